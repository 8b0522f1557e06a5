//! A log line said at most every so often, with a count of what happened
//! in between: for events a peer or the system can make happen many
//! times a second (connections refused at the cap, accepts failing for
//! want of descriptors), so that the log says each kind once a period
//! however fast they come: each line counts the events since the last.
//! Events after the last line are told by the next one, or by the caller
//! with [`Throttle::take_untold`] when what they were about is over (a
//! listener accepting again); else they are not told.

use crate::sync::lock;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often the lines of one [`Throttle`] are said at most, unless it
/// is made with another period: 10 s.
pub(crate) const DEFAULT_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Counts events and says when a line about them is due.
pub(crate) struct Throttle {
    interval: Duration,
    /// Events not told yet, and when the last line was said.
    state: Mutex<(u64, Option<Instant>)>,
}

impl Throttle {
    /// A throttle letting a line through at most every `interval`.
    pub(crate) const fn new(interval: Duration) -> Throttle {
        Throttle {
            interval,
            state: Mutex::new((0, None)),
        }
    }

    /// Counts one event; `Some(n)` when a line is due: the first event,
    /// or the first once `interval` has passed since the last line. `n`
    /// counts the events since that line, this one included.
    pub(crate) fn event(&self) -> Option<u64> {
        self.event_at(Instant::now())
    }

    /// The events counted since the last line, which are then told: for
    /// the line saying what they were about is over.
    #[cfg(any(feature = "tcp", feature = "http", test))]
    pub(crate) fn take_untold(&self) -> u64 {
        std::mem::take(&mut lock(&self.state).0)
    }

    fn event_at(&self, now: Instant) -> Option<u64> {
        let mut state = lock(&self.state);
        state.0 += 1;
        let due = state
            .1
            .is_none_or(|last| now.saturating_duration_since(last) >= self.interval);
        if !due {
            return None;
        }
        let told = state.0;
        *state = (0, Some(now));
        Some(told)
    }
}

impl Default for Throttle {
    /// Every [`DEFAULT_LOG_INTERVAL`].
    fn default() -> Throttle {
        Throttle::new(DEFAULT_LOG_INTERVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_event_is_told_then_one_line_a_period_counting_those_between() {
        let throttle = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(throttle.event_at(start), Some(1));
        for s in 1..10 {
            assert_eq!(
                throttle.event_at(start + Duration::from_secs(s)),
                None,
                "{s}"
            );
        }
        // Nine held back, and this one.
        assert_eq!(throttle.event_at(start + Duration::from_secs(10)), Some(10));
        assert_eq!(throttle.event_at(start + Duration::from_secs(11)), None);
        // A quiet spell: the next event is told at once, with the one before.
        assert_eq!(throttle.event_at(start + Duration::from_secs(60)), Some(2));
        assert_eq!(throttle.event_at(start + Duration::from_secs(61)), None);
        assert_eq!(throttle.take_untold(), 1);
        assert_eq!(throttle.take_untold(), 0);
        // Told: the next line within the period counts only what follows.
        assert_eq!(throttle.event_at(start + Duration::from_secs(62)), None);
        assert_eq!(throttle.event_at(start + Duration::from_secs(70)), Some(2));
    }

    #[test]
    fn a_clock_read_before_the_last_line_holds_the_line_back() {
        // Threads read the clock before taking the lock: an instant earlier
        // than the last line's is within the period.
        let throttle = Throttle::new(Duration::from_secs(10));
        let start = Instant::now() + Duration::from_secs(5);
        assert_eq!(throttle.event_at(start), Some(1));
        assert_eq!(throttle.event_at(start - Duration::from_secs(1)), None);
    }
}
