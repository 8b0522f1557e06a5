//! Keep-alive: the connections whose last response was read whole, kept
//! for the next requests.

use super::response::Body;
use super::target::Target;
use crate::sync::lock;
use crate::transport::http::socket::Socket;
use std::io::BufReader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most idle connections kept open for the next requests; one more
/// finished with is closed.
pub const MAX_IDLE_CONNECTIONS: usize = 32;

/// Longest an idle connection is reused after its last answer: 4 s, under
/// the 5 s after which common servers (Node.js, uvicorn) close idle
/// keep-alive connections, so that a request seldom meets one the server
/// is closing. An older one is closed when the next request or answer
/// finds it, or at close.
pub const IDLE_CONNECTION_MAX: Duration = Duration::from_secs(4);

/// The idle connections, with when each fell idle; the last one in is
/// used first.
#[derive(Default)]
pub(super) struct Pool(Mutex<Vec<(Instant, Socket)>>);

impl Pool {
    /// The connection that fell idle last, if it did within
    /// [`IDLE_CONNECTION_MAX`] of `now` and the server has not closed it
    /// meanwhile (the others are closed).
    fn take(&self, now: Instant) -> Option<Socket> {
        loop {
            let (since, mut socket) = lock(&self.0).pop()?;
            if now.duration_since(since) < IDLE_CONNECTION_MAX && socket.quiet() {
                return Some(socket);
            }
        }
    }

    /// Keeps `socket`, idle since `now`, unless `closed` is set or
    /// [`MAX_IDLE_CONNECTIONS`] are kept (then it is closed); those idle
    /// too long are closed first.
    fn keep(&self, now: Instant, socket: Socket, closed: &AtomicBool) {
        let mut idle = lock(&self.0);
        // Checked under the lock: closing empties the pool after setting
        // `closed`, so nothing kept now outlives it.
        if closed.load(Ordering::SeqCst) {
            return;
        }
        idle.retain(|(since, _)| now.duration_since(*since) < IDLE_CONNECTION_MAX);
        if idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push((now, socket));
        }
    }

    /// Closes every idle connection.
    pub(super) fn clear(&self) {
        lock(&self.0).clear();
    }
}

impl Target {
    /// An idle connection to send the next request on (see [`Pool`]).
    pub(super) fn idle_socket(&self) -> Option<Socket> {
        self.idle.take(Instant::now())
    }

    /// Keeps `body`'s connection for the next request when the response
    /// was read whole and the server keeps the connection open; else it is
    /// closed. Done before the response is delivered, so that the request
    /// its reader sends next finds it.
    pub(super) fn recycle(&self, mut body: Body<BufReader<Socket>>) {
        // Unregistered first: nothing closes or cancels it once it is idle.
        drop(body.socket.take());
        let whole = body.done || (!body.chunked && !body.until_close && body.left == 0);
        if !(body.reusable && whole && body.r.buffer().is_empty()) {
            return;
        }
        self.idle
            .keep(Instant::now(), body.r.into_inner(), &self.closed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    /// A connected socket, and the server's end of it.
    fn pair(l: &TcpListener) -> (Socket, TcpStream) {
        let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (server, _) = l.accept().unwrap();
        (Socket::Plain(client), server)
    }

    /// Whether the client closed the connection whose server end is `s`.
    fn closed_by_client(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        matches!(s.read(&mut [0u8; 1]), Ok(0))
    }

    #[test]
    fn at_most_the_cap_is_kept_and_the_last_in_is_taken_first() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pool, open, now) = (Pool::default(), AtomicBool::new(false), Instant::now());
        let mut servers = Vec::new();
        for _ in 0..=MAX_IDLE_CONNECTIONS {
            let (socket, server) = pair(&l);
            servers.push(server);
            pool.keep(now, socket, &open);
        }
        assert_eq!(lock(&pool.0).len(), MAX_IDLE_CONNECTIONS);
        let mut over = servers.pop().unwrap();
        assert!(
            closed_by_client(&mut over),
            "the one over the cap is closed"
        );
        let last = servers.last().unwrap().peer_addr().unwrap();
        let taken = pool.take(now).unwrap();
        assert_eq!(taken.tcp().local_addr().unwrap(), last);
    }

    #[test]
    fn none_is_taken_after_its_idle_time_and_old_ones_are_closed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pool, open, t0) = (Pool::default(), AtomicBool::new(false), Instant::now());
        let (socket, mut server) = pair(&l);
        pool.keep(t0, socket, &open);
        let just_in_time = t0 + IDLE_CONNECTION_MAX - Duration::from_millis(1);
        let taken = pool.take(just_in_time).expect("still within its time");
        pool.keep(t0, taken, &open);
        assert!(pool.take(t0 + IDLE_CONNECTION_MAX).is_none(), "too old");
        assert!(closed_by_client(&mut server), "and closed");
        // One kept later closes those past their time.
        let (old, mut old_server) = pair(&l);
        pool.keep(t0, old, &open);
        let (new, _new_server) = pair(&l);
        pool.keep(t0 + IDLE_CONNECTION_MAX, new, &open);
        assert_eq!(lock(&pool.0).len(), 1);
        assert!(closed_by_client(&mut old_server));
    }

    #[test]
    fn nothing_is_kept_once_closed() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let (pool, now) = (Pool::default(), Instant::now());
        let (socket, mut server) = pair(&l);
        pool.keep(now, socket, &AtomicBool::new(true));
        assert!(pool.take(now).is_none());
        assert!(closed_by_client(&mut server));
    }
}
