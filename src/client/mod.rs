//! The synchronous MCP client.
//!
//! ```no_run
//! use mcpvisor::client::{Client, ClientOptions, Connection};
//! let conn = Connection::child(std::process::Command::new("my-mcp-server"))?;
//! let client = Client::connect(conn, ClientOptions::default())?;
//! let tools = client.list_tools()?;
//! let result = client.call_tool("echo", serde_json::json!({"message": "hi"}))?;
//! client.close();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Ids are the client's own integers; responses are matched by id; a late
//! response to a request that timed out or was cancelled is dropped and
//! logged. Server-initiated requests (sampling, elicitation, roots) are
//! answered by the callbacks in [`ClientOptions`] (or a call's own
//! [`CallOptions::on_request`]) on a bounded pool of callback threads;
//! `ping` is answered at once.

mod listen;
mod skills;
mod stateless;
mod tasks;
mod typed;

pub use crate::protocol::{PeerRequestHandler, ProgressHandler};
#[cfg(feature = "amqp")]
pub use crate::transport::amqp::RESUME_GRACE;
pub use crate::transport::connection::{
    Connection, MessageReader, MessageWriter, ParsedMessage, DEFAULT_CHILD_GRACE,
    DEFAULT_MAX_MESSAGE_BYTES,
};
pub use crate::transport::reconnect::{Reconnect, DEFAULT_RECONNECT_ATTEMPTS};
pub use listen::{LISTEN_RENEWAL, RELISTEN_DELAY};
pub use stateless::{Generation, MAX_INPUT_ROUNDS};
pub use tasks::{
    TaskHandle, ToolCall, DEFAULT_TASK_POLL, MAX_TASK_POLL, MAX_TASK_WAIT, MIN_TASK_POLL,
};
pub use typed::ToolInfo;

use crate::jsonrpc::{self, ErrorObject, Message, Parsed, Request, RequestId};
use crate::protocol::pool::Pool;
use crate::protocol::{CallError, CancelToken, Outbound, Outgoing, ProtocolVersion, Wait};
use crate::sync::{lock, FastMap};
use crate::transport::reconnect::QuickDrops;
use crossbeam_channel::Sender;
use serde_json::{json, Map, Value};
use std::cell::RefCell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Default timeout of one request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of threads that run callbacks for the server's requests
/// (started at the first such request).
pub const DEFAULT_CALLBACK_THREADS: usize = 4;
/// Server requests that may wait for a callback thread; beyond, they are
/// answered -32603 at once.
pub const CALLBACK_QUEUE: usize = 256;
/// Most pages a listing (`tools/list` and the like) follows before it
/// fails: a server whose cursors never end would otherwise keep it going.
pub const MAX_LIST_PAGES: usize = 10_000;
/// Name prefix of the callback threads.
const CALLBACK_THREAD_PREFIX: &str = "mcpvisor-client-callback-";
/// The client's own answers to the server (`ping`, refusals) that may wait
/// to be written; beyond, one is dropped (logged) and the server's request
/// goes unanswered.
pub const REPLY_QUEUE: usize = 64;

/// Why a client call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientError {
    /// The connection is closed (or closed while waiting).
    Closed,
    /// No response within the timeout; the server was told (with
    /// `notifications/cancelled`, or statelessly over HTTP by closing the
    /// call's connection).
    Timeout {
        /// The request's id.
        id: RequestId,
    },
    /// The call was cancelled by the caller; the server was told.
    Cancelled,
    /// The server answered with a JSON-RPC error.
    Rpc(ErrorObject),
    /// The server broke the protocol (e.g. an unusable initialize result).
    Protocol(String),
    /// A skill's entry or file failed verification (the skills extension):
    /// the content must not be used.
    Skill(crate::model::skill::SkillError),
    /// The transport failed: its kind (`Other` when the failure was not an
    /// I/O error of the system) and what happened.
    Io {
        /// The kind of the underlying I/O error.
        kind: std::io::ErrorKind,
        /// What failed.
        message: String,
    },
}

impl ClientError {
    /// A transport failure from an I/O error, keeping its kind.
    pub fn io(e: &std::io::Error) -> ClientError {
        ClientError::Io {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
    /// A transport failure that is not an I/O error of the system.
    pub fn transport(message: impl Into<String>) -> ClientError {
        ClientError::Io {
            kind: std::io::ErrorKind::Other,
            message: message.into(),
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Closed => f.write_str("the connection is closed"),
            ClientError::Timeout { id } => write!(f, "request {id} timed out"),
            ClientError::Cancelled => f.write_str("the request was cancelled"),
            ClientError::Rpc(e) => e.fmt(f),
            ClientError::Protocol(m) => write!(f, "protocol violation: {m}"),
            ClientError::Skill(e) => write!(f, "skill verification failed: {e}"),
            ClientError::Io { message, .. } => write!(f, "transport error: {message}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// Answers a server-to-client request (sampling, elicitation, roots).
pub type RequestHandler = Arc<dyn Fn(Value) -> Result<Value, ErrorObject> + Send + Sync>;
/// Receives a notification's method and params.
pub type NotificationHandler = Arc<dyn Fn(&str, &Value) + Send + Sync>;
/// Told why the connection ended for good.
pub type ClosedHandler = Arc<dyn Fn(&ClientError) + Send + Sync>;

/// Client options; every field has a documented default.
#[derive(Clone)]
pub struct ClientOptions {
    /// `clientInfo.name` (default "mcpvisor").
    pub name: String,
    /// `clientInfo.version` (default this crate's version).
    pub version: String,
    /// `clientInfo.title`, for display (default none).
    pub title: Option<String>,
    /// `clientInfo.description` (default none).
    pub description: Option<String>,
    /// `clientInfo.websiteUrl` (default none).
    pub website_url: Option<String>,
    /// `clientInfo.icons` (SEP-973; default none).
    pub icons: Vec<crate::model::Icon>,
    /// Per-request timeout (default [`DEFAULT_REQUEST_TIMEOUT`]); progress
    /// notifications restart it.
    pub request_timeout: Duration,
    /// A total limit on a call that progress cannot extend, nor (for a
    /// stateless server) its input-required rounds and the questions
    /// answered between them (default none).
    pub max_total_timeout: Option<Duration>,
    /// Answers `sampling/createMessage`; advertised as a capability only when set.
    pub sampling: Option<RequestHandler>,
    /// With `sampling`: declares `sampling.tools` (SEP-1577; default
    /// off), so the server may send `tools` and `toolChoice` and the
    /// callback may answer with `tool_use` content.
    pub sampling_tools: bool,
    /// Answers `elicitation/create`; advertised only when set (form mode).
    pub elicitation: Option<RequestHandler>,
    /// With `elicitation`: declares URL mode too (`elicitation.url`,
    /// SEP-1036; default off): the callback may get `mode: "url"`
    /// requests (show the URL, answer `accept` once the user agreed to
    /// open it), and [`on_notification`](Self::on_notification) gets
    /// `notifications/elicitation/complete`.
    pub elicitation_url: bool,
    /// Answers `roots/list`; advertised only when set, with
    /// `listChanged` (tell the server with [`Client::roots_changed`]).
    pub roots: Option<RequestHandler>,
    /// Receives every notification other than progress and cancellation
    /// (log messages, list changes, resource updates). Default: logged.
    pub on_notification: Option<NotificationHandler>,
    /// Sends `ping` (statelessly `server/discover`) this often and closes
    /// the connection when one is not answered in time; any answer of the
    /// server's, an error too, counts, but not an error the transport made
    /// for want of one (default off).
    pub heartbeat: Option<Duration>,
    /// Reconnect after the connection is lost (needs [`Client::connect_with`];
    /// default off). Never after an intentional [`Client::close`]. The new
    /// session is asked again for the resource subscriptions and the log
    /// level the old one had (before `on_reconnected`).
    pub reconnect: Option<Reconnect>,
    /// Called once when the connection ends for good other than by
    /// [`Client::close`]: the peer left and reconnection is off, or it gave up.
    pub on_closed: Option<ClosedHandler>,
    /// Called after each successful reconnection (default none).
    pub on_reconnected: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Threads that run the callbacks above for the server's requests, on
    /// a bounded queue ([`CALLBACK_QUEUE`]); default [`DEFAULT_CALLBACK_THREADS`].
    pub callback_threads: usize,
    /// The protocol generation (default [`Generation::Sessions`]). With
    /// `Auto` or `Stateless`, a server that answers `server/discover` is
    /// spoken to statelessly (2026-07-28): every request carries the
    /// client's version, capabilities and info in `_meta`, and
    /// input-required results are answered with the callbacks above and
    /// retried (at most [`MAX_INPUT_ROUNDS`] rounds).
    pub generation: Generation,
    /// Declares the tasks extension (SEP-2663; default off): the server
    /// may then answer a `tools/call` with a task. [`Client::call_tool`]
    /// follows such a task to its end (polling, answering its questions
    /// with the callbacks above); [`Client::call_tool_as_task`] hands it
    /// over instead.
    pub tasks: bool,
}

/// `clientInfo` as the options describe the client.
fn client_info(o: &ClientOptions) -> Value {
    crate::model::implementation(
        &o.name,
        &o.version,
        &o.title,
        &o.description,
        &o.website_url,
        &o.icons,
    )
}

/// Makes a new connection (for reconnection).
pub type Connector = Arc<dyn Fn() -> std::io::Result<Connection> + Send + Sync>;

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            name: "mcpvisor".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            title: None,
            description: None,
            website_url: None,
            icons: Vec::new(),
            sampling_tools: false,
            elicitation_url: false,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_total_timeout: None,
            sampling: None,
            elicitation: None,
            roots: None,
            on_notification: None,
            heartbeat: None,
            reconnect: None,
            on_closed: None,
            on_reconnected: None,
            callback_threads: DEFAULT_CALLBACK_THREADS,
            generation: Generation::Sessions,
            tasks: false,
        }
    }
}

/// Per-call options.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Overrides the client's request timeout.
    pub timeout: Option<Duration>,
    /// Receives progress; the client supplies a unique progress token.
    pub progress: Option<ProgressHandler>,
    /// Cancel the call from another thread with `token.cancel()`.
    pub cancel: Option<CancelToken>,
    /// Answers the server's requests (sampling, elicitation, roots, ...)
    /// that belong to this call, instead of the client's callbacks: those
    /// that arrive on this call's own response stream (HTTP) or name this
    /// call's message as their correlation id (AMQP), or, where the
    /// transport cannot tell, any that arrive while this is the only call
    /// in flight with such a handler (`ping` is always answered by the
    /// client itself). A gateway passes the downstream request's context here.
    pub on_request: Option<PeerRequestHandler>,
}

struct Shared {
    writer: Mutex<Box<dyn MessageWriter>>,
    outbound: Outbound,
    // Runs callbacks for the server's requests; started at the first one.
    callbacks: OnceLock<Option<Pool>>,
    // The server's requests being answered, with what cancels them.
    answering: Mutex<FastMap<RequestId, CancelToken>>,
    // The tools' output schemas, from the last `tools/list`.
    output_schemas: typed::OutputSchemas,
    // Runs notification and progress callbacks in arrival order, off the
    // reader thread; started at the first one.
    notifier: OnceLock<Option<Sender<Notice>>>,
    // Writes the reader thread's own answers (ping, refusals), so that the
    // reader never waits for the writer or the peer; started at the first.
    // Each answer goes with the connection (epoch) it is for.
    replies: OnceLock<Option<Sender<(Value, u64)>>>,
    // Notices queued or running on the notifier.
    queued_notices: Arc<AtomicUsize>,
    closed: AtomicBool,
    // Set when close() found the writer busy: the write closes it after.
    close_pending: AtomicBool,
    // Set while one reader thread re-establishes the connection.
    reconnecting: AtomicBool,
    // Connections in a row lost soon after they came up, and when the
    // current one came up: a server that drops each new connection at once
    // is given up on.
    reconnects: Mutex<(QuickDrops, Instant)>,
    // Which connection the writer writes to: raised, under the writer's
    // lock, when a reconnection puts in a new one. An answer to a request
    // of the server's is written only to the connection it came on (the
    // new session's request ids start again, so it would answer another).
    epoch: AtomicU64,
    options: ClientOptions,
    on_close: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    // The thread ending a connection after a failed write (a child's
    // grace periods, signals and reaping): a close waits for it.
    ending: Mutex<Option<thread::JoinHandle<()>>>,
    connector: Option<Connector>,
    init_params: Mutex<Value>,
    // Stateless (2026-07-28): the `_meta` every request carries.
    stateless_meta: Mutex<Option<Map<String, Value>>>,
    // Stateless: the `subscriptions/listen` stream.
    listen: listen::Listen,
    // Stateless: tools were listed (a new HTTP connection learns their
    // `x-mcp-header` declarations again after a reconnection).
    tools_listed: AtomicBool,
    // With a session: what the session was asked to keep (a new one is
    // asked again after a reconnection).
    kept: Mutex<Kept>,
}

/// What a session was asked to keep for the client: its resource
/// subscriptions and its log level.
#[derive(Default)]
struct Kept {
    subscribed: std::collections::BTreeSet<String>,
    log_level: Option<crate::LogLevel>,
}

/// A connected, initialized MCP client. Cheap to clone; all clones share the connection.
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
    init: Arc<Value>,
    version: ProtocolVersion,
    // Held by user-facing handles only: when the last one is dropped the
    // connection closes (a child process is stopped and reaped).
    _guard: Option<Arc<CloseOnDrop>>,
}

struct CloseOnDrop(Arc<Shared>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.shutdown();
    }
}

impl Client {
    /// A handle for the client's own threads (it does not keep the connection open).
    fn internal(shared: &Arc<Shared>) -> Client {
        Client {
            shared: shared.clone(),
            init: Arc::new(Value::Null),
            version: ProtocolVersion::LATEST_SESSION,
            _guard: None,
        }
    }
}

impl Client {
    /// Starts the reader thread, performs `initialize` (offering 2025-11-25,
    /// accepting any supported revision the server answers with) and sends
    /// `notifications/initialized`.
    pub fn connect(connection: Connection, options: ClientOptions) -> Result<Client, ClientError> {
        Self::start(connection, None, options)
    }

    /// Like [`Client::connect`], with a connector that is called again to
    /// reconnect when [`ClientOptions::reconnect`] is set.
    pub fn connect_with<F>(connector: F, options: ClientOptions) -> Result<Client, ClientError>
    where
        F: Fn() -> std::io::Result<Connection> + Send + Sync + 'static,
    {
        let connector: Connector = Arc::new(connector);
        let first = connector().map_err(|e| ClientError::io(&e))?;
        Self::start(first, Some(connector), options)
    }

    fn start(
        connection: Connection,
        connector: Option<Connector>,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let Connection {
            writer,
            reader,
            on_close,
            ..
        } = connection;
        let mut caps = Map::new();
        if options.sampling.is_some() {
            let tools = options.sampling_tools;
            caps.insert(
                "sampling".into(),
                if tools {
                    json!({"tools": {}})
                } else {
                    json!({})
                },
            );
        }
        if options.elicitation.is_some() {
            let modes = match options.elicitation_url {
                true => json!({"form": {}, "url": {}}),
                false => json!({}),
            };
            caps.insert("elicitation".into(), modes);
        }
        if options.roots.is_some() {
            caps.insert("roots".into(), json!({"listChanged": true}));
        }
        if options.tasks {
            caps.insert(
                "extensions".into(),
                json!({ crate::protocol::tasks::TASKS_EXTENSION: {} }),
            );
        }
        let params = json!({
            "protocolVersion": ProtocolVersion::LATEST_SESSION.as_str(),
            "capabilities": caps,
            "clientInfo": client_info(&options),
        });
        let shared = Arc::new(Shared {
            writer: Mutex::new(writer),
            outbound: Outbound::default(),
            callbacks: OnceLock::new(),
            answering: Mutex::new(FastMap::default()),
            output_schemas: typed::OutputSchemas::default(),
            notifier: OnceLock::new(),
            replies: OnceLock::new(),
            queued_notices: Arc::new(AtomicUsize::new(0)),
            closed: AtomicBool::new(false),
            close_pending: AtomicBool::new(false),
            reconnecting: AtomicBool::new(false),
            reconnects: Mutex::new((QuickDrops::default(), Instant::now())),
            epoch: AtomicU64::new(0),
            options,
            on_close: Mutex::new(on_close),
            ending: Mutex::new(None),
            connector,
            init_params: Mutex::new(params),
            stateless_meta: Mutex::new(None),
            listen: listen::Listen::default(),
            tools_listed: AtomicBool::new(false),
            kept: Mutex::default(),
        });
        let client = Client::internal(&shared);
        if let Err(e) = spawn_reader(&shared, reader) {
            // The connection is ended (its child stopped and reaped).
            client.close();
            return Err(e);
        }
        let (result, version) = match client.establish() {
            Ok(r) => r,
            Err(e) => {
                client.close();
                return Err(e);
            }
        };
        let client = Client {
            init: Arc::new(result),
            version,
            _guard: Some(Arc::new(CloseOnDrop(shared.clone()))),
            ..client
        };
        // Statelessly, list changes come on a listen stream.
        if client.is_stateless() && client.shared.options.on_notification.is_some() {
            if let Err(e) = client.shared.listen.list_changes(&client) {
                log::warn!("client: no listen stream: {e}");
            }
        }
        if let Some(every) = client.shared.options.heartbeat {
            let weak = Arc::downgrade(&client.shared);
            thread::Builder::new()
                .name("mcpvisor-client-heartbeat".into())
                .spawn(move || heartbeat(weak, every))
                .map_err(|e| ClientError::io(&e))?;
        }
        Ok(client)
    }

    /// The negotiated protocol revision.
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.version
    }
    /// The server's `serverInfo`.
    pub fn server_info(&self) -> &Value {
        &self.init["serverInfo"]
    }
    /// The server's `capabilities`.
    pub fn server_capabilities(&self) -> &Value {
        &self.init["capabilities"]
    }
    /// The server's `instructions`, if any.
    pub fn instructions(&self) -> Option<&str> {
        self.init.get("instructions").and_then(Value::as_str)
    }
    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::SeqCst)
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) -> Result<(), ClientError> {
        self.shared.write(&jsonrpc::notification(method, params))
    }

    /// Any request, with the default options.
    pub fn request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        self.request_with(method, params, CallOptions::default())
    }

    /// Any request with per-call options (timeout, progress, cancellation).
    /// While the client is reconnecting, requests fail with `Closed`.
    pub fn request_with(
        &self,
        method: &str,
        params: Value,
        opts: CallOptions,
    ) -> Result<Value, ClientError> {
        if self.shared.reconnecting.load(Ordering::SeqCst) {
            return Err(ClientError::Closed);
        }
        self.send_request(method, params, opts)
    }

    /// Starts talking to the server in the generation the options ask
    /// for (at connect and after each reconnection).
    fn establish(&self) -> Result<(Value, ProtocolVersion), ClientError> {
        match self.shared.options.generation {
            Generation::Sessions => self.handshake(),
            Generation::Stateless => self.discover(),
            Generation::Auto => self.discover().or_else(|e| {
                log::info!("client: server/discover failed ({e}); falling back to initialize");
                self.handshake()
            }),
        }
    }

    /// `server/discover`: stateless from now on if the server speaks
    /// 2026-07-28.
    fn discover(&self) -> Result<(Value, ProtocolVersion), ClientError> {
        let caps = lock(&self.shared.init_params)["capabilities"].clone();
        let info = lock(&self.shared.init_params)["clientInfo"].clone();
        *lock(&self.shared.stateless_meta) = Some(stateless::envelope(&caps, &info));
        let discover = || self.send_request("server/discover", json!({}), CallOptions::default());
        // -32022 naming our version among those supported: one retry (the
        // server may have refused the probe for another reason of its own).
        let adopted = match discover() {
            Err(ClientError::Rpc(e)) if stateless::may_retry(&e) => discover(),
            other => other,
        };
        let adopted = adopted.and_then(|d| {
            stateless::adopt(&d).ok_or_else(|| {
                ClientError::Protocol(format!(
                    "the server speaks none of this client's stateless versions: {}",
                    d["supportedVersions"]
                ))
            })
        });
        match adopted {
            Ok(init) => Ok((init, ProtocolVersion::V2026_07_28)),
            Err(e) => {
                *lock(&self.shared.stateless_meta) = None;
                Err(e)
            }
        }
    }

    /// `initialize` with the stored parameters, then `notifications/initialized`.
    fn handshake(&self) -> Result<(Value, ProtocolVersion), ClientError> {
        let params = lock(&self.shared.init_params).clone();
        // Never with a stateless `_meta`: a session starts here.
        *lock(&self.shared.stateless_meta) = None;
        // Never cancelled: see `Outbound::call`.
        let deadline = self.total_deadline();
        let result = self.send_once("initialize", params, CallOptions::default(), deadline)?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(ProtocolVersion::parse)
            .filter(|v| !v.is_stateless())
            .ok_or_else(|| {
                ClientError::Protocol(format!(
                    "unsupported or missing protocolVersion in {result}"
                ))
            })?;
        self.notify("notifications/initialized", json!({}))?;
        Ok((result, version))
    }

    /// Answers one of the server's questions (an input request of a
    /// stateless round or of a task): with the call's own handler, else
    /// the client's callback for its method.
    fn answer_input(
        &self,
        method: &str,
        params: Value,
        on_request: Option<&PeerRequestHandler>,
    ) -> Result<Value, ErrorObject> {
        let o = &self.shared.options;
        let callback = match method {
            "sampling/createMessage" => o.sampling.as_ref(),
            "elicitation/create" => o.elicitation.as_ref(),
            "roots/list" => o.roots.as_ref(),
            _ => None,
        };
        stateless::answer_with(method, params, on_request, callback)
    }

    /// Whether the client speaks the stateless revision to this server.
    fn is_stateless(&self) -> bool {
        lock(&self.shared.stateless_meta).is_some()
    }

    /// One request; statelessly, with the client's `_meta`, and its
    /// input-required results answered and retried.
    fn send_request(
        &self,
        method: &str,
        params: Value,
        opts: CallOptions,
    ) -> Result<Value, ClientError> {
        // One total limit for all its rounds and the questions between.
        let deadline = self.total_deadline();
        let meta = lock(&self.shared.stateless_meta).clone();
        let Some(meta) = meta else {
            return self.send_once(method, params, opts, deadline);
        };
        let mut params = stateless::with_meta(params, &meta);
        for round in 0..=MAX_INPUT_ROUNDS {
            let result = self.send_once(method, params.clone(), opts.clone(), deadline)?;
            if !stateless::input_required(&result) {
                return Ok(result);
            }
            // No round follows: its questions are not put to the user.
            if round == MAX_INPUT_ROUNDS {
                break;
            }
            let answer = |m: &str, p: Value| self.answer_input(m, p, opts.on_request.as_ref());
            // A call's own handler (a gateway's) relays: every question at once.
            let ask_all = opts.on_request.is_some();
            params = stateless::retry_params(params, &result, &answer, ask_all)
                .map_err(ClientError::Rpc)?;
        }
        Err(ClientError::Protocol(format!(
            "{method}: still input-required after {MAX_INPUT_ROUNDS} rounds"
        )))
    }

    /// When [`ClientOptions::max_total_timeout`] from now ends, if set.
    fn total_deadline(&self) -> Option<Instant> {
        self.shared
            .options
            .max_total_timeout
            .map(crate::wait::deadline_in)
    }

    /// One request, given up at `deadline` (its total limit) if set.
    fn send_once(
        &self,
        method: &str,
        params: Value,
        opts: CallOptions,
        deadline: Option<Instant>,
    ) -> Result<Value, ClientError> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(ClientError::Closed);
        }
        let wait = Wait {
            timeout: opts.timeout.unwrap_or(shared.options.request_timeout),
            // What is left of it: a round after the limit times out at once.
            total: deadline.map(|d| d.saturating_duration_since(Instant::now())),
            cancel: opts.cancel.as_ref().map(CancelToken::receiver),
            progress: opts.progress,
            association: opts.on_request,
            cancel_reason: "cancelled by the client",
            // A call made by a notification callback is answered at once:
            // waiting for the queue it runs in would wait for itself.
            ordered: !ON_NOTIFIER.with(std::cell::Cell::get),
        };
        // The write's own error, kept whole for the caller.
        let failed = RefCell::new(None);
        let send = |out: Outgoing| -> Result<(), String> {
            let Some(message) = out.message() else {
                return Ok(());
            };
            shared.write(&message).map_err(|e| {
                let text = e.to_string();
                *failed.borrow_mut() = Some(e);
                text
            })
        };
        shared
            .outbound
            .call(method, params, wait, &send)
            .map_err(|e| match e {
                CallError::Closed => ClientError::Closed,
                CallError::Timeout(id, _) => ClientError::Timeout { id },
                CallError::Cancelled => ClientError::Cancelled,
                CallError::Rpc(e) => ClientError::Rpc(e),
                CallError::Send(text) => failed.take().unwrap_or(ClientError::transport(text)),
            })
    }

    /// `ping` (a stateless server has none: `server/discover` stands in).
    pub fn ping(&self) -> Result<(), ClientError> {
        self.request(self.liveness_method(), json!({})).map(drop)
    }

    /// What asks whether the server is there: `ping`, or statelessly
    /// `server/discover` (2026-07-28 has no `ping`).
    fn liveness_method(&self) -> &'static str {
        if self.is_stateless() {
            "server/discover"
        } else {
            "ping"
        }
    }

    /// A list's pages, followed by cursor; a cursor given again (a server
    /// that would page for ever) or more than [`MAX_LIST_PAGES`] pages
    /// fail the listing.
    fn list_all(&self, method: &str, key: &str) -> Result<Vec<Value>, ClientError> {
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = std::collections::HashSet::new();
        loop {
            if seen.len() >= MAX_LIST_PAGES {
                return Err(ClientError::Protocol(format!(
                    "{method}: more than {MAX_LIST_PAGES} pages"
                )));
            }
            let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
            let page = self.request(method, params)?;
            let items = page
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| ClientError::Protocol(format!("{method}: no {key} array")))?;
            out.extend(items.iter().cloned());
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(c) if !seen.insert(c.to_owned()) => {
                    return Err(ClientError::Protocol(format!(
                        "{method}: the server gave the cursor {c:?} again"
                    )))
                }
                Some(c) if !c.is_empty() => cursor = Some(c.to_owned()),
                _ => return Ok(out),
            }
        }
    }

    /// `tools/list`, following cursors. Statelessly (2026-07-28), a tool
    /// whose `x-mcp-header` declarations are invalid is left out (and
    /// logged), as SEP-2243 requires.
    pub fn list_tools(&self) -> Result<Vec<Value>, ClientError> {
        let tools = self.list_all("tools/list", "tools")?;
        self.shared.output_schemas.learn(&tools);
        if !self.is_stateless() {
            return Ok(tools);
        }
        self.shared.tools_listed.store(true, Ordering::SeqCst);
        let valid = |t: &Value| match crate::model::param_headers(&t["inputSchema"]) {
            Ok(_) => true,
            Err(why) => {
                log::warn!("client: tool {} left out: {why}", t["name"]);
                false
            }
        };
        Ok(tools.into_iter().filter(valid).collect())
    }
    /// `resources/list`, following cursors.
    pub fn list_resources(&self) -> Result<Vec<Value>, ClientError> {
        self.list_all("resources/list", "resources")
    }
    /// `resources/templates/list`, following cursors.
    pub fn list_resource_templates(&self) -> Result<Vec<Value>, ClientError> {
        self.list_all("resources/templates/list", "resourceTemplates")
    }
    /// `prompts/list`, following cursors.
    pub fn list_prompts(&self) -> Result<Vec<Value>, ClientError> {
        self.list_all("prompts/list", "prompts")
    }
    /// `tools/call`.
    pub fn call_tool(&self, name: &str, arguments: Value) -> Result<Value, ClientError> {
        self.call_tool_with(name, arguments, CallOptions::default())
    }
    /// `tools/call` with options (progress, cancellation, timeout). When
    /// the server answers with a task, it is followed to its end (see
    /// [`TaskHandle::wait`]; the call's cancellation cancels the task).
    pub fn call_tool_with(
        &self,
        name: &str,
        arguments: Value,
        opts: CallOptions,
    ) -> Result<Value, ClientError> {
        let cancel = opts.cancel.clone();
        let on_request = opts.on_request.clone();
        // The call's total limit, for its task's wait too.
        let deadline = self.total_deadline();
        let result = self.request_with(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            opts,
        )?;
        match tasks::ToolCall::of(self, result)? {
            tasks::ToolCall::Done(v) => Ok(v),
            tasks::ToolCall::Task(t) => {
                let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                t.wait_with(left, cancel.as_ref(), on_request.as_ref())
            }
        }
    }
    /// `resources/read`.
    pub fn read_resource(&self, uri: &str) -> Result<Value, ClientError> {
        self.request("resources/read", json!({"uri": uri}))
    }
    /// `resources/subscribe`; statelessly, the resource is added to the
    /// listen stream's `resourceSubscriptions` (its updates go to
    /// [`ClientOptions::on_notification`]), and a server that refused
    /// listen streams (-32601) has this fail with its refusal.
    pub fn subscribe(&self, uri: &str) -> Result<(), ClientError> {
        if self.is_stateless() {
            return self.shared.listen.subscribe(self, uri, true);
        }
        self.request("resources/subscribe", json!({"uri": uri}))?;
        lock(&self.shared.kept).subscribed.insert(uri.to_owned());
        Ok(())
    }
    /// `resources/unsubscribe`; statelessly, the resource leaves the
    /// listen stream.
    pub fn unsubscribe(&self, uri: &str) -> Result<(), ClientError> {
        if self.is_stateless() {
            return self.shared.listen.subscribe(self, uri, false);
        }
        // Dropped from what a new session is asked to keep whatever the
        // answer: the user wants it gone.
        lock(&self.shared.kept).subscribed.remove(uri);
        self.request("resources/unsubscribe", json!({"uri": uri}))
            .map(drop)
    }
    /// `prompts/get`.
    pub fn get_prompt(&self, name: &str, arguments: Value) -> Result<Value, ClientError> {
        self.request("prompts/get", json!({"name": name, "arguments": arguments}))
    }
    /// `completion/complete` for an argument of a `ref/prompt` or `ref/resource`.
    pub fn complete(
        &self,
        reference: Value,
        argument: &str,
        value: &str,
    ) -> Result<Value, ClientError> {
        self.complete_with(reference, argument, value, &[])
    }
    /// `completion/complete` with the arguments already chosen
    /// (`context.arguments`), which the server may complete against.
    pub fn complete_with(
        &self,
        reference: Value,
        argument: &str,
        value: &str,
        context: &[(&str, &str)],
    ) -> Result<Value, ClientError> {
        let mut params = json!({"ref": reference, "argument": {"name": argument, "value": value}});
        if !context.is_empty() {
            let args: Map<String, Value> = context
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                .collect();
            params["context"] = json!({ "arguments": args });
        }
        self.request("completion/complete", params)
    }
    /// `notifications/roots/list_changed`: the roots the
    /// [`roots`](ClientOptions::roots) callback answers have changed.
    /// Needs that callback (the client declares `roots.listChanged` with it).
    pub fn roots_changed(&self) -> Result<(), ClientError> {
        if self.shared.options.roots.is_none() {
            return Err(ClientError::Protocol(
                "roots_changed: the client declared no roots (ClientOptions::roots)".into(),
            ));
        }
        self.notify("notifications/roots/list_changed", json!({}))
    }
    /// `logging/setLevel`; statelessly, the level every request from now
    /// on names in its `_meta`.
    pub fn set_log_level(&self, level: crate::LogLevel) -> Result<(), ClientError> {
        if let Some(meta) = lock(&self.shared.stateless_meta).as_mut() {
            stateless::set_log_level(meta, Some(level));
            return Ok(());
        }
        self.request("logging/setLevel", json!({"level": level.as_str()}))?;
        lock(&self.shared.kept).log_level = Some(level);
        Ok(())
    }

    /// A new session (after a reconnection) is asked for what the old one
    /// kept: the client's subscriptions and log level. What it refuses is
    /// logged. False when the connection ended meanwhile (or the client
    /// was closed): a reconnection under way then tells its own end.
    fn ask_again_to_keep(&self) -> bool {
        let shared = &self.shared;
        let epoch = shared.epoch.load(Ordering::SeqCst);
        let gone = || {
            shared.closed.load(Ordering::SeqCst)
                || shared.reconnecting.load(Ordering::SeqCst)
                || shared.epoch.load(Ordering::SeqCst) != epoch
        };
        let kept = |uri: &str| lock(&shared.kept).subscribed.contains(uri);
        let uris: Vec<String> = lock(&shared.kept).subscribed.iter().cloned().collect();
        for uri in uris {
            // Unsubscribed meanwhile: not asked for.
            if !kept(&uri) {
                continue;
            }
            match self.request("resources/subscribe", json!({"uri": uri})) {
                // Unsubscribed while it was asked for: undone.
                Ok(_) if !kept(&uri) => {
                    let _ = self.request("resources/unsubscribe", json!({"uri": uri}));
                }
                Ok(_) => {}
                Err(_) if gone() => return false,
                Err(e) => log::warn!("client: resources/subscribe {uri} after reconnecting: {e}"),
            }
        }
        let level = lock(&shared.kept).log_level;
        if let Some(level) = level {
            match self.request("logging/setLevel", json!({"level": level.as_str()})) {
                Ok(_) => {}
                Err(_) if gone() => return false,
                Err(e) => log::warn!("client: logging/setLevel after reconnecting: {e}"),
            }
        }
        !gone()
    }

    /// Closes the connection: pending calls fail with `Closed`; a child
    /// process is stopped and reaped. Idempotent.
    pub fn close(&self) {
        self.shared.shutdown();
    }
}

impl Shared {
    fn write(&self, message: &Value) -> Result<(), ClientError> {
        self.write_on(message, None)
    }

    /// [`write`](Self::write), when `epoch` is given only if the writer
    /// is still that connection's (else dropped: that peer is gone).
    fn write_on(&self, message: &Value, epoch: Option<u64>) -> Result<(), ClientError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(ClientError::Closed);
        }
        let mut w = lock(&self.writer);
        if epoch.is_some_and(|e| e != self.epoch.load(Ordering::SeqCst)) {
            log::debug!("client: an answer for a connection that has ended dropped");
            return Ok(());
        }
        let result = w.write(message);
        if result.is_err() {
            self.end_connection(&mut w);
        } else if self.close_pending.load(Ordering::SeqCst) {
            w.close();
        }
        drop(w);
        result.map_err(|e| ClientError::io(&e))
    }

    /// Ends the connection `writer` writes to (a write failed, or the
    /// heartbeat went unanswered), so that its reader ends, which
    /// reconnects or gives up. Closing the writer is not enough for a
    /// child that does not exit when its input ends: what closes the
    /// connection (the child's grace periods, signals and reaping) runs
    /// on a thread of its own. Under the writer's lock, as a reconnection
    /// changes both, so never a connection a reconnection put in meanwhile.
    fn end_connection(&self, writer: &mut MutexGuard<'_, Box<dyn MessageWriter>>) {
        writer.close();
        let Some(close) = lock(&self.on_close).take() else {
            return;
        };
        match thread::Builder::new()
            .name("mcpvisor-client-close".into())
            .spawn(close)
        {
            // (An earlier connection's end, if any, is done or about to be.)
            Ok(ending) => drop(lock(&self.ending).replace(ending)),
            Err(e) => log::error!("client: cannot start a thread to end the connection: {e}"),
        }
    }

    /// Writes `message` (an answer of the reader thread's own) from a
    /// thread of its own: the reader must never wait for the writer or
    /// the peer, since a call may hold the writer, its write waiting for a
    /// server that reads no more until this reader has read what it sent.
    fn write_from_reader(self: &Arc<Self>, message: Value) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let replies = self.replies.get_or_init(|| {
            let (tx, rx) = crossbeam_channel::bounded::<(Value, u64)>(REPLY_QUEUE);
            // Ends when the connection's last handle is gone.
            let shared = Arc::downgrade(self);
            thread::Builder::new()
                .name("mcpvisor-client-replies".into())
                .spawn(move || {
                    for (message, epoch) in rx {
                        let Some(shared) = shared.upgrade() else {
                            return;
                        };
                        // A writer of the user's own may panic: the next
                        // answers are still written.
                        let written =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                shared.write_on(&message, Some(epoch))
                            }));
                        if written.is_err() {
                            log::error!("client: the connection's writer panicked");
                        }
                    }
                })
                .inspect_err(|e| log::error!("client: cannot start the reply thread: {e}"))
                .ok()
                .map(|_| tx)
        });
        match replies.as_ref().map(|tx| tx.try_send((message, epoch))) {
            Some(Ok(())) => {}
            Some(Err(_)) => log::warn!(
                "client: {REPLY_QUEUE} answers to the server wait to be written; one more is dropped"
            ),
            None => log::warn!("client: no thread to write an answer to the server; dropped"),
        }
    }

    /// Closes the client; whether this call did it (false when it was
    /// closed already).
    fn shutdown(&self) -> bool {
        if self.closed.swap(true, Ordering::SeqCst) {
            return false;
        }
        // A write blocked on a peer that stopped reading holds the writer:
        // do not wait for it. Closing the connection (a child is signalled
        // and reaped, a socket is shut down) is what ends that write.
        match self.writer.try_lock() {
            Ok(mut w) => w.close(),
            Err(_) => {
                // The write closes it when it returns; in case it returned
                // just now, try once more.
                self.close_pending.store(true, Ordering::SeqCst);
                if let Ok(mut w) = self.writer.try_lock() {
                    w.close();
                }
            }
        }
        self.outbound.close();
        self.listen.stop();
        if let Some(f) = lock(&self.on_close).take() {
            f();
        }
        // A connection a failed write began to end is ended too (its child
        // stopped and reaped) before a close returns.
        let ending = lock(&self.ending).take();
        if let Some(ending) = ending {
            let _ = ending.join();
        }
        true
    }
}

/// Starts the thread reading `reader`; what it returns is set when that
/// thread has stopped reading.
fn spawn_reader(
    shared: &Arc<Shared>,
    reader: Box<dyn MessageReader>,
) -> Result<Arc<AtomicBool>, ClientError> {
    let shared = shared.clone();
    let ended = Arc::new(AtomicBool::new(false));
    let done = ended.clone();
    thread::Builder::new()
        .name("mcpvisor-client-reader".into())
        .spawn(move || read_loop(shared, reader, &done))
        .map(|_| ended)
        .map_err(|e| ClientError::io(&e))
}

fn read_loop(shared: Arc<Shared>, mut reader: Box<dyn MessageReader>, ended: &AtomicBool) {
    let why = loop {
        let (parsed, related) = match reader.read_parsed() {
            Ok(Some(m)) => m,
            Ok(None) => break ClientError::Closed,
            Err(e) => break ClientError::io(&e),
        };
        // A broken answer to one of our calls fails it (in its place
        // among the messages); anything else broken is dropped.
        let usable = |item: Result<Message, jsonrpc::ParseError>| match item {
            Ok(m) => Some(m),
            Err(e) => {
                log::warn!("client: unreadable message from the server dropped: {e}");
                e.failed_response("server").map(Message::Response)
            }
        };
        let messages: Vec<Message> = match parsed {
            Ok(Parsed::Single(m)) => vec![m],
            Ok(Parsed::Batch(items)) => items.into_iter().filter_map(usable).collect(),
            Err(e) => usable(Err(e)).into_iter().collect(),
        };
        for m in messages {
            dispatch(&shared, m, related.as_ref());
        }
    };
    // Nothing more is read from it: whatever waits to hand it a message
    // (a full queue of the HTTP connection's) is let go now, not after
    // the reconnection below.
    drop(reader);
    ended.store(true, Ordering::SeqCst);
    connection_lost(&shared, why);
}

/// The connection ended: after an intentional close nothing happens; with
/// reconnection configured, this thread reconnects; otherwise the client is
/// closed and `on_closed` fires. Calls waiting on the old connection fail.
fn connection_lost(shared: &Arc<Shared>, why: ClientError) {
    if shared.closed.load(Ordering::SeqCst) {
        return;
    }
    // Only one thread reconnects; a reader of a half-made connection just leaves.
    let (Some(policy), Some(connector)) =
        (shared.options.reconnect.clone(), shared.connector.clone())
    else {
        return give_up(shared, why);
    };
    if shared.reconnecting.swap(true, Ordering::SeqCst) {
        return;
    }
    if lost_too_often(shared, &policy, &why) {
        return;
    }
    log::warn!("client: connection lost ({why}); reconnecting");
    connection_ended(shared);
    for (attempt, delay) in policy.delays().enumerate() {
        thread::sleep(delay);
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        let conn = match connector() {
            Ok(c) => c,
            Err(e) => {
                log::info!("client: reconnect attempt {} failed: {e}", attempt + 1);
                continue;
            }
        };
        let Connection {
            writer,
            reader,
            on_close,
            ..
        } = conn;
        let (old, closed_meanwhile) = {
            let mut w = lock(&shared.writer);
            w.close();
            *w = writer;
            shared.epoch.fetch_add(1, Ordering::SeqCst);
            let old = std::mem::replace(&mut *lock(&shared.on_close), on_close);
            // A close while this connection was being made found the old
            // one: this one is ended here (its child stopped and reaped),
            // or nothing would ever end it.
            let closed = shared.closed.load(Ordering::SeqCst);
            if closed {
                w.close();
            }
            (old, closed)
        };
        if let Some(old) = old {
            old();
        }
        if closed_meanwhile {
            let on_close = lock(&shared.on_close).take();
            if let Some(f) = on_close {
                f();
            }
            return;
        }
        let Ok(reader_ended) = spawn_reader(shared, reader) else {
            continue;
        };
        let client = Client::internal(shared);
        match client.establish() {
            Ok((_, v)) => {
                lock(&shared.reconnects).1 = Instant::now();
                shared.reconnecting.store(false, Ordering::SeqCst);
                // Its reader may have ended already (the server answered
                // and hung up), seeing a reconnection under way and leaving
                // it to this one: then this one goes on, unless that
                // reader came just after and reconnects itself.
                if reader_ended.load(Ordering::SeqCst) {
                    if shared.reconnecting.swap(true, Ordering::SeqCst) {
                        return;
                    }
                    log::info!("client: reconnect attempt {} ended at once", attempt + 1);
                    // A connection lost like any other: it counts.
                    let why = ClientError::transport("the connection ended once initialized");
                    if lost_too_often(shared, &policy, &why) {
                        return;
                    }
                    connection_ended(shared);
                    continue;
                }
                log::info!("client: reconnected (protocol {v})");
                // The new connection learns the tools' header declarations.
                if client.is_stateless() && shared.tools_listed.load(Ordering::SeqCst) {
                    if let Err(e) = client.list_tools() {
                        log::warn!("client: listing tools after reconnecting: {e}");
                    }
                }
                if !client.is_stateless() && !client.ask_again_to_keep() {
                    return;
                }
                if let Some(cb) = &shared.options.on_reconnected {
                    cb();
                }
                return;
            }
            Err(e) => log::info!(
                "client: reconnect attempt {} failed at initialize: {e}",
                attempt + 1
            ),
        }
    }
    shared.reconnecting.store(false, Ordering::SeqCst);
    give_up(
        shared,
        ClientError::transport(format!(
            "gave up reconnecting after {} attempts",
            policy.max_attempts
        )),
    );
}

/// Counts a lost connection (by how long it lived) and, once
/// `max_attempts` in a row lived less than the backoff's `reset_after`,
/// gives up (the caller, which holds `reconnecting`, then just returns).
fn lost_too_often(shared: &Arc<Shared>, policy: &Reconnect, why: &ClientError) -> bool {
    let go_on = {
        let mut r = lock(&shared.reconnects);
        let lived = r.1.elapsed();
        r.0.go_on(policy, lived)
    };
    if !go_on {
        shared.reconnecting.store(false, Ordering::SeqCst);
        give_up(
            shared,
            ClientError::transport(format!(
                "{} connections in a row were lost within {:?} of coming up; last: {why}",
                policy.max_attempts, policy.backoff.reset_after
            )),
        );
    }
    !go_on
}

/// What ends with a connection: the calls waiting on it fail, and the
/// callbacks answering its server's requests are cancelled (their answers
/// would go nowhere, or to another session).
fn connection_ended(shared: &Shared) {
    shared.outbound.fail_all();
    for (_, token) in lock(&shared.answering).drain() {
        token.cancel();
    }
}

fn give_up(shared: &Arc<Shared>, why: ClientError) {
    if shared.closed.load(Ordering::SeqCst) {
        return;
    }
    connection_ended(shared);
    // Two threads may give up at once (a reader that ends late, and the
    // thread that was reconnecting): one closes and tells.
    if !shared.shutdown() {
        return;
    }
    log::warn!("client: connection closed: {why}");
    if let Some(cb) = &shared.options.on_closed {
        cb(&why);
    }
}

/// Handles one message; `related` names our request whose response stream
/// carried it, when the transport knows.
fn dispatch(shared: &Arc<Shared>, message: Message, related: Option<&RequestId>) {
    match message {
        // While notification or progress callbacks of earlier messages are
        // still queued, the answer waits behind them: when a call returns,
        // everything the server sent before its answer has been handled.
        Message::Response(r) if shared.queued_notices.load(Ordering::SeqCst) > 0 => {
            match shared.outbound.defer_answer(r) {
                Ok(id) => {
                    let answering = shared.clone();
                    let answer: Notice = Box::new(move || answering.outbound.deliver(&id));
                    // Not queued (a full queue): answer now rather than lose it.
                    if let Err(answer) = notify(shared, answer) {
                        answer();
                    }
                }
                Err(r) => {
                    shared.outbound.answer(r, "client");
                }
            }
        }
        Message::Response(r) => {
            shared.outbound.answer(r, "client");
        }
        Message::Notification(n) => match (n.method(), n.params()) {
            ("notifications/progress", Some(p)) => {
                if let Some(report) = shared.outbound.progress(p) {
                    notify_user(shared, report);
                }
            }
            ("notifications/cancelled", params) => {
                let id = params
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_value);
                match id.and_then(|id| lock(&shared.answering).get(&id).cloned()) {
                    Some(token) => token.cancel(),
                    None => log::debug!("client: cancellation of a request not being answered"),
                }
            }
            (method, params) => {
                let params = params.map_or(Value::Null, |p| Value::Object(p.clone()));
                match shared.options.on_notification.clone() {
                    Some(h) => {
                        let method = method.to_owned();
                        notify_user(shared, Box::new(move || h(&method, &params)));
                    }
                    None => log::info!("client: notification {method}: {params}"),
                }
            }
        },
        Message::Request(r) => serve_peer_request(shared, r, related),
    }
}

/// A notification or progress callback, ready to run.
type Notice = Box<dyn FnOnce() + Send>;

thread_local! {
    // Set on the notifier thread.
    static ON_NOTIFIER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Notices waiting for the notifier thread; beyond, new ones are dropped
/// (and logged) rather than stalling the reader.
pub const NOTIFICATION_QUEUE: usize = 4096;

/// Runs `notice` on the client's notifier thread, in arrival order: a
/// callback may block or call the client (re-list tools on
/// `list_changed`) without stalling the reader that its answer needs.
/// Answers that arrive while notices wait are queued behind them, except
/// the answers to calls made from the notifier thread itself.
fn notify(shared: &Shared, notice: Notice) -> Result<(), Notice> {
    let queue = shared.notifier.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::bounded::<Notice>(NOTIFICATION_QUEUE);
        let queued = shared.queued_notices.clone();
        // The thread holds only the receiver: it ends when the client does.
        thread::Builder::new()
            .name("mcpvisor-client-notify".into())
            .spawn(move || {
                ON_NOTIFIER.with(|n| n.set(true));
                for notice in rx {
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(notice)).is_err() {
                        log::error!("client: a notification callback panicked");
                    }
                    queued.fetch_sub(1, Ordering::SeqCst);
                }
            })
            .inspect_err(|e| log::error!("client: cannot start the notifier thread: {e}"))
            .ok()
            .map(|_| tx)
    });
    let Some(q) = queue else {
        return Err(notice);
    };
    shared.queued_notices.fetch_add(1, Ordering::SeqCst);
    q.try_send(notice).map_err(|e| {
        shared.queued_notices.fetch_sub(1, Ordering::SeqCst);
        e.into_inner()
    })
}

/// [`notify`] for a user callback: dropped (and logged) when it cannot queue.
fn notify_user(shared: &Shared, notice: Notice) {
    if notify(shared, notice).is_err() {
        log::warn!(
            "client: {NOTIFICATION_QUEUE} notifications wait for their callbacks (or none can run); one dropped"
        );
    }
}

/// Which function answers a request of the server's: the association of
/// the call it belongs to, else the client's callback for its method.
fn peer_handler(
    shared: &Shared,
    method: &str,
    related: Option<&RequestId>,
) -> Option<PeerRequestHandler> {
    if let Some(a) = shared.outbound.association(related) {
        return Some(a);
    }
    let callback = match method {
        "sampling/createMessage" => shared.options.sampling.clone(),
        "elicitation/create" => shared.options.elicitation.clone(),
        "roots/list" => shared.options.roots.clone(),
        _ => None,
    }?;
    Some(Arc::new(move |_: &str, params| callback(params)))
}

thread_local! {
    // Set while a callback answers a request of the server's.
    static ANSWERING: std::cell::RefCell<Option<CancelToken>> = const { std::cell::RefCell::new(None) };
}

/// Inside a callback answering a request of the server's (sampling,
/// elicitation, roots): the token the server's `notifications/cancelled`
/// for that request cancels. Once it is, the callback's answer is not
/// sent (the spec's rule for cancelled requests), so a long callback
/// should check it and give up. `None` outside such a callback.
pub fn callback_cancel_token() -> Option<CancelToken> {
    ANSWERING.with(|a| a.borrow().clone())
}

/// Answers a request of the server's on the callback pool: callbacks may
/// block (a user deciding), never on the reader thread.
fn serve_peer_request(shared: &Arc<Shared>, r: Request, related: Option<&RequestId>) {
    // On the reader thread (ping, refusals): never waiting for the writer.
    let reply = |shared: &Arc<Shared>, outcome: Result<Value, ErrorObject>, id: &RequestId| {
        shared.write_from_reader(response_to(id, outcome));
    };
    // `ping` runs no user code: answered at once, never queued behind callbacks.
    if r.method() == "ping" {
        return reply(shared, Ok(json!({})), r.id());
    }
    // What the client did not declare it must refuse (sampling with tools
    // without `sampling.tools`, a URL elicitation without `elicitation.url`):
    // no callback sees it.
    let params = r.params().map_or(json!({}), |p| Value::Object(p.clone()));
    let declared = lock(&shared.init_params)["capabilities"].clone();
    if let Some(cap) = crate::protocol::undeclared(&declared, r.method(), &params) {
        let e = ErrorObject::invalid_params(format!(
            "{}: this client did not declare {cap}",
            r.method()
        ));
        return reply(shared, Err(e), r.id());
    }
    let Some(handler) = peer_handler(shared, r.method(), related) else {
        return reply(
            shared,
            Err(ErrorObject::method_not_found(r.method())),
            r.id(),
        );
    };
    let pool = shared.callbacks.get_or_init(|| {
        Pool::new(
            CALLBACK_THREAD_PREFIX,
            shared.options.callback_threads,
            CALLBACK_QUEUE,
        )
        .inspect_err(|e| log::error!("client: cannot start callback threads: {e}"))
        .ok()
    });
    let id = r.id().clone();
    let token = CancelToken::new();
    let epoch = shared.epoch.load(Ordering::SeqCst);
    lock(&shared.answering).insert(id.clone(), token.clone());
    let job_shared = shared.clone();
    let job = Box::new(move || {
        let run = || {
            ANSWERING.with(|a| *a.borrow_mut() = Some(token.clone()));
            let outcome = handler(r.method(), params);
            ANSWERING.with(|a| *a.borrow_mut() = None);
            outcome
        };
        // Cancelled while queued: the callback never runs.
        let outcome = (!token.is_cancelled()).then(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|_| {
                ANSWERING.with(|a| *a.borrow_mut() = None);
                log::error!(
                    "client: the callback for {} panicked: {}",
                    r.method(),
                    crate::protocol::pool::take_panic_report()
                );
                Err(ErrorObject::internal("the client's callback failed"))
            })
        });
        {
            // Only this request's entry: after a reconnection the same id
            // may name a new request of the new session.
            let mut answering = lock(&job_shared.answering);
            if answering.get(r.id()).is_some_and(|t| t.same(&token)) {
                answering.remove(r.id());
            }
        }
        match outcome {
            // The server cancelled it: no answer is sent.
            _ if token.is_cancelled() => {
                log::debug!(
                    "client: {} cancelled by the server; not answered",
                    r.method()
                )
            }
            Some(outcome) => {
                let _ = job_shared.write_on(&response_to(r.id(), outcome), Some(epoch));
            }
            None => {}
        }
    });
    let refused = match pool {
        Some(p) => p.try_submit(job).is_err(),
        None => true,
    };
    if refused {
        lock(&shared.answering).remove(&id);
        log::warn!("client: callback queue full; request {id} refused");
        reply(
            shared,
            Err(ErrorObject::internal("the client is busy; retry later")),
            &id,
        );
    }
}

/// The response to the server's request `id`.
fn response_to(id: &RequestId, outcome: Result<Value, ErrorObject>) -> Value {
    match outcome {
        Ok(v) => jsonrpc::result_response(id, v),
        Err(e) => jsonrpc::error_response_value(Some(id), &e),
    }
}

fn heartbeat(shared: std::sync::Weak<Shared>, every: Duration) {
    loop {
        thread::sleep(every);
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if shared.closed.load(Ordering::SeqCst) {
            return;
        }
        if shared.reconnecting.load(Ordering::SeqCst) {
            continue;
        }
        let client = Client::internal(&shared);
        let opts = CallOptions {
            timeout: Some(every),
            ..Default::default()
        };
        let epoch = shared.epoch.load(Ordering::SeqCst);
        let method = client.liveness_method();
        let answered = match client.send_request(method, json!({}), opts) {
            // Any answer, an error too, says the server is there; not
            // one the transport made for want of an answer.
            Err(ClientError::Rpc(e)) if e.is_transport_failure() => Err(ClientError::Rpc(e)),
            Ok(_) | Err(ClientError::Rpc(_) | ClientError::Protocol(_)) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = answered {
            let why = ClientError::transport(format!(
                "heartbeat: {method} not answered within {every:?} ({e})"
            ));
            if shared.options.reconnect.is_none() {
                give_up(&shared, why);
                return;
            }
            // Ending the connection ends the reader, which reconnects;
            // unless a reconnection already put in a new one meanwhile.
            let mut writer = lock(&shared.writer);
            if shared.epoch.load(Ordering::SeqCst) == epoch {
                log::warn!("client: {why}; reconnecting");
                shared.end_connection(&mut writer);
            }
        }
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod reader_tests;

#[cfg(test)]
#[path = "reconnect_tests.rs"]
mod reconnect_tests;
