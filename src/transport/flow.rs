//! Flow control between a connection's reader and its outbox: while half
//! the outbox is queued for the peer, the reader takes no more messages in,
//! until the writer has taken some out. A peer that sends faster than it
//! reads (a pipelining client, one that pauses reading for a moment) is
//! slowed down as a pipe would slow it, instead of having its outbox
//! overflow and its connection end with its answers lost. Only the
//! connection's own reader waits; handlers never do. A peer that stops
//! reading altogether is ended by the writer (a write that blocks past its
//! timeout) or, if messages other than answers keep coming, by the
//! outbox's overflow.

use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

/// What the reader and the writer share.
struct Shared {
    // The reader takes no message in while this many are queued.
    high: usize,
    // The reader waits for the writer's word.
    waiting: AtomicBool,
}

/// The reader's side: waits for room in the outbox.
pub(crate) struct Room {
    shared: Arc<Shared>,
    // The outbox's queue, only to see its length.
    queue: Receiver<Vec<u8>>,
    // A word from the writer; disconnected once the writer is gone.
    word: Receiver<()>,
}

/// The writer's side: tells a waiting reader when room was made.
pub(crate) struct Drained {
    shared: Arc<Shared>,
    word: Sender<()>,
}

/// A reader / writer pair for an outbox of `capacity` messages whose
/// queue is `queue`.
pub(crate) fn pair(queue: &Receiver<Vec<u8>>, capacity: usize) -> (Room, Drained) {
    let shared = Arc::new(Shared {
        high: (capacity / 2).max(1),
        waiting: AtomicBool::new(false),
    });
    // At most one word is pending; a stale one only makes the reader look again.
    let (word_tx, word_rx) = crossbeam_channel::bounded(1);
    (
        Room {
            shared: shared.clone(),
            queue: queue.clone(),
            word: word_rx,
        },
        Drained {
            shared,
            word: word_tx,
        },
    )
}

impl Room {
    fn has_room(&self) -> bool {
        self.queue.len() < self.shared.high
    }

    /// Returns once fewer than half the outbox's messages are queued:
    /// true, or false if the writer is gone (nothing more will be sent).
    pub(crate) fn wait(&self) -> bool {
        if self.has_room() {
            return true;
        }
        loop {
            self.shared.waiting.store(true, Ordering::SeqCst);
            // Against the writer's take-then-look: either it sees the flag
            // or this sees what it took.
            fence(Ordering::SeqCst);
            if self.has_room() {
                self.shared.waiting.store(false, Ordering::SeqCst);
                return true;
            }
            if self.word.recv().is_err() {
                return false;
            }
        }
    }
}

#[cfg(test)]
impl Room {
    /// Whether the reader waits for the writer now (asked from anywhere).
    pub(crate) fn probe(&self) -> impl Fn() -> bool + Send + 'static {
        let shared = self.shared.clone();
        move || shared.waiting.load(Ordering::SeqCst)
    }
}

impl Drained {
    /// The writer took messages out of `queue`: wakes a waiting reader if
    /// there is room now.
    pub(crate) fn took(&self, queue: &Receiver<Vec<u8>>) {
        fence(Ordering::SeqCst);
        if self.shared.waiting.load(Ordering::SeqCst) && queue.len() < self.shared.high {
            self.shared.waiting.store(false, Ordering::SeqCst);
            let _ = self.word.try_send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_waits_while_half_the_outbox_is_queued_and_is_woken_when_the_writer_takes() {
        let (tx, rx) = crossbeam_channel::bounded(4);
        let (room, drained) = pair(&rx, 4);
        tx.send(vec![1]).unwrap();
        assert!(room.wait(), "one queued of four: room");
        tx.send(vec![2]).unwrap();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        let reader = std::thread::spawn(move || {
            let r = room.wait();
            done_tx.send(()).unwrap();
            r
        });
        // The reader waits (two of four queued) until the writer takes one.
        while !drained.shared.waiting.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        assert!(done.try_recv().is_err(), "waiting while two are queued");
        rx.recv().unwrap();
        drained.took(&rx);
        assert!(reader.join().unwrap(), "woken with room");
    }

    #[test]
    fn a_waiting_reader_is_told_when_the_writer_is_gone() {
        let (tx, rx) = crossbeam_channel::bounded(2);
        let (room, drained) = pair(&rx, 2);
        tx.send(vec![1]).unwrap();
        let reader = std::thread::spawn(move || room.wait());
        while !drained.shared.waiting.load(Ordering::SeqCst) {
            std::thread::yield_now();
        }
        drop(drained);
        assert!(!reader.join().unwrap(), "no writer: nothing more is sent");
    }
}
