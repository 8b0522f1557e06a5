//! The accept loop shared by the TCP-based transports.
//!
//! It runs as a supervised worker: errors it cannot ride out end it, and the
//! supervisor restarts it, rebinding the address. Transient accept errors
//! (out of descriptors or memory, aborted handshakes) are logged and retried
//! after a short, growing pause, so the listener never dies of them.
//! Connections get one named thread each, up to `max_connections`; beyond
//! that a new connection is refused at once, unless (HTTP) one open is idle
//! between requests: that one is closed to make room (its slot frees as its
//! thread ends).

use crate::sync::lock;
use crate::throttle::{Throttle, DEFAULT_LOG_INTERVAL};
use crate::wait::Waker;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use supervisor::{ChildSpec, Restart, Shutdown};

/// Stack size of a connection thread: they parse and copy, nothing deep.
pub const CONNECTION_STACK: usize = 256 * 1024;

/// Serves one accepted connection until it ends; the flag is set when the
/// listener is stopped ([`Acceptor::end_connections_on_stop`],
/// [`Acceptor::flag_connections_on_stop`]): from then on, nothing more that
/// comes on it is taken.
pub(crate) type ServeFn = dyn Fn(TcpStream, SocketAddr, Arc<ConnectionFlag>) + Send + Sync;

/// Open connections by number: a copy of each one's stream, and its flag.
type OpenConnections = crate::sync::FastMap<u64, (TcpStream, Arc<ConnectionFlag>)>;

/// What a stop tells one open connection: that it ended, and whether the
/// connection waits idle for its next request (then the stop closes it at
/// once rather than leave it to its idle timeout). One atomic state, so a
/// connection is either idle when the stop comes (closed by the stop) or
/// not (it sees the stop when it next goes idle or takes a request).
#[derive(Debug)]
pub(crate) struct ConnectionFlag(AtomicU8);

impl Default for ConnectionFlag {
    /// Idle: a new connection waits for its first request.
    fn default() -> Self {
        ConnectionFlag(AtomicU8::new(IDLE))
    }
}

/// [`ConnectionFlag`]'s states.
const BUSY: u8 = 0;
const IDLE: u8 = 1;
const ENDED: u8 = 2;

impl ConnectionFlag {
    /// Whether the listener was stopped.
    #[cfg_attr(not(feature = "tcp"), allow(dead_code))]
    pub(crate) fn ended(&self) -> bool {
        self.0.load(Ordering::SeqCst) == ENDED
    }

    /// The connection waits for its next request: false if the listener
    /// was stopped (nothing more is to be taken).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn idle(&self) -> bool {
        self.enter(BUSY, IDLE)
    }

    /// A request came: false if the listener was stopped (the request is
    /// not to be served).
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn busy(&self) -> bool {
        self.enter(IDLE, BUSY)
    }

    /// Moves the flag from `from` to `to`: whether it is at `to` now (it
    /// moved, or was there already), not if the listener was stopped.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    fn enter(&self, from: u8, to: u8) -> bool {
        match self
            .0
            .compare_exchange(from, to, Ordering::SeqCst, Ordering::SeqCst)
        {
            Ok(_) => true,
            Err(now) => now == to,
        }
    }

    /// The listener stopped: whether the connection was idle.
    pub(crate) fn end(&self) -> bool {
        self.0.swap(ENDED, Ordering::SeqCst) == IDLE
    }

    /// Ends the connection if it is idle (it takes no request after),
    /// else leaves it be: whether it was.
    fn end_if_idle(&self) -> bool {
        self.0
            .compare_exchange(IDLE, ENDED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }
}

/// Accepts connections and hands each to `serve` on its own thread.
pub(crate) struct Acceptor {
    name: &'static str,
    serve: Arc<ServeFn>,
    /// Called on a connection refused because of the cap (e.g. write a 503).
    refuse: fn(&TcpStream),
    max_connections: usize,
    active: AtomicUsize,
    /// The listening socket; empty after a fatal error, so the restarted
    /// worker binds the address again.
    socket: Mutex<Option<TcpListener>>,
    /// The socket was passed in (socket activation): it is never dropped
    /// to be bound again (the service manager holds the address).
    keep_socket: AtomicBool,
    /// Set by [`Acceptor::stop_accepting`]: the loop ends and is not
    /// restarted; pending connections stay in the socket's backlog.
    closed: AtomicBool,
    /// Test hook: the accept loop panics at its next turn.
    panic_next: AtomicBool,
    /// Wakes the running accept loop (stop, [`Acceptor::stop_accepting`],
    /// the test hook); made by the first run, kept for the restarts.
    waker: Mutex<Option<Arc<Waker>>>,
    /// The open connections, by number, when a stop ends them
    /// ([`Acceptor::end_connections_on_stop`]), with each one's flag.
    open: Option<Mutex<OpenConnections>>,
    /// Told when the last open connection ends.
    drained: std::sync::Condvar,
    /// Whether a stop also shuts the open connections' input (else it
    /// sets their flags, and closes only those idle between requests).
    shut_on_stop: bool,
    next_connection: AtomicU64,
    /// Connections refused at the cap, told at most every 10 s.
    refused: Throttle,
    /// Accepts failed (out of descriptors, say), told at most every 10 s:
    /// under a backlog the loop can fail and succeed by turns.
    accept_failures: Throttle,
    /// "Accepting again" after failures none of whose lines was said,
    /// told at most every 10 s (else failing and succeeding by turns
    /// would say it every turn).
    recoveries: Throttle,
    /// Connection threads that could not start (out of threads: one per
    /// connection accepted), told at most every 10 s.
    spawn_failures: Throttle,
}

/// Decrements the connection count however a connection thread ends,
/// and forgets its stream.
struct Slot(Arc<Acceptor>, u64);
impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(open) = &self.0.open {
            let mut open = lock(open);
            open.remove(&self.1);
            if open.is_empty() {
                self.0.drained.notify_all();
            }
        }
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

/// How long a stop that ends the open connections' input waits for them
/// to finish (their grace for work in flight, then their answers
/// written) before the listener's tree goes on stopping: 10 s.
pub(crate) const CONNECTIONS_DRAIN: Duration = Duration::from_secs(10);

impl Acceptor {
    /// An acceptor named `name` (thread names, logs) serving each
    /// connection with `serve`, at most `max_connections` at once.
    pub(crate) fn new(
        name: &'static str,
        serve: Arc<ServeFn>,
        refuse: fn(&TcpStream),
        max_connections: usize,
    ) -> Acceptor {
        Acceptor {
            name,
            serve,
            refuse,
            max_connections,
            active: AtomicUsize::new(0),
            socket: Mutex::new(None),
            keep_socket: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            panic_next: AtomicBool::new(false),
            waker: Mutex::new(None),
            open: None,
            drained: std::sync::Condvar::new(),
            shut_on_stop: false,
            next_connection: AtomicU64::new(0),
            refused: Throttle::default(),
            accept_failures: Throttle::default(),
            recoveries: Throttle::default(),
            spawn_failures: Throttle::default(),
        }
    }

    /// A stop (not [`Acceptor::stop_accepting`], nor a restart after a
    /// failure) ends the open connections' input: each session then ends
    /// as at its peer's end of input, its work in flight given its grace
    /// and its answers written. For transports whose connections are their
    /// sessions (TCP): a listener shut down or removed by a reload serves
    /// no one any more.
    #[cfg_attr(not(feature = "tcp"), allow(dead_code))]
    pub(crate) fn end_connections_on_stop(mut self) -> Self {
        self.open = Some(Mutex::default());
        self.shut_on_stop = true;
        self
    }

    /// A stop (as for [`end_connections_on_stop`](Self::end_connections_on_stop))
    /// sets each open connection's flag, and shuts the sockets of those
    /// idle between requests ([`ConnectionFlag::idle`]); it leaves the
    /// others be: for HTTP, whose connections serve requests under way to
    /// their end (a socket shut for reading would look like a client that
    /// left) and then close.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn flag_connections_on_stop(mut self) -> Self {
        self.open = Some(Mutex::default());
        self
    }

    /// Ends every open connection: its input (see
    /// [`end_connections_on_stop`](Self::end_connections_on_stop)), or its
    /// flag (see [`flag_connections_on_stop`](Self::flag_connections_on_stop)).
    fn end_connections(&self) {
        if let Some(open) = &self.open {
            for (stream, flag) in lock(open).values() {
                // The flag first: a read under way when the shutdown comes
                // returns what arrived, which is then not taken (a socket
                // shut for reading still takes in what arrives later).
                let idle = flag.end();
                if self.shut_on_stop {
                    let _ = stream.shutdown(std::net::Shutdown::Read);
                } else if idle {
                    // Waiting for a request it will not serve: closed now,
                    // not at its idle timeout.
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                }
            }
        }
    }

    /// Ends the accept loop's current wait, so it looks at its flags.
    fn wake(&self) {
        if let Some(w) = lock(&self.waker).as_ref() {
            w.wake();
        }
    }

    /// Accepts until `stop` or a fatal error. Between connections it waits
    /// on `listener` and `waker` with no timeout: the stop wakes it.
    fn accept_loop(
        self: &Arc<Self>,
        listener: &TcpListener,
        stop: &crossbeam_channel::Receiver<()>,
        waker: &Waker,
    ) -> io::Result<()> {
        let mut pause = Duration::from_millis(5);
        // Whether an accept failed since the last one that succeeded, and
        // whether a line about those failures was said.
        let (mut failing, mut warned) = (false, false);
        loop {
            if !matches!(stop.try_recv(), Err(crossbeam_channel::TryRecvError::Empty))
                || self.closed.load(Ordering::SeqCst)
            {
                return Ok(());
            }
            if self.panic_next.swap(false, Ordering::SeqCst) {
                panic!("{}: a fault injected by a test", self.name);
            }
            if !waker.wait(listener)? {
                continue;
            }
            match listener.accept() {
                Ok((stream, peer)) => {
                    pause = Duration::from_millis(5);
                    let told = std::mem::take(&mut warned);
                    if std::mem::take(&mut failing) && (told || self.recoveries.event().is_some()) {
                        let untold = self.accept_failures.take_untold();
                        log::info!(
                            "{}: accepting again ({untold} failed accepts since the last line about them)",
                            self.name
                        );
                    }
                    // Some systems hand on the listener's non-blocking mode.
                    let _ = stream.set_nonblocking(false);
                    self.spawn_connection(stream, peer);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if super::accept_errors::transient(&e) => {
                    if let Some(failed) = self.accept_failures.event() {
                        log::warn!(
                            "{}: accept failed ({e}; {failed} failed since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?}); retrying with backoff",
                            self.name
                        );
                        warned = true;
                    } else {
                        log::debug!("{}: accept failed ({e}); retrying in {pause:?}", self.name);
                    }
                    failing = true;
                    // Out of descriptors: wait for connections to close. A
                    // stop, or `stop_accepting`, wakes the wait early (both
                    // wake the waker); the loop's top then sees it.
                    waker.sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn spawn_connection(self: &Arc<Self>, stream: TcpStream, peer: SocketAddr) {
        if self.active.fetch_add(1, Ordering::SeqCst) >= self.max_connections
            && !self.close_an_idle_connection()
        {
            self.active.fetch_sub(1, Ordering::SeqCst);
            if let Some(refused) = self.refused.event() {
                log::warn!(
                    "{}: connection from {peer} refused: {} connections open ({refused} refused since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?})",
                    self.name,
                    self.max_connections,
                );
            }
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            (self.refuse)(&stream);
            return;
        }
        let number = self.next_connection.fetch_add(1, Ordering::Relaxed);
        let ended = Arc::new(ConnectionFlag::default());
        if let (Some(open), Ok(kept)) = (&self.open, stream.try_clone()) {
            lock(open).insert(number, (kept, ended.clone()));
        }
        let slot = Slot(self.clone(), number);
        let name = self.name;
        let spawned = thread::Builder::new()
            .name(format!("mcpvisor-{name}-conn"))
            .stack_size(CONNECTION_STACK)
            .spawn(move || {
                let serve = slot.0.serve.clone();
                let _slot = slot;
                if catch_unwind(AssertUnwindSafe(|| serve(stream, peer, ended))).is_err() {
                    log::error!("{name}: connection thread for {peer} panicked; connection closed");
                }
            });
        if let Err(e) = spawned {
            self.spawn_failed(&e);
        }
    }

    /// At the cap: closes the oldest connection idle between requests
    /// (or before its first: one that sends nothing), to make room for a
    /// new one, as a server short of connections closes idle keep-alive
    /// ones; whether there was one. Only where connections are not
    /// sessions (HTTP, whose connections are flagged): a TCP connection
    /// idle for a while is still its client's session.
    fn close_an_idle_connection(&self) -> bool {
        let Some(open) = self.open.as_ref().filter(|_| !self.shut_on_stop) else {
            return false;
        };
        let open = lock(open);
        let mut numbers: Vec<u64> = open.keys().copied().collect();
        numbers.sort_unstable();
        for number in numbers {
            if let Some((stream, flag)) = open.get(&number) {
                if flag.end_if_idle() {
                    let _ = stream.shutdown(std::net::Shutdown::Both);
                    log::debug!(
                        "{}: at the cap, an idle connection was closed for a new one",
                        self.name
                    );
                    return true;
                }
            }
        }
        false
    }

    /// A connection thread could not start (its connection is closed):
    /// logged through a throttle; true when a line was said.
    fn spawn_failed(&self, e: &io::Error) -> bool {
        let Some(failed) = self.spawn_failures.event() else {
            return false;
        };
        log::error!(
            "{}: cannot start a connection thread: {e}; its connection is closed ({failed} since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?})",
            self.name
        );
        true
    }

    /// The supervised worker running this acceptor on `socket`; after a
    /// failure the restarted worker binds `addr` again.
    pub(crate) fn worker(self: &Arc<Self>, socket: TcpListener, addr: SocketAddr) -> ChildSpec {
        *lock(&self.socket) = Some(socket);
        let acceptor = self.clone();
        ChildSpec::worker(format!("{}-listener", self.name), move |ctx| {
            let socket = {
                let mut s = lock(&acceptor.socket);
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
            // Accept only after poll says so, never blocking: a connection
            // that is gone by then (or taken by another process sharing an
            // activated socket) must not keep this worker from its stop signal.
            socket.set_nonblocking(true)?;
            let waker = Waker::kept(&acceptor.waker)?;
            let wake = waker.clone();
            ctx.on_stop(move || wake.wake());
            ctx.ready();
            acceptor
                .accept_loop(&socket, ctx.stop_signal(), &waker)
                .inspect_err(|e| {
                    log::error!("{}: listener failed: {e}", acceptor.name);
                    if !acceptor.keep_socket.load(Ordering::SeqCst) {
                        lock(&acceptor.socket).take();
                    }
                })?;
            // After `stop_accepting` the open connections go on; the stop
            // that comes later still ends them (the worker is not run
            // again: it waits for that stop here).
            if matches!(
                ctx.stop_signal().try_recv(),
                Err(crossbeam_channel::TryRecvError::Empty)
            ) {
                let _ = ctx.stop_signal().recv();
            }
            if !acceptor.keep_socket.load(Ordering::SeqCst) {
                // Closed now, not once the last connection thread (which
                // holds the acceptor) ends: a stopped listener refuses new
                // connections (after `stop_accepting` they waited in the
                // backlog until this stop; a passed-in socket stays its
                // owner's).
                lock(&acceptor.socket).take();
            }
            // The open connections are ended by the closer, which stops
            // next.
            Ok(())
        })
        .await_ready(Duration::from_secs(10))
        // It returns normally only when told to stop.
        .restart(Restart::Transient)
        .shutdown(Shutdown::Timeout(Duration::from_secs(1)))
    }

    /// A worker that waits for its tree's stop and then ends the open
    /// connections (the one place they are ended), so that a stop that
    /// finds the accept worker not running (it failed and is not started
    /// again yet, or its restarts ran out) ends them all the same. Just
    /// before the accept worker in its tree: it stops right after it.
    /// Where the stop ends their input (see
    /// [`end_connections_on_stop`](Self::end_connections_on_stop)), it
    /// then waits for them to finish, [`CONNECTIONS_DRAIN`] at most: a
    /// program that exits once its server is shut down loses no answer.
    pub(crate) fn closer(self: &Arc<Self>) -> ChildSpec {
        let acceptor = self.clone();
        ChildSpec::worker(format!("{}-connections", self.name), move |ctx| {
            let _ = ctx.stop_signal().recv();
            acceptor.end_connections();
            if acceptor.shut_on_stop {
                acceptor.await_connections(CONNECTIONS_DRAIN);
            }
            Ok(())
        })
        .restart(Restart::Transient)
        .shutdown(Shutdown::Timeout(
            CONNECTIONS_DRAIN + Duration::from_secs(1),
        ))
    }

    /// Waits until no connection is open, `limit` at most.
    fn await_connections(&self, limit: Duration) {
        let Some(open) = &self.open else {
            return;
        };
        let deadline = Instant::now() + limit;
        let mut open = lock(open);
        while !open.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                log::warn!(
                    "{}: stopping: {} connection(s) still finishing after {limit:?}; not waited for",
                    self.name,
                    open.len()
                );
                return;
            }
            open = match self.drained.wait_timeout(open, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Keeps a passed-in socket across restarts instead of binding again.
    pub(crate) fn keep_socket(&self) {
        self.keep_socket.store(true, Ordering::SeqCst);
    }

    /// Stops accepting for good while the connections already open go
    /// on; new ones wait in the backlog.
    pub(crate) fn stop_accepting(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Makes the accept loop panic at once, to prove that the supervisor
    /// restarts it on the same socket while connections go on.
    #[cfg(feature = "http")]
    pub(crate) fn panic_for_tests(&self) {
        self.panic_next.store(true, Ordering::SeqCst);
        self.wake();
    }

    /// Makes the listening socket fail (accept() then returns EINVAL), to
    /// prove that the supervisor restarts the listener and it rebinds.
    #[cfg(feature = "http")]
    pub(crate) fn break_socket(&self) {
        use std::os::fd::AsRawFd;
        if let Some(l) = lock(&self.socket).as_ref() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_flag_tells_a_stop_whether_it_came_while_idle() {
        let flag = ConnectionFlag::default();
        assert!(!flag.ended() && flag.idle() && flag.idle(), "idle, again");
        assert!(flag.busy() && flag.busy(), "busy, again");
        assert!(!flag.end(), "stopped while busy");
        assert!(flag.ended() && !flag.idle() && !flag.busy());
        let flag = ConnectionFlag::default();
        assert!(flag.idle());
        assert!(flag.end(), "stopped while idle");
        assert!(!flag.busy(), "a request after it is not served");
    }

    #[test]
    fn a_stop_ends_the_connections_without_the_accept_worker_running() {
        let (idle_tx, idle) = crossbeam_channel::unbounded();
        let (closed_tx, closed) = crossbeam_channel::unbounded();
        let serve: Arc<ServeFn> = Arc::new(move |mut stream, _, flag: Arc<ConnectionFlag>| {
            use std::io::Read;
            assert!(flag.idle());
            idle_tx.send(()).unwrap();
            let _ = stream.read(&mut [0; 16]);
            closed_tx.send(flag.ended()).unwrap();
        });
        let acceptor = Arc::new(Acceptor::new("test", serve, |_| {}, 8).flag_connections_on_stop());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        acceptor.spawn_connection(stream, peer);
        idle.recv_timeout(Duration::from_secs(10)).unwrap();
        // Only the closer runs (the accept worker failed, say): the tree's
        // stop closes the idle connection all the same.
        let tree = supervisor::Supervisor::start(
            supervisor::SupervisorSpec::new("test", supervisor::Strategy::OneForOne)
                .child(acceptor.closer()),
        )
        .unwrap();
        tree.shutdown().unwrap();
        assert_eq!(closed.recv_timeout(Duration::from_secs(10)), Ok(true));
    }

    /// A stop that ends the connections' input returns once they have
    /// finished (their answers written), not as soon as it told them.
    #[test]
    fn a_stop_that_ends_the_connections_input_waits_for_them_to_finish() {
        let finished = Arc::new(AtomicBool::new(false));
        let done = finished.clone();
        let serve: Arc<ServeFn> = Arc::new(move |mut stream, _, _| {
            use std::io::Read;
            while matches!(stream.read(&mut [0; 16]), Ok(1..)) {}
            // The answers still owed take a while to write.
            std::thread::sleep(Duration::from_millis(300));
            done.store(true, Ordering::SeqCst);
        });
        let acceptor = Arc::new(Acceptor::new("test", serve, |_| {}, 8).end_connections_on_stop());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        acceptor.spawn_connection(stream, peer);
        let tree = supervisor::Supervisor::start(
            supervisor::SupervisorSpec::new("test", supervisor::Strategy::OneForOne)
                .child(acceptor.closer()),
        )
        .unwrap();
        tree.shutdown().unwrap();
        assert!(finished.load(Ordering::SeqCst), "the stop did not wait");
    }

    #[test]
    fn connection_threads_that_cannot_start_are_told_once_a_period() {
        let serve: Arc<ServeFn> =
            Arc::new(|_: TcpStream, _: SocketAddr, _: Arc<ConnectionFlag>| {});
        let acceptor = Acceptor::new("test", serve, |_| {}, 1);
        let e = io::Error::from(io::ErrorKind::OutOfMemory);
        assert!(acceptor.spawn_failed(&e), "the first is told");
        for _ in 0..100 {
            assert!(!acceptor.spawn_failed(&e), "counted, not told");
        }
    }
}
