//! Waiting: on a channel with a short spin first, and on a listening
//! socket until a connection comes or a [`Waker`] ends the wait.
//!
//! On small (virtual) machines waking a parked thread costs tens of
//! microseconds, most of a fast tool's round trip. A thread that has just
//! finished its work therefore polls its channel for a moment before it
//! parks — under steady traffic the next message is already there — but
//! only while messages have been arriving within that moment: an idle
//! server spins not at all. (A process-wide cap of half the cores' worth
//! of spinning threads was measured and dropped: with one spinner, every
//! call at one in flight paid a wake-up as well as the spin, halving
//! throughput and costing more CPU per call.)

use crossbeam_channel::{Receiver, TryRecvError};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `d` from now; a duration too long for the clock (`Duration::MAX`, as a
/// caller may pass for "no limit") is a century, not a panic.
pub(crate) fn deadline_in(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(100 * 365 * 24 * 3600)))
        .unwrap_or(now)
}

/// Wakes a thread blocked in [`Waker::wait`] on a socket: a socket pair
/// whose reading end is polled beside that socket. A listener waits with no
/// timeout, and its stop (a [`supervisor::ChildContext::on_stop`] hook)
/// wakes it: an idle server wakes up for nothing.
pub(crate) struct Waker {
    rx: UnixStream,
    tx: UnixStream,
}

impl Waker {
    /// A waker (two descriptors).
    pub(crate) fn new() -> io::Result<Waker> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok(Waker { rx, tx })
    }

    /// The waker kept in `slot`, made on first use: a restarted worker
    /// reuses it (and needs no descriptors when they ran out).
    pub(crate) fn kept(slot: &std::sync::Mutex<Option<Arc<Waker>>>) -> io::Result<Arc<Waker>> {
        let mut kept = crate::sync::lock(slot);
        if let Some(w) = kept.as_ref() {
            return Ok(w.clone());
        }
        let w = Arc::new(Waker::new()?);
        *kept = Some(w.clone());
        Ok(w)
    }

    /// Ends the current or next [`wait`](Self::wait). Never blocks: when
    /// the pair's buffer is full, a wake-up is pending anyway.
    pub(crate) fn wake(&self) {
        let _ = (&self.tx).write(&[1]);
    }

    /// Blocks until `socket` is readable (`true`: a connection waits, or an
    /// error that accept(2) will report) or [`wake`](Self::wake) was called
    /// (`false`; every pending wake-up is consumed). A signal ends the
    /// wait as `false`.
    pub(crate) fn wait(&self, socket: &impl AsRawFd) -> io::Result<bool> {
        let mut fds = [socket.as_raw_fd(), self.rx.as_raw_fd()].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: poll(2) on two pollfds we own, for the duration of the call.
        if unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) } < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::Interrupted => Ok(false),
                _ => Err(e),
            };
        }
        if fds[1].revents != 0 {
            let mut buf = [0u8; 64];
            while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
        }
        Ok(fds[0].revents != 0)
    }
}

impl Waker {
    /// Sleeps for `d` or until [`wake`](Self::wake) is called, whichever
    /// comes first (every pending wake-up is consumed).
    pub(crate) fn sleep(&self, d: Duration) {
        let mut fd = libc::pollfd {
            fd: self.rx.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = d.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: poll(2) on one pollfd we own, for the duration of the call.
        if unsafe { libc::poll(&mut fd, 1, ms) } > 0 {
            let mut buf = [0u8; 64];
            while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
        }
    }
}

/// How long a thread polls before it parks. Shorter is worse on both
/// counts on a small VM, where a wake-up costs tens of microseconds: with
/// 50 µs or 20 µs instead of 200, stdio at 1 in flight fell from 38k to
/// 8k calls/s and from 24k to 13k calls per CPU-second (PERFORMANCE.md).
pub(crate) const SPIN_BEFORE_PARK: Duration = Duration::from_micros(200);

/// Whether a waiting thread should poll before it parks: only while what
/// it waits for has been arriving within [`SPIN_BEFORE_PARK`]. Under steady
/// traffic the next message comes within the spin and the wake-up is
/// saved; once a wait runs longer (traffic stopped), the thread parks at
/// once until a wait is short again, so an idle server burns nothing.
pub(crate) struct Spin {
    // The last wait ended within SPIN_BEFORE_PARK.
    short: AtomicBool,
}

impl Default for Spin {
    fn default() -> Self {
        Spin {
            short: AtomicBool::new(true),
        }
    }
}

impl Spin {
    /// Whether to poll before parking.
    pub(crate) fn worthwhile(&self) -> bool {
        self.short.load(Ordering::Relaxed)
    }

    /// Polls `rx` for up to [`SPIN_BEFORE_PARK`]; `Err(Empty)` means park now.
    pub(crate) fn poll<T>(&self, rx: &Receiver<T>) -> Result<T, TryRecvError> {
        self.spin(|| match rx.try_recv() {
            Err(TryRecvError::Empty) => None,
            other => Some(other),
        })
        .unwrap_or(Err(TryRecvError::Empty))
    }

    /// Polls descriptor `fd` for up to [`SPIN_BEFORE_PARK`] until it is
    /// readable (or at its end, or failed: a read then tells); false means
    /// block in the read now.
    pub(crate) fn poll_fd(&self, fd: std::os::fd::RawFd) -> bool {
        self.spin(|| {
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call. Only a
            // positive count is readiness; -1 (EINTR, say) polls again.
            (unsafe { libc::poll(&mut p, 1, 0) } > 0).then_some(())
        })
        .is_some()
    }

    /// Tries `attempt` until it gives something or [`SPIN_BEFORE_PARK`]
    /// passed (then `None`, and waits count as long until one is short
    /// again), yielding between tries.
    fn spin<T>(&self, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
        let start = Instant::now();
        loop {
            if let Some(got) = attempt() {
                return Some(got);
            }
            if start.elapsed() >= SPIN_BEFORE_PARK {
                self.short.store(false, Ordering::Relaxed);
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// Polls `rx` if worthwhile (see [`Spin::poll`]); else `Err(Empty)`.
    pub(crate) fn poll_if_worthwhile<T>(&self, rx: &Receiver<T>) -> Result<T, TryRecvError> {
        if self.worthwhile() {
            self.poll(rx)
        } else {
            rx.try_recv()
        }
    }

    /// Receives from `rx`: polls first if worthwhile, then blocks for up
    /// to `wait` (`Duration::MAX`: for as long as it takes).
    #[cfg(all(feature = "http", feature = "client"))]
    pub(crate) fn recv_timeout<T>(
        &self,
        rx: &Receiver<T>,
        wait: Duration,
    ) -> Result<T, crossbeam_channel::RecvTimeoutError> {
        let began = Instant::now();
        match self.poll_if_worthwhile(rx) {
            Ok(m) => return Ok(m),
            Err(TryRecvError::Disconnected) => {
                return Err(crossbeam_channel::RecvTimeoutError::Disconnected)
            }
            Err(TryRecvError::Empty) => {}
        }
        let got = rx.recv_timeout(wait);
        self.parked(began);
        got
    }

    /// The thread began to wait (spin, then park) at `since` and has what
    /// it waited for now.
    pub(crate) fn parked(&self, since: Instant) {
        self.short
            .store(since.elapsed() < SPIN_BEFORE_PARK, Ordering::Relaxed);
    }
}

/// Selects with a short spin before blocking, if `spin`; gives up after
/// `timeout` (`None`: never).
#[cfg(feature = "amqp")]
pub(crate) fn select_within<'a>(
    sel: &mut crossbeam_channel::Select<'a>,
    spin: bool,
    timeout: Option<Duration>,
) -> Option<crossbeam_channel::SelectedOperation<'a>> {
    let start = Instant::now();
    while spin && start.elapsed() < SPIN_BEFORE_PARK {
        if let Ok(op) = sel.try_select() {
            return Some(op);
        }
        std::thread::yield_now();
    }
    match timeout {
        Some(t) => sel.select_timeout(t.saturating_sub(start.elapsed())).ok(),
        None => Some(sel.select()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_deadline_past_the_clock_is_far_away_not_a_panic() {
        let far = deadline_in(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(365 * 24 * 3600));
        let near = deadline_in(Duration::from_secs(1));
        assert!(near <= Instant::now() + Duration::from_secs(1));
    }

    #[test]
    fn a_waker_ends_the_wait_and_a_connection_is_reported() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let waker = Waker::new().unwrap();
        // Wake-ups before the wait are not lost, and all are consumed.
        waker.wake();
        waker.wake();
        assert!(!waker.wait(&listener).unwrap(), "woken, no connection");
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(waker.wait(&listener).unwrap(), "a connection waits");
        // From another thread, while blocked.
        let (l, w) = (listener, std::sync::Arc::new(waker));
        let _ = l.accept().unwrap();
        let w2 = w.clone();
        let t = std::thread::spawn(move || w2.wait(&l).unwrap());
        w.wake();
        assert!(!t.join().unwrap());
    }
}
