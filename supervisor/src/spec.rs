//! Specifications: what to start, and how to supervise it.

use crate::child::ChildContext;
use crate::clock::{Clock, SystemClock};
use crate::event::{Event, EventHook};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// OTP's default restart intensity: at most this many restarts ...
pub const DEFAULT_MAX_RESTARTS: u32 = 1;
/// ... within this period.
pub const DEFAULT_PERIOD: Duration = Duration::from_secs(5);
/// The shortest restart period, OTP's (whole seconds, at least one): a
/// shorter one is taken as this.
pub const MIN_PERIOD: Duration = Duration::from_secs(1);
/// OTP's default shutdown timeout of a worker.
pub const DEFAULT_WORKER_SHUTDOWN: Duration = Duration::from_secs(5);

/// What a worker's body returns; `Err` is an abnormal exit.
pub type WorkerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// The body of a worker thread.
pub type WorkerFn = Arc<dyn Fn(&ChildContext) -> WorkerResult + Send + Sync>;

/// When a child that exited is started again.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Always restarted.
    Permanent,
    /// Restarted only after an abnormal exit (panic or error).
    Transient,
    /// Never restarted; removed from the supervisor once it exits.
    Temporary,
}

/// How a child is stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Signal it, wait up to this long, then detach it (threads cannot be killed).
    Timeout(Duration),
    /// Signal it and detach it at once, without waiting.
    Brutal,
    /// Signal it and wait as long as it takes (the default for supervisors).
    Infinity,
}

/// Worker or supervisor.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ChildKind {
    /// A thread doing work.
    Worker,
    /// A nested supervisor.
    Supervisor,
}

/// Which children are restarted when one fails.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Only the failed child.
    OneForOne,
    /// All children (the others are stopped first, in reverse start order).
    OneForAll,
    /// The failed child and every child started after it.
    RestForOne,
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::OneForOne => "one_for_one",
            Strategy::OneForAll => "one_for_all",
            Strategy::RestForOne => "rest_for_one",
        })
    }
}

/// Exponential restart delay with jitter (not in OTP; for children that
/// crash while starting, such as child processes with a broken command).
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Backoff {
    /// Delay before the first restart.
    pub initial: Duration,
    /// Factor applied per consecutive failure.
    pub multiplier: f64,
    /// Upper bound of the delay.
    pub max: Duration,
    /// Random spread as a fraction of the delay (0.0 ..= 1.0): the delay is
    /// drawn from `[d * (1 - jitter), d]`.
    pub jitter: f64,
    /// A child that ran at least this long counts as healthy again: its next
    /// failure starts from `initial`.
    pub reset_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            multiplier: 2.0,
            max: Duration::from_secs(30),
            jitter: 0.2,
            reset_after: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The delay before restart number `failures` (0-based), with `unit` a
    /// uniform random number in `[0, 1)` for the jitter.
    pub fn delay(&self, failures: u32, unit: f64) -> Duration {
        let base =
            self.initial.as_secs_f64() * self.multiplier.max(1.0).powi(failures.min(64) as i32);
        let capped = base.min(self.max.as_secs_f64());
        let spread = capped * self.jitter.clamp(0.0, 1.0) * unit.clamp(0.0, 1.0);
        // Saturates: a `max` of Duration::MAX (or a NaN from odd inputs)
        // must not panic the supervisor thread.
        Duration::try_from_secs_f64((capped - spread).max(0.0)).unwrap_or(self.max)
    }
}

#[cfg(test)]
mod backoff_tests {
    use super::*;

    #[test]
    fn delays_grow_cap_and_never_panic() {
        let b = Backoff::default();
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(200));
        assert_eq!(b.delay(40, 0.0), b.max);
        let unbounded = Backoff {
            max: Duration::MAX,
            ..Backoff::default()
        };
        for failures in [0, 10, 63, 64, u32::MAX] {
            let d = unbounded.delay(failures, 0.5);
            assert!(d >= Duration::from_millis(50), "{failures}: {d:?}");
        }
        let odd = Backoff {
            multiplier: f64::NAN,
            jitter: f64::NAN,
            ..Backoff::default()
        };
        let _ = odd.delay(3, f64::NAN);
    }
}

#[derive(Clone)]
pub(crate) enum Start {
    Worker(WorkerFn),
    Supervisor(Box<SupervisorSpec>),
}

/// One child of a supervisor.
#[derive(Clone)]
pub struct ChildSpec {
    pub(crate) id: String,
    pub(crate) start: Start,
    pub(crate) restart: Restart,
    pub(crate) shutdown: Shutdown,
    pub(crate) backoff: Option<Backoff>,
    pub(crate) await_ready: Option<Duration>,
}

impl ChildSpec {
    /// A permanent worker running `body` on its own thread; it counts as
    /// started as soon as its thread runs (see [`ChildSpec::await_ready`]).
    pub fn worker<F>(id: impl Into<String>, body: F) -> ChildSpec
    where
        F: Fn(&ChildContext) -> WorkerResult + Send + Sync + 'static,
    {
        ChildSpec {
            id: id.into(),
            start: Start::Worker(Arc::new(body)),
            restart: Restart::Permanent,
            shutdown: Shutdown::Timeout(DEFAULT_WORKER_SHUTDOWN),
            backoff: None,
            await_ready: None,
        }
    }

    /// A nested supervisor (permanent, shutdown `Infinity`, as in OTP).
    pub fn supervisor(spec: SupervisorSpec) -> ChildSpec {
        ChildSpec {
            id: spec.id.clone(),
            start: Start::Supervisor(Box::new(spec)),
            restart: Restart::Permanent,
            shutdown: Shutdown::Infinity,
            backoff: None,
            await_ready: None,
        }
    }

    /// Sets the restart type.
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }
    /// Sets the shutdown policy.
    pub fn shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }
    /// Delays restarts with exponential backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = Some(backoff);
        self
    }
    /// The worker is started only once it calls [`ChildContext::ready`]
    /// (like OTP's `init/1` returning): exiting first, or not being ready
    /// within `timeout`, is a start error.
    pub fn await_ready(mut self, timeout: Duration) -> Self {
        self.await_ready = Some(timeout);
        self
    }
    /// The child's id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// Renames the child (a nested supervisor too), e.g. to run two
    /// listeners of one kind side by side under one parent.
    pub fn named(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        if let Start::Supervisor(spec) = &mut self.start {
            spec.id = self.id.clone();
        }
        self
    }
    /// Sets the restart intensity of a nested supervisor (see
    /// [`SupervisorSpec::intensity`], whose [`MIN_PERIOD`] holds here too);
    /// a worker is returned unchanged.
    pub fn intensity(mut self, max_restarts: u32, period: Duration) -> Self {
        if let Start::Supervisor(spec) = &mut self.start {
            spec.max_restarts = max_restarts;
            spec.period = period.max(MIN_PERIOD);
        }
        self
    }
    /// Worker or supervisor.
    pub fn kind(&self) -> ChildKind {
        match self.start {
            Start::Worker(_) => ChildKind::Worker,
            Start::Supervisor(_) => ChildKind::Supervisor,
        }
    }
}

/// A supervisor: its strategy, restart intensity and children.
#[derive(Clone)]
pub struct SupervisorSpec {
    pub(crate) id: String,
    pub(crate) strategy: Strategy,
    pub(crate) max_restarts: u32,
    pub(crate) period: Duration,
    pub(crate) children: Vec<ChildSpec>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) hook: Option<EventHook>,
}

impl SupervisorSpec {
    /// A supervisor named `id` with `strategy`, OTP's default intensity
    /// ([`DEFAULT_MAX_RESTARTS`] in [`DEFAULT_PERIOD`]) and no children.
    pub fn new(id: impl Into<String>, strategy: Strategy) -> SupervisorSpec {
        SupervisorSpec {
            id: id.into(),
            strategy,
            max_restarts: DEFAULT_MAX_RESTARTS,
            period: DEFAULT_PERIOD,
            children: Vec::new(),
            clock: Arc::new(SystemClock),
            hook: None,
        }
    }
    /// More than `max_restarts` restarts within `period` make the supervisor
    /// stop its children and fail ("reached max restart intensity"). A
    /// period under [`MIN_PERIOD`] is taken as that (OTP's is at least a
    /// second: in a shorter one, few restarts share a window, and a child
    /// that cannot start is retried for ever at full speed).
    pub fn intensity(mut self, max_restarts: u32, period: Duration) -> Self {
        self.max_restarts = max_restarts;
        self.period = period.max(MIN_PERIOD);
        self
    }
    /// Adds a child (children start in the order they are added).
    pub fn child(mut self, child: ChildSpec) -> Self {
        self.children.push(child);
        self
    }
    /// The clock of the intensity window (nested supervisors inherit it).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
    /// Calls `hook` on every start, exit, restart, escalation (nested
    /// supervisors inherit it). It runs on supervisor threads: keep it short.
    pub fn on_event<F: Fn(&Event) + Send + Sync + 'static>(mut self, hook: F) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }
    /// The supervisor's id.
    pub fn id(&self) -> &str {
        &self.id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_is_capped_and_jittered_downwards() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            multiplier: 2.0,
            max: Duration::from_secs(1),
            jitter: 0.5,
            reset_after: Duration::from_secs(1),
        };
        assert_eq!(b.delay(0, 0.0), Duration::from_millis(100));
        assert_eq!(b.delay(1, 0.0), Duration::from_millis(200));
        assert_eq!(b.delay(3, 0.0), Duration::from_millis(800));
        assert_eq!(b.delay(4, 0.0), Duration::from_secs(1));
        assert_eq!(b.delay(40, 0.0), Duration::from_secs(1));
        assert_eq!(b.delay(4, 1.0), Duration::from_millis(500));
        let d = b.delay(2, 0.5);
        assert!(d >= Duration::from_millis(200) && d <= Duration::from_millis(400));
    }

    #[test]
    fn a_renamed_supervisor_child_carries_its_name_and_intensity_inside() {
        let nested = SupervisorSpec::new("http", Strategy::OneForOne);
        let child = ChildSpec::supervisor(nested)
            .named("listener http://a")
            .intensity(2, Duration::from_secs(7));
        assert_eq!(child.id(), "listener http://a");
        match &child.start {
            Start::Supervisor(spec) => {
                assert_eq!(spec.id, "listener http://a");
                assert_eq!(
                    (spec.max_restarts, spec.period),
                    (2, Duration::from_secs(7))
                );
            }
            Start::Worker(_) => panic!("still a supervisor"),
        }
        let worker = ChildSpec::worker("w", |_| Ok(())).intensity(2, Duration::from_secs(7));
        assert_eq!(worker.kind(), ChildKind::Worker);
        // A period under the least is taken as the least, as for a root.
        let short = ChildSpec::supervisor(SupervisorSpec::new("s", Strategy::OneForOne))
            .intensity(2, Duration::from_millis(1));
        match &short.start {
            Start::Supervisor(spec) => assert_eq!(spec.period, MIN_PERIOD),
            Start::Worker(_) => panic!("still a supervisor"),
        }
    }
}
