//! Waiting: on a channel with a short spin first, and on a listening
//! socket with a timeout (so an accept loop sees its stop signal).
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
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long an accept loop waits for a connection before it looks at its
/// stop signal again.
pub(crate) const STOP_CHECK: Duration = Duration::from_millis(200);

/// Waits up to `timeout` for `listener` to have a connection waiting
/// (poll(2)); an interrupted wait counts as none.
pub(crate) fn readable(
    listener: &impl std::os::fd::AsRawFd,
    timeout: Duration,
) -> io::Result<bool> {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll(2) on one pollfd we own, for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, timeout.as_millis() as libc::c_int) };
    match n {
        n if n < 0 => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
        0 => Ok(false),
        // Readable, or an error condition that accept() will report.
        _ => Ok(true),
    }
}

/// How long a thread polls before it parks.
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
        let start = Instant::now();
        loop {
            match rx.try_recv() {
                Err(TryRecvError::Empty) if start.elapsed() < SPIN_BEFORE_PARK => {
                    std::thread::yield_now()
                }
                Err(TryRecvError::Empty) => {
                    self.short.store(false, Ordering::Relaxed);
                    return Err(TryRecvError::Empty);
                }
                other => return other,
            }
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

    /// The thread parked at `since` and woke now.
    pub(crate) fn parked(&self, since: Instant) {
        self.short
            .store(since.elapsed() < SPIN_BEFORE_PARK, Ordering::Relaxed);
    }
}

/// Selects with a short spin before blocking.
#[cfg(feature = "amqp")]
pub(crate) fn select<'a>(
    sel: &mut crossbeam_channel::Select<'a>,
) -> crossbeam_channel::SelectedOperation<'a> {
    let start = Instant::now();
    while start.elapsed() < SPIN_BEFORE_PARK {
        if let Ok(op) = sel.try_select() {
            return op;
        }
        std::thread::yield_now();
    }
    sel.select()
}
