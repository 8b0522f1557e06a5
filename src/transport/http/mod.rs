//! Streamable HTTP server transport (MCP 2024-11-05 … 2025-11-25).
//!
//! One endpoint path (default `/mcp`) for POST, GET and DELETE, plus
//! `GET /healthz`. Sessions live in the transports' session table
//! swept by a supervised thread; the accept loop is a supervised worker too,
//! so a listener that dies is restarted and rebound. The HTTP/1.1 layer is
//! our own small one on `httparse` (see the README for why not tiny_http).

mod checks;
#[cfg(feature = "client")]
pub(crate) mod client;
mod endpoint;
pub(crate) mod headers;
mod listener;
#[cfg(feature = "client")]
mod socket;
mod stateless;
mod streams;
pub(crate) mod wire;

pub use checks::AllowList;
pub use wire::WireLimits;

use crate::protocol::Engine;
use crate::transport::accept::Acceptor;
use crate::transport::session_table::SessionTable;
use endpoint::Endpoint;
use listener::HttpConnections;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use streams::SessionStreams;
use supervisor::{ChildSpec, Clock, Strategy, SupervisorSpec, SystemClock};

/// Default address: loopback, port 8808.
pub const DEFAULT_BIND: &str = "127.0.0.1:8808";
/// Default endpoint path.
pub const DEFAULT_PATH: &str = "/mcp";
/// Default largest POST body: 4 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// Default largest request head (request line + headers): 32 KiB.
pub const DEFAULT_MAX_HEAD_BYTES: usize = 32 * 1024;
/// Default longest request line: 8 KiB.
pub const DEFAULT_MAX_REQUEST_LINE: usize = 8 * 1024;
/// Default time to receive a request head once it started: 10 s.
pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Default keep-alive idle time between requests: 60 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default most concurrent connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;
/// Default SSE `retry:` advice: 1 s.
pub const DEFAULT_SSE_RETRY: Duration = Duration::from_secs(1);
/// Default interval of SSE keep-alive comments (they also detect dead peers).
pub const DEFAULT_SSE_KEEPALIVE: Duration = Duration::from_secs(15);
/// Default events kept per session for resumption.
pub const DEFAULT_EVENT_LOG_CAPACITY: usize = 1024;
/// Default bytes of events kept per session for resumption: 16 MiB. The
/// oldest go first past it (the newest is always kept), so a session's log
/// is bounded in memory, not only in count.
pub const DEFAULT_EVENT_LOG_BYTES: usize = 16 * 1024 * 1024;
/// Default bytes of events kept for resumption by all of a listener's
/// sessions together: 256 MiB. Past it, a session that logs an event keeps
/// no more than its share (this over the sessions keeping events), and past
/// twice it keeps only its newest while they keep more, so that the
/// sessions a listener holds (up to
/// [`DEFAULT_MAX_SESSIONS`](crate::transport::session_table::DEFAULT_MAX_SESSIONS))
/// cannot each keep their own most.
pub const DEFAULT_EVENT_LOG_TOTAL_BYTES: usize = 256 * 1024 * 1024;

/// How a POSTed request is answered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ResponseMode {
    /// JSON when the response is the first thing the handler produces;
    /// SSE when a notification or a server-to-client request comes first,
    /// or (on a session) nothing within one keep-alive interval
    /// (`sse_keepalive`).
    Auto,
    /// Always one JSON response (notifications on the way are dropped).
    JsonOnly,
    /// Always an SSE stream, started at once on a session (before the
    /// handler's first message).
    SseOnly,
}

/// Options of the HTTP transport. Every field has a documented default.
#[derive(Clone)]
pub struct HttpOptions {
    /// Address to bind (default [`DEFAULT_BIND`]).
    pub bind: SocketAddr,
    /// An already-bound listener to use instead (socket activation).
    pub listener: Option<Arc<TcpListener>>,
    /// Endpoint path (default [`DEFAULT_PATH`]).
    pub path: String,
    /// Connection limits (defaults: the `DEFAULT_*` constants above).
    pub limits: WireLimits,
    /// Most concurrent connections (default [`DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// JSON / SSE choice (default [`ResponseMode::Auto`]).
    pub response_mode: ResponseMode,
    /// Whether GET opens the standalone stream (default true; false: 405,
    /// but for a GET resuming a request's stream with `Last-Event-ID`).
    pub enable_get_stream: bool,
    /// Whether DELETE ends sessions (default true; false: 405).
    pub enable_delete: bool,
    /// Idle expiry of sessions (default 30 minutes). A session whose client
    /// has not sent `notifications/initialized` lives only
    /// `DEFAULT_HANDSHAKE_TIMEOUT` (10 s).
    pub session_idle_timeout: Duration,
    /// Most sessions (default 10,000). A new session beyond it ends the
    /// longest-idle session that is not busy (one still in its handshake
    /// first); when every session is busy, 503.
    pub max_sessions: usize,
    /// Allowed `Origin`s (default: loopback origins when bound to loopback,
    /// none otherwise).
    pub allowed_origins: AllowList,
    /// Allowed `Host` names (default: loopback names when bound to
    /// loopback, any otherwise).
    pub allowed_hosts: AllowList,
    /// Bearer tokens; empty means no authentication (default empty).
    pub bearer_tokens: Vec<String>,
    /// SSE `retry:` advice (default [`DEFAULT_SSE_RETRY`]).
    pub sse_retry: Duration,
    /// SSE keep-alive interval (default [`DEFAULT_SSE_KEEPALIVE`]).
    pub sse_keepalive: Duration,
    /// Events kept per session for resumption (default [`DEFAULT_EVENT_LOG_CAPACITY`]).
    pub event_log_capacity: usize,
    /// Bytes of events kept per session for resumption (default
    /// [`DEFAULT_EVENT_LOG_BYTES`]).
    pub event_log_bytes: usize,
    /// Bytes of events kept for resumption by all sessions together
    /// (default [`DEFAULT_EVENT_LOG_TOTAL_BYTES`]): past it each session
    /// that logs keeps its share. A session that logs no more keeps what
    /// it has, so they may keep up to twice this (and each its newest).
    pub event_log_total_bytes: usize,
    /// Clock of session expiry (default: the system clock).
    pub clock: Arc<dyn Clock>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        let bind: SocketAddr = DEFAULT_BIND.parse().expect("valid default address");
        HttpOptions {
            bind,
            listener: None,
            path: DEFAULT_PATH.into(),
            limits: WireLimits {
                max_request_line: DEFAULT_MAX_REQUEST_LINE,
                max_head: DEFAULT_MAX_HEAD_BYTES,
                max_body: DEFAULT_MAX_BODY_BYTES,
                head_timeout: DEFAULT_HEAD_TIMEOUT,
                idle_timeout: DEFAULT_IDLE_TIMEOUT,
            },
            max_connections: DEFAULT_MAX_CONNECTIONS,
            response_mode: ResponseMode::Auto,
            enable_get_stream: true,
            enable_delete: true,
            session_idle_timeout: crate::transport::session_table::DEFAULT_IDLE_TIMEOUT,
            max_sessions: crate::transport::session_table::DEFAULT_MAX_SESSIONS,
            allowed_origins: AllowList::Loopback,
            allowed_hosts: AllowList::Loopback,
            bearer_tokens: Vec::new(),
            sse_retry: DEFAULT_SSE_RETRY,
            sse_keepalive: DEFAULT_SSE_KEEPALIVE,
            event_log_capacity: DEFAULT_EVENT_LOG_CAPACITY,
            event_log_bytes: DEFAULT_EVENT_LOG_BYTES,
            event_log_total_bytes: DEFAULT_EVENT_LOG_TOTAL_BYTES,
            clock: Arc::new(SystemClock),
        }
    }
}

fn is_loopback(ip: IpAddr) -> bool {
    ip.is_loopback()
}

/// The tokens of a bearer token file: one per line, blank lines and `#`
/// comments ignored; a file with none is an error.
pub(crate) fn read_token_file(path: &std::path::Path) -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let tokens: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();
    if tokens.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: no tokens", path.display()),
        ));
    }
    Ok(tokens)
}

impl HttpOptions {
    /// Binds `addr`. Away from loopback, the allow lists still at their
    /// loopback default follow the address: the Origin default becomes
    /// "none" and the Host check is off. Lists set before are kept.
    pub fn with_bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        if !is_loopback(addr.ip()) {
            if self.allowed_origins == AllowList::Loopback {
                self.allowed_origins = AllowList::List(Vec::new());
            }
            if self.allowed_hosts == AllowList::Loopback {
                self.allowed_hosts = AllowList::Any;
            }
        }
        self
    }
    /// Uses an already-bound listener (socket activation).
    pub fn with_listener(mut self, listener: TcpListener) -> io::Result<Self> {
        let addr = listener.local_addr()?;
        self = self.with_bind(addr);
        self.listener = Some(Arc::new(listener));
        Ok(self)
    }
    /// Sets the endpoint path.
    pub fn with_path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }
    /// Sets the response mode.
    pub fn with_response_mode(mut self, mode: ResponseMode) -> Self {
        self.response_mode = mode;
        self
    }
    /// Sets the allowed origins.
    pub fn with_allowed_origins(mut self, list: AllowList) -> Self {
        self.allowed_origins = list;
        self
    }
    /// Sets the allowed hosts.
    pub fn with_allowed_hosts(mut self, list: AllowList) -> Self {
        self.allowed_hosts = list;
        self
    }
    /// Requires one of these bearer tokens.
    pub fn with_bearer_tokens(mut self, tokens: Vec<String>) -> Self {
        self.bearer_tokens = tokens;
        self
    }
    /// Reads bearer tokens from a file, one per line (blank lines and `#` comments ignored).
    pub fn with_bearer_token_file(self, path: &std::path::Path) -> io::Result<Self> {
        Ok(self.with_bearer_tokens(read_token_file(path)?))
    }
    /// Sets the session idle timeout.
    pub fn with_session_idle_timeout(mut self, idle: Duration) -> Self {
        self.session_idle_timeout = idle;
        self
    }
    /// Sets the maximum number of sessions.
    pub fn with_max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max;
        self
    }
    /// Sets the maximum number of connections.
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max;
        self
    }
    /// Sets the wire limits.
    pub fn with_limits(mut self, limits: WireLimits) -> Self {
        self.limits = limits;
        self
    }
    /// Turns the standalone GET stream on or off.
    pub fn with_get_stream(mut self, on: bool) -> Self {
        self.enable_get_stream = on;
        self
    }
    /// Turns DELETE on or off.
    pub fn with_delete(mut self, on: bool) -> Self {
        self.enable_delete = on;
        self
    }
    /// Sets the session clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// What an HTTP listener serves (cheap to clone): its address, sessions
/// and connections.
#[derive(Clone)]
pub struct HttpListener {
    addr: SocketAddr,
    path: String,
    acceptor: Arc<Acceptor>,
    sessions: Arc<SessionTable<SessionStreams>>,
    access: Arc<RwLock<Arc<endpoint::Access>>>,
}

impl HttpListener {
    /// Takes `options`' Host and Origin allow lists and bearer tokens
    /// (what a configuration reload may change) from the next request
    /// on; the rest of `options` is left as it was. A token that is gone
    /// is refused (401) from then on, and the sessions opened with it
    /// end at once, their open streams with them (as do the sessions
    /// opened without a token once tokens are asked for, and those opened
    /// with one once none are). The allow lists' loopback defaults follow
    /// this listener's address, as when bound.
    pub fn set_access(&self, options: &HttpOptions) {
        let options = options.clone().with_bind(self.addr);
        let access = Arc::new(endpoint::Access::of(&options));
        // Swapped first: no request admitted from here on opens a session
        // under a credential that is gone.
        *crate::sync::write(&self.access) = access.clone();
        let ended = self.sessions.retain_owners(|owner| access.admits(owner));
        if ended > 0 {
            log::info!(
                "http {}: ended {ended} session(s) of a revoked credential",
                self.addr
            );
        }
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// The endpoint path.
    pub fn path(&self) -> &str {
        &self.path
    }
    /// Number of open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }
    /// Expires idle sessions now (the sweeper does this periodically).
    pub fn sweep_sessions(&self) -> usize {
        self.sessions.sweep()
    }
    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.acceptor.connections()
    }
    /// Stops accepting connections for good (a draining stop); open
    /// connections and sessions go on, new connections wait in the backlog.
    pub fn stop_accepting(&self) {
        self.acceptor.stop_accepting();
    }
    /// Test hook: makes the listening socket fail so that the supervisor
    /// must restart the listener, which binds the address again.
    #[doc(hidden)]
    pub fn break_listener_for_tests(&self) {
        self.acceptor.break_socket();
    }

    /// Test hook: makes the accept loop panic, so that the supervisor must
    /// restart it (on the same socket).
    #[doc(hidden)]
    pub fn panic_listener_for_tests(&self) {
        self.acceptor.panic_for_tests();
    }
}

/// An HTTP transport running under a supervision tree of its own.
pub type HttpServer = crate::transport::tree::Tree<HttpListener>;

impl crate::transport::tree::Tree<HttpListener> {
    /// Binds (or takes `options.listener`) and returns the transport as a
    /// child spec (a supervisor over the session sweeper and the accept
    /// loop) for a tree of yours. When the tree stops it, its sessions end.
    pub fn child_spec(
        engine: Arc<Engine>,
        options: HttpOptions,
    ) -> io::Result<(ChildSpec, HttpListener)> {
        let (spec, handle) = Self::tree(engine, options)?;
        Ok((ChildSpec::supervisor(spec), handle))
    }

    /// The transport's supervision tree, and its handle.
    fn tree(
        engine: Arc<Engine>,
        options: HttpOptions,
    ) -> io::Result<(SupervisorSpec, HttpListener)> {
        let socket = match &options.listener {
            Some(l) => l.try_clone()?,
            None => TcpListener::bind(options.bind)?,
        };
        let addr = socket.local_addr()?;
        let access = Arc::new(RwLock::new(Arc::new(endpoint::Access::of(&options))));
        let sessions = Arc::new(
            SessionTable::new(
                options.max_sessions,
                options.session_idle_timeout,
                options.clock.clone(),
            )
            .evicting(),
        );
        let endpoint = Endpoint::new(engine, options.clone(), sessions.clone(), access.clone());
        let connections = Arc::new(HttpConnections {
            handler: Arc::new(endpoint),
            limits: options.limits.clone(),
        });
        let acceptor = Arc::new(
            Acceptor::new(
                "http",
                Arc::new(move |stream, peer, ended| {
                    connections.serve_connection(stream, peer, &ended)
                }),
                listener::refuse,
                options.max_connections,
            )
            // A stop flags every open connection: one idle between
            // requests is closed, a request that comes on a kept-alive one
            // after it is not served (it would reach a listener that is
            // gone), a request under way is served to its end.
            .flag_connections_on_stop(),
        );
        if options.listener.is_some() {
            acceptor.keep_socket();
        }
        let spec = SupervisorSpec::new("http", Strategy::OneForOne)
            .intensity(10, Duration::from_secs(10))
            .child(SessionTable::sweeper(&sessions, "http-session-sweeper"))
            .child(acceptor.closer())
            .child(acceptor.worker(socket, addr));
        log::info!("http: serving MCP on http://{addr}{}", options.path);
        let handle = HttpListener {
            addr,
            path: options.path.clone(),
            acceptor,
            sessions,
            access,
        };
        Ok((spec, handle))
    }

    /// Binds and starts serving `engine` under a tree of its own.
    pub fn start(engine: Arc<Engine>, options: HttpOptions) -> io::Result<HttpServer> {
        let (spec, handle) = Self::tree(engine, options)?;
        crate::transport::tree::Tree::run(spec, handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_away_from_loopback_keeps_lists_the_caller_set() {
        // #11 item 14: defaults follow the address; explicit lists stay.
        let wide: SocketAddr = "0.0.0.0:8808".parse().unwrap();
        let o = HttpOptions::default().with_bind(wide);
        assert_eq!(o.allowed_hosts, AllowList::Any);
        assert_eq!(o.allowed_origins, AllowList::List(Vec::new()));
        let hosts = AllowList::List(vec!["mcp.example".into()]);
        let origins = AllowList::List(vec!["https://app.example".into()]);
        let o = HttpOptions::default()
            .with_allowed_hosts(hosts.clone())
            .with_allowed_origins(origins.clone())
            .with_bind(wide);
        assert_eq!((o.allowed_hosts, o.allowed_origins), (hosts, origins));
    }
}
