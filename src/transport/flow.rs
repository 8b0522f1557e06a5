//! Flow control between a connection's reader and its outbox: while half
//! the outbox is queued for the peer, the reader takes no more requests
//! in, until the writer has taken the queue down to a quarter. A peer that
//! sends faster than it reads (a pipelining client, one that pauses
//! reading for a moment) is slowed down as a pipe would slow it, instead
//! of having its outbox overflow and its connection end with its answers
//! lost. A message that names no method or no id (a notification such as
//! a cancellation, a response to the server's own request) is taken in all
//! the same, as far as a look at its bytes tells; one behind a waiting
//! request waits with it. Only the connection's own reader waits;
//! handlers never do.
//! A peer that stops reading altogether is waited for as long as the
//! writer waits for it: on TCP, until a write has blocked for the write
//! timeout; on a pipe (stdio), until the peer closes it.

use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;

/// What the reader and the writer share.
struct Shared {
    // The reader takes no request in while this many messages are queued…
    high: usize,
    // …until fewer than this many are (one wake-up per stretch, not per
    // message, under steady backpressure).
    low: usize,
    // The reader waits for the writer's word.
    waiting: AtomicBool,
    // The writer is gone: nothing more will be sent.
    gone: AtomicBool,
}

/// The reader's side: waits for room in the outbox.
pub(crate) struct Room {
    shared: Arc<Shared>,
    // One waiter at a time: the writer's word wakes one.
    one: std::sync::Mutex<()>,
    // The outbox's queue, only to see its length (a sender: when the
    // writer is gone the queue is disconnected, and nothing more is queued).
    queue: Sender<Vec<u8>>,
    // A word from the writer; disconnected once the writer is gone.
    word: Receiver<()>,
}

/// The writer's side: tells a waiting reader when room was made.
pub(crate) struct Drained {
    shared: Arc<Shared>,
    word: Sender<()>,
}

/// A reader / writer pair for an outbox of `capacity` messages whose
/// queue `queue` feeds.
pub(crate) fn pair(queue: &Sender<Vec<u8>>, capacity: usize) -> (Room, Drained) {
    let high = (capacity / 2).max(1);
    let shared = Arc::new(Shared {
        high,
        low: (high / 2).max(1),
        waiting: AtomicBool::new(false),
        gone: AtomicBool::new(false),
    });
    // At most one word is pending; a stale one only makes the reader look again.
    let (word_tx, word_rx) = crossbeam_channel::bounded(1);
    (
        Room {
            shared: shared.clone(),
            one: std::sync::Mutex::new(()),
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
    /// Returns when the next message may be taken in: at once unless half
    /// the outbox is queued and `asks` (asked only then) says it may be a
    /// request; else once the writer has taken the queue down to a
    /// quarter. True, or false if the writer is gone, whether or not there
    /// is room (nothing more will be sent: the reader stops, and runs no
    /// more requests for a peer that will never hear of them).
    pub(crate) fn wait(&self, asks: impl FnOnce() -> bool) -> bool {
        // A queue whose writer is gone keeps its length: it never grows to
        // `high` again, so only this tells the reader.
        if self.shared.gone.load(Ordering::SeqCst) {
            return false;
        }
        if self.queue.len() < self.shared.high || !asks() {
            return true;
        }
        let _one = crate::sync::lock(&self.one);
        loop {
            self.shared.waiting.store(true, Ordering::SeqCst);
            // Against the writer's take-then-look: either it sees the flag
            // or this sees what it took.
            fence(Ordering::SeqCst);
            if self.queue.len() < self.shared.low {
                self.shared.waiting.store(false, Ordering::SeqCst);
                return true;
            }
            if self.word.recv().is_err() {
                return false;
            }
        }
    }
}

impl Drop for Drained {
    /// The writer is gone: a reader stops at its next message (one
    /// waiting now is told by the word's channel ending).
    fn drop(&mut self) {
        self.shared.gone.store(true, Ordering::SeqCst);
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
    /// the queue is down to a quarter of the outbox.
    pub(crate) fn took(&self, queue: &Receiver<Vec<u8>>) {
        fence(Ordering::SeqCst);
        if self.shared.waiting.load(Ordering::SeqCst) && queue.len() < self.shared.low {
            self.shared.waiting.store(false, Ordering::SeqCst);
            let _ = self.word.try_send(());
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Waits until `done` holds (10 s at most).
    pub(crate) fn until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_request_waits_from_half_the_outbox_down_to_a_quarter_and_a_notification_does_not() {
        let (tx, rx) = crossbeam_channel::bounded(8);
        let (room, drained) = pair(&tx, 8);
        for m in 0..3 {
            tx.send(vec![m]).unwrap();
        }
        assert!(room.wait(|| true), "three queued of eight: room");
        tx.send(vec![3]).unwrap();
        assert!(
            room.wait(|| false),
            "a notification adds nothing to the queue"
        );
        let waiting = room.probe();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || done_tx.send(room.wait(|| true)).unwrap());
        until("the reader waits with four of eight queued", &waiting);
        // Three left: still above a quarter; two left: still; one: room.
        for _ in 0..2 {
            rx.recv().unwrap();
            drained.took(&rx);
            assert!(done.try_recv().is_err(), "waiting down to a quarter");
        }
        rx.recv().unwrap();
        drained.took(&rx);
        let woken = done.recv_timeout(Duration::from_secs(10));
        assert_eq!(woken, Ok(true), "woken once one is left");
    }

    #[test]
    fn a_reader_with_room_stops_all_the_same_once_the_writer_is_gone() {
        let (tx, _rx) = crossbeam_channel::bounded(8);
        let (room, drained) = pair(&tx, 8);
        tx.send(vec![1]).unwrap();
        assert!(room.wait(|| true), "room, and a writer");
        drop(drained);
        // The queue keeps its one message and never fills again.
        assert!(!room.wait(|| true), "no writer: nothing more is sent");
        assert!(!room.wait(|| false), "nor is anything more taken in");
    }

    #[test]
    fn a_waiting_reader_is_told_when_the_writer_is_gone() {
        let (tx, _rx) = crossbeam_channel::bounded(2);
        let (room, drained) = pair(&tx, 2);
        tx.send(vec![1]).unwrap();
        let waiting = room.probe();
        let (done_tx, done) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || done_tx.send(room.wait(|| true)).unwrap());
        until("the reader waits", &waiting);
        drop(drained);
        let woken = done.recv_timeout(Duration::from_secs(10));
        assert_eq!(woken, Ok(false), "no writer: nothing more is sent");
    }
}
