//! Waiting on a channel with a short spin first.
//!
//! On small (virtual) machines waking a parked thread costs tens of
//! microseconds, most of a fast tool's round trip. A thread that has just
//! finished its work therefore polls its channel for a moment before it
//! parks: under steady traffic the next message is already there.

use crossbeam_channel::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

/// How long a thread polls before it parks.
pub(crate) const SPIN_BEFORE_PARK: Duration = Duration::from_micros(200);

/// Polls `rx` for up to [`SPIN_BEFORE_PARK`]; `Err(Empty)` means park now.
pub(crate) fn spin<T>(rx: &Receiver<T>) -> Result<T, TryRecvError> {
    let start = Instant::now();
    loop {
        match rx.try_recv() {
            Err(TryRecvError::Empty) if start.elapsed() < SPIN_BEFORE_PARK => {
                std::thread::yield_now()
            }
            other => return other,
        }
    }
}

/// Receives with a short spin before blocking; `None` once the channel closed.
pub(crate) fn recv<T>(rx: &Receiver<T>) -> Option<T> {
    match spin(rx) {
        Ok(v) => Some(v),
        Err(TryRecvError::Disconnected) => None,
        Err(TryRecvError::Empty) => rx.recv().ok(),
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
