//! Bounded pools of named threads: the engine's handler pool, and the
//! client's pool for callbacks the server asks for.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
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

/// Up to a fixed number of named threads fed by a bounded crossbeam
/// channel. Threads start when work needs them (a job is queued and no
/// thread is idle) and then stay: a server that is never called starts
/// none, and the first answer is not delayed by starting them all.
///
/// Jobs catch their own panics (the engine turns them into -32603 errors);
/// the pool catches any that escape too, so a thread never dies of one.
pub(crate) struct Pool {
    // Owned by the pool; capacity = the queue bound. Dropping it stops the threads.
    tx: Sender<Job>,
    inner: Arc<Inner>,
}

/// What the pool's threads share with it.
struct Inner {
    rx: Receiver<Job>,
    prefix: String,
    max: usize,
    started: AtomicUsize,
    // Threads waiting for a job.
    idle: AtomicUsize,
}

impl Pool {
    /// At most `threads` threads named `prefix` and their number, in front
    /// of a queue of `queue` jobs.
    pub(crate) fn new(prefix: &str, threads: usize, queue: usize) -> std::io::Result<Pool> {
        install_panic_hook();
        let (tx, rx) = crossbeam_channel::bounded::<Job>(queue.max(1));
        let inner = Arc::new(Inner {
            rx,
            prefix: prefix.to_owned(),
            max: threads.max(1),
            started: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
        });
        Ok(Pool { tx, inner })
    }

    /// Queues a job; gives it back when the queue is full (or no thread
    /// can run it).
    pub(crate) fn try_submit(&self, job: Job) -> Result<(), Job> {
        // One more job than idle threads: start a thread for it.
        if !Inner::grow(&self.inner, 1) {
            return Err(job);
        }
        self.tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
        })?;
        // An idle thread counted above may have taken another job since:
        // look again now that this one is queued (a thread that takes a
        // job looks too, after it stops counting as idle; one of the two
        // sees this job waiting).
        Inner::grow(&self.inner, 0);
        Ok(())
    }

    /// Threads started so far.
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.inner.started.load(Ordering::SeqCst)
    }
}

impl Inner {
    /// Starts one more thread if the queue (plus `coming` jobs about to be
    /// queued) holds more jobs than there are idle threads and the pool is
    /// not at its size. False when no thread runs and none could start.
    fn grow(this: &Arc<Inner>, coming: usize) -> bool {
        let started = this.started.load(Ordering::SeqCst);
        let wanted = this.rx.len() + coming > this.idle.load(Ordering::SeqCst);
        if !wanted || started >= this.max {
            return started > 0;
        }
        if this
            .started
            .compare_exchange(started, started + 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            // Another caller is starting one right now.
            return true;
        }
        // The new thread counts as idle from now: it is about to wait.
        this.idle.fetch_add(1, Ordering::SeqCst);
        let inner = this.clone();
        let spawned = thread::Builder::new()
            .name(format!("{}{started}", this.prefix))
            .spawn(move || inner.work());
        match spawned {
            Ok(_) => true,
            Err(e) => {
                log::error!("cannot start a thread for {}: {e}", this.prefix);
                this.idle.fetch_sub(1, Ordering::SeqCst);
                this.started.fetch_sub(1, Ordering::SeqCst);
                started > 0
            }
        }
    }

    fn work(self: Arc<Self>) {
        POOL_THREAD.with(|p| p.set(true));
        // `grow` counted this thread as idle when it started it.
        let mut counted = true;
        loop {
            if !std::mem::replace(&mut counted, false) {
                self.idle.fetch_add(1, Ordering::SeqCst);
            }
            let job = crate::wait::recv(&self.rx);
            self.idle.fetch_sub(1, Ordering::SeqCst);
            let Some(job) = job else { break };
            // A job queued while this thread still counted as idle has no
            // thread yet: start one, so it never waits behind this job.
            if !self.rx.is_empty() {
                Inner::grow(&self, 0);
            }
            if catch_unwind(AssertUnwindSafe(job)).is_err() {
                log::error!(
                    "a pool job panicked outside its guard: {}",
                    take_panic_report()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_start_as_work_needs_them_and_never_beyond_the_size() {
        let pool = Pool::new("mcpvisor-test-pool-", 3, 64).unwrap();
        assert_eq!(pool.threads(), 0, "nothing started before the first job");
        let (done_tx, done) = crossbeam_channel::unbounded();
        let d = done_tx.clone();
        assert!(pool
            .try_submit(Box::new(move || d.send(()).unwrap()))
            .is_ok());
        done.recv().unwrap();
        assert_eq!(pool.threads(), 1);
        // Jobs that block: each one that finds no idle thread starts one, up to 3.
        let (release_tx, release) = crossbeam_channel::unbounded::<()>();
        for _ in 0..10 {
            let (r, d) = (release.clone(), done_tx.clone());
            assert!(pool
                .try_submit(Box::new(move || {
                    let _ = r.recv();
                    d.send(()).unwrap();
                }))
                .is_ok());
        }
        assert_eq!(pool.threads(), 3);
        for _ in 0..10 {
            release_tx.send(()).unwrap();
        }
        for _ in 0..10 {
            done.recv().unwrap();
        }
        assert_eq!(pool.threads(), 3);
    }
}
