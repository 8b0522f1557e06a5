//! Message buffers handed back, once written, for a connection's
//! producers to fill again. Under load an answer is serialized on the
//! thread that made it and written by the writer thread; freed there,
//! each buffer was a free(3) across threads, which glibc (once the
//! writer's tcache holds all it keeps of that size) serves under the
//! arena lock that the producing thread's malloc(3) takes too: at 32
//! requests in flight on stdio, malloc and free were a sixth of the
//! server's CPU (PERFORMANCE.md, thirteenth session). Handed back, a small
//! buffer is reused instead of freed; a larger one, or one beyond the
//! spares, is still freed where it was written. An idle connection keeps
//! at most [`SPARE_BUFFERS`] buffers of [`SPARE_MAX_BYTES`], besides the
//! channel's own slots (about 1 KiB, made with the connection).

use crossbeam_channel::{Receiver, Sender};

/// Buffers a connection keeps for reuse.
const SPARE_BUFFERS: usize = 32;
/// Largest buffer kept for reuse (bytes of capacity); a larger one is freed.
const SPARE_MAX_BYTES: usize = 512;
/// Capacity of a new buffer: most answers fit.
const FRESH_BYTES: usize = 128;

/// One connection's spare buffers, shared by its producers (the sink) and
/// its writer.
#[derive(Clone)]
pub(crate) struct Spare {
    // Buffers given back, emptied; bounded: one more is freed instead.
    tx: Sender<Vec<u8>>,
    // Where the producers take them from.
    rx: Receiver<Vec<u8>>,
}

impl Default for Spare {
    fn default() -> Self {
        let (tx, rx) = crossbeam_channel::bounded(SPARE_BUFFERS);
        Spare { tx, rx }
    }
}

impl Spare {
    /// An empty buffer: a spare one if there is one, else a new one.
    pub(crate) fn take(&self) -> Vec<u8> {
        self.rx
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(FRESH_BYTES))
    }

    /// `buf`, written (or not to be sent) and no longer needed: kept for
    /// reuse, emptied, if it is small and a spare's place is free; else
    /// freed.
    pub(crate) fn give(&self, mut buf: Vec<u8>) {
        if buf.capacity() <= SPARE_MAX_BYTES {
            buf.clear();
            let _ = self.tx.try_send(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_comes_back_empty_with_its_memory() {
        let spare = Spare::default();
        let mut buf = spare.take();
        assert!(buf.is_empty() && buf.capacity() >= FRESH_BYTES);
        buf.extend_from_slice(b"{\"jsonrpc\":\"2.0\"}");
        let at = buf.as_ptr();
        spare.give(buf);
        let again = spare.take();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), at, "the same allocation");
    }

    #[test]
    fn large_buffers_and_more_than_the_spares_are_freed() {
        let spare = Spare::default();
        spare.give(Vec::with_capacity(SPARE_MAX_BYTES + 1));
        assert!(spare.rx.is_empty(), "too large to keep");
        spare.give(Vec::with_capacity(SPARE_MAX_BYTES));
        assert_eq!(spare.rx.len(), 1, "the largest kept");
        for _ in 0..SPARE_BUFFERS + 5 {
            spare.give(Vec::with_capacity(64));
        }
        assert_eq!(spare.rx.len(), SPARE_BUFFERS);
    }
}
