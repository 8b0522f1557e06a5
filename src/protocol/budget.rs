//! A byte budget many holders share: the URIs every session and listen
//! stream subscribes to count against one limit for the whole engine, so
//! that many sessions, each within its own limits, cannot together hold
//! the host's memory.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes of resource URIs all sessions and listen streams of an engine
/// may hold subscribed at once: 64 MiB. Past it, a subscription (or a
/// listen stream naming resources) is refused with -32603 until others
/// end.
pub const MAX_SUBSCRIBED_BYTES: usize = 64 * 1024 * 1024;

/// Bytes of resource URIs one session (or one connection's listen
/// streams together) may hold subscribed: 256 KiB, a 256th of
/// [`MAX_SUBSCRIBED_BYTES`]. Past it, -32602. It takes 256 sessions at
/// their limit to hold the whole budget (a stateless HTTP request is a
/// session of its own).
pub const MAX_SUBSCRIBED_BYTES_PER_SESSION: usize = 256 * 1024;

/// The shared count and its limit.
#[derive(Clone)]
pub(crate) struct Budget {
    used: Arc<AtomicUsize>,
    limit: usize,
}

impl Default for Budget {
    fn default() -> Budget {
        Budget::new(MAX_SUBSCRIBED_BYTES)
    }
}

impl Budget {
    pub(crate) fn new(limit: usize) -> Budget {
        Budget {
            used: Arc::default(),
            limit,
        }
    }

    /// A holder's share, empty at first; what it holds is given back when
    /// it is dropped.
    pub(crate) fn share(&self) -> Share {
        Share {
            budget: self.clone(),
            bytes: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::SeqCst)
    }
}

/// What one holder took of a [`Budget`].
pub(crate) struct Share {
    budget: Budget,
    bytes: usize,
}

impl Share {
    /// Takes `n` bytes more; `false`, taking nothing, past the limit.
    pub(crate) fn take(&mut self, n: usize) -> bool {
        let used = &self.budget.used;
        let taken = used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
            u.checked_add(n).filter(|&t| t <= self.budget.limit)
        });
        if taken.is_ok() {
            self.bytes += n;
        }
        taken.is_ok()
    }

    /// Whether `n` bytes more would keep this share within `own` bytes.
    pub(crate) fn fits(&self, n: usize, own: usize) -> bool {
        self.bytes.checked_add(n).is_some_and(|b| b <= own)
    }

    /// Gives `n` of its bytes back.
    pub(crate) fn give(&mut self, n: usize) {
        let n = n.min(self.bytes);
        self.bytes -= n;
        self.budget.used.fetch_sub(n, Ordering::SeqCst);
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_take_within_the_limit_and_give_back_on_drop() {
        let b = Budget::new(10);
        let mut x = b.share();
        let mut y = b.share();
        assert!(x.take(6));
        assert!(!y.take(5), "past the limit: nothing taken");
        assert!(y.take(4));
        assert_eq!(b.used(), 10);
        x.give(2);
        assert_eq!(b.used(), 8);
        x.give(100);
        assert_eq!(b.used(), 4, "gives back no more than it holds");
        drop(y);
        assert_eq!(b.used(), 0);
    }
}
