//! HTTP connections: the request loop of one keep-alive connection. The
//! accept loop is `transport::accept`, shared with TCP.

use super::wire::{
    write_head_response, write_response, Conn, ReadError, Request, Response, WireLimits,
};
use crate::transport::accept::ConnectionFlag;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long what was written to a client may stay unacknowledged before
/// its connection is given up (`TCP_USER_TIMEOUT`, Linux). A client that
/// vanished without a word (a network change, a laptop put to sleep) is
/// then noticed at the next SSE keep-alive plus this, not after the
/// kernel's retransmissions (some 15 minutes): its standalone stream, which
/// one connection holds at a time, is free again for the client's new one.
pub(crate) const DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(30);

/// Sets [`DEAD_PEER_TIMEOUT`] on `stream` (where the system has it).
pub(crate) fn give_up_on_silent_peers(stream: &TcpStream) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use std::os::fd::AsRawFd;
        let ms = libc::c_uint::try_from(DEAD_PEER_TIMEOUT.as_millis()).unwrap_or(libc::c_uint::MAX);
        // SAFETY: setsockopt(2) on a socket we own, with a value of the
        // size it names.
        unsafe {
            libc::setsockopt(
                stream.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                std::ptr::addr_of!(ms).cast(),
                std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
            );
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = stream;
}

/// At most this much of what a connection refused at the cap sent is read
/// before it is closed: a request's head, and some of its body.
pub(crate) const REFUSED_READ_BYTES: usize = 64 * 1024;

/// Answers a connection refused because of the connection cap, on the
/// accept loop: so it never waits to read. What the client sent already
/// is read, up to [`REFUSED_READ_BYTES`], for the close to end the connection
/// after the 503 rather than reset it (a reset can discard the 503 before
/// the client reads it). A request that arrives only after the close is
/// still answered by a reset: the accept loop does not wait for it.
pub(crate) fn refuse(stream: &TcpStream) {
    use std::io::Read;
    let _ = write_response(
        stream,
        &Response::status(503).header("Retry-After", "1"),
        false,
    );
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let mut sink = [0u8; 4096];
    let mut left = REFUSED_READ_BYTES;
    let mut s = stream;
    while left > 0 {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

/// Handles one request on a connection. Returns whether the connection
/// may serve another request.
pub trait Handler: Send + Sync + 'static {
    /// Looks at a request before its body is read: a refusal here is
    /// written at once and the body is never buffered. `handle` is only
    /// ever called for requests that passed it.
    fn check_head(&self, req: &Request) -> Result<(), Response>;
    /// Serves `req`, writing the response to `stream`.
    fn handle(&self, req: Request, stream: &TcpStream, peer: SocketAddr) -> io::Result<bool>;
}

/// The HTTP side of a connection: reads requests until the peer leaves,
/// a limit is hit, or the server stops. A draining stop (the listener
/// stops accepting) leaves open connections be: what their clients send
/// is still taken (an answer to the server's elicitation, say).
pub(crate) struct HttpConnections {
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) limits: WireLimits,
}

impl HttpConnections {
    /// Serves `stream` until it ends. `flag` ends when the listener is
    /// stopped (not when it only stops accepting, to drain): a connection
    /// idle between requests is then closed at once; a request that comes
    /// after it is not served, and the connection is closed unanswered, as
    /// a server closes an idle connection just as a request comes (a
    /// client sends it again, on a new connection).
    pub(crate) fn serve_connection(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        flag: &ConnectionFlag,
    ) {
        let _ = stream.set_nodelay(true);
        let _ = stream.set_write_timeout(Some(self.limits.idle_timeout));
        give_up_on_silent_peers(&stream);
        let write_side = match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        };
        let mut conn = Conn::new(stream, self.limits.clone());
        // Idle until a head came: a stop then closes the connection.
        while flag.idle() {
            let read = conn.read_head().and_then(|mut req| {
                // A stopped listener serves no request that arrives on a
                // kept-alive connection.
                if !flag.busy() {
                    return Err(ReadError::Closed);
                }
                if let Err(resp) = self.handler.check_head(&req) {
                    return Ok(Err(Box::new((req, resp))));
                }
                conn.read_body(&mut req).map(|()| Ok(req))
            });
            match read {
                Ok(Ok(req)) => match self.handler.handle(req, &write_side, peer) {
                    Ok(true) => continue,
                    _ => break,
                },
                Ok(Err(refusal)) => {
                    let (req, refused) = *refusal;
                    // Refused on its head. Without a body the connection
                    // goes on; with one, the body is unread, so it closes.
                    let keep_alive = req.keep_alive && !req.has_body();
                    let written = if req.method == "HEAD" {
                        write_head_response(&write_side, &refused, keep_alive)
                    } else {
                        write_response(&write_side, &refused, keep_alive)
                    };
                    if written.is_ok() && keep_alive {
                        continue;
                    }
                    if req.has_body() {
                        linger(&write_side);
                    }
                    break;
                }
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
                    let body = super::checks::reject(status, crate::jsonrpc::INVALID_REQUEST, why);
                    let _ = write_response(&write_side, &body, false);
                    linger(&write_side);
                    break;
                }
            }
        }
        let _ = write_side.shutdown(std::net::Shutdown::Both);
    }
}

/// Longest a refused connection is drained before it is closed.
pub(crate) const LINGER_TIME: Duration = Duration::from_secs(2);
/// Most bytes drained from a refused connection.
pub(crate) const LINGER_BYTES: usize = 4 * 1024 * 1024;

/// Lingering close after refusing a request whose body is still arriving:
/// stop writing, then read and discard for a moment, so the peer's kernel
/// does not answer our close with a reset that destroys the error response
/// before the client reads it. Bounded in total time ([`LINGER_TIME`]) and
/// bytes ([`LINGER_BYTES`]): a trickling peer cannot hold the connection.
fn linger(stream: &TcpStream) {
    use std::io::Read;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + LINGER_TIME;
    let mut sink = [0u8; 16 * 1024];
    let mut left = LINGER_BYTES;
    let mut s = stream;
    while left > 0 {
        let wait = until.saturating_duration_since(Instant::now());
        if wait.is_zero() || stream.set_read_timeout(Some(wait)).is_err() {
            break;
        }
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => left = left.saturating_sub(n),
        }
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_connection_refused_at_the_cap_ends_after_its_503_without_a_reset() {
        use std::io::{Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let (ours, _) = l.accept().unwrap();
        // The request has arrived before the refusal.
        ours.peek(&mut [0]).unwrap();
        refuse(&ours);
        drop(ours);
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        // A close with the request unread would reset the connection: the
        // read would fail (and, on a real network, could lose the 503).
        client.read_to_end(&mut got).expect("the 503, then the end");
        assert!(
            got.starts_with(b"HTTP/1.1 503"),
            "{}",
            String::from_utf8_lossy(&got)
        );
    }

    #[test]
    fn a_served_connection_gives_up_on_a_silent_peer() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let _peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        give_up_on_silent_peers(&ours);
        let mut ms: libc::c_uint = 0;
        let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
        // SAFETY: getsockopt(2) into a value of the size given.
        let rc = unsafe {
            libc::getsockopt(
                ours.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_USER_TIMEOUT,
                std::ptr::addr_of_mut!(ms).cast(),
                &mut len,
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(u128::from(ms), DEAD_PEER_TIMEOUT.as_millis());
    }
}
