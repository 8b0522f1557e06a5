//! `perSession` upstreams: each client session that calls one gets a
//! connection of its own (for `command`, a child process of its own),
//! started at its first call with exactly the client's capabilities, and
//! stopped when the session ends or the upstream stops. A connection that
//! exits is started again at the session's next call. What the upstream
//! logs on it goes to that session alone. A stateless (2026-07-28) request
//! has no session to give a connection of its own: it is refused (a tool
//! error saying so), never served on another user's connection. The
//! session's roots are the connection's: asked of the session's client
//! whenever the upstream asks, and their changes passed on.

use super::proxy::Link;
use super::upstream;
use crate::client::{Client, ClientOptions};
use crate::protocol::SessionWatcher;
use crate::server::Server;
use crate::service::config::UpstreamConfig;
use crate::sync::lock;
use crate::Context;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A session's connection, started at most once at a time.
#[derive(Default)]
struct Slot {
    link: Option<Arc<Link>>,
    /// The session has ended: nothing is started for it any more.
    ended: bool,
}

/// The per-session connections of one life of one upstream.
pub(crate) struct Sessions {
    cfg: Arc<UpstreamConfig>,
    server: Server,
    slots: Mutex<Slots>,
    telling_roots: OnePerKey,
}

#[derive(Default)]
struct Slots {
    stopped: bool,
    by_session: HashMap<String, Arc<Mutex<Slot>>>,
    /// The threads stopping the connections of ended sessions, which the
    /// upstream's stop waits for.
    closing: Vec<std::thread::JoinHandle<()>>,
}

/// Runs a job for a key on a thread of its own, at most one thread a key:
/// asked again while that thread runs, the thread runs the job once more
/// when it is done (however often it was asked meanwhile). A client that
/// sends `roots/list_changed` in a burst starts one thread, not one each.
#[derive(Clone, Default)]
struct OnePerKey(Arc<Mutex<HashMap<String, bool>>>);

impl OnePerKey {
    fn run(&self, key: &str, job: impl Fn() + Send + 'static) -> std::io::Result<()> {
        {
            let mut running = lock(&self.0);
            if let Some(again) = running.get_mut(key) {
                *again = true;
                return Ok(());
            }
            running.insert(key.to_owned(), false);
        }
        let (running, mine) = (self.clone(), key.to_owned());
        std::thread::Builder::new()
            .name("mcpvisor-upstream-roots".into())
            .spawn(move || loop {
                job();
                let mut map = lock(&running.0);
                match map.get_mut(&mine) {
                    Some(again) if *again => *again = false,
                    _ => {
                        map.remove(&mine);
                        return;
                    }
                }
            })
            .map(drop)
            .inspect_err(|_| {
                lock(&self.0).remove(key);
            })
    }
}

impl Sessions {
    /// Per-session connections for `cfg`; they end with their sessions
    /// (the engine tells this as long as it lives).
    pub(crate) fn new(cfg: Arc<UpstreamConfig>, server: &Server) -> Arc<Sessions> {
        let sessions = Arc::new(Sessions {
            cfg,
            server: server.clone(),
            slots: Mutex::default(),
            telling_roots: OnePerKey::default(),
        });
        let watcher: Arc<dyn SessionWatcher> = sessions.clone();
        server.engine().watch_sessions(&watcher);
        sessions
    }

    /// The connection of `ctx`'s session, started if it has none (or its
    /// last one exited). Only this session's calls wait for the start.
    pub(crate) fn link(&self, ctx: &Context) -> Result<Arc<Link>, String> {
        let name = &self.cfg.name;
        let session = ctx.session_id();
        let slot = {
            let mut slots = lock(&self.slots);
            let open = slots.by_session.len();
            if slots.stopped {
                return Err(format!("upstream {name}: stopping"));
            }
            match slots.by_session.get(session) {
                Some(slot) => slot.clone(),
                // A call that outlived its session (its watcher has run, or
                // is waiting for this lock, and finds no slot to end).
                None if !self.server.engine().is_open(session) => {
                    return Err(format!("upstream {name}: the session has ended"))
                }
                None if open >= self.cfg.max_sessions => {
                    return Err(format!(
                        "upstream {name}: {open} sessions have a connection of their own, \
                         the most maxSessions allows"
                    ))
                }
                None => slots
                    .by_session
                    .entry(session.to_owned())
                    .or_default()
                    .clone(),
            }
        };
        let mut slot = lock(&slot);
        if slot.ended {
            return Err(format!("upstream {name}: the session has ended"));
        }
        if let Some(link) = &slot.link {
            if !link.client.is_closed() {
                return Ok(link.clone());
            }
            log::warn!(
                "upstream {name}: the connection of session {} exited; starting it again",
                crate::protocol::session_log_name(session)
            );
        }
        let link = Arc::new(Link::new(&self.cfg, self.start(ctx)?));
        slot.link = Some(link.clone());
        Ok(link)
    }

    /// A new connection for `ctx`'s session, declaring the capabilities its
    /// client declared (so the upstream asks only for what it can do).
    fn start(&self, ctx: &Context) -> Result<Client, String> {
        let session = ctx.session_id().to_owned();
        let label = format!(
            "upstream {} session {}",
            self.cfg.name,
            crate::protocol::session_log_name(&session)
        );
        let theirs = ctx.protocol();
        let refuse = |method: &'static str| {
            theirs
                .client_supports(method)
                .then(|| upstream::refuse(method))
        };
        // The connection is this session's alone: its roots are the
        // session's client's, also outside a call (an upstream that asks
        // for them as it starts).
        let roots = match (theirs.client_supports("roots"), ctx.session()) {
            (true, Some(handle)) => {
                let timeout = self.cfg.timeout;
                let asked: crate::client::RequestHandler =
                    Arc::new(move |_| handle.list_roots(timeout).map_err(upstream::relayed_error));
                Some(asked)
            }
            _ => refuse("roots"),
        };
        let (server, name) = (self.server.clone(), self.cfg.name.clone());
        let options = ClientOptions {
            sampling: refuse("sampling"),
            sampling_tools: theirs.client_supports("sampling.tools"),
            elicitation: refuse("elicitation"),
            elicitation_url: theirs.client_supports("elicitation.url"),
            roots,
            // Its lists come from the shared connection; its logs are this
            // session's.
            on_notification: Some(Arc::new(move |method: &str, params: &Value| {
                if method == "notifications/message" {
                    let (level, logger, data) = upstream::log_message(&name, params);
                    server.engine().log_to(&session, level, Some(&logger), data);
                }
            })),
            ..upstream::client_options(&self.cfg)
        };
        let client = upstream::connect(&self.cfg, &label, options)?;
        // All it logs reaches us; the session's own level filters it.
        if client.server_capabilities().get("logging").is_some() {
            if let Err(e) = client.set_log_level(crate::LogLevel::Debug) {
                log::warn!("{label}: logging/setLevel: {e}");
            }
        }
        Ok(client)
    }

    /// Stops every connection (the upstream's life ends) and starts no more.
    pub(crate) fn stop_all(&self) {
        let (slots, ending): (Vec<_>, Vec<_>) = {
            let mut s = lock(&self.slots);
            s.stopped = true;
            (
                s.by_session.drain().map(|(_, slot)| slot).collect(),
                s.closing.drain(..).collect(),
            )
        };
        // In parallel: each may take two grace periods.
        let closing: Vec<_> = slots
            .into_iter()
            .filter_map(|slot| {
                let s = slot.clone();
                let spawned = std::thread::Builder::new()
                    .name("mcpvisor-upstream-close".into())
                    .spawn(move || end(&s));
                if spawned.is_err() {
                    end(&slot);
                }
                spawned.ok()
            })
            .collect();
        for c in closing.into_iter().chain(ending) {
            let _ = c.join();
        }
    }
}

/// Ends a slot: no start after this, and its connection (if any) closed.
fn end(slot: &Mutex<Slot>) {
    let link = {
        let mut slot = lock(slot);
        slot.ended = true;
        slot.link.take()
    };
    if let Some(l) = link {
        l.client.close();
    }
}

impl SessionWatcher for Sessions {
    /// Tells the session's connection, if it has one, from a thread of its
    /// own: the slot may be held by a start (which then tells the new
    /// connection too: one notice more does no harm), and the write may
    /// wait for an upstream that reads slowly. Changes that come while it
    /// tells are told once more after it, by the same thread.
    fn roots_changed(&self, session: &crate::protocol::SessionHandle) {
        let id = session.id();
        let Some(slot) = lock(&self.slots).by_session.get(id).cloned() else {
            return;
        };
        let told = self.telling_roots.run(id, move || {
            // Not under the slot's lock: the write may wait for the upstream.
            let link = lock(&slot).link.clone();
            if let Some(link) = link {
                if let Err(e) = link.client.roots_changed() {
                    log::warn!(
                        "upstream {}: notifications/roots/list_changed: {e}",
                        link.name
                    );
                }
            }
        });
        if let Err(e) = told {
            log::warn!("upstream: cannot tell a session's roots changed: {e}");
        }
    }

    fn session_closed(&self, session_id: &str) {
        let mut slots = lock(&self.slots);
        let Some(slot) = slots.by_session.remove(session_id) else {
            return;
        };
        slots.closing.retain(|c| !c.is_finished());
        // Closing a child takes up to two grace periods, and a start in
        // progress holds the slot: neither on the thread that closed the
        // session.
        let s = slot.clone();
        match std::thread::Builder::new()
            .name("mcpvisor-upstream-close".into())
            .spawn(move || end(&s))
        {
            Ok(closing) => slots.closing.push(closing),
            Err(_) => {
                drop(slots);
                end(&slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::OnePerKey;
    use crossbeam_channel::{bounded, unbounded};

    #[test]
    fn one_thread_a_key_runs_once_more_for_what_came_meanwhile() {
        let runs = OnePerKey::default();
        let (started, starts) = unbounded();
        let (release, released) = bounded::<()>(0);
        let job = move || {
            started.send(()).unwrap();
            let _ = released.recv();
        };
        runs.run("a", job.clone()).unwrap();
        starts.recv().unwrap();
        // The first run is held: these only mark the key.
        for _ in 0..100 {
            runs.run("a", job.clone()).unwrap();
        }
        release.send(()).unwrap();
        // Exactly one run more, then the thread ends and forgets the key.
        starts.recv().unwrap();
        release.send(()).unwrap();
        while super::lock(&runs.0).contains_key("a") {
            std::thread::yield_now();
        }
        assert!(starts.try_recv().is_err());
        // A later change starts a thread again.
        runs.run("a", job).unwrap();
        starts.recv().unwrap();
        release.send(()).unwrap();
    }
}
