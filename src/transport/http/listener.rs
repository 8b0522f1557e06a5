//! The accept loop and the connection threads.
//!
//! The accept loop is a supervised worker: any error it cannot ride out
//! ends it and the supervisor restarts it, rebinding the address. Transient
//! accept errors (out of file descriptors, aborted handshakes) are logged and
//! retried after a short pause, so the listener never dies from them.
//! Connections get one thread each, up to `max_connections`; beyond that a
//! new connection is answered 503 and closed at once.

use super::wire::{write_response, Conn, ReadError, Request, Response, WireLimits};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Stack size of a connection thread: they parse and copy, nothing deep.
pub const CONNECTION_STACK: usize = 256 * 1024;

/// Handles one request on a connection. Returns whether the connection
/// may serve another request.
pub trait Handler: Send + Sync + 'static {
    /// Serves `req`, writing the response to `stream`.
    fn handle(&self, req: Request, stream: &TcpStream, peer: SocketAddr) -> io::Result<bool>;
}

/// Shared state of a listener.
pub struct Listener {
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) limits: WireLimits,
    pub(crate) max_connections: usize,
    pub(crate) active: AtomicUsize,
    pub(crate) stopping: AtomicBool,
}

/// Decrements the connection count however a connection thread ends.
struct Slot(Arc<Listener>);
impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Accept errors worth riding out rather than restarting the listener:
/// out of descriptors or memory, or a handshake the peer aborted.
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

impl Listener {
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
                    log::warn!("http: accept failed ({e}); retrying in {pause:?}");
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
                "http: connection from {peer} refused: {} connections open",
                self.max_connections
            );
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            let resp = Response::status(503).header("Retry-After", "1");
            let _ = write_response(&stream, &resp, false);
            return;
        }
        let slot = Slot(self.clone());
        let spawned = thread::Builder::new()
            .name("mcpvisor-http-conn".into())
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                let listener = slot.0.clone();
                let _slot = slot;
                if catch_unwind(AssertUnwindSafe(|| listener.serve_connection(stream, peer)))
                    .is_err()
                {
                    log::error!("http: connection thread for {peer} panicked; connection closed");
                }
            });
        if let Err(e) = spawned {
            log::error!("http: cannot start a connection thread: {e}");
        }
    }

    fn serve_connection(&self, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(self.limits.idle_timeout));
        let write_side = match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        };
        let mut conn = Conn::new(stream, self.limits.clone());
        loop {
            match conn.read_request() {
                Ok(req) => match self.handler.handle(req, &write_side, peer) {
                    Ok(true) if !self.stopping.load(Ordering::SeqCst) => continue,
                    _ => break,
                },
                Err(ReadError::Closed) => break,
                Err(ReadError::Io(e)) => {
                    log::debug!("http: {peer}: {e}");
                    break;
                }
                Err(ReadError::Timeout) => {
                    let _ = write_response(&write_side, &Response::status(408), false);
                    break;
                }
                Err(ReadError::Reject(status, why)) => {
                    log::debug!("http: {peer}: {status} {why}");
                    let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": why}});
                    let _ = write_response(&write_side, &Response::json(status, &body), false);
                    linger(&write_side);
                    break;
                }
            }
        }
        let _ = write_side.shutdown(std::net::Shutdown::Both);
    }
}

/// Lingering close after refusing a request whose body is still arriving:
/// stop writing, then read and discard a bounded amount for a moment, so the
/// peer's kernel does not answer our close with a reset that destroys the
/// error response before the client reads it.
fn linger(stream: &TcpStream) {
    use std::io::Read;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut sink = [0u8; 16 * 1024];
    let mut left: usize = 8 * 1024 * 1024;
    let mut s = stream;
    while left > 0 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}
