//! Keep-alive: the connections whose last response was read whole, kept
//! for the next requests.

use super::response::Body;
use super::target::Target;
use crate::sync::lock;
use crate::transport::http::socket::Socket;
use std::io::BufReader;
use std::sync::atomic::Ordering;
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

impl Target {
    /// An idle connection to send the next request on: the one that fell
    /// idle last, if it did within [`IDLE_CONNECTION_MAX`] and the server
    /// has not closed it meanwhile (the others are closed).
    pub(super) fn idle_socket(&self) -> Option<Socket> {
        loop {
            let (since, mut socket) = lock(&self.idle).pop()?;
            if since.elapsed() < IDLE_CONNECTION_MAX && socket.quiet() {
                return Some(socket);
            }
        }
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
        let mut idle = lock(&self.idle);
        // close() drains the idle connections after setting `closed`.
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        idle.retain(|(since, _)| since.elapsed() < IDLE_CONNECTION_MAX);
        if idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push((Instant::now(), body.r.into_inner()));
        }
    }
}
