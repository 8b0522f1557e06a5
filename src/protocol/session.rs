//! One MCP session: its lifecycle phase, negotiated version, client
//! capabilities, log level, subscriptions, requests in flight, and requests
//! it sent to the client.

use super::cancel::CancelToken;
use super::context::{Context, Exchange, ProtocolContext};
use super::dispatch::{self, Route};
use super::inflight::InFlight;
use super::outbound::Outbound;
use super::peer::{SessionEvent, SessionHandle};
use super::sink::{Outgoing, Sink};
use super::stateless;
use super::{Engine, ListKind};
use crate::jsonrpc::{
    self, ErrorObject, Message, Notification, ParseError, Parsed, Reply, Request, RequestId,
    Response,
};
use crate::model::{Answer, LogLevel, ProtocolVersion};
use crate::sync::lock;
use serde_json::Value;
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// Most resources one session may subscribe to.
pub const MAX_SUBSCRIPTIONS: usize = 1024;
/// Longest resource URI a session may subscribe to, in bytes.
pub const MAX_SUBSCRIPTION_URI_BYTES: usize = 8 * 1024;
/// Largest `capabilities` plus `clientInfo` of an `initialize`, as JSON:
/// a session keeps them for its life.
pub const MAX_CLIENT_DESCRIPTION_BYTES: usize = 64 * 1024;
/// The bit of `lists_told` that says `completions` was declared (the
/// list kinds take the low bits).
const COMPLETIONS_TOLD: u8 = 1 << 7;

/// The lifecycle phase.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Nothing but `initialize` and `ping` is accepted.
    AwaitingInitialize,
    /// `initialize` was answered; waiting for `notifications/initialized`.
    Initializing,
    /// Normal operation.
    Operating,
    /// Serving stateless (2026-07-28) requests, each on its own.
    Stateless,
}

struct State {
    phase: Phase,
    version: Option<ProtocolVersion>,
    // Default until the handshake: no capabilities, no info.
    protocol: ProtocolContext,
    log_level: Option<LogLevel>,
    subscriptions: HashSet<String>,
    // The bytes of `subscriptions`, of the engine's budget for all sessions.
    subscribed: super::budget::Share,
}

/// A session of the protocol engine, fed by one transport connection.
pub struct Session {
    pub(crate) engine: Arc<Engine>,
    key: u64,
    id: String,
    /// How logs name the session (never its id).
    log_name: super::session_id::LogName,
    sink: Arc<dyn Sink>,
    state: Mutex<State>,
    inflight: Mutex<InFlight>,
    idle: Condvar,
    // Threads in `wait_idle` (changed and read under `inflight`'s lock):
    // only then does a request's end notify `idle` (std's notify is a
    // system call even with no waiter).
    idle_waiters: AtomicUsize,
    outbound: Outbound,
    closed: AtomicBool,
    // This session, for handles that outlive a request.
    this: Weak<Session>,
    // Its client finished the handshake (`SessionEvent::Opened` was sent).
    opened: AtomicBool,
    // Its handler jobs on the pool, and those waiting for one to end.
    running: Mutex<Running>,
    // The lists whose capability its initialize result declared (a bit
    // each, by `ListKind`): only their changes are told to it.
    lists_told: std::sync::atomic::AtomicU8,
    /// The credential the transport bound it to (a bearer token's digest).
    credential: std::sync::OnceLock<[u8; 32]>,
    /// Made for one request and dropped after it (a stateless HTTP POST,
    /// an AMQP message naming no session): not a client of its own.
    one_request: std::sync::atomic::AtomicBool,
}

/// A session's handler jobs: at most [`Session::running_cap`] run on the
/// pool at once, so one session's stuck handlers cannot take every thread;
/// the rest wait here, each run by the thread of a job that ended, in
/// arrival order, or at once when cancelled (which answers nothing and
/// runs no user code).
#[derive(Default)]
struct Running {
    now: usize,
    waiting: std::collections::VecDeque<(CancelToken, Job)>,
}

/// A handler job: it answers its request, or only ends it when cancelled.
type Job = Box<dyn FnOnce() + Send>;

impl Session {
    pub(crate) fn new(
        engine: Arc<Engine>,
        key: u64,
        sink: Arc<dyn Sink>,
        this: Weak<Session>,
    ) -> Session {
        let id = super::session_id::new_session_id();
        let subscribed = engine.subscribed.share();
        Session {
            engine,
            key,
            log_name: super::session_id::LogName::of(&id),
            id,
            sink,
            state: Mutex::new(State {
                phase: Phase::AwaitingInitialize,
                version: None,
                protocol: ProtocolContext::new(
                    ProtocolVersion::LATEST_SESSION,
                    &Value::Object(Default::default()),
                    &Value::Null,
                    None,
                ),
                log_level: None,
                subscriptions: HashSet::new(),
                subscribed,
            }),
            inflight: Mutex::default(),
            idle: Condvar::new(),
            idle_waiters: AtomicUsize::new(0),
            outbound: Outbound::default(),
            closed: AtomicBool::new(false),
            this,
            opened: AtomicBool::new(false),
            running: Mutex::default(),
            lists_told: std::sync::atomic::AtomicU8::new(0),
            credential: std::sync::OnceLock::new(),
            one_request: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Remembers which lists the `capabilities` its initialize result
    /// declares (see [`told_of`](Self::told_of)).
    pub(crate) fn told_capabilities(&self, capabilities: &Value) {
        let lists = ListKind::ALL
            .iter()
            .filter(|k| capabilities.get(k.capability()).is_some())
            .fold(0, |bits, k| bits | k.bit());
        let completions = if capabilities.get("completions").is_some() {
            COMPLETIONS_TOLD
        } else {
            0
        };
        self.lists_told.store(lists | completions, Ordering::SeqCst);
    }

    /// Binds the session to the credential its requests came with (a
    /// bearer token's digest): the tasks its requests make may then be
    /// followed only by requests with the same one (the tasks extension's
    /// rule where there is an authorization context). Set once.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn bind_credential(&self, digest: [u8; 32]) {
        let _ = self.credential.set(digest);
    }

    /// See [`bind_credential`](Self::bind_credential).
    pub(crate) fn credential(&self) -> Option<[u8; 32]> {
        self.credential.get().copied()
    }

    /// Whether its initialize result declared `capability` (a list, or
    /// `completions`): what a client was told is offered stays offered,
    /// however the catalog changes (an empty list is still a list).
    pub(crate) fn was_told(&self, capability: &str) -> bool {
        let bits = self.lists_told.load(Ordering::SeqCst);
        match capability {
            "completions" => bits & COMPLETIONS_TOLD != 0,
            other => ListKind::ALL
                .iter()
                .any(|k| k.capability() == other && bits & k.bit() != 0),
        }
    }

    /// Whether the session was told the server has `kind` (so may be told
    /// it changed): a client never told of prompts is sent no
    /// `prompts/list_changed` when prompts are added later.
    pub(crate) fn told_of(&self, kind: ListKind) -> bool {
        self.lists_told.load(Ordering::SeqCst) & kind.bit() != 0
    }

    /// Most handler jobs of one session on the pool at once: all threads
    /// but one.
    fn running_cap(&self) -> usize {
        self.engine.options.pool_threads.saturating_sub(1).max(1)
    }

    /// Runs `job` (cancelled by `cancel`) on the pool, or queues it behind
    /// this session's running jobs when the session has its share of
    /// threads; `false` when the pool refuses it (its queue is full). The
    /// pool is asked under the session's lock (it never blocks): a job
    /// queued meanwhile always has a running one to take it after.
    fn submit(self: &Arc<Self>, cancel: &CancelToken, job: Job) -> bool {
        let mut running = lock(&self.running);
        if running.now >= self.running_cap() {
            // Cancelled between its entry in flight and here (a close or a
            // cancellation on another thread already looked at the
            // queue): ended now, not left holding its slot.
            if cancel.is_cancelled() {
                drop(running);
                job();
                return true;
            }
            running.waiting.push_back((cancel.clone(), job));
            return true;
        }
        running.now += 1;
        let session = self.clone();
        let runner = Box::new(move || session.run_then_waiting(Some(job)));
        if self.engine.pool.try_submit(runner).is_err() {
            running.now -= 1;
            return false;
        }
        true
    }

    /// Ends the waiting jobs whose requests were cancelled, here and now:
    /// they run no handler, and leave the in-flight table (and its limit)
    /// without waiting for a running job of the session to end.
    fn end_cancelled_waiting(&self) {
        let cancelled: Vec<Job> = {
            let mut running = lock(&self.running);
            let (cancelled, waiting) = std::mem::take(&mut running.waiting)
                .into_iter()
                .partition(|(token, _)| token.is_cancelled());
            running.waiting = waiting;
            cancelled.into_iter().map(|(_, job)| job).collect()
        };
        for job in cancelled {
            job();
        }
    }

    /// Runs `job`, then this session's waiting jobs while there are any.
    fn run_then_waiting(&self, mut job: Option<Job>) {
        while let Some(j) = job.take() {
            // A job answers its own panics; this is the last guard.
            if catch_unwind(AssertUnwindSafe(j)).is_err() {
                log::error!(
                    "session {}: a handler job panicked outside its guard",
                    self.log_name()
                );
            }
            let mut running = lock(&self.running);
            job = running.waiting.pop_front().map(|(_, job)| job);
            if job.is_none() {
                running.now -= 1;
            }
        }
    }

    pub(crate) fn key(&self) -> u64 {
        self.key
    }

    /// From now on, serves stateless (2026-07-28) requests only.
    pub(crate) fn make_stateless(&self) {
        lock(&self.state).phase = Phase::Stateless;
    }

    /// Marks it as made for one request (see `Session::one_request`).
    pub(crate) fn for_one_request(self: Arc<Self>) -> Arc<Self> {
        self.one_request.store(true, Ordering::SeqCst);
        self
    }

    /// The session id (32 hex digits from `ring`'s system random).
    pub fn id(&self) -> &str {
        &self.id
    }
    /// How logs name the session: a short digest of its id
    /// ([`log_name`](super::session_id::log_name)), never the id itself.
    pub fn log_name(&self) -> &str {
        self.log_name.as_str()
    }
    /// Most resources one session may subscribe to.
    pub const MAX_SUBSCRIPTIONS: usize = 1024;
    /// Longest resource URI a session may subscribe to, in bytes.
    pub const MAX_SUBSCRIPTION_URI_BYTES: usize = 8 * 1024;
    /// Largest `capabilities` plus `clientInfo` of an `initialize`, as JSON:
    /// a session keeps them for its life.
    pub const MAX_CLIENT_DESCRIPTION_BYTES: usize = 64 * 1024;

    /// The lifecycle phase.
    pub fn phase(&self) -> Phase {
        lock(&self.state).phase
    }
    /// The negotiated protocol revision, once `initialize` was answered.
    pub fn version(&self) -> Option<ProtocolVersion> {
        lock(&self.state).version
    }
    /// The minimum log level the client asked for.
    pub fn log_level(&self) -> Option<LogLevel> {
        lock(&self.state).log_level
    }
    /// The session's default sink, for messages related to no request.
    pub fn sink(&self) -> &Arc<dyn Sink> {
        &self.sink
    }

    /// Parses and handles bytes from the transport; replies go to `sink`.
    /// Bad input is answered with the right error and logged once; the
    /// session keeps serving.
    pub fn receive(self: &Arc<Self>, bytes: &[u8], sink: &Arc<dyn Sink>) {
        match jsonrpc::parse(bytes) {
            Ok(parsed) => self.receive_parsed(parsed, sink),
            Err(e) => self.reject(e, sink),
        }
    }

    /// Handles an already parsed message or batch.
    pub fn receive_parsed(self: &Arc<Self>, parsed: Parsed, sink: &Arc<dyn Sink>) {
        match parsed {
            Parsed::Single(m) => self.handle(m, sink),
            Parsed::Batch(items) => {
                if !self.version().is_some_and(ProtocolVersion::allows_batches) {
                    return self.reject(ParseError::batch_not_supported(), sink);
                }
                let owed = jsonrpc::answers_owed_in(&items);
                let batch: Arc<dyn Sink> =
                    Arc::new(super::batch::Collector::new(sink.clone(), owed));
                for item in items {
                    match item {
                        Ok(m) => self.handle(m, &batch),
                        Err(e) => self.reject(e, &batch),
                    }
                }
            }
        }
    }

    /// Answers a parse or validation failure (when an answer is owed).
    pub fn reject(&self, error: ParseError, sink: &Arc<dyn Sink>) {
        log::warn!("session {}: rejected a message: {error}", self.log_name());
        if let Some(reply) = error.reply() {
            sink.send(Outgoing::Response(reply));
        }
        self.fail_answered(&error);
    }

    /// Fails `request`, one of ours that the transport could not send to
    /// the client, with `error`: its handler learns now, not at its
    /// timeout.
    #[cfg_attr(not(any(feature = "http", feature = "amqp")), allow(dead_code))]
    pub(crate) fn fail_unsent(&self, request: &Value, error: &ErrorObject) {
        if let Some(id) = RequestId::from_value(&request["id"]) {
            self.handle_response(Response::error(id, error));
        }
    }

    /// Fails the request of ours that `error`, a broken response, answers
    /// (if its id could be read): its handler learns now, not at its
    /// timeout. For transports that refuse the message themselves (an
    /// HTTP 400, a dead letter) and log it.
    pub(crate) fn fail_answered(&self, error: &ParseError) {
        if let Some(failed) = error.failed_response("client") {
            self.handle_response(failed);
        }
    }

    /// Handles one valid message.
    pub fn handle(self: &Arc<Self>, message: Message, sink: &Arc<dyn Sink>) {
        match message {
            Message::Request(r) => self.handle_request(r, sink),
            Message::Notification(n) => self.handle_notification(&n),
            Message::Response(r) => self.handle_response(r),
        }
    }

    fn handle_request(self: &Arc<Self>, request: Request, sink: &Arc<dyn Sink>) {
        match self.phase() {
            Phase::Stateless => return self.handle_stateless(request, sink),
            // A connection speaks the generation of its first request.
            Phase::AwaitingInitialize if stateless::announces(&request) => {
                return self.handle_stateless(request, sink)
            }
            _ => {}
        }
        let route = match request.method() {
            "initialize" => Route::Inline(dispatch::initialize),
            "ping" => Route::Inline(dispatch::ping),
            method if self.phase() == Phase::AwaitingInitialize => {
                let e = ErrorObject::invalid_request(format!(
                    "{} received before initialize: only initialize and ping are accepted until the session is initialized",
                    jsonrpc::excerpt(method)
                ));
                return respond(sink, request.id(), Err(e));
            }
            method => dispatch::route(self, method),
        };
        match route {
            Route::Inline(_) if lock(&self.inflight).holds(request.id()) => {
                self.refuse_duplicate(request.id(), sink)
            }
            Route::Inline(f) => {
                let version = self.version().unwrap_or(ProtocolVersion::LATEST_SESSION);
                let outcome = f(self, &request).map(|v| {
                    Answer::Json(crate::model::adapt::result(request.method(), version, v))
                });
                respond(sink, request.id(), outcome)
            }
            Route::Pool(f) => {
                let protocol = self.protocol_context();
                self.spawn(request, sink.clone(), f, protocol, None)
            }
        }
    }

    /// A stateless (2026-07-28) request: its `_meta` says everything about
    /// the client; nothing is kept from one request to the next.
    fn handle_stateless(self: &Arc<Self>, request: Request, sink: &Arc<dyn Sink>) {
        let envelope = stateless::Envelope::parse(&request).and_then(|e| Ok((e.version()?, e)));
        let (version, envelope) = match envelope {
            Ok(v) => v,
            Err(e) => return respond(sink, request.id(), Err(e)),
        };
        if self.phase() == Phase::AwaitingInitialize {
            log::info!(
                "session {}: serving stateless protocol {version}",
                self.log_name()
            );
            self.make_stateless();
        }
        let method = request.method();
        // An id an open listen stream has: its answer would read as the
        // stream's end.
        if self.engine.listeners.holds(self.key(), request.id()) {
            return self.refuse_duplicate(request.id(), sink);
        }
        let route = match method {
            "server/discover" => Route::Inline(dispatch::discover),
            super::LISTEN => {
                // An id a request in flight has.
                let id = request.id();
                if lock(&self.inflight).holds(id) {
                    return self.refuse_duplicate(id, sink);
                }
                if let Err(e) = self.engine.listeners.open(self, &request, sink) {
                    respond(sink, request.id(), Err(e));
                }
                return;
            }
            m if stateless::REMOVED_METHODS.contains(&m) => {
                let e = ErrorObject::method_not_found(m);
                return respond(sink, request.id(), Err(e));
            }
            m => dispatch::route(self, m),
        };
        match route {
            Route::Inline(f) => {
                let outcome =
                    f(self, &request).map(|v| self.engine.shape(method, version, v.into()));
                respond(sink, request.id(), outcome)
            }
            Route::Pool(f) => {
                let round = match super::input::Round::of(
                    &request,
                    &self.engine.state_key,
                    self.credential().as_ref(),
                ) {
                    Ok(r) => r,
                    Err(e) => return respond(sink, request.id(), Err(e)),
                };
                let protocol = ProtocolContext::new(
                    version,
                    &envelope.capabilities,
                    &envelope.client_info,
                    envelope.log_level,
                );
                self.spawn(request, sink.clone(), f, protocol, Some(Arc::new(round)))
            }
        }
    }

    /// Refuses a request whose id a request in flight, or an open listen
    /// stream, has. The error goes with `id: null`: with the id, the client
    /// would take it for the answer to the other (or the stream's end), and
    /// that one's answer for a stray.
    fn refuse_duplicate(&self, id: &RequestId, sink: &Arc<dyn Sink>) {
        let e = ErrorObject::invalid_request(format!(
            "request id {id} is already in use (by a request in flight or an open listen stream)"
        ));
        log::warn!("session {}: {}; refused", self.log_name(), e.message);
        sink.send(Outgoing::Response(Reply::Error(None, e)));
    }

    fn spawn(
        self: &Arc<Self>,
        request: Request,
        sink: Arc<dyn Sink>,
        handler: dispatch::PoolHandler,
        protocol: ProtocolContext,
        round: Option<Arc<super::input::Round>>,
    ) {
        let id = request.id().clone();
        let observer = self.engine.observer().cloned();
        let arrived = observer.as_ref().map(|_| std::time::Instant::now());
        let cancel = CancelToken::new();
        let cancels_job = cancel.clone();
        {
            let mut inflight = lock(&self.inflight);
            // Under the lock `Engine::drain` takes after setting the flag:
            // a request is either refused here or waited for there.
            if self.engine.is_draining() {
                drop(inflight);
                let e =
                    ErrorObject::internal("the server is shutting down; retry elsewhere or later");
                return respond(&sink, &id, Err(e));
            }
            if self.closed.load(Ordering::SeqCst) {
                drop(inflight);
                let e = ErrorObject::internal("the session has ended");
                return respond(&sink, &id, Err(e));
            }
            if inflight.holds(&id) {
                drop(inflight);
                return self.refuse_duplicate(&id, &sink);
            }
            let limit = self.engine.options.max_inflight_per_session;
            // Answered requests still waiting to leave the table do not
            // count: a client keeping `limit` requests outstanding sends
            // the next one as soon as it reads an answer.
            if inflight.unanswered() >= limit {
                drop(inflight);
                log::warn!(
                    "session {}: {limit} requests in flight; request {id} refused",
                    self.log_name()
                );
                let e = ErrorObject::internal(format!(
                    "too many requests in flight on this session (at most {limit}); retry when some are answered"
                ));
                return respond(&sink, &id, Err(e));
            }
            inflight.join(id.clone(), cancel.clone());
        }
        let quick = dispatch::is_quick_call(self, &request);
        let mut ctx = Context::new(
            self.clone() as Arc<dyn Exchange>,
            &request,
            sink.clone(),
            cancel,
            protocol,
            round,
        );
        if quick {
            ctx.mark_quick();
        }
        let job = move || {
            if ctx.is_cancelled() {
                // Cancelled (or its session ended) while queued: the
                // handler never runs; nothing is answered.
                return ctx.finish(Err(ErrorObject::internal("cancelled")));
            }
            // The handler takes the request: what it needs of it, it moves.
            let outcome =
                catch_unwind(AssertUnwindSafe(|| handler(&ctx, request))).unwrap_or_else(|_| {
                    let msg = super::pool::take_panic_report();
                    log::error!(
                        "handler for {} (request {}) panicked: {msg}",
                        ctx.method(),
                        ctx.request_id()
                    );
                    Err(ErrorObject::internal(format!(
                        "internal error: the handler for {} panicked",
                        ctx.method()
                    )))
                });
            let label = match (&outcome, ctx.is_cancelled()) {
                (_, true) => super::Outcome::Cancelled,
                (Ok(_), false) => super::Outcome::Ok,
                (Err(_), false) => super::Outcome::Error,
            };
            // Counted before the answer leaves: whoever holds the answer
            // finds it counted.
            if let (Some(arrived), Some(o)) = (arrived, &observer) {
                // The observer's code: its panic must not keep the answer.
                let told = catch_unwind(AssertUnwindSafe(|| {
                    o.request_done(ctx.method(), label, arrived.elapsed())
                }));
                if told.is_err() {
                    log::error!(
                        "the observer of {} panicked: {}",
                        ctx.method(),
                        super::pool::take_panic_report()
                    );
                }
            }
            ctx.finish(outcome);
        };
        if quick {
            // Run where it is: no box to allocate.
            return self.engine.pool.run_here(job);
        }
        if !self.submit(&cancels_job, Box::new(job)) {
            self.request_ended(&id, &cancels_job);
            log::warn!(
                "session {}: handler queue full, request {id} refused",
                self.log_name()
            );
            respond(
                &sink,
                &id,
                Err(ErrorObject::internal(
                    "server overloaded: the handler queue is full; retry later",
                )),
            );
        }
    }

    fn handle_notification(&self, n: &Notification) {
        match n.method() {
            "notifications/initialized" => {
                let mut st = lock(&self.state);
                match st.phase {
                    Phase::Initializing => {
                        st.phase = Phase::Operating;
                        drop(st);
                        self.opened.store(true, Ordering::SeqCst);
                        self.tell(SessionEvent::Opened);
                    }
                    Phase::Operating => {}
                    Phase::Stateless => log::debug!(
                        "session {}: initialized on a stateless connection; ignored",
                        self.log_name()
                    ),
                    Phase::AwaitingInitialize => log::warn!(
                        "session {}: initialized before initialize; ignored",
                        self.log_name()
                    ),
                }
            }
            "notifications/cancelled" => {
                let id = n
                    .params()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_value);
                let token = id.as_ref().and_then(|id| lock(&self.inflight).token(id));
                match token {
                    Some(token) => {
                        token.cancel();
                        self.end_cancelled_waiting();
                    }
                    None if id
                        .as_ref()
                        .is_some_and(|id| self.engine.listeners.cancel(self.key, id)) => {}
                    None => log::debug!(
                        "session {}: cancellation of an unknown or finished request ignored",
                        self.log_name()
                    ),
                }
            }
            "notifications/roots/list_changed" if self.phase() == Phase::Operating => {
                self.tell(SessionEvent::RootsChanged);
            }
            "notifications/progress" => {
                // The engine's own requests carry no progress token: only
                // the timeout restarts, no callback exists to run.
                if let Some(p) = n.params() {
                    let _ = self.outbound.progress(p);
                }
            }
            other => log::debug!("session {}: notification {other} ignored", self.log_name()),
        }
    }

    /// Tells the engine's watchers and event readers about this session.
    fn tell(&self, event: fn(SessionHandle) -> SessionEvent) {
        if let Some(handle) = Exchange::handle(self) {
            self.engine.session_event(event(handle));
        }
    }

    /// Whether the session has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn handle_response(&self, r: Response) {
        self.outbound
            .answer(r, &format!("session {}", self.log_name()));
    }

    /// The protocol context a new request is served under.
    pub(crate) fn protocol_context(&self) -> ProtocolContext {
        lock(&self.state).protocol.clone()
    }

    /// `Err` (-32600) when `initialize` was already received: checked
    /// before its params, so that a second one is refused as such.
    pub(crate) fn awaits_initialize(&self) -> Result<(), ErrorObject> {
        awaiting_initialize(&lock(&self.state))
    }

    /// Records the handshake; `Err` when `initialize` was already received.
    pub(crate) fn initialized(
        &self,
        version: ProtocolVersion,
        capabilities: &Value,
        client_info: &Value,
    ) -> Result<(), ErrorObject> {
        let size = capabilities.to_string().len() + client_info.to_string().len();
        if size > MAX_CLIENT_DESCRIPTION_BYTES {
            return Err(ErrorObject::invalid_params(format!(
                "capabilities and clientInfo take {size} bytes; at most {MAX_CLIENT_DESCRIPTION_BYTES} are kept per session"
            )));
        }
        let mut st = lock(&self.state);
        awaiting_initialize(&st)?;
        st.phase = Phase::Initializing;
        st.version = Some(version);
        st.protocol = ProtocolContext::new(version, capabilities, client_info, None);
        Ok(())
    }

    pub(crate) fn set_log_level(&self, level: LogLevel) {
        lock(&self.state).log_level = Some(level);
    }

    /// Subscribes to (or unsubscribes from) `uri`, within
    /// [`MAX_SUBSCRIPTIONS`] of at most [`MAX_SUBSCRIPTION_URI_BYTES`] each
    /// and [`MAX_SUBSCRIBED_BYTES_PER_SESSION`](super::MAX_SUBSCRIBED_BYTES_PER_SESSION)
    /// in all, and within what all sessions may hold together
    /// ([`MAX_SUBSCRIBED_BYTES`](super::MAX_SUBSCRIBED_BYTES)).
    pub(crate) fn subscribe(&self, uri: &str, on: bool) -> Result<(), ErrorObject> {
        let mut st = lock(&self.state);
        if !on {
            if st.subscriptions.remove(uri) {
                st.subscribed.give(uri.len());
            }
            return Ok(());
        }
        if st.subscriptions.contains(uri) {
            return Ok(());
        }
        // Closed meanwhile (it drained the set under this lock after
        // setting the flag): nothing would ever be sent for it.
        if self.closed.load(Ordering::SeqCst) {
            return Err(ErrorObject::internal("the session is closed"));
        }
        if uri.len() > MAX_SUBSCRIPTION_URI_BYTES {
            return Err(ErrorObject::invalid_params(format!(
                "the URI is longer than {MAX_SUBSCRIPTION_URI_BYTES} bytes"
            )));
        }
        use super::budget::MAX_SUBSCRIBED_BYTES_PER_SESSION;
        if st.subscriptions.len() >= MAX_SUBSCRIPTIONS
            || !st
                .subscribed
                .fits(uri.len(), MAX_SUBSCRIBED_BYTES_PER_SESSION)
        {
            return Err(ErrorObject::invalid_params(format!(
                "a session may subscribe to at most {MAX_SUBSCRIPTIONS} resources, \
                 of {MAX_SUBSCRIBED_BYTES_PER_SESSION} bytes of URIs in all"
            )));
        }
        if !st.subscribed.take(uri.len()) {
            return Err(ErrorObject::internal(
                "the server holds as many subscriptions as it may; retry later",
            ));
        }
        st.subscriptions.insert(uri.to_owned());
        Ok(())
    }

    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        lock(&self.state).subscriptions.contains(uri)
    }

    /// The request `id` (the one with `cancel`) left the table.
    fn request_ended(&self, id: &RequestId, cancel: &CancelToken) {
        let mut inflight = lock(&self.inflight);
        inflight.leave(id, cancel);
        if inflight.is_empty() && self.idle_waiters.load(Ordering::SeqCst) > 0 {
            self.idle.notify_all();
        }
    }

    /// Whether the request with `id` is in flight, its answer perhaps on
    /// its way already (a redelivered copy of it can be dropped: the
    /// original answers, or has).
    pub fn is_inflight(&self, id: &RequestId) -> bool {
        lock(&self.inflight).has(id)
    }

    /// Whether a request in flight whose answer has not left holds `id`:
    /// another request with it would be refused. Once its answer leaves,
    /// the id is free for the client to use again.
    pub fn holds_id(&self, id: &RequestId) -> bool {
        lock(&self.inflight).holds(id)
    }

    /// Number of requests in flight.
    pub fn inflight(&self) -> usize {
        lock(&self.inflight).len()
    }

    /// Threads waiting in [`Session::wait_idle`].
    #[cfg(test)]
    pub(crate) fn idle_waiters(&self) -> usize {
        self.idle_waiters.load(Ordering::SeqCst)
    }

    /// Waits until no request is in flight or `timeout` passes; true if idle.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = crate::wait::deadline_in(timeout);
        let mut inflight = lock(&self.inflight);
        self.idle_waiters.fetch_add(1, Ordering::SeqCst);
        let idle = loop {
            let now = Instant::now();
            if inflight.is_empty() || now >= deadline {
                break inflight.is_empty();
            }
            inflight = self
                .idle
                .wait_timeout(inflight, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        };
        self.idle_waiters.fetch_sub(1, Ordering::SeqCst);
        idle
    }

    /// Ends the session: cancels everything in flight, fails every pending
    /// server-to-client request, and leaves the engine's session list.
    pub fn close(&self) {
        {
            // Under the lock a request takes to join the table: it is
            // either refused there or cancelled here.
            let inflight = lock(&self.inflight);
            if self.closed.swap(true, Ordering::SeqCst) {
                return;
            }
            for token in inflight.tokens() {
                token.cancel();
            }
        }
        self.end_cancelled_waiting();
        self.outbound.close();
        // Nothing more is sent to it: its subscriptions go (and their
        // bytes back to the engine's budget), whatever still holds it.
        {
            let mut st = lock(&self.state);
            let bytes = st.subscriptions.drain().map(|u| u.len()).sum();
            st.subscribed.give(bytes);
        }
        let opened = self.opened.load(Ordering::SeqCst);
        self.engine.forget_session(self.key, &self.id, opened);
    }
}

impl Exchange for Session {
    fn id(&self) -> &str {
        &self.id
    }
    fn task_owner(&self) -> &str {
        // Sessions made for one request are no client of their own: the
        // requests without a credential that come in them are one owner.
        if self.one_request.load(Ordering::SeqCst) {
            ""
        } else {
            &self.id
        }
    }
    fn was_told(&self, capability: &str) -> bool {
        Session::was_told(self, capability)
    }
    fn credential(&self) -> Option<[u8; 32]> {
        Session::credential(self)
    }
    fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }
    fn log_level(&self) -> Option<LogLevel> {
        Session::log_level(self)
    }
    fn outbound(&self) -> &Outbound {
        &self.outbound
    }
    fn answering(&self, id: &RequestId, cancel: &CancelToken) {
        lock(&self.inflight).answering(id, cancel);
    }
    fn request_done(&self, id: &RequestId, cancel: &CancelToken) {
        self.request_ended(id, cancel)
    }
    fn handle(&self) -> Option<SessionHandle> {
        if self.phase() == Phase::Stateless {
            return None;
        }
        self.this.upgrade().map(|s| SessionHandle::new(&s))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
    }
}

fn respond(sink: &Arc<dyn Sink>, id: &RequestId, outcome: Result<Answer, ErrorObject>) {
    sink.send(Outgoing::Response(Reply::answer(id.clone(), outcome)));
}

/// `Err` (-32600) unless the session still waits for `initialize`.
fn awaiting_initialize(st: &State) -> Result<(), ErrorObject> {
    match st.phase {
        Phase::AwaitingInitialize => Ok(()),
        _ => Err(ErrorObject::invalid_request(
            "initialize was already received on this session",
        )),
    }
}
