//! Reaching a session's client outside any request: a [`SessionHandle`]
//! that a worker thread of the embedding program may keep for as long as
//! it likes, and the [`SessionEvent`]s that tell it when sessions open,
//! change their roots and close.

use super::context::{log_message, passes, Exchange, PeerError, ProtocolContext};
use super::outbound::Wait;
use super::session::{Phase, Session};
use super::sink::Outgoing;
use crate::jsonrpc;
use crate::model::LogLevel;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Value};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// A session's client, reachable from any thread: log to it, notify it,
/// ask it (`ping`, `roots/list`, or any request its capabilities allow).
/// Cheap to clone; it does not keep the session open: once the client
/// has gone, every call is [`PeerError::Closed`].
#[derive(Clone)]
pub struct SessionHandle {
    session: Weak<Session>,
    id: Arc<str>,
}

impl std::fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = crate::protocol::session_log_name(&self.id);
        f.debug_struct("SessionHandle")
            .field("session", &name)
            .finish()
    }
}

impl SessionHandle {
    pub(crate) fn new(session: &Arc<Session>) -> SessionHandle {
        SessionHandle {
            session: Arc::downgrade(session),
            id: Arc::from(session.id()),
        }
    }

    /// The session's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether the session is open and past its handshake.
    pub fn is_open(&self) -> bool {
        self.live().is_ok()
    }

    /// What the client declared at `initialize` (revision, capabilities,
    /// `clientInfo`); `None` once the session is gone.
    pub fn protocol(&self) -> Option<ProtocolContext> {
        self.live().ok().map(|s| s.protocol_context())
    }

    fn live(&self) -> Result<Arc<Session>, PeerError> {
        match self.session.upgrade() {
            Some(s) if s.phase() == Phase::Operating && !s.is_closed() => Ok(s),
            _ => Err(PeerError::Closed),
        }
    }

    /// `notifications/message` at `level`, if the session's level
    /// (`logging/setLevel`) lets it through or it set none (the spec
    /// leaves that to the server; [`Engine::log`](super::Engine::log),
    /// which relays logs that are no session's own, sends nothing then);
    /// whether it was sent.
    pub fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) -> bool {
        let Ok(s) = self.live() else {
            return false;
        };
        if !passes(level, s.log_level()) {
            return false;
        }
        s.sink()
            .send(Outgoing::Notification(log_message(level, logger, data)));
        true
    }

    /// Sends the notification `method` to the client.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), PeerError> {
        let s = self.live()?;
        s.sink().send(Outgoing::Notification(jsonrpc::notification(
            method, params,
        )));
        Ok(())
    }

    /// `notifications/elicitation/complete`: the URL-mode elicitation
    /// `elicitation_id` has been completed out of band (SEP-1036). Only
    /// for a client that declared `elicitation.url`.
    pub fn elicitation_complete(&self, elicitation_id: &str) -> Result<(), PeerError> {
        if !self
            .live()?
            .protocol_context()
            .client_supports("elicitation.url")
        {
            return Err(PeerError::NotSupported("elicitation.url"));
        }
        self.notify(
            "notifications/elicitation/complete",
            json!({"elicitationId": elicitation_id}),
        )
    }

    /// Sends the request `method` and blocks for its answer, at most
    /// `timeout` (then the client is told with `notifications/cancelled`).
    /// A request that needs a capability the client did not declare is
    /// [`PeerError::NotSupported`] and is not sent.
    ///
    /// Sampling and elicitation belong to a request the client made (the
    /// next revision, SEP-2260, requires it; a Streamable HTTP client
    /// without a standalone GET stream never sees this one): ask them
    /// through the handler's [`Context`](super::Context) where you can.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, PeerError> {
        let s = self.live()?;
        if let Some(cap) = s.protocol_context().undeclared(method, &params) {
            return Err(PeerError::NotSupported(cap));
        }
        let sink = s.sink().clone();
        let send = move |out: Outgoing| -> Result<(), String> {
            sink.send(out);
            Ok(())
        };
        let wait = Wait {
            timeout,
            cancel_reason: "the server gave up",
            ..Default::default()
        };
        // Closing the session fails the call at once.
        Exchange::outbound(&*s)
            .call(method, params, wait, &send)
            .map_err(PeerError::from)
    }

    /// `ping`: whether the client answers within `timeout`.
    pub fn ping(&self, timeout: Duration) -> Result<(), PeerError> {
        self.request("ping", json!({}), timeout).map(|_| ())
    }

    /// `roots/list`: the client's roots (needs its `roots` capability).
    pub fn list_roots(&self, timeout: Duration) -> Result<Value, PeerError> {
        self.request("roots/list", json!({}), timeout)
    }
}

/// What happened to a session, for [`SessionEvents`].
#[derive(Clone, Debug)]
pub enum SessionEvent {
    /// A client finished its handshake (`notifications/initialized`).
    Opened(SessionHandle),
    /// The client's roots changed (`notifications/roots/list_changed`):
    /// ask again with [`SessionHandle::list_roots`].
    RootsChanged(SessionHandle),
    /// The session with this id ended.
    Closed(String),
}

/// Most events queued for a [`SessionEvents`] receiver that is not
/// reading; beyond it new events are dropped (and logged), never waited
/// for: the engine does not block on a slow reader.
pub const SESSION_EVENT_QUEUE: usize = 1024;

/// A stream of [`SessionEvent`]s for a worker thread: from
/// [`Engine::session_events`](super::Engine::session_events). It ends
/// (`recv` is `None`) when the engine is gone; dropping it stops the events.
pub struct SessionEvents {
    rx: Receiver<SessionEvent>,
}

impl SessionEvents {
    pub(crate) fn new() -> (Sender<SessionEvent>, SessionEvents) {
        let (tx, rx) = crossbeam_channel::bounded(SESSION_EVENT_QUEUE);
        (tx, SessionEvents { rx })
    }
    /// The next event, waiting for it; `None` once the engine is gone.
    pub fn recv(&self) -> Option<SessionEvent> {
        self.rx.recv().ok()
    }
    /// The next event, waiting at most `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<SessionEvent, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }
    /// The next event if there is one.
    pub fn try_recv(&self) -> Option<SessionEvent> {
        self.rx.try_recv().ok()
    }
    /// The channel itself, for `crossbeam_channel::select!`.
    pub fn receiver(&self) -> &Receiver<SessionEvent> {
        &self.rx
    }
}
