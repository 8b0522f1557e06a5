//! TCP transport: newline-delimited JSON-RPC, one MCP session per
//! connection (as erlmcp does). A supervised acceptor, then per connection a
//! reader (the connection's thread) and a writer thread, with the same size
//! limits and error behaviour as stdio.

use super::accept::Acceptor;
use super::stdio::{serve_io, StdioOptions};
use crate::protocol::Engine;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervisor::{Strategy, Supervisor, SupervisorSpec};

/// Default address: loopback, port 8809.
pub const DEFAULT_TCP_BIND: &str = "127.0.0.1:8809";
/// Default most concurrent connections.
pub const DEFAULT_TCP_MAX_CONNECTIONS: usize = 1024;
/// Default time a connection may send nothing before it is closed: 5 minutes.
pub const DEFAULT_TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// Options of the TCP transport.
#[derive(Clone, Debug)]
pub struct TcpOptions {
    /// Address to bind (default [`DEFAULT_TCP_BIND`]).
    pub bind: SocketAddr,
    /// Most concurrent connections (default [`DEFAULT_TCP_MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Idle timeout (default [`DEFAULT_TCP_IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
    /// Line limit and shutdown grace, as for stdio.
    pub lines: StdioOptions,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            bind: DEFAULT_TCP_BIND.parse().expect("valid default address"),
            max_connections: DEFAULT_TCP_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_TCP_IDLE_TIMEOUT,
            lines: StdioOptions::default(),
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
}

/// A running TCP transport.
pub struct TcpServer {
    addr: SocketAddr,
    root: Supervisor,
    acceptor: Arc<Acceptor>,
}

impl TcpServer {
    /// Binds and starts serving `engine`.
    pub fn start(engine: Arc<Engine>, options: TcpOptions) -> io::Result<TcpServer> {
        let socket = TcpListener::bind(options.bind)?;
        let addr = socket.local_addr()?;
        let (idle, lines) = (options.idle_timeout, options.lines.clone());
        let acceptor = Arc::new(Acceptor {
            name: "tcp",
            serve: Arc::new(move |stream, peer| {
                let _ = stream.set_nodelay(true);
                let _ = stream.set_read_timeout(Some(idle));
                let writer = match stream.try_clone() {
                    Ok(w) => w,
                    Err(_) => return,
                };
                if let Err(e) = serve_io(&engine, stream, writer, lines.clone()) {
                    log::debug!("tcp: {peer}: {e}");
                }
            }),
            refuse: |_| {},
            max_connections: options.max_connections,
            active: AtomicUsize::new(0),
            stopping: Arc::new(AtomicBool::new(false)),
            socket: Mutex::new(None),
        });
        let spec = SupervisorSpec::new("tcp", Strategy::OneForOne)
            .intensity(10, Duration::from_secs(10))
            .child(acceptor.worker(socket, addr));
        let root = Supervisor::start(spec).map_err(io::Error::other)?;
        log::info!("tcp: serving MCP on {addr}");
        Ok(TcpServer {
            addr,
            root,
            acceptor,
        })
    }
    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
    /// Open connections.
    pub fn connection_count(&self) -> usize {
        self.acceptor.connections()
    }
    /// Stops accepting and stops the supervision tree (open connections end
    /// when their peers leave or idle out).
    pub fn shutdown(self) -> io::Result<()> {
        self.acceptor.stop(self.addr);
        self.root.shutdown().map(drop).map_err(io::Error::other)
    }
    /// Blocks until the transport's supervision tree ends.
    pub fn wait(self) -> io::Result<()> {
        self.root.wait().map_err(io::Error::other)
    }
}
