//! TCP transport: newline-delimited JSON-RPC, one MCP session per
//! connection (as erlmcp does). A supervised acceptor, then per connection a
//! reader (the connection's thread) and a writer thread, with the same size
//! limits and error behaviour as stdio.

use super::accept::{Acceptor, ConnectionFlag, ServeFn};
use super::lines::LineBudget;
use super::stdio::{serve_lines, EndFn, Output, StdioOptions};
use crate::protocol::Engine;
use crate::sync::lock;
use crate::throttle::{Throttle, DEFAULT_LOG_INTERVAL};
use std::io;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervisor::{ChildSpec, Strategy, SupervisorSpec};

/// Default address: loopback, port 8809.
pub const DEFAULT_TCP_BIND: &str = "127.0.0.1:8809";
/// Default most concurrent connections.
pub const DEFAULT_TCP_MAX_CONNECTIONS: usize = 1024;
/// Default time a connection may send nothing, with none of its requests
/// in flight, before it is closed: 5 minutes.
pub const DEFAULT_TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Default memory all connections' partial lines may hold together beyond
/// 64 KiB each: 256 MiB. A line that would need more is refused as too
/// large (its connection stays open).
pub const DEFAULT_TCP_LINE_BUDGET: usize = 256 * 1024 * 1024;
/// Default time one write to a peer may block before the connection is
/// closed (the peer stopped reading): 30 s.
pub const DEFAULT_TCP_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of the TCP transport.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// Address to bind (default [`DEFAULT_TCP_BIND`]).
    pub bind: SocketAddr,
    /// Most concurrent connections (default [`DEFAULT_TCP_MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Idle timeout (default [`DEFAULT_TCP_IDLE_TIMEOUT`]): a connection
    /// that sends nothing this long is closed, unless requests of its are
    /// still in flight (its client waits for a long call).
    pub idle_timeout: Duration,
    /// Longest a write may block (default [`DEFAULT_TCP_WRITE_TIMEOUT`]).
    /// A peer that reads slower than it sends has no more requests read
    /// from it while 512 messages wait for it (half its outbox), until
    /// fewer than 256 do; one that stops reading loses its connection when
    /// a write has blocked this long, or when its outbox (1,024 messages)
    /// is full all the same; no other connection waits for it. Zero is not a timeout:
    /// writes then wait as long as the peer does.
    pub write_timeout: Duration,
    /// Line limit and shutdown grace, as for stdio.
    pub lines: StdioOptions,
    /// Memory the partial lines of all connections may hold together
    /// (default [`DEFAULT_TCP_LINE_BUDGET`]).
    pub line_budget: usize,
    /// An already-bound listener to use instead of binding (socket activation).
    pub listener: Option<Arc<TcpListener>>,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            bind: DEFAULT_TCP_BIND.parse().expect("valid default address"),
            max_connections: DEFAULT_TCP_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_TCP_IDLE_TIMEOUT,
            write_timeout: DEFAULT_TCP_WRITE_TIMEOUT,
            lines: StdioOptions::default(),
            line_budget: DEFAULT_TCP_LINE_BUDGET,
            listener: None,
        }
    }
}

impl TcpOptions {
    /// Sets the address.
    pub fn with_bind(mut self, addr: SocketAddr) -> Self {
        self.bind = addr;
        self
    }
    /// Sets the connection cap.
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }
    /// Sets the idle timeout.
    pub fn with_idle_timeout(mut self, idle: Duration) -> Self {
        self.idle_timeout = idle;
        self
    }
    /// Sets the write timeout.
    pub fn with_write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }
}

impl TcpOptions {
    /// Uses an already-bound listener (socket activation) instead of binding.
    pub fn with_listener(mut self, listener: TcpListener) -> io::Result<Self> {
        self.bind = listener.local_addr()?;
        self.listener = Some(Arc::new(listener));
        Ok(self)
    }
}

/// What a TCP listener serves (cheap to clone): its address, its connections.
#[derive(Clone)]
pub struct TcpListenerHandle {
    addr: SocketAddr,
    acceptor: Arc<Acceptor>,
}

impl TcpListenerHandle {
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.acceptor.connections()
    }
    /// Stops accepting connections for good (a draining stop); open
    /// connections go on, new ones wait in the backlog.
    pub fn stop_accepting(&self) {
        self.acceptor.stop_accepting();
    }
}

/// A TCP transport running under a supervision tree of its own.
pub type TcpServer = super::tree::Tree<TcpListenerHandle>;

/// A connection's input that fails (reads nothing more) once its listener
/// was stopped: the flag [`Acceptor::end_connections_on_stop`] sets. An
/// error, not the end of input: a line the peer was still sending is cut,
/// not ended, and is not taken for a whole (malformed) message; the
/// connection then ends as at its end of input (the grace, the answers
/// written).
struct Ending {
    stream: TcpStream,
    ended: Arc<ConnectionFlag>,
}

impl Ending {
    /// The error of a read once the listener stopped.
    fn stopped() -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "the listener stopped: the connection's input ends",
        )
    }
}

impl Read for Ending {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.ended.ended() {
            return Err(Self::stopped());
        }
        let n = self.stream.read(buf)?;
        // What a read under way returned as the stop came is not taken.
        if self.ended.ended() {
            return Err(Self::stopped());
        }
        Ok(n)
    }
}

impl super::tree::Tree<TcpListenerHandle> {
    /// Binds (or takes `options.listener`) and returns the listener as a
    /// child spec (a supervisor over its accept loop) for a tree of yours.
    pub fn child_spec(
        engine: Arc<Engine>,
        options: TcpOptions,
    ) -> io::Result<(ChildSpec, TcpListenerHandle)> {
        let (spec, handle) = Self::tree(engine, options)?;
        Ok((ChildSpec::supervisor(spec), handle))
    }

    /// The transport's supervision tree, and its handle.
    fn tree(
        engine: Arc<Engine>,
        options: TcpOptions,
    ) -> io::Result<(SupervisorSpec, TcpListenerHandle)> {
        let socket = match &options.listener {
            Some(l) => l.try_clone()?,
            None => TcpListener::bind(options.bind)?,
        };
        let addr = socket.local_addr()?;
        let (idle, lines) = (options.idle_timeout, options.lines.clone());
        let write_timeout = options.write_timeout;
        let budget = LineBudget::new(options.line_budget);
        let serve: Arc<ServeFn> = Arc::new(move |stream, peer, ended| {
            let _ = stream.set_nodelay(true);
            let _ = stream.set_read_timeout(Some(idle));
            let _ = stream.set_write_timeout(Some(write_timeout));
            let (writer, ender) = match (stream.try_clone(), stream.try_clone()) {
                (Ok(w), Ok(e)) => (w, e),
                (Err(e), _) | (_, Err(e)) => {
                    // Out of descriptors, likely for many at once.
                    static DROPPED: Throttle = Throttle::new(DEFAULT_LOG_INTERVAL);
                    if let Some(dropped) = DROPPED.event() {
                        log::warn!(
                            "tcp: {peer}: connection dropped: {e} ({dropped} dropped since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?})"
                        );
                    }
                    return;
                }
            };
            // A peer that stops reading: shut the socket down, so the
            // reader ends and the slot is freed. The session's sink keeps
            // this (a task, or a handler still running, may outlive the
            // connection), so its descriptor is let go when serving ends.
            let ender = Arc::new(Mutex::new(Some(ender)));
            let end: EndFn = {
                let ender = ender.clone();
                let once = AtomicBool::new(false);
                Arc::new(move || {
                    // Both the full outbox and the writer's failure call
                    // this: said and done once.
                    if once.swap(true, Ordering::SeqCst) {
                        return;
                    }
                    if let Some(s) = lock(&ender).as_ref() {
                        log::warn!("tcp: {peer}: stopped reading, or reads too slowly; closing its connection");
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                })
            };
            let budget = Some(budget.clone());
            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
            if let Err(e) = serve_lines(
                &engine,
                Ending { stream, ended },
                Output::Buffered(writer),
                lines.clone(),
                Some(end),
                budget,
                Some(fd),
            ) {
                log::debug!("tcp: {peer}: {e}");
            }
            // Everything is written: the peer sees the end now, whoever
            // still holds the session's sink.
            let last = lock(&ender).take();
            if let Some(s) = last {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        });
        let acceptor = Arc::new(
            Acceptor::new("tcp", serve, |_| {}, options.max_connections).end_connections_on_stop(),
        );
        if options.listener.is_some() {
            acceptor.keep_socket();
        }
        let spec = SupervisorSpec::new("tcp", Strategy::OneForOne)
            .intensity(10, Duration::from_secs(10))
            .child(acceptor.closer())
            .child(acceptor.worker(socket, addr));
        log::info!("tcp: serving MCP on {addr}");
        Ok((spec, TcpListenerHandle { addr, acceptor }))
    }

    /// Binds and starts serving `engine` under a tree of its own.
    pub fn start(engine: Arc<Engine>, options: TcpOptions) -> io::Result<TcpServer> {
        let (spec, handle) = Self::tree(engine, options)?;
        super::tree::Tree::run(spec, handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::lines::{Frame, LineReader};
    use std::io::Write;

    /// Stops the listener as soon as its first read returned.
    struct StopAfterFirstRead(Ending);

    impl Read for StopAfterFirstRead {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.read(buf)?;
            self.0.ended.end();
            Ok(n)
        }
    }

    #[test]
    fn a_line_cut_by_a_listener_stop_is_not_taken_for_a_message() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, _) = listener.accept().unwrap();
        // The peer is still sending its request when the listener stops.
        peer.write_all(br#"{"jsonrpc":"2.0","id":1,"meth"#).unwrap();
        let ended = Arc::new(ConnectionFlag::default());
        let input = StopAfterFirstRead(Ending { stream, ended });
        let mut lines = LineReader::new(input, 1024);
        match lines.next_frame() {
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionAborted),
            Ok(Some(Frame::Line(line))) => {
                panic!("a cut line taken: {}", String::from_utf8_lossy(line))
            }
            Ok(other) => panic!("{other:?}"),
        }
    }
}
