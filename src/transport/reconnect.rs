//! Reconnection policy shared by the client and the AMQP link: exponential
//! backoff with jitter, capped, a bounded number of attempts.

use std::time::Duration;

/// Default reconnection attempts before giving up.
pub const DEFAULT_RECONNECT_ATTEMPTS: u32 = 10;

/// How to reconnect: exponential backoff with jitter, capped, a bounded
/// number of attempts. A client's attempts start over only once a
/// connection has lived `backoff.reset_after`; a server that drops each
/// new connection sooner uses them up.
#[derive(Clone, Debug)]
pub struct Reconnect {
    /// Delays between attempts (base, multiplier, max delay, jitter).
    pub backoff: supervisor::Backoff,
    /// Attempts before giving up (default [`DEFAULT_RECONNECT_ATTEMPTS`]).
    pub max_attempts: u32,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            backoff: supervisor::Backoff {
                initial: Duration::from_millis(100),
                multiplier: 2.0,
                max: Duration::from_secs(10),
                jitter: 0.2,
                reset_after: Duration::from_secs(60),
            },
            max_attempts: DEFAULT_RECONNECT_ATTEMPTS,
        }
    }
}

impl Reconnect {
    /// The delays before each attempt: `max_attempts` of them, growing by
    /// the backoff and jittered downwards (a xorshift seeded by the clock:
    /// jitter spreads peers apart, it needs no cryptographic quality).
    pub fn delays(&self) -> impl Iterator<Item = Duration> + '_ {
        self.delays_from(0).map(|(_, delay)| delay)
    }

    /// [`delays`](Self::delays) from attempt `first` on (numbered from 0),
    /// each with its number: a series that goes on where an earlier one
    /// stopped (none at all once `first` reaches `max_attempts`).
    pub fn delays_from(&self, first: u32) -> impl Iterator<Item = (u32, Duration)> + '_ {
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        (first..self.max_attempts).map(move |attempt| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let delay = self
                .backoff
                .delay(attempt, (seed >> 11) as f64 / (1u64 << 53) as f64);
            (attempt, delay)
        })
    }
}
