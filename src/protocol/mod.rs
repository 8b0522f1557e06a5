//! The MCP protocol engine: sessions and their lifecycle, version
//! negotiation, dispatch, cancellation, progress, logging, pagination, and
//! requests from server to client.
//!
//! A transport opens a [`Session`] per connection with [`Engine::open_session`]
//! and feeds it bytes with [`Session::receive`]; replies come back through the
//! [`Sink`] it passed in. Handlers run on a bounded pool of named threads.

mod batch;
mod budget;
mod cancel;
pub mod catalog;
mod context;
mod dispatch;
mod inflight;
pub mod input;
mod listen;
pub(crate) use dispatch::is_engine_method;
#[cfg(any(feature = "http", feature = "amqp"))]
pub(crate) use listen::is_listen;
pub(crate) use listen::LISTEN;
mod outbound;
#[cfg(feature = "client")]
pub(crate) use outbound::excuse_the_call;
mod pagination;
mod peer;
pub(crate) mod pool;
mod session;
mod session_id;
mod sink;
mod skills;
pub mod stateless;
pub mod tasks;

pub use budget::{MAX_SUBSCRIBED_BYTES, MAX_SUBSCRIBED_BYTES_PER_SESSION};
pub use cancel::CancelToken;
pub use catalog::{Changes, ListKind, Source};
pub use context::{
    capability_for, capability_needed, declares, undeclared, Context, PeerError, ProtocolContext,
    ToolContext, DEFAULT_PEER_REQUEST_TIMEOUT,
};
pub use input::{InputRequest, StateKey};
#[cfg(feature = "client")]
pub(crate) use outbound::{CallError, Outbound, Wait};
pub use outbound::{PeerRequestHandler, ProgressHandler, ABANDONED_CALL_GRACE};
pub use peer::{SessionEvent, SessionEvents, SessionHandle, SESSION_EVENT_QUEUE};
pub use session::{
    Phase, Session, MAX_CLIENT_DESCRIPTION_BYTES, MAX_SUBSCRIPTIONS, MAX_SUBSCRIPTION_URI_BYTES,
};
#[cfg(all(feature = "http", feature = "client"))]
pub(crate) use session_id::is_valid as is_valid_session_id;
pub use session_id::{log_name as session_log_name, new_session_id, SESSION_ID_BYTES};
pub use sink::{Outgoing, Sink};
pub use stateless::{CacheHint, CachePolicy, CacheScope};
pub use tasks::{TaskOptions, TaskStatus, TaskSupport};
// The data types engine users meet most, where they used to live.
pub use crate::model::{LogLevel, ProtocolVersion};

use crate::jsonrpc;
use crate::model::Answer;
use crate::sync::lock;
use catalog::{Catalog, CatalogError, Enabled, MethodFallback};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// Default number of handler threads. One session runs handlers on all
/// but one of them at most; its further requests wait for its own
/// handlers to end, so one session's stuck handlers cannot take every
/// thread.
pub const DEFAULT_POOL_THREADS: usize = 16;
/// Default capacity of the handler queue; beyond it requests are refused
/// with -32603 "server overloaded" instead of blocking the transport.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;
/// Default most requests one session may have in flight (queued or
/// running); beyond it a request is refused with -32603 at once, so one
/// session cannot take the whole queue.
pub const DEFAULT_MAX_INFLIGHT_PER_SESSION: usize = 64;
/// Default number of items per page of a list method.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// Engine options.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Handler threads (default [`DEFAULT_POOL_THREADS`]); one session
    /// runs handlers on all but one of them at most.
    pub pool_threads: usize,
    /// Handler queue capacity (default [`DEFAULT_QUEUE_CAPACITY`]).
    pub queue_capacity: usize,
    /// Items per page of `tools/list` and the other lists (default [`DEFAULT_PAGE_SIZE`]).
    pub page_size: usize,
    /// Requests one session may have in flight (default
    /// [`DEFAULT_MAX_INFLIGHT_PER_SESSION`]).
    pub max_inflight_per_session: usize,
    /// `ttlMs` and `cacheScope` of 2026-07-28 results (default
    /// [`CachePolicy::default`]: lists and `server/discover` a minute,
    /// public; `resources/read` stale at once, private).
    pub cache: CachePolicy,
    /// The key 2026-07-28 `requestState` is signed with: give instances
    /// behind one load balancer the same (default: [`StateKey::random`],
    /// this process's own).
    pub request_state_key: Option<StateKey>,
    /// The tasks extension: how long tasks are kept, how many (default
    /// [`TaskOptions::default`]).
    pub tasks: TaskOptions,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            pool_threads: DEFAULT_POOL_THREADS,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            page_size: DEFAULT_PAGE_SIZE,
            max_inflight_per_session: DEFAULT_MAX_INFLIGHT_PER_SESSION,
            cache: CachePolicy::default(),
            request_state_key: None,
            tasks: TaskOptions::default(),
        }
    }
}

/// The server's `serverInfo` and `instructions`.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Optional display title.
    pub title: Option<String>,
    /// Optional instructions for the model.
    pub instructions: Option<String>,
    /// Optional description of what the server does.
    pub description: Option<String>,
    /// Optional URL of the server's home page.
    pub website_url: Option<String>,
    /// Icons a client may show for the server (SEP-973).
    pub icons: Vec<crate::model::Icon>,
    /// What `initialize` declares as `capabilities.experimental`
    /// (non-standard features; each value an object).
    pub experimental: Map<String, Value>,
}

impl ServerInfo {
    pub(crate) fn to_value(&self) -> Value {
        crate::model::implementation(
            &self.name,
            &self.version,
            &self.title,
            &self.description,
            &self.website_url,
            &self.icons,
        )
    }
}

/// The protocol engine shared by every session of a server: the handler
/// pool, the sessions, and the [`catalog`] of what it serves.
pub struct Engine {
    pub(crate) info: ServerInfo,
    pub(crate) options: EngineOptions,
    pub(crate) catalog: Catalog,
    pool: pool::Pool,
    sessions: Mutex<HashMap<u64, Weak<Session>>>,
    next_key: AtomicU64,
    draining: AtomicBool,
    observer: OnceLock<Arc<dyn Observer>>,
    // Told when a session closes; dropped watchers fall out.
    watchers: Mutex<Vec<Weak<dyn SessionWatcher>>>,
    // The senders of `session_events` receivers (held here only: when the
    // engine goes, their readers see the end).
    event_readers: Mutex<Vec<crossbeam_channel::Sender<SessionEvent>>>,
    // Instructions added at run time (a gateway's upstreams), by source.
    added_instructions: Mutex<std::collections::BTreeMap<String, String>>,
    // Open `subscriptions/listen` streams (2026-07-28).
    listeners: listen::Listeners,
    // Signs input-required rounds' `requestState` (2026-07-28).
    state_key: StateKey,
    // Calls running or ended as tasks (the tasks extension).
    pub(crate) tasks: tasks::Tasks,
    // The URIs every session and listen stream subscribes to.
    pub(crate) subscribed: budget::Budget,
}

/// How a request handled on the pool ended, for an [`Observer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with a result.
    Ok,
    /// Answered with an error.
    Error,
    /// Cancelled (by the client, or because its session ended): not answered.
    Cancelled,
}

impl Outcome {
    /// `ok`, `error` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// Told about every request that ran a handler (`tools/call`,
/// `resources/read`, `prompts/get`, `completion/complete`; for metrics).
/// Called on the thread that ran it (a pool thread; for a quick tool, the
/// transport's) just before the answer is queued: keep it short.
pub trait Observer: Send + Sync {
    /// `method` ended with `outcome` after `elapsed` (from its arrival).
    fn request_done(&self, method: &str, outcome: Outcome, elapsed: Duration);
}

/// Told when a session of the engine opens, changes its roots or closes
/// (a gateway stops what it started for a session that closed). Called on
/// the thread that saw it happen, with no lock held: keep it short, hand
/// long work to a thread. [`Engine::session_events`] is the same as a
/// channel.
pub trait SessionWatcher: Send + Sync {
    /// The session with id `session_id` has closed.
    fn session_closed(&self, session_id: &str);
    /// A client finished its handshake.
    fn session_opened(&self, _session: &SessionHandle) {}
    /// A client said its roots changed.
    fn roots_changed(&self, _session: &SessionHandle) {}
}

impl Engine {
    pub(crate) fn new(
        info: ServerInfo,
        options: EngineOptions,
        enabled: Enabled,
    ) -> std::io::Result<Arc<Engine>> {
        let pool = pool::Pool::new(
            pool::HANDLER_THREADS,
            options.pool_threads,
            options.queue_capacity,
        )?;
        let state_key = options
            .request_state_key
            .clone()
            .unwrap_or_else(StateKey::random);
        let tasks = tasks::Tasks::new(options.tasks.clone());
        Ok(Arc::new(Engine {
            info,
            options,
            tasks,
            catalog: Catalog::new(enabled),
            pool,
            sessions: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
            draining: AtomicBool::new(false),
            observer: OnceLock::new(),
            watchers: Mutex::new(Vec::new()),
            event_readers: Mutex::new(Vec::new()),
            added_instructions: Mutex::new(std::collections::BTreeMap::new()),
            listeners: listen::Listeners::default(),
            state_key,
            subscribed: budget::Budget::default(),
        }))
    }

    /// A result of `method` shaped for a client speaking `version`: older
    /// revisions lose what they do not define; 2026-07-28 results gain
    /// `resultType`, the server's info and caching hints.
    pub(crate) fn shape(&self, method: &str, version: ProtocolVersion, result: Answer) -> Answer {
        let result = crate::model::adapt::answer(method, version, result);
        if version.is_stateless() {
            let result = result.into_value();
            Answer::Json(stateless::decorate(
                method,
                result,
                &self.info,
                &self.options.cache,
            ))
        } else {
            result
        }
    }

    /// The `inputSchema` of the tool `name`, if it is served.
    #[cfg(feature = "http")]
    pub(crate) fn tool_input_schema(&self, name: &str) -> Option<Value> {
        let view = self.catalog.view();
        view.tools
            .get(name)
            .map(|t| t.definition["inputSchema"].clone())
    }

    /// Opens a session that serves only stateless (2026-07-28) requests,
    /// each on its own: what an HTTP request without a session gets. Its
    /// unrelated messages go to `sink`.
    pub fn open_stateless(self: &Arc<Self>, sink: Arc<dyn Sink>) -> Arc<Session> {
        let session = self.open_session(sink).for_one_request();
        session.make_stateless();
        session
    }

    /// Opens a session whose unrelated messages (list changes, resource
    /// updates) go to `sink`.
    pub fn open_session(self: &Arc<Self>, sink: Arc<dyn Sink>) -> Arc<Session> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new_cyclic(|this| Session::new(self.clone(), key, sink, this.clone()));
        lock(&self.sessions).insert(key, Arc::downgrade(&session));
        session
    }

    /// Number of open sessions.
    pub fn session_count(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// Whether the session with id `session_id` is open (it leaves the
    /// list before its [`SessionWatcher`]s are told).
    pub fn is_open(&self, session_id: &str) -> bool {
        self.live_sessions().iter().any(|s| s.id() == session_id)
    }

    /// Leaves the session list and tells the watchers (and, for a session
    /// whose client `opened` it, the event readers).
    pub(crate) fn forget_session(&self, key: u64, id: &str, opened: bool) {
        lock(&self.sessions).remove(&key);
        self.listeners.remove_session(key);
        for w in self.live_watchers() {
            w.session_closed(id);
        }
        if opened {
            self.send_event(SessionEvent::Closed(id.to_owned()));
        }
    }

    fn live_watchers(&self) -> Vec<Arc<dyn SessionWatcher>> {
        let mut w = lock(&self.watchers);
        w.retain(|w| w.strong_count() > 0);
        w.iter().filter_map(Weak::upgrade).collect()
    }

    /// A session opened or its roots changed: watchers and event readers
    /// are told, with no lock held.
    pub(crate) fn session_event(&self, event: SessionEvent) {
        for w in self.live_watchers() {
            match &event {
                SessionEvent::Opened(h) => w.session_opened(h),
                SessionEvent::RootsChanged(h) => w.roots_changed(h),
                SessionEvent::Closed(id) => w.session_closed(id),
            }
        }
        self.send_event(event);
    }

    /// Queues `event` for every reader; a reader that has gone is dropped,
    /// one that is [`SESSION_EVENT_QUEUE`] behind misses it (never waited for).
    fn send_event(&self, event: SessionEvent) {
        let mut readers = lock(&self.event_readers);
        readers.retain(|tx| match tx.try_send(event.clone()) {
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => false,
            Err(crossbeam_channel::TrySendError::Full(_)) => {
                log::warn!("session events: a reader is {SESSION_EVENT_QUEUE} behind; an event was dropped");
                true
            }
            Ok(()) => true,
        });
    }

    /// Session events (opened, roots changed, closed) for a worker thread
    /// of the embedding program, from now on until the engine is gone
    /// (then [`SessionEvents::recv`] is `None`) or the receiver is dropped.
    pub fn session_events(&self) -> SessionEvents {
        let (tx, events) = SessionEvents::new();
        lock(&self.event_readers).push(tx);
        events
    }

    /// Tells `watcher` of every session that closes from now on, for as
    /// long as someone else holds it (the engine keeps it weakly).
    pub fn watch_sessions(&self, watcher: &Arc<dyn SessionWatcher>) {
        lock(&self.watchers).push(Arc::downgrade(watcher));
    }

    /// Adds (or with `None` removes) instructions of source `id` (a
    /// gateway's upstream): `initialize` answers the server's own
    /// instructions followed by each source's, headed by its id. Sessions
    /// initialized before keep what they were told.
    pub fn set_instructions(&self, id: &str, text: Option<&str>) {
        let mut added = lock(&self.added_instructions);
        match text {
            Some(t) if !t.trim().is_empty() => {
                added.insert(id.to_owned(), t.to_owned());
            }
            _ => {
                added.remove(id);
            }
        }
    }

    /// What `initialize` answers as `instructions`.
    pub(crate) fn instructions(&self) -> Option<String> {
        let added = lock(&self.added_instructions);
        let mut parts: Vec<String> = self.info.instructions.iter().cloned().collect();
        parts.extend(added.iter().map(|(id, t)| format!("## {id}\n\n{t}")));
        (!parts.is_empty()).then(|| parts.join("\n\n"))
    }

    /// Sets the one observer of every request (for metrics); false if one
    /// was set before.
    pub fn observe(&self, observer: Arc<dyn Observer>) -> bool {
        self.observer.set(observer).is_ok()
    }

    pub(crate) fn observer(&self) -> Option<&Arc<dyn Observer>> {
        self.observer.get()
    }

    /// Stops taking new handler work (requests that would run on the
    /// handler pool are answered -32603 "shutting down"; what the engine
    /// answers at once, `initialize`, `ping`, the lists, `tasks/*`, is
    /// still answered) and waits up to `timeout` for those in flight to be
    /// answered. Returns how many are still in flight; the caller then
    /// ends the sessions, which cancels them.
    pub fn drain(&self, timeout: Duration) -> usize {
        self.draining.store(true, Ordering::SeqCst);
        // A task's result would not outlive the process: its work stops.
        self.tasks.cancel_all();
        // Listen streams end gracefully: their result tells the client so.
        self.listeners.end_all(&self.info);
        let deadline = crate::wait::deadline_in(timeout);
        let sessions = self.live_sessions();
        for s in &sessions {
            s.wait_idle(deadline.saturating_duration_since(Instant::now()));
        }
        sessions.iter().map(|s| s.inflight()).sum()
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// What `initialize` and `server/discover` declare: what the catalog
    /// offers, and the extensions served.
    pub(crate) fn capabilities(&self) -> Value {
        let mut caps = self.catalog.capabilities();
        let Value::Object(m) = &mut caps else {
            return caps;
        };
        if !self.info.experimental.is_empty() {
            let experimental = Value::Object(self.info.experimental.clone());
            m.insert("experimental".into(), experimental);
        }
        let mut extensions = Map::new();
        if m.contains_key("tools") && self.tasks.enabled() {
            extensions.insert(tasks::TASKS_EXTENSION.into(), json!({}));
        }
        if !self.catalog.view().skills.is_empty() {
            use crate::model::skill::SKILLS_EXTENSION;
            extensions.insert(SKILLS_EXTENSION.into(), json!({"directoryRead": true}));
        }
        if !extensions.is_empty() {
            m.insert("extensions".into(), Value::Object(extensions));
        }
        caps
    }

    /// Tasks stored, by status (the tasks extension).
    pub fn task_counts(&self) -> Vec<(tasks::TaskStatus, usize)> {
        self.tasks.counts()
    }

    /// A supervised worker named `engine-task-sweeper` that drops each
    /// task when its time to live passes (a running one is cancelled
    /// first) until stopped; with no task stored it sleeps.
    pub fn task_sweeper(self: &Arc<Self>) -> supervisor::ChildSpec {
        let engine = Arc::downgrade(self);
        supervisor::ChildSpec::worker("engine-task-sweeper", move |ctx| {
            loop {
                // The engine is not kept alive while the sweeper waits.
                let Some((due, first)) = engine.upgrade().map(|e| e.tasks.next_expiry()) else {
                    break;
                };
                crossbeam_channel::select! {
                    recv(ctx.stop_signal()) -> _ => break,
                    recv(due) -> _ => {}
                    recv(first) -> _ => continue,
                }
                let Some(engine) = engine.upgrade() else {
                    break;
                };
                let n = engine.tasks.sweep();
                if n > 0 {
                    log::info!("{n} expired task(s) dropped");
                }
            }
            Ok(())
        })
    }

    /// Open `subscriptions/listen` streams (2026-07-28).
    pub fn listen_streams(&self) -> usize {
        self.listeners.count()
    }

    /// Requests in flight over every session.
    pub fn inflight(&self) -> usize {
        self.live_sessions().iter().map(|s| s.inflight()).sum()
    }

    /// Replaces (or adds) the catalog source `id` with `source` in one
    /// step, then sends one `notifications/*/list_changed` per kind whose
    /// listing changed. A definition without its key (`name`, `uri`,
    /// `uriTemplate`) refuses the whole source and changes nothing.
    pub fn replace_source(&self, id: &str, source: Source) -> Result<Changes, CatalogError> {
        let changes = self.catalog.replace(id, source)?;
        self.announce(changes);
        Ok(changes)
    }

    /// Withdraws the catalog source `id` and every entry it offered,
    /// announcing the lists that changed.
    pub fn withdraw_source(&self, id: &str) -> Changes {
        let changes = self.catalog.withdraw(id);
        self.announce(changes);
        changes
    }

    /// The entries of source `id`, as last replaced.
    pub fn source(&self, id: &str) -> Option<Source> {
        self.catalog.source(id)
    }

    /// Serves requests for methods the engine does not know (custom
    /// methods) with `fallback`; `None` answers them -32601 again.
    pub fn set_fallback(&self, fallback: Option<Arc<dyn MethodFallback>>) {
        self.catalog.set_fallback(fallback);
    }

    /// Sends one `list_changed` per kind in `changes`.
    pub(crate) fn announce(&self, changes: Changes) {
        for kind in changes.kinds() {
            self.notify_list_changed(kind);
        }
    }

    fn live_sessions(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions)
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Sends `notifications/<kind>/list_changed` to every operating session
    /// whose initialize result declared `kind`'s capability (a kind the
    /// server began to offer later is news to none of them: enable it
    /// from the start, `ServerBuilder::enable_*`, to tell them).
    pub fn notify_list_changed(&self, kind: ListKind) {
        let method = match kind {
            ListKind::Tools => "notifications/tools/list_changed",
            ListKind::Resources => "notifications/resources/list_changed",
            ListKind::Prompts => "notifications/prompts/list_changed",
        };
        for s in self
            .live_sessions()
            .into_iter()
            .filter(|s| s.phase() == Phase::Operating && s.told_of(kind))
        {
            s.sink().send(Outgoing::Notification(jsonrpc::notification(
                method,
                json!({}),
            )));
        }
        self.listeners.list_changed(kind, method);
    }

    /// Sends `notifications/message` to every operating session that set
    /// a log level (`logging/setLevel`) which lets `level` through: a
    /// gateway relaying an upstream's log, which belongs to no one request.
    /// Sessions that never asked for a log get none.
    pub fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        self.log_where(|_| true, level, logger, data)
    }

    /// [`Engine::log`] to the one session with id `session_id`, if it is
    /// open and its level lets `level` through (what a gateway's
    /// per-session upstream logs).
    pub fn log_to(&self, session_id: &str, level: LogLevel, logger: Option<&str>, data: Value) {
        self.log_where(|s| s.id() == session_id, level, logger, data)
    }

    fn log_where(
        &self,
        to: impl Fn(&Session) -> bool,
        level: LogLevel,
        logger: Option<&str>,
        data: Value,
    ) {
        for s in self.live_sessions().into_iter().filter(|s| {
            to(s) && s.phase() == Phase::Operating && s.log_level().is_some_and(|m| level >= m)
        }) {
            s.sink().send(Outgoing::Notification(context::log_message(
                level,
                logger,
                data.clone(),
            )));
        }
    }

    /// Sends `notifications/resources/updated` to every session subscribed to `uri`.
    pub fn notify_resource_updated(&self, uri: &str) {
        for s in self
            .live_sessions()
            .into_iter()
            .filter(|s| s.phase() == Phase::Operating && s.is_subscribed(uri))
        {
            s.sink().send(Outgoing::Notification(jsonrpc::notification(
                "notifications/resources/updated",
                json!({"uri": uri}),
            )));
        }
        self.listeners.resource_updated(uri);
    }
}
