//! The supervisor: a thread that starts its children in order, restarts them
//! by strategy within its restart intensity, answers introspection and
//! dynamic-child commands, and stops everything in reverse start order.

use crate::child::{run_body, ChildContext, ExitReason, StopHooks};
use crate::clock::Clock;
use crate::event::{Event, EventHook, EventKind};
use crate::snapshot::{ChildCounts, ChildInfo, ChildSnapshot, ChildState, TreeSnapshot};
use crate::spec::{ChildKind, ChildSpec, Restart, Shutdown, Start, Strategy, SupervisorSpec};
use crossbeam_channel::{Receiver, Sender};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The exit reason of a supervisor that gave up, as its parent sees it.
pub const MAX_INTENSITY_REASON: &str = "reached max restart intensity";
/// How long a snapshot waits for a nested supervisor to answer.
pub const SNAPSHOT_TIMEOUT: Duration = Duration::from_secs(1);
// A select! default long enough to mean "no restart is scheduled".
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// Why a supervisor failed or could not be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SupervisorError {
    /// A child failed to start while the supervisor started.
    StartFailed {
        /// The supervisor.
        supervisor: String,
        /// The child.
        child: String,
        /// Why.
        reason: String,
    },
    /// The supervisor reached its restart intensity (or a nested one did and
    /// it escalated up to here).
    Escalated {
        /// The supervisor that gave up.
        supervisor: String,
        /// Why.
        reason: String,
    },
    /// The supervisor no longer runs.
    Gone,
}

impl fmt::Display for SupervisorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SupervisorError::StartFailed {
                supervisor,
                child,
                reason,
            } => {
                write!(
                    f,
                    "supervisor {supervisor}: child {child} failed to start: {reason}"
                )
            }
            SupervisorError::Escalated { supervisor, reason } => {
                write!(f, "supervisor {supervisor} failed: {reason}")
            }
            SupervisorError::Gone => f.write_str("the supervisor is no longer running"),
        }
    }
}

impl std::error::Error for SupervisorError {}

/// Why a dynamic-child command failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildError {
    /// No child with that id.
    NotFound,
    /// A child with that id exists already.
    AlreadyPresent,
    /// The child is running (or scheduled to restart); terminate it first.
    Running,
    /// The child could not be started.
    StartFailed(String),
    /// The supervisor no longer runs.
    Gone,
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChildError::NotFound => f.write_str("no such child"),
            ChildError::AlreadyPresent => f.write_str("a child with this id already exists"),
            ChildError::Running => f.write_str("the child is running"),
            ChildError::StartFailed(e) => write!(f, "start failed: {e}"),
            ChildError::Gone => f.write_str("the supervisor is no longer running"),
        }
    }
}

impl std::error::Error for ChildError {}

/// What a shutdown did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Children stopped and whose threads were joined.
    pub stopped: usize,
    /// Children whose threads ignored the stop signal past their timeout (or
    /// were `Brutal`) and were detached. Threads cannot be killed: a detached
    /// thread runs on until it returns by itself.
    pub detached: Vec<String>,
}

enum Command {
    Which(Sender<Vec<ChildInfo>>),
    Count(Sender<ChildCounts>),
    Snapshot(Sender<TreeSnapshot>),
    Start(ChildSpec, Sender<Result<(), ChildError>>),
    Terminate(String, Sender<Result<(), ChildError>>),
    Restart(String, Sender<Result<(), ChildError>>),
    Delete(String, Sender<Result<(), ChildError>>),
    Shutdown(Sender<ShutdownReport>),
}

/// A cloneable handle to a running supervisor (root or nested).
#[derive(Clone)]
pub struct SupervisorRef {
    id: String,
    tx: Sender<Command>,
    progress: Arc<AtomicU64>,
}

impl SupervisorRef {
    /// The supervisor's id.
    pub fn id(&self) -> &str {
        &self.id
    }
    fn ask<T>(
        &self,
        make: impl FnOnce(Sender<T>) -> Command,
        timeout: Option<Duration>,
    ) -> Option<T> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.tx.send(make(tx)).ok()?;
        match timeout {
            Some(t) => rx.recv_timeout(t).ok(),
            None => rx.recv().ok(),
        }
    }
    /// The children, in start order (OTP `which_children`).
    pub fn which_children(&self) -> Result<Vec<ChildInfo>, SupervisorError> {
        self.ask(Command::Which, None).ok_or(SupervisorError::Gone)
    }
    /// Counts of children (OTP `count_children`).
    pub fn count_children(&self) -> Result<ChildCounts, SupervisorError> {
        self.ask(Command::Count, None).ok_or(SupervisorError::Gone)
    }
    /// [`SupervisorRef::count_children`], or [`SupervisorError::Gone`]
    /// when the supervisor does not answer within `timeout` (busy starting
    /// or stopping a child).
    pub fn count_children_within(&self, timeout: Duration) -> Result<ChildCounts, SupervisorError> {
        self.ask(Command::Count, Some(timeout))
            .ok_or(SupervisorError::Gone)
    }
    /// A count this supervisor raises at each of its own steps: an event
    /// (a child started, exited, restarting, stopped), a command taken, a
    /// turn of its loop. One whose count moves is at work, also while it
    /// does not answer at once (a child's start that waits for it to be
    /// ready); one whose count stands still and that does not answer is
    /// stuck. The supervisors below it count their own.
    pub fn progress(&self) -> u64 {
        self.progress.load(Ordering::Relaxed)
    }
    /// A snapshot of the tree below this supervisor.
    pub fn snapshot(&self) -> Result<TreeSnapshot, SupervisorError> {
        self.ask(Command::Snapshot, None)
            .ok_or(SupervisorError::Gone)
    }
    /// [`SupervisorRef::snapshot`], or [`SupervisorError::Gone`] when the
    /// supervisor does not answer within `timeout` (busy stopping, say):
    /// for a caller that is itself a child of this supervisor.
    pub fn snapshot_within(&self, timeout: Duration) -> Result<TreeSnapshot, SupervisorError> {
        self.ask(Command::Snapshot, Some(timeout))
            .ok_or(SupervisorError::Gone)
    }
    /// Adds and starts a child at run time (e.g. one per connection).
    pub fn start_child(&self, spec: ChildSpec) -> Result<(), ChildError> {
        self.ask(|tx| Command::Start(spec, tx), None)
            .unwrap_or(Err(ChildError::Gone))
    }
    /// Stops a child by its shutdown policy; its spec stays.
    pub fn terminate_child(&self, id: &str) -> Result<(), ChildError> {
        self.ask(|tx| Command::Terminate(id.to_owned(), tx), None)
            .unwrap_or(Err(ChildError::Gone))
    }
    /// Starts a terminated child again.
    pub fn restart_child(&self, id: &str) -> Result<(), ChildError> {
        self.ask(|tx| Command::Restart(id.to_owned(), tx), None)
            .unwrap_or(Err(ChildError::Gone))
    }
    /// Removes a child that is not running.
    pub fn delete_child(&self, id: &str) -> Result<(), ChildError> {
        self.ask(|tx| Command::Delete(id.to_owned(), tx), None)
            .unwrap_or(Err(ChildError::Gone))
    }
    /// Stops every child in reverse start order, then the supervisor.
    pub fn shutdown(&self) -> Result<ShutdownReport, SupervisorError> {
        self.ask(Command::Shutdown, None)
            .ok_or(SupervisorError::Gone)
    }
}

/// A running root supervisor.
pub struct Supervisor {
    handle: SupervisorRef,
    thread: JoinHandle<Result<(), SupervisorError>>,
    // Disconnected when the supervisor's thread ends.
    ended: Receiver<()>,
}

impl Supervisor {
    /// Starts the supervisor's thread and its children, in order. If a child
    /// fails to start, the ones already started are stopped (reverse order)
    /// and the error is returned.
    pub fn start(spec: SupervisorSpec) -> Result<Supervisor, SupervisorError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let (init_tx, init_rx) = crossbeam_channel::bounded(1);
        let progress = Arc::new(AtomicU64::new(0));
        let handle = SupervisorRef {
            id: spec.id.clone(),
            tx: tx.clone(),
            progress: progress.clone(),
        };
        let id = spec.id.clone();
        let (alive, ended) = crossbeam_channel::bounded::<()>(0);
        let thread = thread::Builder::new()
            .name(format!("sup:{id}"))
            .spawn(move || {
                let _alive = alive;
                let mut sup = Sup::new(spec, tx, progress);
                if let Err(e) = sup.start_all() {
                    let _ = init_tx.send(Err(e.clone()));
                    return Err(e);
                }
                let _ = init_tx.send(Ok(()));
                sup.run(rx, crossbeam_channel::never()).map_err(|reason| {
                    SupervisorError::Escalated {
                        supervisor: sup.id.clone(),
                        reason,
                    }
                })
            })
            .map_err(|e| SupervisorError::StartFailed {
                supervisor: id.clone(),
                child: id.clone(),
                reason: e.to_string(),
            })?;
        match init_rx.recv() {
            Ok(Ok(())) => Ok(Supervisor {
                handle,
                thread,
                ended,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(SupervisorError::Gone),
        }
    }

    /// A handle for introspection and dynamic children.
    pub fn handle(&self) -> SupervisorRef {
        self.handle.clone()
    }

    /// A channel that is disconnected (its `recv` fails) once the
    /// supervisor has ended, for a `select!` beside other waits; nothing
    /// is ever sent on it. [`Supervisor::wait`] then says how it ended.
    pub fn ended(&self) -> Receiver<()> {
        self.ended.clone()
    }

    /// Blocks until the supervisor ends: `Ok` after a shutdown, `Err` when it
    /// reached its restart intensity (the daemon then exits non-zero).
    pub fn wait(self) -> Result<(), SupervisorError> {
        self.thread.join().unwrap_or(Err(SupervisorError::Gone))
    }

    /// Stops the tree (reverse start order, each child within its timeout).
    pub fn shutdown(self) -> Result<ShutdownReport, SupervisorError> {
        let report = self.handle.shutdown();
        self.wait()?;
        report
    }
}

/// Starts a supervision tree and blocks until it ends; `Err` when the root
/// failed (so a daemon can exit non-zero and let systemd restart it).
pub fn run(spec: SupervisorSpec) -> Result<(), SupervisorError> {
    Supervisor::start(spec)?.wait()
}

/// What a child thread runs, with errors already turned into text.
type Body = Box<dyn FnOnce(&ChildContext) -> Result<(), String> + Send>;

struct Exit {
    id: String,
    generation: u64,
    reason: ExitReason,
}

struct Running {
    generation: u64,
    stop: Sender<()>,
    hooks: Arc<Mutex<StopHooks>>,
    done: Receiver<ExitReason>,
    thread: JoinHandle<()>,
    started: Instant,
    nested: Option<SupervisorRef>,
}

struct Child {
    spec: ChildSpec,
    run: Option<Running>,
    restarts: u32,
    failures: u32,
    last_exit: Option<ExitReason>,
    restart_due: Option<Instant>,
}

impl Child {
    fn new(spec: ChildSpec) -> Child {
        Child {
            spec,
            run: None,
            restarts: 0,
            failures: 0,
            last_exit: None,
            restart_due: None,
        }
    }
}

struct Sup {
    id: String,
    strategy: Strategy,
    max_restarts: u32,
    period: Duration,
    clock: Arc<dyn Clock>,
    hook: Option<EventHook>,
    children: Vec<Child>,
    restarts: VecDeque<Instant>,
    exits_tx: Sender<Exit>,
    exits_rx: Receiver<Exit>,
    // Keeps the command channel open even when every handle is dropped.
    _commands: Sender<Command>,
    next_generation: u64,
    // Child threads detached and not seen to exit since: id, generation.
    detached: Vec<(String, u64)>,
    rng: u64,
    // Its step count (see `SupervisorRef::progress`).
    progress: Arc<AtomicU64>,
}

impl Sup {
    fn new(spec: SupervisorSpec, commands: Sender<Command>, progress: Arc<AtomicU64>) -> Sup {
        // Unbounded on purpose: one message per child thread exit, so it is
        // bounded by the number of threads this supervisor started.
        let (exits_tx, exits_rx) = crossbeam_channel::unbounded();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ (spec.id.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Sup {
            id: spec.id,
            strategy: spec.strategy,
            max_restarts: spec.max_restarts,
            period: spec.period,
            clock: spec.clock,
            hook: spec.hook,
            children: spec.children.into_iter().map(Child::new).collect(),
            restarts: VecDeque::new(),
            exits_tx,
            exits_rx,
            _commands: commands,
            next_generation: 1,
            detached: Vec::new(),
            rng: seed | 1,
            progress,
        }
    }

    fn emit(&self, kind: EventKind) {
        self.progress.fetch_add(1, Ordering::Relaxed);
        match &kind {
            EventKind::Exited { child, reason } if reason.is_abnormal() => {
                log::warn!("supervisor {}: child {child} exited: {reason}", self.id)
            }
            EventKind::Escalated { reason } => log::error!("supervisor {}: {reason}", self.id),
            EventKind::Detached { child } => log::error!(
                "supervisor {}: child {child} ignored its stop signal; thread detached",
                self.id
            ),
            other => log::debug!("supervisor {}: {other:?}", self.id),
        }
        if let Some(h) = &self.hook {
            // The hook is the user's code: its panic must not unwind the
            // supervisor's thread past its ordered shutdown.
            let told = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                h(&Event {
                    supervisor: self.id.clone(),
                    kind,
                })
            }));
            if told.is_err() {
                log::error!("supervisor {}: its event hook panicked", self.id);
            }
        }
    }

    fn index(&self, id: &str) -> Option<usize> {
        self.children.iter().position(|c| c.spec.id == id)
    }

    fn start_all(&mut self) -> Result<(), SupervisorError> {
        // Ids name children in every command and exit (OTP refuses a
        // duplicate at init): a second child of one id would never be
        // restarted, stopped or seen to exit.
        for (i, c) in self.children.iter().enumerate() {
            if self.children[..i].iter().any(|d| d.spec.id == c.spec.id) {
                return Err(SupervisorError::StartFailed {
                    supervisor: self.id.clone(),
                    child: c.spec.id.clone(),
                    reason: "another child has the same id".into(),
                });
            }
        }
        for i in 0..self.children.len() {
            if let Err(reason) = self.start_child(i) {
                let child = self.children[i].spec.id.clone();
                self.shutdown_all();
                return Err(SupervisorError::StartFailed {
                    supervisor: self.id.clone(),
                    child,
                    reason,
                });
            }
        }
        Ok(())
    }

    /// Starts child `i`'s thread; waits for readiness when the spec asks.
    fn start_child(&mut self, i: usize) -> Result<(), String> {
        let generation = self.next_generation;
        self.next_generation += 1;
        let spec = self.children[i].spec.clone();
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let (ready_tx, ready_rx) = crossbeam_channel::bounded::<()>(1);
        let (done_tx, done_rx) = crossbeam_channel::bounded::<ExitReason>(1);
        let hooks = Arc::new(Mutex::new(StopHooks::default()));
        let child_hooks = hooks.clone();
        let exits = self.exits_tx.clone();
        let id = spec.id.clone();
        let (body, nested, await_ready): (Body, _, _) = match &spec.start {
            Start::Worker(f) => {
                let f = f.clone();
                (
                    Box::new(move |ctx: &ChildContext| f(ctx).map_err(|e| e.to_string())),
                    None,
                    spec.await_ready.map(Some),
                )
            }
            Start::Supervisor(nested_spec) => {
                let mut nested_spec = (**nested_spec).clone();
                nested_spec.clock = self.clock.clone();
                if nested_spec.hook.is_none() {
                    nested_spec.hook = self.hook.clone();
                }
                let (tx, rx) = crossbeam_channel::unbounded();
                let progress = Arc::new(AtomicU64::new(0));
                let handle = SupervisorRef {
                    id: nested_spec.id.clone(),
                    tx: tx.clone(),
                    progress: progress.clone(),
                };
                let body = move |ctx: &ChildContext| -> Result<(), String> {
                    let mut sup = Sup::new(nested_spec, tx, progress);
                    sup.start_all().map_err(|e| e.to_string())?;
                    ctx.ready();
                    sup.run(rx, ctx.stop_signal().clone())
                };
                (Box::new(body), Some(handle), Some(None))
            }
        };
        // Thread names cannot hold NUL bytes.
        let name = if nested.is_some() {
            format!("sup:{id}")
        } else {
            id.clone()
        }
        .replace('\0', "?");
        let thread = thread::Builder::new()
            .name(name)
            .spawn(move || {
                let ctx = ChildContext::new(id.clone(), stop_rx, ready_tx, child_hooks);
                let reason = run_body(ctx, body);
                let _ = done_tx.send(reason.clone());
                let _ = exits.send(Exit {
                    id,
                    generation,
                    reason,
                });
            })
            .map_err(|e| {
                let error = format!("cannot spawn a thread: {e}");
                self.emit(EventKind::StartFailed {
                    child: spec.id.clone(),
                    error: error.clone(),
                });
                error
            })?;
        let run = Running {
            generation,
            stop: stop_tx,
            hooks,
            done: done_rx,
            thread,
            started: self.clock.now(),
            nested,
        };
        if let Some(timeout) = await_ready {
            // `None` (supervisors): wait as long as their own start takes.
            let answer = match timeout {
                Some(t) => ready_rx.recv_timeout(t).map_err(|e| e.is_timeout()),
                None => ready_rx.recv().map_err(|_| false),
            };
            if let Err(timed_out) = answer {
                let reason = if timed_out {
                    self.stop_running(&spec, run);
                    format!("not ready within {timeout:?}")
                } else {
                    let exit = run
                        .done
                        .recv()
                        .map_or_else(|_| "unknown".to_owned(), |r| r.to_string());
                    let _ = run.thread.join();
                    format!("exited before it was ready ({exit})")
                };
                self.emit(EventKind::StartFailed {
                    child: spec.id.clone(),
                    error: reason.clone(),
                });
                return Err(reason);
            }
        }
        self.children[i].run = Some(run);
        self.emit(EventKind::Started { child: spec.id });
        Ok(())
    }

    /// Signals a running child and waits per its shutdown policy. Returns the
    /// exit reason, or `None` if the thread was detached.
    fn stop_running(&mut self, spec: &ChildSpec, run: Running) -> Option<ExitReason> {
        let Running {
            generation,
            stop,
            hooks,
            done,
            thread,
            ..
        } = run;
        drop(stop);
        StopHooks::fire(&hooks);
        let reason = match spec.shutdown {
            Shutdown::Brutal => done.try_recv().ok(),
            Shutdown::Timeout(d) => done.recv_timeout(d).ok(),
            Shutdown::Infinity => done.recv().ok(),
        };
        match reason {
            Some(r) => {
                let _ = thread.join();
                Some(r)
            }
            None => {
                self.detached.push((spec.id.clone(), generation));
                self.emit(EventKind::Detached {
                    child: spec.id.clone(),
                });
                None
            }
        }
    }

    /// Stops child `i` if it runs; cancels a scheduled restart. Returns
    /// whether a thread was stopped and joined.
    fn terminate(&mut self, i: usize) -> bool {
        self.children[i].restart_due = None;
        let Some(run) = self.children[i].run.take() else {
            return false;
        };
        let spec = self.children[i].spec.clone();
        match self.stop_running(&spec, run) {
            Some(reason) => {
                self.children[i].last_exit = Some(reason.clone());
                self.emit(EventKind::Exited {
                    child: spec.id,
                    reason,
                });
                true
            }
            None => false,
        }
    }

    fn shutdown_all(&mut self) -> ShutdownReport {
        let before = self.detached.len();
        let mut stopped = 0;
        for i in (0..self.children.len()).rev() {
            stopped += usize::from(self.terminate(i));
        }
        ShutdownReport {
            stopped,
            detached: self.detached[before..]
                .iter()
                .map(|(id, _)| id.clone())
                .collect(),
        }
    }

    fn run(
        &mut self,
        commands: Receiver<Command>,
        parent_stop: Receiver<()>,
    ) -> Result<(), String> {
        let result = self.serve(commands, parent_stop);
        if let Err(reason) = &result {
            self.emit(EventKind::Escalated {
                reason: reason.clone(),
            });
            self.shutdown_all();
        }
        result
    }

    fn serve(
        &mut self,
        commands: Receiver<Command>,
        parent_stop: Receiver<()>,
    ) -> Result<(), String> {
        loop {
            self.progress.fetch_add(1, Ordering::Relaxed);
            // Exits before commands, as OTP's mailbox orders them: a crash
            // that came before a terminate_child is counted as a crash.
            while let Ok(exit) = self.exits_rx.try_recv() {
                self.handle_exit(exit)?;
            }
            let wait = self.next_due().map_or(IDLE_WAIT, |due| {
                due.saturating_duration_since(Instant::now())
            });
            crossbeam_channel::select! {
                recv(self.exits_rx) -> exit => {
                    if let Ok(exit) = exit {
                        self.handle_exit(exit)?;
                    }
                }
                recv(commands) -> cmd => match cmd {
                    Ok(Command::Shutdown(reply)) => {
                        let report = self.shutdown_all();
                        let _ = reply.send(report);
                        return Ok(());
                    }
                    Ok(cmd) => {
                        // Exits that came with it go first (see above).
                        while let Ok(exit) = self.exits_rx.try_recv() {
                            self.handle_exit(exit)?;
                        }
                        self.command(cmd)?
                    }
                    Err(_) => unreachable!("the supervisor holds a sender of its own command channel"),
                },
                recv(parent_stop) -> _ => {
                    self.shutdown_all();
                    return Ok(());
                }
                default(wait) => self.restart_due()?,
            }
        }
    }

    fn next_due(&self) -> Option<Instant> {
        self.children.iter().filter_map(|c| c.restart_due).min()
    }

    fn handle_exit(&mut self, exit: Exit) -> Result<(), String> {
        let current = self.index(&exit.id).filter(|&i| {
            self.children[i].run.as_ref().map(|r| r.generation) == Some(exit.generation)
        });
        let Some(i) = current else {
            // A thread we already stopped, or gave up on: one detached has
            // ended at last.
            self.detached
                .retain(|(id, g)| !(*id == exit.id && *g == exit.generation));
            return Ok(());
        };
        let run = self.children[i].run.take().expect("checked above");
        let ran_for = self.clock.now().saturating_duration_since(run.started);
        let _ = run.thread.join();
        self.children[i].last_exit = Some(exit.reason.clone());
        self.emit(EventKind::Exited {
            child: exit.id.clone(),
            reason: exit.reason.clone(),
        });
        self.after_exit(&exit.id, &exit.reason, Some(ran_for))
    }

    /// Applies restart type, intensity and strategy after child `id` exited
    /// (or failed to start, `ran_for: None`).
    fn after_exit(
        &mut self,
        id: &str,
        reason: &ExitReason,
        ran_for: Option<Duration>,
    ) -> Result<(), String> {
        let Some(i) = self.index(id) else {
            return Ok(());
        };
        let restart = match self.children[i].spec.restart {
            Restart::Permanent => true,
            Restart::Transient => reason.is_abnormal(),
            Restart::Temporary => false,
        };
        if !restart {
            if self.children[i].spec.restart == Restart::Temporary {
                self.children.remove(i);
            }
            return Ok(());
        }
        self.count_restart()?;
        let group: Vec<String> = match self.strategy {
            Strategy::OneForOne => vec![id.to_owned()],
            Strategy::OneForAll => self.children.iter().map(|c| c.spec.id.clone()).collect(),
            Strategy::RestForOne => self.children[i..]
                .iter()
                .map(|c| c.spec.id.clone())
                .collect(),
        };
        for other in group.iter().rev().filter(|g| g.as_str() != id) {
            if let Some(j) = self.index(other) {
                self.terminate(j);
            }
        }
        // Temporary siblings stopped by the strategy are not restarted (OTP).
        self.children.retain(|c| {
            c.spec.id == id || !group.contains(&c.spec.id) || c.spec.restart != Restart::Temporary
        });
        let delay = self.backoff_delay(id, ran_for);
        // A delay too long to add is as good as never (a `max` of
        // `Duration::MAX`): a year.
        let now = Instant::now();
        let due = now
            .checked_add(delay)
            .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600));
        for g in &group {
            if let Some(j) = self.index(g) {
                let c = &mut self.children[j];
                c.restarts += 1;
                c.restart_due = Some(due);
                let restarts = c.restarts;
                self.emit(EventKind::Restarting {
                    child: g.clone(),
                    delay,
                    restarts,
                });
            }
        }
        // Due now or later: the loop starts it on its next turn, so a child
        // that keeps failing to start is retried iteratively, never recursively.
        Ok(())
    }

    /// Records a restart; more than `max_restarts` within `period` is
    /// failure. A restart exactly `period` old still counts (as in OTP),
    /// and the one being recorded always does.
    fn count_restart(&mut self) -> Result<(), String> {
        let now = self.clock.now();
        self.restarts.push_back(now);
        while self
            .restarts
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) > self.period)
        {
            self.restarts.pop_front();
        }
        if self.restarts.len() as u64 > u64::from(self.max_restarts) {
            return Err(MAX_INTENSITY_REASON.to_owned());
        }
        Ok(())
    }

    fn backoff_delay(&mut self, id: &str, ran_for: Option<Duration>) -> Duration {
        let Some(i) = self.index(id) else {
            return Duration::ZERO;
        };
        let Some(b) = self.children[i].spec.backoff else {
            return Duration::ZERO;
        };
        if ran_for.is_some_and(|r| r >= b.reset_after) {
            self.children[i].failures = 0;
        }
        let failures = self.children[i].failures;
        self.children[i].failures = failures.saturating_add(1);
        // xorshift64: jitter needs spread, not secrecy.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        b.delay(failures, (self.rng >> 11) as f64 / (1u64 << 53) as f64)
    }

    /// Starts every child whose restart is due, in start order.
    fn restart_due(&mut self) -> Result<(), String> {
        let now = Instant::now();
        let due: Vec<String> = self
            .children
            .iter()
            .filter(|c| c.restart_due.is_some_and(|d| d <= now))
            .map(|c| c.spec.id.clone())
            .collect();
        for id in due {
            let Some(i) = self.index(&id) else { continue };
            // A start earlier in this pass may have failed and set its
            // group's restart later: this one waits with the group (for
            // rest_for_one, the child it depends on is down).
            if self.children[i].restart_due.is_none_or(|d| d > now) {
                continue;
            }
            self.children[i].restart_due = None;
            if let Err(reason) = self.start_child(i) {
                let reason = ExitReason::Error(reason);
                self.children[i].last_exit = Some(reason.clone());
                self.after_exit(&id, &reason, None)?;
            }
        }
        Ok(())
    }

    /// The index of child `id` if it is neither running nor about to restart.
    fn stopped_child(&self, id: &str) -> Result<usize, ChildError> {
        let i = self.index(id).ok_or(ChildError::NotFound)?;
        let c = &self.children[i];
        if c.run.is_some() || c.restart_due.is_some() {
            return Err(ChildError::Running);
        }
        Ok(i)
    }

    fn info(&self, c: &Child) -> ChildInfo {
        ChildInfo {
            id: c.spec.id.clone(),
            kind: c.spec.kind(),
            state: match (&c.run, c.restart_due) {
                (Some(_), _) => ChildState::Running,
                (None, Some(_)) => ChildState::Restarting,
                (None, None) => ChildState::Stopped,
            },
            restarts: c.restarts,
            last_exit: c.last_exit.clone(),
            uptime: c
                .run
                .as_ref()
                .map(|r| self.clock.now().saturating_duration_since(r.started)),
        }
    }

    fn snapshot(&self) -> TreeSnapshot {
        TreeSnapshot {
            id: self.id.clone(),
            strategy: self.strategy,
            children: self
                .children
                .iter()
                .map(|c| ChildSnapshot {
                    info: self.info(c),
                    subtree: c
                        .run
                        .as_ref()
                        .and_then(|r| r.nested.as_ref())
                        .and_then(|n| n.ask(Command::Snapshot, Some(SNAPSHOT_TIMEOUT))),
                })
                .collect(),
            detached: self.detached.iter().map(|(id, _)| id.clone()).collect(),
        }
    }

    fn command(&mut self, cmd: Command) -> Result<(), String> {
        self.progress.fetch_add(1, Ordering::Relaxed);
        match cmd {
            Command::Which(reply) => {
                let _ = reply.send(self.children.iter().map(|c| self.info(c)).collect());
            }
            Command::Count(reply) => {
                let mut n = ChildCounts {
                    specs: self.children.len(),
                    ..Default::default()
                };
                for c in &self.children {
                    n.active += usize::from(c.run.is_some());
                    match c.spec.kind() {
                        ChildKind::Worker => n.workers += 1,
                        ChildKind::Supervisor => n.supervisors += 1,
                    }
                }
                let _ = reply.send(n);
            }
            Command::Snapshot(reply) => {
                let _ = reply.send(self.snapshot());
            }
            Command::Start(spec, reply) => {
                let result = if self.index(&spec.id).is_some() {
                    Err(ChildError::AlreadyPresent)
                } else {
                    let id = spec.id.clone();
                    self.children.push(Child::new(spec));
                    self.start_child(self.children.len() - 1).map_err(|e| {
                        self.children.retain(|c| c.spec.id != id);
                        ChildError::StartFailed(e)
                    })
                };
                let _ = reply.send(result);
            }
            Command::Terminate(id, reply) => {
                let result = self
                    .index(&id)
                    .map(|i| {
                        self.terminate(i);
                    })
                    .ok_or(ChildError::NotFound);
                let _ = reply.send(result);
            }
            Command::Restart(id, reply) => {
                let result = self
                    .stopped_child(&id)
                    .and_then(|i| self.start_child(i).map_err(ChildError::StartFailed));
                let _ = reply.send(result);
            }
            Command::Delete(id, reply) => {
                let result = self.stopped_child(&id).map(|i| {
                    self.children.remove(i);
                });
                let _ = reply.send(result);
            }
            Command::Shutdown(_) => unreachable!("handled by the loop"),
        }
        Ok(())
    }
}
