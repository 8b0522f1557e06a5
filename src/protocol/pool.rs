//! The bounded pool of handler threads.

use crossbeam_channel::{Sender, TrySendError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::thread;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed number of named threads fed by a bounded crossbeam channel.
///
/// Jobs catch their own panics (the engine turns them into -32603 errors);
/// the pool catches any that escape too, so it always keeps its size.
pub(crate) struct Pool {
    // Owned by the pool; capacity = the queue bound. Dropping it stops the threads.
    tx: Sender<Job>,
}

impl Pool {
    pub(crate) fn new(threads: usize, queue: usize) -> std::io::Result<Pool> {
        let (tx, rx) = crossbeam_channel::bounded::<Job>(queue.max(1));
        for n in 0..threads.max(1) {
            let rx = rx.clone();
            thread::Builder::new()
                .name(format!("mcpvisor-handler-{n}"))
                .spawn(move || {
                    while let Some(job) = crate::wait::recv(&rx) {
                        if catch_unwind(AssertUnwindSafe(job)).is_err() {
                            log::error!(
                                "a handler job panicked outside its guard; the pool keeps running"
                            );
                        }
                    }
                })?;
        }
        Ok(Pool { tx })
    }

    /// Queues a job; gives it back when the queue is full.
    pub(crate) fn try_submit(&self, job: Job) -> Result<(), Job> {
        self.tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
        })
    }
}
