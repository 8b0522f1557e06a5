//! The accept loop shared by the TCP-based transports.
//!
//! It runs as a supervised worker: errors it cannot ride out end it, and the
//! supervisor restarts it, rebinding the address. Transient accept errors
//! (out of descriptors or memory, aborted handshakes) are logged and retried
//! after a short, growing pause, so the listener never dies of them.
//! Connections get one named thread each, up to `max_connections`; beyond
//! that a new connection is refused at once.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;
use supervisor::{ChildSpec, Restart, Shutdown};

/// Stack size of a connection thread: they parse and copy, nothing deep.
pub const CONNECTION_STACK: usize = 256 * 1024;

/// Serves one accepted connection until it ends.
pub(crate) type ServeFn = dyn Fn(TcpStream, SocketAddr) + Send + Sync;

/// Accepts connections and hands each to `serve` on its own thread.
pub(crate) struct Acceptor {
    pub(crate) name: &'static str,
    pub(crate) serve: Arc<ServeFn>,
    /// Called on a connection refused because of the cap (e.g. write a 503).
    pub(crate) refuse: fn(&TcpStream),
    pub(crate) max_connections: usize,
    pub(crate) active: AtomicUsize,
    pub(crate) stopping: Arc<AtomicBool>,
    /// The listening socket; empty after a fatal error, so the restarted
    /// worker binds the address again.
    pub(crate) socket: Mutex<Option<TcpListener>>,
}

/// Decrements the connection count however a connection thread ends.
struct Slot(Arc<Acceptor>);
impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Accept errors worth riding out rather than restarting the listener.
fn transient(e: &io::Error) -> bool {
    const EINTR: i32 = 4;
    const ENOMEM: i32 = 12;
    const ENFILE: i32 = 23;
    const EMFILE: i32 = 24;
    const EPROTO: i32 = 71;
    const ECONNABORTED: i32 = 103;
    const ENOBUFS: i32 = 105;
    matches!(e.raw_os_error(), Some(c) if [EINTR, ENOMEM, ENFILE, EMFILE, EPROTO, ECONNABORTED, ENOBUFS].contains(&c))
        || matches!(
            e.kind(),
            io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
        )
}

impl Acceptor {
    /// Accepts until `stop` or a fatal error.
    pub(crate) fn accept_loop(
        self: &Arc<Self>,
        listener: &TcpListener,
        stop: &crossbeam_channel::Receiver<()>,
    ) -> io::Result<()> {
        let mut pause = Duration::from_millis(5);
        loop {
            if self.stopping.load(Ordering::SeqCst)
                || matches!(
                    stop.try_recv(),
                    Err(crossbeam_channel::TryRecvError::Disconnected)
                )
            {
                return Ok(());
            }
            match listener.accept() {
                Ok((stream, peer)) => {
                    pause = Duration::from_millis(5);
                    if self.stopping.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    self.spawn_connection(stream, peer);
                }
                Err(e) if transient(&e) => {
                    log::warn!("{}: accept failed ({e}); retrying in {pause:?}", self.name);
                    // Out of descriptors: wait for connections to close. The
                    // stop signal ends the wait early.
                    if stop.recv_timeout(pause).is_err_and(|e| e.is_disconnected()) {
                        return Ok(());
                    }
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn spawn_connection(self: &Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        if self.active.fetch_add(1, Ordering::SeqCst) >= self.max_connections {
            self.active.fetch_sub(1, Ordering::SeqCst);
            log::warn!(
                "{}: connection from {peer} refused: {} connections open",
                self.name,
                self.max_connections
            );
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            (self.refuse)(&stream);
            return;
        }
        let slot = Slot(self.clone());
        let name = self.name;
        let spawned = thread::Builder::new()
            .name(format!("mcpvisor-{name}-conn"))
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                let serve = slot.0.serve.clone();
                let _slot = slot;
                if catch_unwind(AssertUnwindSafe(|| serve(stream, peer))).is_err() {
                    log::error!("{name}: connection thread for {peer} panicked; connection closed");
                }
            });
        if let Err(e) = spawned {
            log::error!("{name}: cannot start a connection thread: {e}");
        }
    }

    /// The supervised worker running this acceptor on `socket`; after a
    /// failure the restarted worker binds `addr` again.
    pub(crate) fn worker(self: &Arc<Self>, socket: TcpListener, addr: SocketAddr) -> ChildSpec {
        *self.socket.lock().unwrap_or_else(|p| p.into_inner()) = Some(socket);
        let acceptor = self.clone();
        ChildSpec::worker(format!("{}-listener", self.name), move |ctx| {
            let socket = {
                let mut s = acceptor.socket.lock().unwrap_or_else(|p| p.into_inner());
                match s.as_ref() {
                    Some(l) => l.try_clone()?,
                    None => {
                        log::warn!("{}: rebinding {addr}", acceptor.name);
                        let l = TcpListener::bind(addr)?;
                        *s = Some(l.try_clone()?);
                        l
                    }
                }
            };
            ctx.ready();
            acceptor
                .accept_loop(&socket, ctx.stop_signal())
                .inspect_err(|e| {
                    log::error!("{}: listener failed: {e}", acceptor.name);
                    acceptor
                        .socket
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .take();
                })?;
            Ok(())
        })
        .await_ready(Duration::from_secs(10))
        // It returns normally only when told to stop.
        .restart(Restart::Transient)
        .shutdown(Shutdown::Timeout(Duration::from_secs(1)))
    }

    /// Stops accepting: sets the flag and wakes accept() with a connection.
    pub(crate) fn stop(&self, addr: SocketAddr) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
    }

    /// Makes the listening socket fail (accept() then returns EINVAL), to
    /// prove that the supervisor restarts the listener and it rebinds.
    pub(crate) fn break_socket(&self) {
        use std::os::fd::AsRawFd;
        if let Some(l) = self
            .socket
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            // SAFETY: shutdown(2) on a socket we own; it only changes its state.
            unsafe {
                libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR);
            }
        }
    }

    /// Open connections.
    pub(crate) fn connections(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}
