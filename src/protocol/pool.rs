//! The bounded pool of handler threads.

use crossbeam_channel::{Sender, TrySendError};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;
use std::thread;

/// Name prefix of handler threads (`mcpvisor-handler-N`).
const THREAD_PREFIX: &str = "mcpvisor-handler-";

thread_local! {
    // The last panic on this handler thread, recorded by our panic hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once per process) a panic hook that records panics of handler
/// threads instead of printing them, so the engine logs each one exactly
/// once, with its request. Panics of every other thread go to the hook that
/// was installed before.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !thread::current()
                .name()
                .is_some_and(|n| n.starts_with(THREAD_PREFIX))
            {
                return previous(info);
            }
            let payload = info.payload();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".to_owned());
            let at = info
                .location()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// The last panic recorded on this handler thread (message and location).
pub(crate) fn take_panic_report() -> String {
    LAST_PANIC
        .with(|p| p.borrow_mut().take())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

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
        install_panic_hook();
        let (tx, rx) = crossbeam_channel::bounded::<Job>(queue.max(1));
        for n in 0..threads.max(1) {
            let rx = rx.clone();
            thread::Builder::new()
                .name(format!("{THREAD_PREFIX}{n}"))
                .spawn(move || {
                    while let Some(job) = crate::wait::recv(&rx) {
                        if catch_unwind(AssertUnwindSafe(job)).is_err() {
                            log::error!(
                                "a handler job panicked outside its guard: {}",
                                take_panic_report()
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
