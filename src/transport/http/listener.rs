//! HTTP connections: the request loop of one keep-alive connection. The
//! accept loop is `transport::accept`, shared with TCP.

use super::wire::{write_response, Conn, ReadError, Request, Response, WireLimits};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Answers a connection refused because of the connection cap.
pub(crate) fn refuse(stream: &TcpStream) {
    let _ = write_response(
        stream,
        &Response::status(503).header("Retry-After", "1"),
        false,
    );
}

/// Handles one request on a connection. Returns whether the connection
/// may serve another request.
pub trait Handler: Send + Sync + 'static {
    /// Serves `req`, writing the response to `stream`.
    fn handle(&self, req: Request, stream: &TcpStream, peer: SocketAddr) -> io::Result<bool>;
}

/// The HTTP side of a connection: reads requests until the peer leaves,
/// a limit is hit, or the server stops.
pub(crate) struct HttpConnections {
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) limits: WireLimits,
    pub(crate) stopping: Arc<AtomicBool>,
}

impl HttpConnections {
    pub(crate) fn serve_connection(&self, stream: TcpStream, peer: SocketAddr) {
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
