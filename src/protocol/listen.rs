//! `subscriptions/listen` (2026-07-28): the long-lived request on which a
//! stateless client receives list changes and resource updates. It replaces
//! the session revisions' GET stream and `resources/subscribe`.
//!
//! The stream opens with `notifications/subscriptions/acknowledged` naming
//! what the server will send; every notification on it carries the listen
//! request's id as `_meta["io.modelcontextprotocol/subscriptionId"]`, and
//! only the kinds the client asked for are sent. It ends when the client
//! cancels it or goes away, or, with a result, when the server shuts down.

use super::catalog::ListKind;
use super::session::{Session, MAX_SUBSCRIPTIONS, MAX_SUBSCRIPTION_URI_BYTES};
use super::sink::{Outgoing, Sink};
use super::stateless::{META_SERVER_INFO, META_SUBSCRIPTION_ID};
use super::ServerInfo;
use crate::jsonrpc::{self, ErrorObject, Reply, Request, RequestId};
use crate::sync::lock;
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The method that opens a listen stream.
pub(crate) const LISTEN: &str = "subscriptions/listen";

/// Whether `parsed` is one `subscriptions/listen` request (a stream, not
/// one answer: transports treat it apart).
#[cfg(any(feature = "http", feature = "amqp"))]
pub(crate) fn is_listen(parsed: &jsonrpc::Parsed) -> bool {
    use jsonrpc::{Message, Parsed};
    matches!(parsed, Parsed::Single(Message::Request(r)) if r.method() == LISTEN)
}

/// Most listen streams open at once over the whole engine; past it a new
/// one is refused (-32603) rather than held.
pub const MAX_LISTENERS: usize = 4096;

/// Most listen streams one session (one connection, on stdio and TCP) has
/// open at once; the resources they name count together against
/// [`MAX_SUBSCRIPTIONS`], as a session revision's subscriptions do. Past
/// either, a new stream is refused (-32603): one client cannot take the
/// engine's streams, or its memory, from the others.
pub const MAX_LISTENERS_PER_SESSION: usize = 16;

/// What a stream asked for (and was granted).
#[derive(Clone, Debug, Default, PartialEq)]
struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: HashSet<String>,
}

impl Filter {
    fn parse(v: Option<&Value>) -> Result<Filter, ErrorObject> {
        let o = v.and_then(Value::as_object).ok_or_else(|| {
            ErrorObject::invalid_params("params.notifications (an object) is required")
        })?;
        let flag = |k: &str| match o.get(k) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(ErrorObject::invalid_params(format!(
                "params.notifications.{k} must be a boolean"
            ))),
        };
        let mut uris = HashSet::new();
        match o.get("resourceSubscriptions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for item in items {
                    let uri = item.as_str().ok_or_else(|| {
                        ErrorObject::invalid_params(
                            "params.notifications.resourceSubscriptions must hold URI strings",
                        )
                    })?;
                    if uri.len() > MAX_SUBSCRIPTION_URI_BYTES || uris.len() >= MAX_SUBSCRIPTIONS {
                        return Err(ErrorObject::invalid_params(format!(
                            "at most {MAX_SUBSCRIPTIONS} resource subscriptions of at most {MAX_SUBSCRIPTION_URI_BYTES} bytes each"
                        )));
                    }
                    uris.insert(uri.to_owned());
                }
            }
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "params.notifications.resourceSubscriptions must be an array",
                ))
            }
        }
        Ok(Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
    }

    /// The part the server honours: kinds it serves.
    fn granted(mut self, tools: bool, prompts: bool, resources: bool) -> Filter {
        self.tools &= tools;
        self.prompts &= prompts;
        self.resources &= resources;
        if !resources {
            self.uris.clear();
        }
        self
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        for (k, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(k.into(), true.into());
            }
        }
        if !self.uris.is_empty() {
            let mut uris: Vec<&String> = self.uris.iter().collect();
            uris.sort();
            m.insert("resourceSubscriptions".into(), json!(uris));
        }
        Value::Object(m)
    }
}

#[derive(Clone)]
struct Listener {
    session: u64,
    id: RequestId,
    sink: Arc<dyn Sink>,
    // Shared: announcements clone the listeners they go to.
    filter: Arc<Filter>,
    // The bytes of its URIs, of the engine's budget for all subscriptions:
    // given back when the stream (its last clone) goes.
    _subscribed: Arc<super::budget::Share>,
}

impl Listener {
    fn notify(&self, method: &str, mut params: Map<String, Value>) {
        params.insert(
            "_meta".into(),
            json!({META_SUBSCRIPTION_ID: self.id.to_value()}),
        );
        self.sink.send(Outgoing::Notification(jsonrpc::notification(
            method,
            Value::Object(params),
        )));
    }
}

/// The engine's open listen streams.
#[derive(Default)]
pub(crate) struct Listeners {
    open: Mutex<Vec<Listener>>,
    /// How many are open, read without the lock ([`Listeners::holds`]
    /// runs for every stateless request).
    count: AtomicUsize,
}

impl Listeners {
    /// Opens the stream of `req` on `session`: registers it, then sends
    /// the acknowledgement (so nothing announced after it is missed).
    pub(crate) fn open(
        &self,
        session: &Arc<Session>,
        req: &Request,
        sink: &Arc<dyn Sink>,
    ) -> Result<(), ErrorObject> {
        let catalog = &session.engine.catalog;
        let filter = Filter::parse(req.params().and_then(|p| p.get("notifications")))?.granted(
            catalog.has_capability("tools"),
            catalog.has_capability("prompts"),
            catalog.has_capability("resources"),
        );
        let bytes: usize = filter.uris.iter().map(String::len).sum();
        if bytes > super::budget::MAX_SUBSCRIBED_BYTES_PER_SESSION {
            return Err(ErrorObject::invalid_params(format!(
                "params.notifications.resourceSubscriptions: more than {} bytes of URIs",
                super::budget::MAX_SUBSCRIBED_BYTES_PER_SESSION
            )));
        }
        let mut subscribed = session.engine.subscribed.share();
        if !subscribed.take(bytes) {
            return Err(ErrorObject::internal(
                "the server holds as many subscriptions as it may; retry later",
            ));
        }
        let listener = Listener {
            session: session.key(),
            id: req.id().clone(),
            sink: sink.clone(),
            filter: Arc::new(filter),
            _subscribed: Arc::new(subscribed),
        };
        let mut open = lock(&self.open);
        // Checked under the lock `end_all` takes after draining began: a
        // stream either is ended by it or is never opened.
        if session.engine.is_draining() {
            return Err(ErrorObject::internal(
                "the server is shutting down; open the listen stream again (elsewhere)",
            ));
        }
        if open.len() >= MAX_LISTENERS {
            return Err(ErrorObject::internal(format!(
                "{MAX_LISTENERS} listen streams are open; retry later"
            )));
        }
        let mine = || open.iter().filter(|l| l.session == listener.session);
        let uris: usize = mine().map(|l| l.filter.uris.len()).sum();
        let bytes: usize = mine()
            .chain(std::iter::once(&listener))
            .flat_map(|l| l.filter.uris.iter().map(String::len))
            .sum();
        if mine().count() >= MAX_LISTENERS_PER_SESSION
            || uris + listener.filter.uris.len() > MAX_SUBSCRIPTIONS
            || bytes > super::budget::MAX_SUBSCRIBED_BYTES_PER_SESSION
        {
            return Err(ErrorObject::internal(format!(
                "this connection has as many listen streams as it may \
                 ({MAX_LISTENERS_PER_SESSION}, naming {MAX_SUBSCRIPTIONS} resources and {} bytes \
                 of URIs in all); cancel one first",
                super::budget::MAX_SUBSCRIBED_BYTES_PER_SESSION
            )));
        }
        // The acknowledgement goes first: sent under the lock every
        // announcement takes (sinks never block), so none overtakes it.
        let mut ack = Map::new();
        ack.insert("notifications".into(), listener.filter.to_value());
        listener.notify("notifications/subscriptions/acknowledged", ack);
        open.push(listener);
        self.count.store(open.len(), Ordering::SeqCst);
        Ok(())
    }

    fn matching(&self, want: impl Fn(&Filter) -> bool) -> Vec<Listener> {
        lock(&self.open)
            .iter()
            .filter(|l| want(&l.filter))
            .cloned()
            .collect()
    }

    /// Sends `method` (a `list_changed`) to the streams that asked for `kind`.
    pub(crate) fn list_changed(&self, kind: ListKind, method: &str) {
        let wants = |f: &Filter| match kind {
            ListKind::Tools => f.tools,
            ListKind::Prompts => f.prompts,
            ListKind::Resources => f.resources,
        };
        for l in self.matching(wants) {
            l.notify(method, Map::new());
        }
    }

    /// Sends `notifications/resources/updated` to the streams that named `uri`.
    pub(crate) fn resource_updated(&self, uri: &str) {
        for l in self.matching(|f| f.uris.contains(uri)) {
            let mut p = Map::new();
            p.insert("uri".into(), uri.into());
            l.notify("notifications/resources/updated", p);
        }
    }

    /// Closes the stream `id` of `session` (the client cancelled it);
    /// whether there was one.
    pub(crate) fn cancel(&self, session: u64, id: &RequestId) -> bool {
        let mut open = lock(&self.open);
        let before = open.len();
        open.retain(|l| !(l.session == session && &l.id == id));
        self.count.store(open.len(), Ordering::SeqCst);
        let removed = before != open.len();
        if removed {
            drop(open);
            log::debug!("listen stream {id} cancelled");
        }
        removed
    }

    /// Whether `session` has a stream open with request id `id`.
    pub(crate) fn holds(&self, session: u64, id: &RequestId) -> bool {
        self.count.load(Ordering::SeqCst) > 0
            && lock(&self.open)
                .iter()
                .any(|l| l.session == session && &l.id == id)
    }

    /// How many streams are open.
    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// Forgets the streams of a closed session.
    pub(crate) fn remove_session(&self, session: u64) {
        let mut open = lock(&self.open);
        open.retain(|l| l.session != session);
        self.count.store(open.len(), Ordering::SeqCst);
    }

    /// Ends every stream with its result (server shutdown).
    pub(crate) fn end_all(&self, info: &ServerInfo) {
        let ended: Vec<Listener> = {
            let mut open = lock(&self.open);
            self.count.store(0, Ordering::SeqCst);
            std::mem::take(&mut *open)
        };
        for l in ended {
            let result = json!({
                "resultType": "complete",
                "_meta": {META_SUBSCRIPTION_ID: l.id.to_value(), META_SERVER_INFO: info.to_value()},
            });
            l.sink
                .send(Outgoing::Response(Reply::Result(l.id, result.into())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_are_granted_by_what_is_served() {
        let f = Filter::parse(Some(&json!({"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["a://b"]}))).unwrap();
        let g = f.granted(true, false, true);
        assert_eq!(
            g.to_value(),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["a://b"]})
        );
        assert!(Filter::parse(None).is_err());
        assert!(Filter::parse(Some(&json!({"toolsListChanged": "yes"}))).is_err());
        assert!(Filter::parse(Some(&json!({"resourceSubscriptions": [1]}))).is_err());
        assert_eq!(
            Filter::parse(Some(&json!({}))).unwrap().to_value(),
            json!({})
        );
    }
}
