//! Conveniences that run transports for a [`Server`]: `serve_*` (blocking)
//! and `start_*` (in the background, under a supervision tree of their
//! own), and [`Server::listener`], which turns a [`Listen`] into a child
//! spec for a tree of yours.
//!
//! They sit above both the server builder and the transports, so neither
//! of those names the other.

use crate::server::Server;
use crate::transport::listen::Listen;
use crate::transport::stdio::{self, StdioOptions};
use crate::transport::tree::Tree;
use std::io;
use supervisor::{ChildSpec, Strategy, SupervisorSpec};

#[cfg(feature = "amqp")]
use crate::transport::amqp::{AmqpConfig, AmqpListener, AmqpServer};
#[cfg(feature = "http")]
use crate::transport::http::{HttpListener, HttpOptions, HttpServer};
#[cfg(feature = "tcp")]
use crate::transport::tcp::{TcpListenerHandle, TcpOptions, TcpServer};

impl Server {
    /// Serves MCP over this process's stdin and stdout until EOF on stdin.
    pub fn serve_stdio(&self) -> io::Result<()> {
        self.serve_stdio_with(StdioOptions::default())
    }

    /// [`Server::serve_stdio`] with options.
    pub fn serve_stdio_with(&self, options: StdioOptions) -> io::Result<()> {
        stdio::serve(self.engine(), options)
    }

    /// Serves one end of an in-process pair on a new thread; returns at once.
    pub fn serve_memory(&self, end: crate::transport::memory::MemoryEnd) -> io::Result<()> {
        let engine = self.engine().clone();
        std::thread::Builder::new()
            .name("mcpvisor-memory".into())
            .spawn(move || {
                crate::transport::memory::serve(&engine, end, stdio::DEFAULT_SHUTDOWN_GRACE)
            })?;
        Ok(())
    }

    /// Serves MCP over Streamable HTTP until the transport fails (blocking).
    #[cfg(feature = "http")]
    pub fn serve_http(&self, options: HttpOptions) -> io::Result<()> {
        self.start_http(options)?.wait()
    }

    /// Starts the Streamable HTTP transport in the background.
    #[cfg(feature = "http")]
    pub fn start_http(&self, options: HttpOptions) -> io::Result<HttpServer> {
        HttpServer::start(self.engine().clone(), options)
    }

    /// Starts an instance of this server on AMQP in the background: it
    /// shares new sessions with the other instances of `config.server_name`.
    #[cfg(feature = "amqp")]
    pub fn start_amqp(&self, config: AmqpConfig) -> io::Result<AmqpServer> {
        AmqpServer::start(self.engine().clone(), config)
    }

    /// Serves on AMQP until the transport's supervision tree ends.
    #[cfg(feature = "amqp")]
    pub fn serve_amqp(&self, config: AmqpConfig) -> io::Result<()> {
        self.start_amqp(config)?.wait()
    }

    /// Starts the TCP transport (newline-delimited JSON-RPC) in the background.
    #[cfg(feature = "tcp")]
    pub fn start_tcp(&self, options: TcpOptions) -> io::Result<TcpServer> {
        TcpServer::start(self.engine().clone(), options)
    }

    /// The listener `listen` names, with default options, as a child spec
    /// for a supervision tree of yours: see [`Server::listener_with`].
    pub fn listener(&self, listen: &Listen) -> io::Result<(ChildSpec, Listener)> {
        self.listener_with(listen, &ListenOptions::default())
    }

    /// The listener `listen` names, as a child spec for a supervision tree
    /// of yours, and a handle to what it serves; `options` supplies what a
    /// listener string does not say. Sockets are bound (and the first
    /// broker connection made) here, so an address in use is this call's
    /// error; the tree then owns the listener's threads and restarts them
    /// as its strategy says.
    pub fn listener_with(
        &self,
        listen: &Listen,
        options: &ListenOptions,
    ) -> io::Result<(ChildSpec, Listener)> {
        let engine = self.engine().clone();
        match listen {
            Listen::Stdio => Ok((
                stdio::child_spec(engine, options.stdio.clone()),
                Listener::Stdio,
            )),
            #[cfg(feature = "tcp")]
            Listen::Tcp(addr) => {
                let (spec, handle) =
                    TcpServer::child_spec(engine, options.tcp.clone().with_bind(*addr))?;
                Ok((spec, Listener::Tcp(handle)))
            }
            #[cfg(feature = "http")]
            Listen::Http { addr, path } => {
                let http = options.http.clone().with_bind(*addr).with_path(path.clone());
                let (spec, handle) = HttpServer::child_spec(engine, http)?;
                Ok((spec, Listener::Http(handle)))
            }
            #[cfg(feature = "amqp")]
            Listen::Amqp { url, name } => {
                let named = AmqpConfig::new(url.as_str(), name.as_str()).map_err(io::Error::other)?;
                let config = match &options.amqp {
                    Some(template) => AmqpConfig {
                        url: named.url,
                        server_name: named.server_name,
                        ..template.clone()
                    },
                    None => named,
                };
                let (spec, handle) = AmqpServer::child_spec(engine, config)?;
                Ok((spec, Listener::Amqp(handle)))
            }
            #[allow(unreachable_patterns)]
            other => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{other}: this build of mcpvisor has no such transport (see its Cargo features)"),
            )),
        }
    }

    /// Starts the listener `listen` names under a supervision tree of its
    /// own; [`Running::wait`] blocks until it ends (stdio: at EOF).
    pub fn start(&self, listen: &Listen) -> io::Result<Running> {
        self.start_with(listen, &ListenOptions::default())
    }

    /// [`Server::start`] with options.
    pub fn start_with(&self, listen: &Listen, options: &ListenOptions) -> io::Result<Running> {
        let root = SupervisorSpec::new("mcpvisor", Strategy::OneForOne)
            .child(self.engine().task_sweeper());
        if *listen == Listen::Stdio {
            // stdio ends normally at EOF and is not restarted: the tree's
            // wait ends with it.
            let (done_tx, done) = crossbeam_channel::bounded(1);
            let spec = stdio::worker(self.engine().clone(), options.stdio.clone(), Some(done_tx));
            return Ok(Tree::run(root.child(spec), Listener::Stdio)?.ending_with(done));
        }
        let (spec, listener) = self.listener_with(listen, options)?;
        Tree::run(root.child(spec), listener)
    }
}

/// What a listener string does not say: each transport's own options.
/// The address (and path, URL, server name) always come from the
/// [`Listen`]; everything else from here.
#[derive(Clone, Default)]
pub struct ListenOptions {
    /// For `stdio` (default [`StdioOptions::default`]).
    pub stdio: StdioOptions,
    /// For `tcp://` (default [`TcpOptions::default`]).
    #[cfg(feature = "tcp")]
    pub tcp: TcpOptions,
    /// For `http://` (default [`HttpOptions::default`]; the Origin and Host
    /// defaults follow the listener's address as [`HttpOptions::with_bind`] says).
    #[cfg(feature = "http")]
    pub http: HttpOptions,
    /// For `amqp://`: every field but `url` and `server_name` (default
    /// `None`: [`AmqpConfig::new`]'s defaults).
    #[cfg(feature = "amqp")]
    pub amqp: Option<AmqpConfig>,
}

/// What a started listener serves, for status and tests.
#[derive(Clone)]
pub enum Listener {
    /// This process's stdin and stdout.
    Stdio,
    /// A TCP listener.
    #[cfg(feature = "tcp")]
    Tcp(TcpListenerHandle),
    /// A Streamable HTTP listener.
    #[cfg(feature = "http")]
    Http(HttpListener),
    /// An AMQP instance.
    #[cfg(feature = "amqp")]
    Amqp(AmqpListener),
}

impl std::fmt::Display for Listener {
    /// Where it serves, as a [`Listen`] string with the bound address
    /// (the AMQP password hidden).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listener::Stdio => f.write_str("stdio"),
            #[cfg(feature = "tcp")]
            Listener::Tcp(t) => write!(f, "tcp://{}", t.local_addr()),
            #[cfg(feature = "http")]
            Listener::Http(h) => write!(f, "http://{}{}", h.local_addr(), h.path()),
            #[cfg(feature = "amqp")]
            Listener::Amqp(a) => a.fmt(f),
        }
    }
}

impl Listener {
    /// Its transport: `stdio`, `tcp`, `http` or `amqp`.
    pub fn transport(&self) -> &'static str {
        match self {
            Listener::Stdio => "stdio",
            #[cfg(feature = "tcp")]
            Listener::Tcp(_) => "tcp",
            #[cfg(feature = "http")]
            Listener::Http(_) => "http",
            #[cfg(feature = "amqp")]
            Listener::Amqp(_) => "amqp",
        }
    }

    /// Stops taking new connections (TCP, HTTP) or new sessions and
    /// stateless requests (AMQP: see [`AmqpListener::stop_accepting`])
    /// while open ones go on; stdio has none to refuse.
    pub fn stop_accepting(&self) {
        match self {
            #[cfg(feature = "tcp")]
            Listener::Tcp(t) => t.stop_accepting(),
            #[cfg(feature = "http")]
            Listener::Http(h) => h.stop_accepting(),
            #[cfg(feature = "amqp")]
            Listener::Amqp(a) => a.stop_accepting(),
            _ => {}
        }
    }

    /// Takes who may connect from `options` (HTTP: the Host and Origin
    /// allow lists and bearer tokens; see [`HttpListener::set_access`]),
    /// as a configuration reload changes them; the other transports have
    /// nothing of the kind.
    pub fn set_access(&self, options: &ListenOptions) {
        match self {
            #[cfg(feature = "http")]
            Listener::Http(h) => h.set_access(&options.http),
            _ => {
                let _ = options;
            }
        }
    }

    /// Its open sessions (a TCP connection is one), where it counts them.
    pub fn session_count(&self) -> Option<usize> {
        match self {
            Listener::Stdio => None,
            #[cfg(feature = "tcp")]
            Listener::Tcp(t) => Some(t.connection_count()),
            #[cfg(feature = "http")]
            Listener::Http(h) => Some(h.session_count()),
            #[cfg(feature = "amqp")]
            Listener::Amqp(a) => Some(a.session_count()),
        }
    }
}

/// A listener running under a tree of its own.
pub type Running = Tree<Listener>;

impl Tree<Listener> {
    /// What it serves.
    pub fn listener(&self) -> &Listener {
        self.handle()
    }
}
