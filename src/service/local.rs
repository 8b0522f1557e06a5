//! The daemon's own small listeners (the control socket, `/metrics`):
//! a supervised worker that serves each client on a thread of its own
//! within a deadline, at most [`MAX_CLIENTS`] at once, and waits for the
//! next with no timeout (its stop wakes it).

use crate::throttle::{Throttle, DEFAULT_LOG_INTERVAL};
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use supervisor::{ChildSpec, Restart};

/// A listening socket the worker accepts on.
pub(crate) trait Accept: AsRawFd + Send + Sync + 'static {
    /// A connected client.
    type Stream: Send + 'static;
    fn try_clone_listener(&self) -> io::Result<Self>
    where
        Self: Sized;
    fn set_nonblocking(&self, on: bool) -> io::Result<()>;
    fn accept_one(&self) -> io::Result<Self::Stream>;
}

impl Accept for std::net::TcpListener {
    type Stream = std::net::TcpStream;
    fn try_clone_listener(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        std::net::TcpListener::set_nonblocking(self, on)
    }
    fn accept_one(&self) -> io::Result<Self::Stream> {
        self.accept().map(|(s, _)| s)
    }
}

impl Accept for std::os::unix::net::UnixListener {
    type Stream = std::os::unix::net::UnixStream;
    fn try_clone_listener(&self) -> io::Result<Self> {
        self.try_clone()
    }
    fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        std::os::unix::net::UnixListener::set_nonblocking(self, on)
    }
    fn accept_one(&self) -> io::Result<Self::Stream> {
        self.accept().map(|(s, _)| s)
    }
}

/// Most clients one such listener serves at once; one more is closed at
/// once (a few idle connections cannot hold back a scrape).
pub(crate) const MAX_CLIENTS: usize = 8;

/// The pause after an accept error that passes (out of descriptors).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The worker `id` serving each client of `socket` with `serve` (given
/// the deadline it must keep); `on_stop` runs when it is told to stop.
pub(crate) fn worker<L: Accept>(
    id: &str,
    socket: L,
    deadline: Duration,
    serve: impl Fn(L::Stream, Instant) -> io::Result<()> + Send + Sync + 'static,
    on_stop: impl Fn() + Send + Sync + 'static,
) -> ChildSpec {
    let socket = Arc::new(socket);
    let name = id.to_owned();
    let serve = Arc::new(serve);
    let serving = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let kept = std::sync::Mutex::new(None);
    // Told at most every 10 s each, with a count: a peer can make both
    // happen many times a second.
    let (refused, failed) = (Throttle::default(), Throttle::default());
    ChildSpec::worker(id, move |ctx| {
        let socket = socket.try_clone_listener()?;
        socket.set_nonblocking(true)?;
        let waker = crate::wait::Waker::kept(&kept)?;
        let wake = waker.clone();
        ctx.on_stop(move || wake.wake());
        ctx.ready();
        while !ctx.should_stop() {
            if !waker.wait(&socket)? {
                continue;
            }
            match socket.accept_one() {
                Ok(stream) => {
                    let client = Client(serving.clone());
                    if client.0.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                        if let Some(n) = refused.event() {
                            log::warn!(
                                "{name}: {MAX_CLIENTS} clients served at once; one more closed ({n} since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?})"
                            );
                        }
                        continue;
                    }
                    let (serve, who, due) =
                        (serve.clone(), name.clone(), Instant::now() + deadline);
                    let spawned = std::thread::Builder::new()
                        .name("mcpvisor-local-client".into())
                        .spawn(move || {
                            let _client = client;
                            if let Err(e) = serve(stream, due) {
                                log::debug!("{who}: a client failed: {e}");
                            }
                        });
                    if let Err(e) = spawned {
                        log::warn!("{name}: no thread for a client: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Out of descriptors (a peer holding many connections
                // elsewhere) or a pending connection's network error: wait
                // and go on; failing would restart this worker at once,
                // again and again, until its supervisor gave up.
                Err(e) if crate::transport::accept_errors::transient(&e) => {
                    if let Some(n) = failed.event() {
                        log::warn!(
                            "{name}: accept failed ({e}; {n} failed since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?}); retrying every {ACCEPT_RETRY:?}"
                        );
                    }
                    waker.sleep(ACCEPT_RETRY);
                }
                Err(e) => return Err(e.into()),
            }
        }
        on_stop();
        Ok(())
    })
    .await_ready(Duration::from_secs(5))
    .restart(Restart::Transient)
}

/// Counts a client being served, until dropped.
struct Client(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Client {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What is left of `deadline`, or a timeout error once it passed.
pub(crate) fn left(deadline: Instant) -> io::Result<Duration> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(io::ErrorKind::TimedOut.into())
    } else {
        Ok(left)
    }
}
