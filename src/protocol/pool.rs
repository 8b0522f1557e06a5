//! Bounded pools of named threads: the engine's handler pool, and the
//! client's pool for callbacks the server asks for.

use crossbeam_channel::{Sender, TrySendError};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;
use std::thread;

/// Name prefix of the engine's handler threads (`mcpvisor-handler-N`).
pub(crate) const HANDLER_THREADS: &str = "mcpvisor-handler-";

thread_local! {
    // The last panic on this pool thread, recorded by our panic hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    // Set on pool threads: their panics are recorded, not printed.
    static POOL_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs (once per process) a panic hook that records panics of pool
/// threads instead of printing them, so the engine logs each one exactly
/// once, with its request. Panics of every other thread go to the hook that
/// was installed before.
fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !POOL_THREAD.with(std::cell::Cell::get) {
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
    /// `threads` threads named `prefix` and their number, in front of a
    /// queue of `queue` jobs.
    pub(crate) fn new(prefix: &str, threads: usize, queue: usize) -> std::io::Result<Pool> {
        install_panic_hook();
        let (tx, rx) = crossbeam_channel::bounded::<Job>(queue.max(1));
        for n in 0..threads.max(1) {
            let rx = rx.clone();
            thread::Builder::new()
                .name(format!("{prefix}{n}"))
                .spawn(move || {
                    POOL_THREAD.with(|p| p.set(true));
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
