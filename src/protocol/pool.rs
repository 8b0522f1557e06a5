//! Bounded pools of named threads: the engine's handler pool, and the
//! client's pool for callbacks the server asks for.

use crate::throttle::{Throttle, DEFAULT_LOG_INTERVAL};
use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

/// Name prefix of the engine's handler threads (`mcpvisor-handler-N`).
pub(crate) const HANDLER_THREADS: &str = "mcpvisor-handler-";

thread_local! {
    // The last panic on this pool thread, recorded by our panic hook.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    // Set on pool threads: their panics are recorded, not printed.
    static POOL_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    // Set while a quick job runs on the thread that read its request.
    static QUICK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether this thread runs a quick job ([`Pool::run_here`]): it must not
/// wait for an answer, which may have to come through this very thread.
pub(crate) fn running_quick() -> bool {
    QUICK.with(std::cell::Cell::get)
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

/// How often the pool's watchdog looks for a queued job that waited a
/// whole tick (the running threads block in handlers).
pub(crate) const WATCH_TICK: Duration = Duration::from_micros(500);
/// Name of a pool's watchdog thread.
pub(crate) const WATCHDOG_THREAD: &str = "mcpvisor-pool-watchdog";
/// The watchdog parks after this many ticks with nothing queued (100 ms).
const WATCH_IDLE_TICKS: u32 = 200;
/// A queued job that the running threads are expected to reach within
/// this wakes no other thread: waking one costs about as much on a small
/// machine, and the woken thread would compete with them for the cores.
pub(crate) const SHORT_WAIT: Duration = Duration::from_micros(20);
/// What jobs are assumed to take before any has run: long, so a new pool
/// spreads its first jobs as it would without the estimate.
const FIRST_JOB_ESTIMATE: Duration = Duration::from_millis(1);
/// After a thread failed to start (out of threads or memory: `TasksMax`,
/// `RLIMIT_NPROC`), no other start is tried for this long: every watchdog
/// tick and every request would try again, in vain.
const SPAWN_RETRY: Duration = Duration::from_millis(100);

/// Up to a fixed number of named threads fed by a bounded crossbeam
/// channel. Threads start when work needs them and then stay: a server
/// that is never called starts none, and the first answer is not delayed
/// by starting them all.
///
/// Every wake-up of a parked thread costs microseconds, and a thread that
/// runs beside as many others as there are cores only takes CPU from
/// them. So:
/// - at most one idle thread spins (polls the queue for a moment before it
///   parks, and only while jobs have been arriving within that moment, see
///   [`crate::wait::Spin`]); a job queued while one spins wakes nobody;
/// - otherwise a queued job wakes (or starts) a thread only while fewer
///   threads than cores are running jobs; a thread that takes a job and
///   sees more waiting applies the same rule, so a burst spreads over the
///   cores one wake-up at a time — unless the jobs have been short (a
///   running average of their durations): a job the running threads will
///   reach within [`SHORT_WAIT`] is left to them;
/// - beyond that, the running threads take the queued jobs as they finish
///   theirs, and a watchdog makes sure they do: when a queued job waited a
///   whole [`WATCH_TICK`] (handlers that block rather than compute), it
///   wakes or starts one more thread, up to the pool's size. The
///   watchdog runs only while there is traffic and parks after 100 ms
///   without, so an idle pool uses no CPU at all; and at the pool's size,
///   with every thread in a job (handlers blocked on slow upstreams or on
///   their clients), a tick could neither wake nor start one, so it waits
///   for a job to end instead of ticking (the thread that ends it takes
///   the next queued job itself).
///
/// Jobs catch their own panics (the engine turns them into -32603 errors);
/// the pool catches any that escape too, so a thread never dies of one.
pub(crate) struct Pool {
    // Owned by the pool; capacity = the queue bound. Dropping it stops the threads.
    tx: Option<Sender<Job>>,
    inner: Arc<Inner>,
}

/// What the pool's threads share with it.
struct Inner {
    rx: Receiver<Job>,
    prefix: String,
    max: usize,
    cores: usize,
    started: AtomicUsize,
    // Threads polling the queue before they park (at most one).
    spinning: AtomicUsize,
    // Threads started that have not yet looked at the queue.
    starting: AtomicUsize,
    // Threads parked on `wake`; changed under `state`'s lock.
    parked: AtomicUsize,
    // Threads running a job.
    running: AtomicUsize,
    // Jobs taken so far: the watchdog's measure of progress.
    taken: AtomicU64,
    // Jobs ended so far: what a watchdog waiting for one looks at.
    ended: AtomicU64,
    // The watchdog waits for a job to end (set under `state`'s lock): the
    // thread that ends one wakes it.
    awaiting_end: AtomicBool,
    // Running average of job durations, in nanoseconds (weight 1/8).
    job_nanos: AtomicU64,
    // When the latest job started, in nanoseconds since `epoch`.
    job_started: AtomicU64,
    epoch: Instant,
    // The watchdog is awake (mirrors `State::watchdog` for a lock-free look).
    watching: AtomicBool,
    // Starting the watchdog failed (logged once).
    watchdog_failed: AtomicBool,
    // Handler threads that failed to start: told at most every 10 s, and
    // the next start waits a moment.
    spawn_failures: SpawnFailures,
    // Test hooks: every thread start fails; and starts tried.
    #[cfg(test)]
    refuse_spawns: AtomicBool,
    #[cfg(test)]
    spawn_tries: AtomicUsize,
    // Test hooks: the watchdog's ticks, and its waits for a job to end.
    #[cfg(test)]
    watch_ticks: AtomicU64,
    #[cfg(test)]
    end_waits: AtomicU64,
    state: Mutex<State>,
    wake: Condvar,
    watch: Condvar,
}

struct State {
    // The pool was dropped: threads end once the queue is empty.
    stopped: bool,
    watchdog: Watchdog,
}

#[derive(Clone, Copy, PartialEq)]
enum Watchdog {
    NotStarted,
    Parked,
    Watching,
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
            cores: thread::available_parallelism().map_or(1, |n| n.get()),
            started: AtomicUsize::new(0),
            spinning: AtomicUsize::new(0),
            starting: AtomicUsize::new(0),
            parked: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            awaiting_end: AtomicBool::new(false),
            job_nanos: AtomicU64::new(FIRST_JOB_ESTIMATE.as_nanos() as u64),
            job_started: AtomicU64::new(0),
            epoch: Instant::now(),
            watching: AtomicBool::new(false),
            watchdog_failed: AtomicBool::new(false),
            spawn_failures: SpawnFailures::default(),
            #[cfg(test)]
            refuse_spawns: AtomicBool::new(false),
            #[cfg(test)]
            spawn_tries: AtomicUsize::new(0),
            #[cfg(test)]
            watch_ticks: AtomicU64::new(0),
            #[cfg(test)]
            end_waits: AtomicU64::new(0),
            state: Mutex::new(State {
                stopped: false,
                watchdog: Watchdog::NotStarted,
            }),
            wake: Condvar::new(),
            watch: Condvar::new(),
        });
        Ok(Pool {
            tx: Some(tx),
            inner,
        })
    }

    /// Queues a job; gives it back when the queue is full (or no thread
    /// can run it).
    pub(crate) fn try_submit(&self, job: Job) -> Result<(), Job> {
        let Some(tx) = &self.tx else { return Err(job) };
        if self.inner.started.load(Ordering::SeqCst) == 0
            && !self.inner.start_thread()
            && self.inner.started.load(Ordering::SeqCst) == 0
        {
            return Err(job);
        }
        tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(j) | TrySendError::Disconnected(j) => j,
        })?;
        self.inner.dispatch(false);
        Ok(())
    }

    /// Runs `job` on this thread now, as a pool thread would (its panic
    /// recorded for the engine to report, not printed): a quick tool's call
    /// on the thread that read it. The pool's counts and job estimate are
    /// left alone: they describe the pool's threads.
    pub(crate) fn run_here(&self, job: impl FnOnce()) {
        struct Restore(bool, bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                POOL_THREAD.with(|p| p.set(self.0));
                QUICK.with(|q| q.set(self.1));
            }
        }
        let _restore = Restore(
            POOL_THREAD.with(|p| p.replace(true)),
            QUICK.with(|q| q.replace(true)),
        );
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            log::error!(
                "a quick job panicked outside its guard: {}",
                take_panic_report()
            );
        }
    }

    /// Threads started so far.
    #[cfg(test)]
    pub(crate) fn threads(&self) -> usize {
        self.inner.started.load(Ordering::SeqCst)
    }
}

/// Counts a thread out of `running` however its job ends.
struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Pool {
    /// Stops the threads (and the watchdog) once the queue is empty.
    fn drop(&mut self) {
        self.tx = None;
        self.inner.lock().stopped = true;
        self.inner.wake.notify_all();
        self.inner.watch.notify_all();
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A job is queued: a spinning thread will take it; else wake a parked
    /// thread or start one, while fewer than `cores` run jobs (or when
    /// `force`d by the watchdog); else leave it to the running threads and
    /// the watchdog.
    fn dispatch(self: &Arc<Self>, force: bool) {
        // Pairs with the fences in `park`, `work` and `watchdog`: either
        // they see the job, or this sees them parked, spinning or not
        // watching.
        fence(Ordering::SeqCst);
        if self.spinning.load(Ordering::SeqCst) + self.starting.load(Ordering::SeqCst) > 0 {
            return;
        }
        if !force {
            let running = self.running.load(Ordering::SeqCst);
            if running >= self.cores || (running > 0 && self.soon_taken(running)) {
                return self.watch();
            }
        }
        if self.parked.load(Ordering::SeqCst) > 0 {
            let _held = self.lock();
            self.wake.notify_one();
        } else if self.started.load(Ordering::SeqCst) < self.max && !self.rx.is_empty() {
            if !self.start_thread() {
                // At the size after all, or no thread could start: the
                // watchdog tries again.
                self.watch();
            }
        } else if !force {
            // At the pool's size: the next thread to finish takes it.
            self.watch();
        }
    }

    /// Whether `running` threads, taking the queued jobs as they finish
    /// theirs, are expected to reach the last one within [`SHORT_WAIT`] —
    /// unless the latest job has run past twice the average and half a
    /// [`WATCH_TICK`] (a handler that blocks, waiting for its client say):
    /// then nothing is expected.
    fn soon_taken(&self, running: usize) -> bool {
        let running_for = self
            .nanos_now()
            .saturating_sub(self.job_started.load(Ordering::Relaxed));
        soon_reached(
            self.job_nanos.load(Ordering::Relaxed),
            running_for,
            self.rx.len(),
            running,
        )
    }

    /// Nanoseconds since the pool's epoch.
    fn nanos_now(&self) -> u64 {
        self.epoch.elapsed().as_nanos().min(u64::MAX.into()) as u64
    }

    /// Makes sure the watchdog is awake.
    fn watch(self: &Arc<Self>) {
        if self.watching.load(Ordering::SeqCst) {
            return;
        }
        let mut state = self.lock();
        match state.watchdog {
            Watchdog::Watching => return,
            Watchdog::Parked => self.watch.notify_one(),
            Watchdog::NotStarted => {
                let inner = self.clone();
                let spawned = thread::Builder::new()
                    .name(WATCHDOG_THREAD.to_owned())
                    .spawn(move || inner.watchdog());
                if let Err(e) = spawned {
                    // The running threads still take every job, later;
                    // the next job that needs the watchdog tries again.
                    if !self.watchdog_failed.swap(true, Ordering::SeqCst) {
                        log::error!("cannot start the watchdog of {}: {e}", self.prefix);
                    }
                    return;
                }
            }
        }
        state.watchdog = Watchdog::Watching;
        self.watching.store(true, Ordering::SeqCst);
    }

    /// Every [`WATCH_TICK`]: if jobs are queued and none was taken since
    /// the last tick, wake or start one more thread. Parks after
    /// [`WATCH_IDLE_TICKS`] ticks with nothing queued; waits for a job to
    /// end while jobs are queued but every thread of a full pool is in one
    /// ([`Inner::full_and_busy`]).
    fn watchdog(self: Arc<Self>) {
        // Jobs taken so far and jobs queued, at the last tick.
        let (mut taken_then, mut queued_then) = (self.taken.load(Ordering::SeqCst), 0);
        let mut idle = 0;
        let mut state = self.lock();
        while !state.stopped {
            state = self
                .watch
                .wait_timeout(state, WATCH_TICK)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            #[cfg(test)]
            self.watch_ticks.fetch_add(1, Ordering::SeqCst);
            // Read before looking at the threads: a job that ends after
            // this is seen by `await_job_end`.
            let ended = self.ended.load(Ordering::SeqCst);
            let taken = self.taken.load(Ordering::SeqCst);
            let queued = self.rx.len();
            if queued > 0 {
                idle = 0;
                if self.full_and_busy() {
                    // No thread to wake or start: ticking would only spin.
                    state = self.await_job_end(state, ended);
                    // What happened meanwhile is not this tick's business.
                    (taken_then, queued_then) = (self.taken.load(Ordering::SeqCst), self.rx.len());
                    continue;
                }
                // Fewer jobs taken since the last tick than were waiting
                // then: one of them waited a whole tick (the running
                // threads block rather than compute). One more thread.
                if taken.wrapping_sub(taken_then) < queued_then as u64 {
                    drop(state);
                    self.dispatch(true);
                    state = self.lock();
                }
            } else if idle + 1 < WATCH_IDLE_TICKS {
                idle += 1;
            } else {
                idle = 0;
                state.watchdog = Watchdog::Parked;
                self.watching.store(false, Ordering::SeqCst);
                fence(Ordering::SeqCst);
                if !self.rx.is_empty() {
                    state.watchdog = Watchdog::Watching;
                    self.watching.store(true, Ordering::SeqCst);
                }
                while state.watchdog == Watchdog::Parked && !state.stopped {
                    state = self.watch.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                // What happened while parked is not this tick's business.
                (taken_then, queued_then) = (self.taken.load(Ordering::SeqCst), self.rx.len());
                continue;
            }
            (taken_then, queued_then) = (taken, queued);
        }
    }

    /// Whether the pool is at its size and every thread is in a job: none
    /// parked to wake, none spinning or starting that will look at the
    /// queue, and none more to start. (A thread between two jobs takes a
    /// queued one itself: `park` sleeps only on an empty queue.)
    fn full_and_busy(&self) -> bool {
        self.started.load(Ordering::SeqCst) >= self.max
            && self.parked.load(Ordering::SeqCst) == 0
            && self.spinning.load(Ordering::SeqCst) == 0
            && self.starting.load(Ordering::SeqCst) == 0
    }

    /// Waits, holding `state`'s lock between looks, until more than
    /// `ended` jobs have ended, the pool is below its size (a start that
    /// was under way failed) or the pool is dropped. Pairs with
    /// [`Inner::wake_awaiting_end`]: either it sees this waiting, or this
    /// sees what it did.
    fn await_job_end<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        ended: u64,
    ) -> MutexGuard<'a, State> {
        #[cfg(test)]
        self.end_waits.fetch_add(1, Ordering::SeqCst);
        self.awaiting_end.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.ended.load(Ordering::SeqCst) == ended
            && self.started.load(Ordering::SeqCst) >= self.max
            && !state.stopped
        {
            state = self.watch.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        self.awaiting_end.store(false, Ordering::SeqCst);
        state
    }

    /// A pool thread's job ended: wakes the watchdog if it waits for that.
    fn job_ended(&self) {
        self.ended.fetch_add(1, Ordering::SeqCst);
        self.wake_awaiting_end();
    }

    /// Wakes the watchdog if it is in [`Inner::await_job_end`] (a job ended
    /// or the pool is no longer full).
    fn wake_awaiting_end(&self) {
        // Pairs with the fence in `await_job_end`.
        fence(Ordering::SeqCst);
        if self.awaiting_end.load(Ordering::SeqCst) {
            let _held = self.lock();
            self.watch.notify_one();
        }
    }

    /// Starts one more thread unless the pool is at its size, or a start
    /// failed less than [`SPAWN_RETRY`] ago; false when none started.
    fn start_thread(self: &Arc<Self>) -> bool {
        let now = self.nanos_now();
        if !self.spawn_failures.may_try(now) {
            return false;
        }
        // `starting` is raised first and lowered last: a start that takes
        // `started` to the pool's size, and may yet fail, is never seen as
        // a full pool with nothing starting (`full_and_busy`), which waits
        // for a job to end. (Looked at first: at the size, nothing is
        // raised, not even for a moment.)
        if self.started.load(Ordering::SeqCst) >= self.max {
            return false;
        }
        self.starting.fetch_add(1, Ordering::SeqCst);
        let started = self.started.fetch_add(1, Ordering::SeqCst);
        if started >= self.max {
            self.started.fetch_sub(1, Ordering::SeqCst);
            self.starting.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        match self.spawn(started) {
            Ok(_) => true,
            Err(e) => {
                self.unstart();
                if let Some(failed) = self.spawn_failures.failed(now) {
                    log::error!(
                        "cannot start a thread for {}: {e} ({failed} failed since the last such line, said at most every {DEFAULT_LOG_INTERVAL:?}); the next try waits {SPAWN_RETRY:?}",
                        self.prefix
                    );
                }
                false
            }
        }
    }

    /// Takes back a start that failed, and wakes the watchdog if it waits
    /// for a job to end: it may have read `started` at the pool's size
    /// while the start ran, and `starting` after it had failed, as a full
    /// pool with nothing starting (the pool is not full now).
    fn unstart(&self) {
        self.started.fetch_sub(1, Ordering::SeqCst);
        self.starting.fetch_sub(1, Ordering::SeqCst);
        self.wake_awaiting_end();
    }

    /// Spawns thread number `number` of the pool.
    fn spawn(self: &Arc<Self>, number: usize) -> std::io::Result<thread::JoinHandle<()>> {
        #[cfg(test)]
        {
            self.spawn_tries.fetch_add(1, Ordering::SeqCst);
            if self.refuse_spawns.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("refused by the test"));
            }
        }
        let inner = self.clone();
        thread::Builder::new()
            .name(format!("{}{number}", self.prefix))
            .spawn(move || inner.work())
    }

    fn work(self: Arc<Self>) {
        POOL_THREAD.with(|p| p.set(true));
        let spin = crate::wait::Spin::default();
        // From here on this thread looks at the queue before it parks.
        self.starting.fetch_sub(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while let Some(job) = self.next(&spin) {
            self.taken.fetch_add(1, Ordering::SeqCst);
            self.running.fetch_add(1, Ordering::SeqCst);
            // More waiting: get the next thread going before this one is
            // busy (the fence pairs with `dispatch`'s: a job queued while
            // this thread still counted as spinning is seen here).
            fence(Ordering::SeqCst);
            if !self.rx.is_empty() {
                self.dispatch(false);
            }
            let _running = Running(&self.running);
            let start = Instant::now();
            self.job_started.store(self.nanos_now(), Ordering::Relaxed);
            if catch_unwind(AssertUnwindSafe(job)).is_err() {
                log::error!(
                    "a pool job panicked outside its guard: {}",
                    take_panic_report()
                );
            }
            // Threads may race here; any of their figures will do.
            let took = start.elapsed().as_nanos().min(u64::MAX.into()) as u64;
            let average = self.job_nanos.load(Ordering::Relaxed);
            self.job_nanos
                .store(average - average / 8 + took / 8, Ordering::Relaxed);
            self.job_ended();
        }
    }

    /// The next job: queued now, or within a spin (if no other thread
    /// spins), or after parking. `None` once the pool is dropped and the
    /// queue is empty.
    fn next(&self, spin: &crate::wait::Spin) -> Option<Job> {
        let began = Instant::now();
        loop {
            match self.rx.try_recv() {
                Ok(job) => return Some(job),
                Err(TryRecvError::Disconnected) => return None,
                Err(TryRecvError::Empty) => {}
            }
            if spin.worthwhile()
                && self
                    .spinning
                    .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
            {
                let got = spin.poll(&self.rx);
                self.spinning.store(0, Ordering::SeqCst);
                match got {
                    Ok(job) => return Some(job),
                    Err(TryRecvError::Disconnected) => return None,
                    Err(TryRecvError::Empty) => {}
                }
            }
            self.park(spin, began);
        }
    }

    /// Sleeps until a job is queued (or the pool is dropped).
    fn park(&self, spin: &crate::wait::Spin, began: Instant) {
        let mut state = self.lock();
        self.parked.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        while self.rx.is_empty() && !state.stopped {
            state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        self.parked.fetch_sub(1, Ordering::SeqCst);
        spin.parked(began);
    }
}

/// Thread starts that failed: each is told through a [`Throttle`] (one
/// line a period, counting those between), and none is tried again for
/// [`SPAWN_RETRY`] after one.
#[derive(Default)]
struct SpawnFailures {
    told: Throttle,
    // No start before this, in nanoseconds since the pool's epoch.
    retry_at: AtomicU64,
}

impl SpawnFailures {
    /// Whether a start may be tried at `now` (nanoseconds since the epoch).
    fn may_try(&self, now: u64) -> bool {
        now >= self.retry_at.load(Ordering::SeqCst)
    }

    /// A start failed at `now`: the next waits [`SPAWN_RETRY`]. `Some(n)`
    /// when a line is due, `n` counting the failures since the last.
    fn failed(&self, now: u64) -> Option<u64> {
        let pause = SPAWN_RETRY.as_nanos().min(u64::MAX.into()) as u64;
        self.retry_at
            .store(now.saturating_add(pause), Ordering::SeqCst);
        self.told.event()
    }
}

/// [`Inner::soon_taken`] on its figures: jobs averaging `average` ns, the
/// latest running for `running_for` ns, `queued` waiting for `running`
/// threads.
fn soon_reached(average: u64, running_for: u64, queued: usize, running: usize) -> bool {
    let short = SHORT_WAIT.as_nanos() as u64;
    // (Not sooner than half a watchdog tick: on a busy machine a short
    // job is pre-empted for longer than it runs.)
    let overran = average
        .saturating_mul(2)
        .max(WATCH_TICK.as_nanos() as u64 / 2);
    if running_for > overran {
        return false;
    }
    let ahead = (queued as u64).saturating_mul(average);
    ahead / running.max(1) as u64 <= short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_cannot_start_is_tried_again_only_after_a_pause() {
        let pool = Pool::new("mcpvisor-test-nospawn-", 4, 16).unwrap();
        pool.inner.refuse_spawns.store(true, Ordering::SeqCst);
        let began = Instant::now();
        for _ in 0..100 {
            assert!(pool.try_submit(Box::new(|| {})).is_err(), "no thread");
        }
        // Each try after the first waited a pause (however slow this loop was).
        let pauses = began.elapsed().as_nanos() / SPAWN_RETRY.as_nanos();
        let tries = pool.inner.spawn_tries.load(Ordering::SeqCst);
        assert!(
            tries as u128 <= 1 + pauses,
            "{tries} tries in {:?}",
            began.elapsed()
        );
        assert_eq!(pool.threads(), 0);
    }

    #[test]
    fn a_failed_start_pauses_the_next_and_is_told_once_a_period() {
        let failures = SpawnFailures::default();
        assert!(failures.may_try(0));
        let pause = SPAWN_RETRY.as_nanos() as u64;
        assert_eq!(failures.failed(1_000), Some(1), "the first is told");
        assert!(!failures.may_try(1_000));
        assert!(!failures.may_try(1_000 + pause - 1));
        assert!(failures.may_try(1_000 + pause));
        // Within the throttle's period (10 s): counted, not told.
        assert_eq!(failures.failed(1_000 + pause), None);
    }

    #[test]
    fn threads_start_as_work_needs_them_and_never_beyond_the_size() {
        let wait = |rx: &crossbeam_channel::Receiver<()>| {
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("within 10 s")
        };
        // More than the cores: the threads past them are started by the
        // watchdog, seeing the running ones blocked.
        let size = thread::available_parallelism().map_or(1, |n| n.get()) + 2;
        let pool = Pool::new("mcpvisor-test-pool-", size, 64).unwrap();
        assert_eq!(pool.threads(), 0, "nothing started before the first job");
        let (done_tx, done) = crossbeam_channel::unbounded();
        let d = done_tx.clone();
        assert!(pool
            .try_submit(Box::new(move || d.send(()).unwrap()))
            .is_ok());
        wait(&done);
        assert_eq!(pool.threads(), 1);
        // Jobs that block: while one waits and the pool is below its size,
        // a thread starts for it, up to the size.
        let (release_tx, release) = crossbeam_channel::unbounded::<()>();
        let (running_tx, running) = crossbeam_channel::unbounded::<()>();
        let jobs = size + 5;
        for _ in 0..jobs {
            let (r, d, s) = (release.clone(), done_tx.clone(), running_tx.clone());
            assert!(pool
                .try_submit(Box::new(move || {
                    s.send(()).unwrap();
                    let _ = r.recv();
                    d.send(()).unwrap();
                }))
                .is_ok());
        }
        for _ in 0..size {
            wait(&running);
        }
        assert_eq!(pool.threads(), size);
        // The other 5 wait for a thread: each job released lets one run.
        assert!(running.try_recv().is_err(), "more jobs ran than threads");
        for _ in 0..5 {
            release_tx.send(()).unwrap();
            wait(&done);
            wait(&running);
        }
        for _ in 0..size {
            release_tx.send(()).unwrap();
            wait(&done);
        }
        assert_eq!(pool.threads(), size);
    }

    #[test]
    fn short_jobs_are_left_to_the_running_thread_and_a_blocked_one_is_not_waited_for() {
        let wait = |rx: &crossbeam_channel::Receiver<()>| {
            rx.recv_timeout(std::time::Duration::from_secs(10))
                .expect("within 10 s")
        };
        let pool = Pool::new("mcpvisor-short-", 4, 64).unwrap();
        let (tx, rx) = crossbeam_channel::unbounded::<()>();
        let job = |tx: &crossbeam_channel::Sender<()>| -> Job {
            let tx = tx.clone();
            Box::new(move || tx.send(()).unwrap())
        };
        // Before any job ran, jobs count as long: one queued is not left
        // to a running thread. (Queued directly: no thread runs yet.)
        let queue = pool.tx.as_ref().unwrap();
        assert!(queue.try_send(job(&tx)).is_ok());
        assert!(!pool.inner.soon_taken(1));
        assert!(pool.try_submit(job(&tx)).is_ok());
        wait(&rx);
        wait(&rx);
        // Instant jobs until the average says so (a job pre-empted on a
        // busy machine weighs for a while).
        let read = || Duration::from_nanos(pool.inner.job_nanos.load(Ordering::SeqCst));
        let mut average = read();
        for _ in 0..10_000 {
            if average < SHORT_WAIT / 2 {
                break;
            }
            assert!(pool.try_submit(job(&tx)).is_ok());
            wait(&rx);
            average = read();
        }
        assert!(average < SHORT_WAIT / 2, "instant jobs average {average:?}");
        // On those figures (not the pool's own, which its running threads
        // change meanwhile):
        let average = average.as_nanos() as u64;
        assert!(
            soon_reached(average, 0, 1, 1),
            "a job queued behind one just begun is left to it"
        );
        let overran = WATCH_TICK.as_nanos() as u64;
        assert!(
            !soon_reached(average, overran.max(3 * average), 1, 1),
            "not behind one that overran"
        );

        // Short jobs so far; now one blocks. A short job queued behind it
        // runs anyway: the watchdog sees it wait and adds a thread.
        let (release_tx, release) = crossbeam_channel::bounded::<()>(1);
        let (started_tx, started) = crossbeam_channel::bounded::<()>(1);
        assert!(pool
            .try_submit(Box::new(move || {
                started_tx.send(()).unwrap();
                let _ = release.recv();
            }))
            .is_ok());
        wait(&started);
        let tx2 = tx.clone();
        assert!(pool
            .try_submit(Box::new(move || tx2.send(()).unwrap()))
            .is_ok());
        wait(&rx);
        release_tx.send(()).unwrap();
    }

    /// Polls `cond` until it holds, failing after 10 s.
    fn until(what: &str, cond: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "not within 10 s: {what}");
            thread::yield_now();
        }
    }

    #[test]
    fn a_full_pool_of_blocked_threads_does_not_tick_until_a_job_ends() {
        let wait = |rx: &crossbeam_channel::Receiver<()>| {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("within 10 s")
        };
        let size = 2;
        let pool = Pool::new("mcpvisor-test-full-", size, 16).unwrap();
        let inner = pool.inner.clone();
        // Handlers that block (on a slow upstream, say) until released.
        let (release_tx, release) = crossbeam_channel::unbounded::<()>();
        let (running_tx, running) = crossbeam_channel::unbounded::<()>();
        let (done_tx, done) = crossbeam_channel::unbounded::<()>();
        let blocking = || -> Job {
            let (r, s, d) = (release.clone(), running_tx.clone(), done_tx.clone());
            Box::new(move || {
                s.send(()).unwrap();
                let _ = r.recv();
                d.send(()).unwrap();
            })
        };
        for _ in 0..size {
            assert!(pool.try_submit(blocking()).is_ok());
        }
        for _ in 0..size {
            wait(&running);
        }
        assert_eq!(pool.threads(), size);
        // Two more queued behind them: no thread to wake or start.
        for _ in 0..2 {
            assert!(pool.try_submit(blocking()).is_ok());
        }
        until("the watchdog waits for a job to end", || {
            inner.end_waits.load(Ordering::SeqCst) == 1 && inner.awaiting_end.load(Ordering::SeqCst)
        });
        let ticks = inner.watch_ticks.load(Ordering::SeqCst);
        // Looked at for 50 ticks' worth (the old watchdog ticked all
        // along): it waits for a job's end with no timeout, so not one
        // tick passes, however busy the machine.
        let watched = Instant::now();
        while watched.elapsed() < 50 * WATCH_TICK {
            thread::yield_now();
        }
        assert_eq!(inner.watch_ticks.load(Ordering::SeqCst), ticks);
        assert!(running.try_recv().is_err(), "a queued job ran on no thread");
        // A job ends: its thread takes a queued one at once, and the
        // watchdog, woken, finds the pool as busy as before and waits again.
        release_tx.send(()).unwrap();
        wait(&done);
        wait(&running);
        until("the watchdog waits again", || {
            inner.end_waits.load(Ordering::SeqCst) == 2
        });
        let more = inner.watch_ticks.load(Ordering::SeqCst) - ticks;
        assert!(more <= 3, "{more} ticks for one job's end");
        // The rest end, the last queued job running after one of them.
        for _ in 0..3 {
            release_tx.send(()).unwrap();
        }
        for _ in 0..3 {
            wait(&done);
        }
    }

    #[test]
    fn a_start_that_fails_while_the_watchdog_waits_on_a_full_pool_wakes_it() {
        let wait = |rx: &crossbeam_channel::Receiver<()>| {
            rx.recv_timeout(Duration::from_secs(10))
                .expect("within 10 s")
        };
        let pool = Pool::new("mcpvisor-test-unstart-", 2, 16).unwrap();
        let inner = pool.inner.clone();
        let (release_tx, release) = crossbeam_channel::unbounded::<()>();
        let (running_tx, running) = crossbeam_channel::unbounded::<()>();
        assert!(pool
            .try_submit(Box::new(move || {
                running_tx.send(()).unwrap();
                let _ = release.recv();
            }))
            .is_ok());
        wait(&running);
        assert_eq!(pool.threads(), 1);
        // What the watchdog may read while a second thread's start is
        // under way: the pool at its size, nothing starting (read after
        // the start failed).
        inner.started.fetch_add(1, Ordering::SeqCst);
        let (ran_tx, ran) = crossbeam_channel::unbounded::<()>();
        assert!(pool
            .try_submit(Box::new(move || ran_tx.send(()).unwrap()))
            .is_ok());
        until("the watchdog waits for a job to end", || {
            inner.awaiting_end.load(Ordering::SeqCst)
        });
        // The start fails: the watchdog, woken, starts a thread for the
        // queued job while the first still blocks.
        inner.starting.fetch_add(1, Ordering::SeqCst);
        inner.unstart();
        wait(&ran);
        release_tx.send(()).unwrap();
    }

    /// Names of this process's threads.
    fn thread_names() -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .map(|d| {
                d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                    .map(|n| n.trim().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn dropping_the_pool_ends_its_threads() {
        let prefix = "mcpvisor-drop-";
        let pool = Pool::new(prefix, 4, 64).unwrap();
        let (done_tx, done) = crossbeam_channel::unbounded();
        for _ in 0..8 {
            let d = done_tx.clone();
            assert!(pool
                .try_submit(Box::new(move || d.send(()).unwrap()))
                .is_ok());
        }
        for _ in 0..8 {
            done.recv_timeout(std::time::Duration::from_secs(10))
                .unwrap();
        }
        assert!(thread_names().iter().any(|n| n.starts_with(prefix)));
        drop(pool);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while thread_names().iter().any(|n| n.starts_with(prefix)) {
            assert!(std::time::Instant::now() < deadline, "{:?}", thread_names());
            std::thread::yield_now();
        }
    }
}
