//! Reconnection policy shared by the client and the AMQP link: exponential
//! backoff with jitter, capped, a bounded number of attempts.

use std::time::Duration;

/// Default reconnection attempts before giving up.
pub const DEFAULT_RECONNECT_ATTEMPTS: u32 = 10;

/// How to reconnect: exponential backoff with jitter, capped, a bounded
/// number of attempts. Each outage gets all the attempts; but connections
/// that end before `backoff.reset_after` count too (`QuickDrops`): a peer
/// that drops every new connection at once is given up on after
/// `max_attempts` of them in a row.
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
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        (0..self.max_attempts).map(move |attempt| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            self.backoff
                .delay(attempt, (seed >> 11) as f64 / (1u64 << 53) as f64)
        })
    }
}

/// Connections in a row that ended before the backoff's `reset_after`.
#[derive(Debug, Default)]
pub(crate) struct QuickDrops(u32);

impl QuickDrops {
    /// A connection that lived `lived` ended: whether to reconnect (false
    /// once `max_attempts` connections in a row lived less than
    /// `reset_after`).
    pub(crate) fn go_on(&mut self, policy: &Reconnect, lived: Duration) -> bool {
        if lived >= policy.backoff.reset_after {
            self.0 = 0;
        } else {
            self.0 += 1;
        }
        self.0 < policy.max_attempts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_dropped_at_once_use_up_the_attempts() {
        let policy = Reconnect::default();
        let mut drops = QuickDrops::default();
        let (short, long) = (Duration::from_millis(5), policy.backoff.reset_after);
        for _ in 1..policy.max_attempts {
            assert!(drops.go_on(&policy, short));
        }
        // One that served a while starts the count over.
        assert!(drops.go_on(&policy, long));
        for _ in 1..policy.max_attempts {
            assert!(drops.go_on(&policy, short));
        }
        assert!(!drops.go_on(&policy, short), "max_attempts in a row");
    }
}
