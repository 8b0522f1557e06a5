//! The client's `subscriptions/listen` stream (2026-07-28): how a
//! stateless client hears list changes and resource updates, which a
//! session client gets on its session.
//!
//! One stream at a time, kept open by a thread of its own: it asks for the
//! list changes the server advertises (when the client has a notification
//! handler) and for updates of the resources subscribed to. A change of
//! subscriptions cancels the stream and opens the next; a stream the
//! server ends, or that fails, is opened again after [`RELISTEN_DELAY`].
//! What arrives on it goes to [`ClientOptions::on_notification`](super::ClientOptions::on_notification),
//! the acknowledgement (`notifications/subscriptions/acknowledged`) too.

use super::{CallOptions, Client, ClientError};
use crate::jsonrpc::ErrorObject;
use crate::protocol::CancelToken;
use crate::sync::lock;
use crossbeam_channel::{Receiver, Sender};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::Duration;

/// Wait before a listen stream that ended or failed is opened again.
pub const RELISTEN_DELAY: Duration = Duration::from_secs(1);
/// A listen stream is renewed (cancelled and opened again) this often.
pub const LISTEN_RENEWAL: Duration = Duration::from_secs(24 * 3600);

/// The listen stream's wishes and its running thread.
pub(crate) struct Listen {
    state: Mutex<State>,
    wake: Sender<()>,
    woken: Receiver<()>,
}

#[derive(Default)]
struct State {
    /// The thread runs.
    started: bool,
    /// Ask for the list changes the server advertises.
    list_changes: bool,
    /// Resources subscribed to.
    uris: BTreeSet<String>,
    /// Cancels the stream open now.
    current: Option<CancelToken>,
    /// The server does not serve listen streams (-32601): why.
    refused: Option<ErrorObject>,
}

impl Default for Listen {
    fn default() -> Self {
        let (wake, woken) = crossbeam_channel::bounded(1);
        Listen {
            state: Mutex::default(),
            wake,
            woken,
        }
    }
}

/// The filter of a listen stream: the list changes `capabilities` offer
/// (when asked for) and the resource updates of `uris`.
fn filter(capabilities: &Value, list_changes: bool, uris: &BTreeSet<String>) -> Map<String, Value> {
    let mut f = Map::new();
    if list_changes {
        for (kind, key) in [
            ("tools", "toolsListChanged"),
            ("prompts", "promptsListChanged"),
            ("resources", "resourcesListChanged"),
        ] {
            if capabilities.pointer(&format!("/{kind}/listChanged")) == Some(&Value::Bool(true)) {
                f.insert(key.into(), true.into());
            }
        }
    }
    if !uris.is_empty() {
        f.insert("resourceSubscriptions".into(), json!(uris));
    }
    f
}

impl Listen {
    /// Changes what the stream asks for with `change`, then opens it anew
    /// (starting its thread on `client` the first time). Fails with the
    /// server's refusal once it refused listen streams.
    fn update(&self, client: &Client, change: impl FnOnce(&mut State)) -> Result<(), ClientError> {
        let start = {
            let mut st = lock(&self.state);
            if let Some(e) = &st.refused {
                return Err(ClientError::Rpc(e.clone()));
            }
            change(&mut st);
            if let Some(c) = st.current.take() {
                c.cancel();
            }
            !std::mem::replace(&mut st.started, true)
        };
        let _ = self.wake.try_send(());
        if start {
            // A handle that does not keep the connection open.
            let client = Client {
                _guard: None,
                ..client.clone()
            };
            let spawned = std::thread::Builder::new()
                .name("mcpvisor-client-listen".into())
                .spawn(move || run(&client));
            if let Err(e) = spawned {
                lock(&self.state).started = false;
                return Err(ClientError::io(&e));
            }
        }
        Ok(())
    }

    /// Ends the thread's wait (the client is closing).
    pub(crate) fn stop(&self) {
        let _ = self.wake.try_send(());
    }

    /// Asks for the list changes the server advertises.
    pub(crate) fn list_changes(&self, client: &Client) -> Result<(), ClientError> {
        self.update(client, |st| st.list_changes = true)
    }

    /// Adds (or with `on` false removes) a resource subscription.
    pub(crate) fn subscribe(
        &self,
        client: &Client,
        uri: &str,
        on: bool,
    ) -> Result<(), ClientError> {
        self.update(client, |st| {
            if on {
                st.uris.insert(uri.to_owned());
            } else {
                st.uris.remove(uri);
            }
        })
    }
}

/// The stream's thread: until the client is closed.
fn run(client: &Client) {
    let shared = &client.shared;
    let listen = &shared.listen;
    loop {
        // Wakings from before now are answered by what is read below (so
        // none made after the read is lost).
        while listen.woken.try_recv().is_ok() {}
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        let (notifications, cancel) = {
            let mut st = lock(&listen.state);
            let f = filter(client.server_capabilities(), st.list_changes, &st.uris);
            let cancel = CancelToken::new();
            st.current = Some(cancel.clone());
            (f, cancel)
        };
        if notifications.is_empty() {
            // Nothing to ask for: wait for a wish.
            let _ = listen.woken.recv_timeout(LISTEN_RENEWAL);
            continue;
        }
        let opts = CallOptions {
            timeout: Some(LISTEN_RENEWAL),
            cancel: Some(cancel),
            ..Default::default()
        };
        let params = json!({"notifications": notifications});
        match client.send_request(crate::protocol::LISTEN, params, opts) {
            // Cancelled for new wishes, or renewed: at once.
            Err(ClientError::Cancelled | ClientError::Timeout { .. }) => {}
            // Not served here (over AMQP, say): asking again would not help.
            Err(ClientError::Rpc(e)) if e.code == crate::jsonrpc::METHOD_NOT_FOUND => {
                log::info!("client: no listen stream: {}", e.message);
                let mut st = lock(&listen.state);
                st.refused = Some(e);
                st.started = false;
                return;
            }
            ended => {
                if let Err(e) = ended {
                    log::debug!("client: the listen stream failed: {e}");
                }
                let _ = listen.woken.recv_timeout(RELISTEN_DELAY);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_ask_only_for_what_the_server_offers() {
        let caps = json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"listChanged": true}});
        let uris: BTreeSet<String> = ["a://1".to_owned()].into();
        let f = filter(&caps, true, &uris);
        assert_eq!(
            Value::Object(f),
            json!({"toolsListChanged": true, "resourcesListChanged": true,
                   "resourceSubscriptions": ["a://1"]})
        );
        assert!(filter(&caps, false, &BTreeSet::new()).is_empty());
    }
}
