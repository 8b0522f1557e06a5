//! Cancellation tokens: a flag that long handlers check, and a channel they
//! can `select!` on.

use crate::sync::lock;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A cancellation token shared between the engine and one handler.
#[derive(Clone)]
pub struct CancelToken(Arc<Inner>);

struct Inner {
    flag: AtomicBool,
    // Made by the first `receiver()`: most handlers never ask for one.
    chan: Mutex<Chan>,
    // Tokens cancelled with this one (see `cancels`).
    followers: Mutex<Vec<CancelToken>>,
}

#[derive(Default)]
struct Chan {
    // Dropping the sender (on cancel) disconnects `rx`, which wakes every
    // receiver clone.
    tx: Option<Sender<()>>,
    rx: Option<Receiver<()>>,
}

impl Default for CancelToken {
    fn default() -> Self {
        CancelToken(Arc::new(Inner {
            flag: AtomicBool::new(false),
            chan: Mutex::new(Chan::default()),
            followers: Mutex::new(Vec::new()),
        }))
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Cancels: sets the flag and wakes every receiver. Idempotent.
    pub fn cancel(&self) {
        self.0.flag.store(true, Ordering::SeqCst);
        lock(&self.0.chan).tx.take();
        let followers = std::mem::take(&mut *lock(&self.0.followers));
        for f in followers {
            f.cancel();
        }
    }

    /// Makes `follower` cancelled when this token is (at once if it is
    /// already): work that must end with either of two tokens waits on
    /// one that follows both.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn cancels(&self, follower: &CancelToken) {
        {
            let mut followers = lock(&self.0.followers);
            if !self.is_cancelled() {
                followers.retain(|f| !f.is_cancelled());
                followers.push(follower.clone());
                return;
            }
        }
        follower.cancel();
    }

    /// Whether the work was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.flag.load(Ordering::SeqCst)
    }

    /// Whether `other` is this same token (a clone of it).
    pub fn same(&self, other: &CancelToken) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// A receiver that becomes ready (disconnected) once the token is cancelled;
    /// use it in `crossbeam_channel::select!` beside your own channels.
    pub fn receiver(&self) -> Receiver<()> {
        let mut chan = lock(&self.0.chan);
        if let Some(rx) = &chan.rx {
            return rx.clone();
        }
        let (tx, rx) = crossbeam_channel::bounded(0);
        // Cancelled already (the flag is set before `cancel` takes the
        // lock): the sender is dropped now and the receiver is ready.
        if !self.is_cancelled() {
            chan.tx = Some(tx);
        }
        chan.rx = Some(rx.clone());
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_cancelled_with_any_token_it_follows() {
        let (a, b) = (CancelToken::new(), CancelToken::new());
        let both = CancelToken::new();
        a.cancels(&both);
        b.cancels(&both);
        let rx = both.receiver();
        assert!(!both.is_cancelled());
        b.cancel();
        assert!(both.is_cancelled() && !a.is_cancelled());
        assert!(rx.recv().is_err(), "its receiver is woken");
        // Following a token cancelled already cancels at once.
        let late = CancelToken::new();
        b.cancels(&late);
        assert!(late.is_cancelled());
    }

    #[test]
    fn receiver_wakes_on_cancel() {
        let t = CancelToken::new();
        let rx = t.receiver();
        assert!(rx.try_recv().is_err() && !t.is_cancelled());
        assert_eq!(rx.try_recv(), Err(crossbeam_channel::TryRecvError::Empty));
        let t2 = t.clone();
        let h = std::thread::spawn(move || rx.recv());
        t2.cancel();
        assert!(h.join().unwrap().is_err());
        assert!(t.is_cancelled());
        assert_eq!(
            t.receiver().try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        );
    }

    #[test]
    fn a_receiver_asked_for_after_the_cancel_is_ready() {
        let t = CancelToken::new();
        t.cancel();
        assert_eq!(
            t.receiver().try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        );
        // And one asked for before the cancel, by another clone, too.
        let t = CancelToken::new();
        let early = t.clone().receiver();
        assert_eq!(
            early.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty)
        );
        t.cancel();
        assert_eq!(
            early.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        );
        assert_eq!(
            t.receiver().try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        );
    }
}
