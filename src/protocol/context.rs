//! What a handler sees of its request: cancellation, progress, logging, and
//! requests back to the client.
//!
//! A handler sees an [`Exchange`], never the session type: a session is one
//! kind of exchange today; a single stateless (2026-07-28) request will be
//! another.

use super::cancel::CancelToken;
use super::input::{Asked, InputRequest, Round};
use super::outbound::{CallError, Outbound, Wait};
use super::sink::{Outgoing, Sink};
use super::tasks::Task;
use super::Engine;
use crate::jsonrpc::{self, ErrorObject, Reply, Request, RequestId};
use crate::model::{Answer, LogLevel, ProtocolVersion};
use crate::sync::lock;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a request is served within: what its handler can reach beyond the
/// request itself.
pub(crate) trait Exchange: Send + Sync {
    /// The session's id (visible ASCII, cryptographically random).
    fn id(&self) -> &str;
    /// The engine serving it (its catalog, its options).
    fn engine(&self) -> &Arc<Engine>;
    /// The minimum log level the client set for the whole exchange.
    fn log_level(&self) -> Option<LogLevel>;
    /// Requests to the client and their answers.
    fn outbound(&self) -> &Outbound;
    /// The answer to request `id` (the one with `cancel`) is about to
    /// leave: from now on it no longer counts against the in-flight limit
    /// nor holds its id (its client may send the next request, with that
    /// id too, as soon as it reads the answer), though it stays in flight
    /// until [`Exchange::request_done`].
    fn answering(&self, id: &RequestId, cancel: &CancelToken);
    /// The request `id` (the one with `cancel`) has ended (answered or
    /// suppressed, after [`Exchange::answering`]).
    fn request_done(&self, id: &RequestId, cancel: &CancelToken);
    /// A handle on the session for use outside the request, if the
    /// exchange is a session with a client that stays (not a stateless
    /// request).
    fn handle(&self) -> Option<super::SessionHandle>;
    /// Whether the client was told at `initialize` that the server offers
    /// `capability` (it then stays offered for the session's life). A
    /// stateless request was told nothing: `server/discover` answers anew.
    fn was_told(&self, _capability: &str) -> bool {
        false
    }
    /// The credential (a bearer token's digest) the transport bound the
    /// exchange to, if any ([`Session::bind_credential`](super::Session::bind_credential)).
    fn credential(&self) -> Option<[u8; 32]> {
        None
    }
    /// Whose tasks it makes, with its credential ([`Context::task_owner`]):
    /// its id, or `""` for one made for a single request.
    fn task_owner(&self) -> &str {
        self.id()
    }
}

/// Default timeout of a server-to-client request made through [`Context`].
pub const DEFAULT_PEER_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The protocol facts a request is served under. Sessions supply them from
/// the handshake today; the 2026-07-28 revision carries them per request.
///
/// The client's capabilities and info are kept as their JSON text: a
/// session holds them for its whole life, and text is several times smaller
/// than a parsed `serde_json::Value` map.
#[derive(Clone, Debug)]
pub struct ProtocolContext {
    /// The negotiated (or per-request) protocol revision.
    pub version: ProtocolVersion,
    /// A per-request minimum log level; `None` follows the session's level.
    pub log_level: Option<LogLevel>,
    client_capabilities: Arc<str>,
    client_info: Arc<str>,
}

impl ProtocolContext {
    /// A context from the client's declared capabilities and info.
    pub fn new(
        version: ProtocolVersion,
        client_capabilities: &Value,
        client_info: &Value,
        log_level: Option<LogLevel>,
    ) -> Self {
        ProtocolContext {
            version,
            log_level,
            client_capabilities: Arc::from(client_capabilities.to_string()),
            client_info: Arc::from(client_info.to_string()),
        }
    }
    /// The client's `capabilities` object.
    pub fn client_capabilities(&self) -> Value {
        serde_json::from_str(&self.client_capabilities).unwrap_or(Value::Null)
    }
    /// The client's `clientInfo` object.
    pub fn client_info(&self) -> Value {
        serde_json::from_str(&self.client_info).unwrap_or(Value::Null)
    }
    /// Whether the client declared `capability` (`sampling`), or a
    /// member of one (`sampling.tools`, `elicitation.url`). An empty
    /// `elicitation` object declares form mode (`elicitation.form`), as
    /// the spec keeps it for older clients.
    pub fn client_supports(&self, capability: &str) -> bool {
        declares(&self.client_capabilities(), capability)
    }
    /// The capability the request `method` with `params` needs and the
    /// client did not declare, if any (see [`capability_needed`]).
    pub fn undeclared(&self, method: &str, params: &Value) -> Option<&'static str> {
        undeclared(&self.client_capabilities(), method, params)
    }
    /// Whether the client declared the extension `id` (in
    /// `capabilities.extensions`).
    pub fn client_extension(&self, id: &str) -> bool {
        crate::model::declares_extension(&self.client_capabilities(), id)
    }
    /// The lowest level of `notifications/message` this request gets:
    /// its own, else (session revisions) the session's. A stateless
    /// request without a level gets no log at all.
    fn log_minimum(&self, session: Option<LogLevel>) -> Option<Option<LogLevel>> {
        match (self.log_level, self.version.is_stateless()) {
            (Some(l), _) => Some(Some(l)),
            (None, true) => None,
            (None, false) => Some(session),
        }
    }
}

/// Why a server-to-client request failed.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerError {
    /// The client did not declare the capability this request needs.
    NotSupported(&'static str),
    /// No answer within the timeout; `notifications/cancelled` was sent.
    Timeout(Duration),
    /// The handler's own request was cancelled while waiting.
    Cancelled,
    /// The session ended before an answer came.
    Closed,
    /// The client answered with an error, or (stateless) its answer in
    /// `inputResponses` was malformed.
    Rpc(ErrorObject),
    /// A stateless (2026-07-28) client must answer first: the request ends
    /// with an input-required result and the handler runs again with the
    /// answer when the client retries. Return (any error) at once.
    InputRequired,
    /// A stateless (2026-07-28) client, or a task, takes no requests but
    /// the input requests (sampling, elicitation, roots).
    Stateless,
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerError::NotSupported(c) => write!(f, "the client does not support {c}"),
            PeerError::Timeout(d) if d.is_zero() => {
                f.write_str("the call's total time limit was spent before it was sent")
            }
            PeerError::Timeout(d) => write!(f, "the client did not answer within {d:?}"),
            PeerError::Cancelled => f.write_str("the request was cancelled"),
            PeerError::Closed => f.write_str("the session is closed"),
            PeerError::Rpc(e) => write!(f, "the client answered with an error: {e}"),
            PeerError::InputRequired => {
                f.write_str("the client must answer first (the request will be retried)")
            }
            PeerError::Stateless => {
                f.write_str("a 2026-07-28 client or a task takes no requests but input requests")
            }
        }
    }
}

impl std::error::Error for PeerError {}

impl From<CallError> for PeerError {
    fn from(e: CallError) -> PeerError {
        match e {
            CallError::Timeout(_, d) => PeerError::Timeout(d),
            CallError::Cancelled => PeerError::Cancelled,
            CallError::Rpc(e) => PeerError::Rpc(e),
            CallError::Closed | CallError::Send(_) => PeerError::Closed,
        }
    }
}

impl From<PeerError> for ErrorObject {
    /// The JSON-RPC error a request fails with when its handler could not
    /// reach the client: an undeclared capability is -32021 (2026-07-28's
    /// `MissingRequiredClientCapabilityError`), a client's error is
    /// passed on, everything else is -32603.
    fn from(e: PeerError) -> ErrorObject {
        match e {
            PeerError::NotSupported(cap) => ErrorObject::missing_client_capability(cap),
            PeerError::Rpc(e) => e,
            other => ErrorObject::internal(other.to_string()),
        }
    }
}

#[derive(Default)]
struct RunState {
    last: Option<f64>,
    finished: bool,
    // Set once the call runs as a task (SEP-2663): its questions,
    // cancellation and outcome go through the task from then on.
    task: Option<Arc<Task>>,
    // The task this `tools/call` started, its answer the task's handle:
    // ended with the call if the call is cancelled before it is answered
    // (no client would learn of it).
    started: Option<Arc<Task>>,
    // Whether the handler may make the call a task (`detach`).
    detachable: bool,
}

/// The context of one request, handed to tool, resource, prompt and
/// completion handlers.
///
/// A clone is the same request's context (for a callback that must be
/// `'static`, such as a gateway relaying an upstream's progress and
/// requests): once the request is answered, its progress goes nowhere.
#[derive(Clone)]
pub struct Context {
    exchange: Arc<dyn Exchange>,
    request_id: RequestId,
    method: Cow<'static, str>,
    meta: Option<Map<String, Value>>,
    sink: Arc<dyn Sink>,
    cancel: CancelToken,
    protocol: ProtocolContext,
    state: Arc<Mutex<RunState>>,
    // Stateless requests: the answers this run may use, the open questions.
    round: Option<Arc<Round>>,
    // A quick tool's call, run on the thread that read it (`Tool::quick`):
    // it does not become a task (waiting for answers is refused by
    // `Outbound::call`).
    quick: bool,
}

/// The context of a tool call.
pub type ToolContext = Context;

impl Context {
    pub(crate) fn new(
        exchange: Arc<dyn Exchange>,
        request: &Request,
        sink: Arc<dyn Sink>,
        cancel: CancelToken,
        protocol: ProtocolContext,
        round: Option<Arc<Round>>,
    ) -> Context {
        Context {
            exchange,
            request_id: request.id().clone(),
            method: super::dispatch::method_name(request.method()),
            meta: request.meta().cloned(),
            sink,
            cancel,
            protocol,
            state: Arc::new(Mutex::new(RunState::default())),
            round,
            quick: false,
        }
    }

    /// This call runs on the thread that read it (`Tool::quick`).
    pub(crate) fn mark_quick(&mut self) {
        self.quick = true;
    }

    pub(crate) fn engine(&self) -> &Arc<Engine> {
        self.exchange.engine()
    }

    /// The request's cancellation: cancelled when the client cancels it
    /// or its session ends (to hand on to a call made on its behalf). In a
    /// task, the task's: cancelled by `tasks/cancel` or its expiry.
    pub fn cancel_token(&self) -> CancelToken {
        match self.task() {
            Some(t) => t.cancel.clone(),
            None => self.cancel.clone(),
        }
    }

    fn task(&self) -> Option<Arc<Task>> {
        lock(&self.state).task.clone()
    }

    /// The id of the task this call runs as, if it is one.
    pub fn task_id(&self) -> Option<String> {
        lock(&self.state).task.as_ref().map(|t| t.id.clone())
    }

    /// The context of `task`, made from this request's: what a task's own
    /// thread runs the handler with.
    pub(crate) fn for_task(&self, task: Arc<Task>) -> Context {
        Context {
            cancel: task.cancel.clone(),
            state: Arc::new(Mutex::new(RunState {
                task: Some(task),
                ..RunState::default()
            })),
            round: None,
            quick: false,
            ..self.clone()
        }
    }

    /// Continues this `tools/call` as a task (SEP-2663): the client is
    /// answered now with the task's handle, and what this handler returns
    /// becomes the task's result. Its questions to the client wait in
    /// `tasks/get` from then on, and its cancellation is `tasks/cancel`.
    ///
    /// For a tool declared with `Tool::detach_in_handler`: it can ask
    /// its questions first, as a plain call (input-required rounds for a
    /// 2026-07-28 client), and go on as a task once it has its answers.
    /// Returns `false`, changing nothing, when this call cannot become a
    /// task: not `tools/call`, the request did not declare the extension,
    /// the tool forbids tasks or is quick (`Tool::quick`), a question of
    /// this round is still open, task storage is full, or it already is
    /// one. The handler then goes on as a plain call.
    pub fn detach(&self) -> bool {
        if self.method != "tools/call"
            || self.quick
            || !self
                .protocol
                .client_extension(super::tasks::TASKS_EXTENSION)
            || self.task().is_some()
            || self.round.as_ref().is_some_and(|r| r.has_pending())
            || !lock(&self.state).detachable
        {
            return false;
        }
        let Some(task) = self
            .engine()
            .tasks
            .create(self.credential(), self.task_owner())
        else {
            return false;
        };
        let mut state = lock(&self.state);
        // Checked again under the lock: two threads of one handler
        // detaching at once make one task, answer once.
        if state.finished || state.task.is_some() || self.cancel.is_cancelled() {
            drop(state);
            self.engine()
                .tasks
                .abandon(&task, "the call ended before it became a task");
            return false;
        }
        state.task = Some(task.clone());
        let created = self.engine().shape(
            &self.method,
            self.protocol.version,
            task.created_result().into(),
        );
        self.exchange.answering(&self.request_id, &self.cancel);
        self.sink.send(Outgoing::Response(Reply::Result(
            self.request_id.clone(),
            created,
        )));
        drop(state);
        self.exchange.request_done(&self.request_id, &self.cancel);
        true
    }

    /// The session whose task quota a task this request makes counts
    /// against, with its [`credential`](Self::credential): none (`""`)
    /// where the session was made for this request alone (a stateless
    /// HTTP POST), so that such requests without a credential are one
    /// owner; a connection's session otherwise, stateless or not.
    pub(crate) fn task_owner(&self) -> &str {
        self.exchange.task_owner()
    }

    /// Records the task this call started (see `RunState::started`).
    pub(crate) fn started_task(&self, task: Arc<Task>) {
        lock(&self.state).started = Some(task);
    }

    /// Lets this call become a task with [`Context::detach`] (its tool
    /// supports tasks and detaches itself).
    pub(crate) fn allow_detach(&self) {
        lock(&self.state).detachable = true;
    }

    /// This context with `cancel` as its cancellation: for requests to the
    /// client made on the request's behalf that must end earlier than it
    /// (a gateway's relayed elicitation ends with the relayed call).
    #[cfg(feature = "client")]
    pub(crate) fn with_cancel(&self, cancel: CancelToken) -> Context {
        Context {
            cancel,
            ..self.clone()
        }
    }

    /// The id of the request being served.
    pub fn request_id(&self) -> &RequestId {
        &self.request_id
    }
    /// The method being served.
    pub fn method(&self) -> &str {
        &self.method
    }
    /// A handle on this request's session that outlives the request: a
    /// worker thread may keep it to log, notify or ask the client later.
    /// `None` for a stateless (2026-07-28) request, which has no session
    /// to reach.
    pub fn session(&self) -> Option<super::SessionHandle> {
        self.exchange.handle()
    }
    /// The session's id (visible ASCII, cryptographically random).
    pub fn session_id(&self) -> &str {
        self.exchange.id()
    }
    /// See [`Exchange::was_told`].
    pub(crate) fn was_told(&self, capability: &str) -> bool {
        self.exchange.was_told(capability)
    }
    /// See [`Exchange::credential`].
    pub(crate) fn credential(&self) -> Option<[u8; 32]> {
        self.exchange.credential()
    }
    /// The request's `_meta`, if any.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.meta.as_ref()
    }
    /// Version, client capabilities and client info for this request.
    pub fn protocol(&self) -> &ProtocolContext {
        &self.protocol
    }

    /// Whether the client cancelled this request (or the session ended);
    /// in a task, whether the task was cancelled or expired.
    pub fn is_cancelled(&self) -> bool {
        match self.task() {
            Some(t) => t.cancel.is_cancelled(),
            None => self.cancel.is_cancelled(),
        }
    }
    /// A channel that becomes ready when the request (or task) is cancelled.
    pub fn cancelled(&self) -> crossbeam_channel::Receiver<()> {
        self.cancel_token().receiver()
    }

    /// Reports progress; sent only if the request carried
    /// `_meta.progressToken`, only while the request is running, and only
    /// when `progress` is greater than the last value sent. Returns whether
    /// a notification was sent.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
        // A token is what an id may be (each notification repeats it).
        let Some(token) = self
            .meta
            .as_ref()
            .and_then(|m| m.get("progressToken"))
            .filter(|t| RequestId::bounded(t).is_some())
        else {
            return false;
        };
        // JSON has no NaN or infinity (it would go out as null, and NaN
        // would pass every later "greater than" check).
        if !progress.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return false;
        }
        let mut state = lock(&self.state);
        if state.task.is_some() || state.finished || state.last.is_some_and(|last| progress <= last)
        {
            log::debug!(
                "progress {progress} for request {} dropped (finished or not increasing)",
                self.request_id
            );
            return false;
        }
        state.last = Some(progress);
        let mut params = Map::new();
        params.insert("progressToken".into(), token.clone());
        params.insert("progress".into(), number(progress));
        if let Some(t) = total {
            params.insert("total".into(), number(t));
        }
        if let (Some(m), true) = (
            message,
            self.protocol.version >= ProtocolVersion::V2025_03_26,
        ) {
            params.insert("message".into(), m.into());
        }
        self.sink.send(Outgoing::Notification(jsonrpc::notification(
            "notifications/progress",
            Value::Object(params),
        )));
        true
    }

    /// Sends `notifications/message` if `level` passes the request's
    /// minimum level (session revisions: else the session's; a session
    /// that set none gets every level, as
    /// [`SessionHandle::log`](super::SessionHandle::log)). A stateless
    /// request that named no level gets none. Returns whether it was sent.
    pub fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) -> bool {
        if self.task().is_some() {
            return false;
        }
        match self.protocol.log_minimum(self.exchange.log_level()) {
            Some(min) if passes(level, min) => {}
            _ => return false,
        }
        self.sink
            .send(Outgoing::Notification(log_message(level, logger, data)));
        true
    }

    /// Asks the transport to close this request's stream now and have the
    /// client come back after `retry` (SSE polling, HTTP only; the response
    /// is delivered on the resumed stream). Other transports ignore it.
    pub fn close_stream(&self, retry: Duration) {
        self.sink.send(Outgoing::Reconnect { retry });
    }

    /// `sampling/createMessage`: asks the client's LLM. Needs the client's
    /// `sampling` capability. See [`Context::input`].
    pub fn sample(&self, params: Value, timeout: Duration) -> Result<Value, PeerError> {
        self.input(InputRequest::sample(params).timeout(timeout))
    }
    /// `elicitation/create`: asks the user. Needs the `elicitation`
    /// capability. See [`Context::input`].
    pub fn elicit(&self, params: Value, timeout: Duration) -> Result<Value, PeerError> {
        self.input(InputRequest::elicit(params).timeout(timeout))
    }
    /// `roots/list`: the client's roots. Needs the `roots` capability.
    /// See [`Context::input`].
    pub fn list_roots(&self, timeout: Duration) -> Result<Value, PeerError> {
        self.input(InputRequest::list_roots().timeout(timeout))
    }

    /// Asks the client for input and returns its answer, in either
    /// generation (see [`input`](super::input)): a session client is sent
    /// the request; for a stateless (2026-07-28) client this is the
    /// answer it gave on a retry, or [`PeerError::InputRequired`], upon
    /// which the handler should return at once (with any error: the
    /// request ends with an input-required result whatever it returns).
    ///
    /// Without the capability the question needs, this is
    /// [`PeerError::NotSupported`]; a stateless request whose handler then
    /// fails answers -32021 naming the capability.
    pub fn input(&self, question: InputRequest) -> Result<Value, PeerError> {
        self.inputs(vec![question]).map(|mut v| v.remove(0))
    }

    /// Asks several questions at once: a stateless client gets them in one
    /// input-required result, a session client one after another. The
    /// answers come in the order asked.
    pub fn inputs(&self, questions: Vec<InputRequest>) -> Result<Vec<Value>, PeerError> {
        for q in &questions {
            if let Some(cap) = self.protocol.undeclared(q.method, &q.params) {
                if let Some(r) = &self.round {
                    r.missing(cap);
                }
                return Err(PeerError::NotSupported(cap));
            }
        }
        if let Some(task) = self.task() {
            // A relayed question also ends with its relay (`with_cancel`).
            return task.ask(&questions, Some(&self.cancel.receiver()));
        }
        let Some(round) = &self.round else {
            if self.protocol.version.is_stateless() {
                return Err(PeerError::Stateless);
            }
            return questions
                .into_iter()
                .map(|q| self.send_request(q.method, q.params, q.timeout))
                .collect();
        };
        let mut answers = Vec::with_capacity(questions.len());
        let mut pending = false;
        for q in &questions {
            match round.ask(q) {
                Asked::Answer(v) => answers.push(v),
                Asked::Pending => pending = true,
                Asked::Invalid(e) => return Err(PeerError::Rpc(e)),
            }
        }
        if pending {
            Err(PeerError::InputRequired)
        } else {
            Ok(answers)
        }
    }

    /// Sends a request to the client on this request's stream and blocks
    /// for the answer. On timeout (or when this request is cancelled) the
    /// client is told with `notifications/cancelled`. For a stateless
    /// client, sampling, elicitation and roots go through
    /// [`Context::input`]; other requests are [`PeerError::Stateless`].
    pub fn peer_request(
        &self,
        method: &str,
        params: Value,
        capability: Option<&'static str>,
        timeout: Duration,
    ) -> Result<Value, PeerError> {
        let named = capability.filter(|cap| !self.protocol.client_supports(cap));
        if let Some(cap) = named.or_else(|| self.protocol.undeclared(method, &params)) {
            if let Some(round) = &self.round {
                round.missing(cap);
            }
            return Err(PeerError::NotSupported(cap));
        }
        if self.protocol.version.is_stateless() || self.task().is_some() {
            let question = match method {
                "sampling/createMessage" => InputRequest::sample(params),
                "elicitation/create" => InputRequest::elicit(params),
                "roots/list" => InputRequest::list_roots(),
                _ => return Err(PeerError::Stateless),
            };
            return self.input(question.timeout(timeout));
        }
        self.send_request(method, params, timeout)
    }

    fn send_request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, PeerError> {
        let sink = &self.sink;
        let send = |out: Outgoing| -> Result<(), String> {
            sink.send(out);
            Ok(())
        };
        let wait = Wait {
            timeout,
            cancel: Some(self.cancel.receiver()),
            cancel_reason: "the originating request was cancelled",
            ..Default::default()
        };
        self.exchange
            .outbound()
            .call(method, params, wait, &send)
            .map_err(PeerError::from)
    }

    /// Ends the request: after this, no progress is sent. Sends the response,
    /// or nothing (`Suppressed`) if the request was cancelled.
    pub(crate) fn finish(&self, outcome: Result<Answer, ErrorObject>) {
        let mut state = lock(&self.state);
        state.finished = true;
        let started = state.started.take();
        if let Some(task) = state.task.clone() {
            // A task's outcome is kept for `tasks/get`; its request was
            // answered when it became one.
            drop(state);
            let version = self.protocol.version;
            return task.settle(
                outcome.map(|a| crate::model::adapt::answer(&self.method, version, a).into()),
            );
        }
        let out = if self.cancel.is_cancelled() {
            if let Some(task) = started {
                self.engine()
                    .tasks
                    .abandon(&task, "the call was cancelled as it became a task");
            }
            Outgoing::Suppressed {
                id: self.request_id.clone(),
            }
        } else {
            let outcome = match &self.round {
                Some(round) => round.settle(outcome),
                None => outcome,
            };
            let version = self.protocol.version;
            let outcome = outcome.map(|v| self.engine().shape(&self.method, version, v));
            Outgoing::Response(Reply::answer(self.request_id.clone(), outcome))
        };
        self.exchange.answering(&self.request_id, &self.cancel);
        self.sink.send(out);
        // Only now is the request no longer in flight: whoever waits for the
        // session to go idle (EOF, shutdown) finds its answer already queued.
        self.exchange.request_done(&self.request_id, &self.cancel);
    }
}

/// The client capability a server-to-client request needs (none for
/// `ping` and methods the spec does not gate).
pub fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "sampling/createMessage" => Some("sampling"),
        "elicitation/create" => Some("elicitation"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Whether `capabilities` declare `capability`, a dotted path into them
/// (`sampling`, `sampling.tools`, `elicitation.url`). An empty
/// `elicitation` object declares form mode (`elicitation.form`), as the
/// spec keeps it for older clients.
pub fn declares(capabilities: &Value, capability: &str) -> bool {
    if capability == "elicitation.form" {
        if let Some(e) = capabilities.get("elicitation").and_then(Value::as_object) {
            return e.is_empty() || e.contains_key("form");
        }
    }
    capability
        .split('.')
        .try_fold(capabilities, |v, key| v.get(key))
        .is_some()
}

/// The capability the request `method` with `params` needs that
/// `capabilities` do not declare, if any: what a server must not send and
/// a client must refuse.
pub fn undeclared(capabilities: &Value, method: &str, params: &Value) -> Option<&'static str> {
    capability_needed(method, params).filter(|cap| !declares(capabilities, cap))
}

/// The client capability a server-to-client request needs, by its method
/// and, for elicitation and sampling, its parameters: URL-mode
/// elicitation needs `elicitation.url` and form mode `elicitation.form`
/// (SEP-1036); sampling with `tools` or `toolChoice` needs
/// `sampling.tools` (SEP-1577). Checked with
/// [`ProtocolContext::client_supports`] before anything is sent.
pub fn capability_needed(method: &str, params: &Value) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some(match params.get("mode").and_then(Value::as_str) {
            Some("url") => "elicitation.url",
            _ => "elicitation.form",
        }),
        "sampling/createMessage"
            if params.get("tools").is_some() || params.get("toolChoice").is_some() =>
        {
            Some("sampling.tools")
        }
        _ => capability_for(method),
    }
}

/// Whether a message at `level` goes to a peer whose minimum is `min`
/// (none set: everything goes).
pub(crate) fn passes(level: LogLevel, min: Option<LogLevel>) -> bool {
    min.is_none_or(|m| level >= m)
}

/// A `notifications/message`.
pub(crate) fn log_message(level: LogLevel, logger: Option<&str>, data: Value) -> Value {
    let mut params = Map::new();
    params.insert("level".into(), level.as_str().into());
    if let Some(l) = logger {
        params.insert("logger".into(), l.into());
    }
    params.insert("data".into(), data);
    jsonrpc::notification("notifications/message", Value::Object(params))
}

/// Integers as JSON integers, everything else as floats.
fn number(x: f64) -> Value {
    if x.fract() == 0.0 && x.abs() < 9.0e15 {
        Value::from(x as i64)
    } else {
        Value::from(x)
    }
}
