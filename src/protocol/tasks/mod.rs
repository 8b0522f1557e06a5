//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): a
//! `tools/call` answered at once with a task handle while the tool runs
//! on, followed with `tasks/get`, answered with `tasks/update` when the
//! tool asks the client something, stopped with `tasks/cancel`.
//!
//! The server decides: a call becomes a task when its tool supports tasks
//! ([`TaskSupport`]) and the request declared the extension in its client
//! capabilities (per request in 2026-07-28, at `initialize` for a
//! session). A tool that requires tasks refuses other calls with -32021.
//! The handler is the same code either way: in a task, its questions to
//! the client wait in `tasks/get` for `tasks/update`, its cancellation is
//! `tasks/cancel`, and progress and log messages are dropped (the
//! extension defines neither for tasks).
//!
//! Tasks live in the engine, not in a session: a task outlives the
//! connection that created it, and any request that names its id (128
//! random bits) and declares the extension may follow it. Storage is
//! bounded ([`TaskOptions::max_tasks`]); a task is dropped once its
//! `ttlMs` has passed (a running one is cancelled first), by a supervised
//! sweeper ([`Engine::task_sweeper`](super::Engine::task_sweeper)), when
//! it is asked for, and when storage is full.

pub(crate) mod methods;
mod task;

pub use task::TaskStatus;
pub(crate) use task::{Owner, Task};

use super::context::Context;
use super::session_id::{log_name, new_session_id};
use crate::jsonrpc::ErrorObject;
use crate::model::Answer;
use crate::sync::lock;
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The extension's identifier, in `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// Default time a task is kept after its creation (`ttlMs`): an hour.
pub const DEFAULT_TASK_TTL: Duration = Duration::from_secs(3600);
/// Default polling interval suggested to clients (`pollIntervalMs`).
pub const DEFAULT_TASK_POLL_INTERVAL: Duration = Duration::from_millis(500);
/// Default bound on stored tasks, running or ended.
pub const DEFAULT_MAX_TASKS: usize = 1024;
/// Default bound on tasks running at once (each has a thread of its own).
pub const DEFAULT_MAX_RUNNING_TASKS: usize = 64;
/// Default bound on the tasks stored for one owner (a bearer credential,
/// else a session): a quarter of [`DEFAULT_MAX_TASKS`].
pub const DEFAULT_MAX_TASKS_PER_OWNER: usize = DEFAULT_MAX_TASKS / 4;
/// The longest the task sweeper sleeps with tasks stored (a longer time to
/// live is reached in several sleeps).
const MAX_SWEEP_WAIT: Duration = Duration::from_secs(3600);

/// Whether a tool's calls may run as tasks.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum TaskSupport {
    /// Never a task (the default).
    #[default]
    Forbidden,
    /// A task when the client declared the extension; else a plain call.
    Optional,
    /// Only as a task: a client that did not declare the extension gets
    /// -32021 naming it. Where the server runs no tasks (its task options
    /// allow none) it runs as a plain call; where its task storage is
    /// full, the call is refused (-32603, retry later).
    Required,
}

/// How tasks are kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskOptions {
    /// `ttlMs`: how long a task is kept after its creation (default
    /// [`DEFAULT_TASK_TTL`]).
    pub ttl: Duration,
    /// `pollIntervalMs` suggested to clients (default
    /// [`DEFAULT_TASK_POLL_INTERVAL`]).
    pub poll_interval: Duration,
    /// Tasks stored at most, running or ended (default
    /// [`DEFAULT_MAX_TASKS`]); zero turns the extension off. When full, a
    /// tool that merely supports tasks runs as a plain call, and one that
    /// requires them is refused with -32603.
    pub max_tasks: usize,
    /// Task threads at most (default [`DEFAULT_MAX_RUNNING_TASKS`]), with
    /// the same fallback; a cancelled or expired task's thread counts until
    /// its handler returns. (A handler that detaches itself keeps its
    /// handler-pool thread and does not count.)
    pub max_running: usize,
    /// Tasks stored at most for one owner, running or ended (default
    /// [`DEFAULT_MAX_TASKS_PER_OWNER`]): the bearer credential of the
    /// requests that made them, else their session (sessions made for one
    /// request, stateless HTTP POSTs, are one owner). Past it, the same fallback as
    /// for [`max_tasks`](Self::max_tasks): one credential, or one session,
    /// cannot fill the storage every client shares until its tasks expire.
    /// (A client without a credential that opens many sessions can: put a
    /// bearer token in front of a server that anyone can reach.)
    pub max_per_owner: usize,
}

impl Default for TaskOptions {
    fn default() -> Self {
        TaskOptions {
            ttl: DEFAULT_TASK_TTL,
            poll_interval: DEFAULT_TASK_POLL_INTERVAL,
            max_tasks: DEFAULT_MAX_TASKS,
            max_running: DEFAULT_MAX_RUNNING_TASKS,
            max_per_owner: DEFAULT_MAX_TASKS_PER_OWNER,
        }
    }
}

/// The engine's tasks, by id.
pub(crate) struct Tasks {
    options: TaskOptions,
    map: Mutex<HashMap<String, Arc<Task>>>,
    // Task threads alive (a cancelled or expired task's thread counts
    // until its handler returns).
    threads: AtomicUsize,
    // Wakes the sweeper, asleep while there are no tasks, at the first one.
    first: (Sender<()>, Receiver<()>),
}

/// A task thread's place under [`TaskOptions::max_running`], given back
/// when dropped.
struct Running<'a>(&'a AtomicUsize);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Tasks {
    pub(crate) fn new(options: TaskOptions) -> Tasks {
        Tasks {
            options,
            map: Mutex::new(HashMap::new()),
            threads: AtomicUsize::new(0),
            first: crossbeam_channel::bounded(1),
        }
    }

    /// A place for one more task thread, if under the bound.
    fn thread_place(&self) -> Option<Running<'_>> {
        let n = self.threads.fetch_add(1, Ordering::SeqCst);
        let place = Running(&self.threads);
        (n < self.options.max_running).then_some(place)
    }

    /// Drops a task that never started.
    fn forget(&self, id: &str) {
        lock(&self.map).remove(id);
    }

    /// Cancels and drops a task no client learned of (the call it was
    /// made for ended, or was cancelled, before it was answered): it
    /// would hold a place in storage until its time to live ran out.
    pub(crate) fn abandon(&self, task: &Task, why: &str) {
        task.cancel(why);
        self.forget(&task.id);
    }

    pub(crate) fn enabled(&self) -> bool {
        self.options.max_tasks > 0 && self.options.max_running > 0
    }

    /// A new working task, stored before anyone learns its id; `None` when
    /// storage is full, or holds as many of its owner's as it may, even
    /// after dropping expired tasks.
    pub(crate) fn create(&self, credential: Option<[u8; 32]>, session: &str) -> Option<Arc<Task>> {
        let owner = Owner::of(credential, session);
        let full = |map: &HashMap<String, Arc<Task>>| {
            map.len() >= self.options.max_tasks
                || map.values().filter(|t| t.owner == owner).count() >= self.options.max_per_owner
        };
        let mut map = lock(&self.map);
        if full(&map) {
            expire(&mut map, Instant::now());
            if full(&map) {
                return None;
            }
        }
        let task = Arc::new(Task::new(
            new_session_id(),
            credential,
            owner,
            self.options.ttl,
            self.options.poll_interval,
        ));
        map.insert(task.id.clone(), task.clone());
        // Every task lives as long: none expires before those stored already.
        if map.len() == 1 {
            let _ = self.first.0.try_send(());
        }
        Some(task)
    }

    /// The task `id`, unless unknown or expired.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Task>> {
        let task = lock(&self.map).get(id).cloned()?;
        if task.expired(Instant::now()) {
            self.sweep();
            return None;
        }
        Some(task)
    }

    /// Drops expired tasks (cancelling those still running); how many.
    pub(crate) fn sweep(&self) -> usize {
        expire(&mut lock(&self.map), Instant::now())
    }

    /// When the sweeper should look next: a timer ready when the first
    /// stored task is due to expire (never, with none stored), and a
    /// channel ready when a first task is stored.
    pub(crate) fn next_expiry(&self) -> (Receiver<Instant>, Receiver<()>) {
        let now = Instant::now();
        let due = match lock(&self.map).values().map(|t| t.expires_in(now)).min() {
            Some(d) => crossbeam_channel::after(d.min(MAX_SWEEP_WAIT)),
            None => crossbeam_channel::never(),
        };
        (due, self.first.1.clone())
    }

    /// Tasks stored, by status.
    pub(crate) fn counts(&self) -> Vec<(TaskStatus, usize)> {
        let map = lock(&self.map);
        TaskStatus::ALL
            .into_iter()
            .map(|s| (s, map.values().filter(|t| t.status() == s).count()))
            .collect()
    }

    /// Cancels every task (the engine is going away).
    pub(crate) fn cancel_all(&self) {
        let tasks: Vec<_> = lock(&self.map).values().cloned().collect();
        for t in tasks {
            t.cancel("the server is shutting down");
        }
    }
}

fn expire(map: &mut HashMap<String, Arc<Task>>, now: Instant) -> usize {
    let before = map.len();
    map.retain(|_, t| {
        let keep = !t.expired(now);
        if !keep {
            t.cancel("the task's time to live passed");
        }
        keep
    });
    before - map.len()
}

/// What a `tools/call` becomes.
pub(crate) enum Plan {
    /// A plain call.
    Call,
    /// A task, run by a thread of its own from the start.
    Task,
    /// Refused.
    Refuse(ErrorObject),
}

/// Decides what a call of a tool with `support` becomes for the request
/// of `ctx`. `self_detaching` tools start as plain calls and may become
/// tasks later ([`Context::detach`]).
pub(crate) fn plan(ctx: &Context, support: TaskSupport, self_detaching: bool) -> Plan {
    // A server that runs no tasks (and so does not offer the extension)
    // runs every call plainly: it can serve them all without one.
    if !ctx.engine().tasks.enabled() {
        return Plan::Call;
    }
    let declared = ctx.protocol().client_extension(TASKS_EXTENSION);
    match (support, declared) {
        (TaskSupport::Forbidden, _) => Plan::Call,
        (TaskSupport::Required, false) => {
            Plan::Refuse(ErrorObject::missing_client_extension(TASKS_EXTENSION))
        }
        (TaskSupport::Optional, false) => Plan::Call,
        (_, true) if self_detaching => Plan::Call,
        (_, true) => Plan::Task,
    }
}

/// Runs `run` as a new task on a thread of its own and returns the
/// `CreateTaskResult` with the task; `None` when no task can be made now
/// (storage full, or no thread).
pub(crate) fn start(
    ctx: &Context,
    run: impl FnOnce(&Context) -> Result<Answer, ErrorObject> + Send + 'static,
) -> Option<(Value, Arc<Task>)> {
    let engine = ctx.engine().clone();
    // Counted before the task exists: a full house makes no task.
    let place = engine.tasks.thread_place()?;
    let Some(task) = engine.tasks.create(ctx.credential(), ctx.task_owner()) else {
        drop(place);
        return None;
    };
    std::mem::forget(place);
    let task_ctx = ctx.for_task(task.clone());
    let created = task.created_result();
    let started = task.clone();
    let name = log_name(&task.id);
    let thread_engine = engine.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("mcp-task-{name}"))
        .spawn(move || {
            // Given back when the handler returns, however it ends.
            let _place = Running(&thread_engine.tasks.threads);
            let run = std::panic::AssertUnwindSafe(|| run(&task_ctx));
            let outcome = std::panic::catch_unwind(run).unwrap_or_else(|_| {
                let id = task_ctx.task_id().unwrap_or_default();
                log::error!("task {}: its handler panicked", log_name(&id));
                Err(ErrorObject::internal(
                    "internal error: the task's handler panicked",
                ))
            });
            task_ctx.finish(outcome);
        });
    match spawned {
        Ok(_) => Some((created, started)),
        Err(e) => {
            log::error!("task {name}: no thread: {e}");
            drop(Running(&engine.tasks.threads));
            engine.tasks.forget(&task.id);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use supervisor::{Strategy, Supervisor, SupervisorSpec};

    #[test]
    fn one_owner_fills_only_its_share_of_the_storage() {
        let tasks = Tasks::new(TaskOptions {
            max_tasks: 4,
            max_per_owner: 2,
            ..Default::default()
        });
        let token = Some([7; 32]);
        assert!(tasks.create(None, "a").is_some());
        assert!(tasks.create(None, "a").is_some());
        assert!(tasks.create(None, "a").is_none(), "session a has its share");
        // Another session, or a credential, has its own share; a
        // credential's share is its own whatever the session.
        assert!(tasks.create(token, "a").is_some());
        assert!(tasks.create(token, "b").is_some());
        assert!(tasks.create(token, "c").is_none());
        assert!(tasks.create(None, "b").is_none(), "the storage is full");
    }

    #[test]
    fn the_sweeper_sleeps_without_tasks_and_drops_one_when_its_time_passes() {
        let tasks = Tasks::new(TaskOptions {
            ttl: Duration::from_millis(50),
            ..Default::default()
        });
        let (due, first) = tasks.next_expiry();
        assert!(due.try_recv().is_err() && first.try_recv().is_err());
        let task = tasks.create(None, "s").unwrap();
        assert!(first.try_recv().is_ok(), "the first task wakes the sweeper");
        tasks.create(None, "s").unwrap();
        assert!(first.try_recv().is_err(), "a second one does not");
        let (due, _) = tasks.next_expiry();
        due.recv_timeout(Duration::from_secs(10)).unwrap();
        assert!(task.expired(Instant::now()));

        // The engine's sweeper drops the task with no request touching it.
        let options = crate::protocol::EngineOptions {
            tasks: TaskOptions {
                ttl: Duration::from_millis(50),
                ..Default::default()
            },
            ..Default::default()
        };
        let engine =
            crate::protocol::Engine::new(Default::default(), options, Default::default()).unwrap();
        let tree = Supervisor::start(
            SupervisorSpec::new("t", Strategy::OneForOne).child(engine.task_sweeper()),
        )
        .unwrap();
        let task = engine.tasks.create(None, "s").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while lock(&engine.tasks.map).contains_key(&task.id) {
            assert!(Instant::now() < deadline, "the sweeper dropped the task");
            std::thread::yield_now();
        }
        tree.shutdown().unwrap();
    }
}
