//! # supervisor: Erlang/OTP supervision for plain std threads
//!
//! A supervisor starts its children (worker threads or nested supervisors)
//! in order, watches them, and restarts them the way an OTP supervisor does:
//!
//! - **Restart types**: [`Restart::Permanent`] children are always
//!   restarted, [`Restart::Transient`] ones only after an abnormal exit
//!   (panic or error), [`Restart::Temporary`] ones never.
//! - **Strategies**: [`Strategy::OneForOne`] restarts the failed child,
//!   [`Strategy::OneForAll`] all children, [`Strategy::RestForOne`] the
//!   failed child and those started after it. Children can also be started,
//!   terminated and deleted at run time through a [`SupervisorRef`] (one per
//!   connection, one per upstream server: simple_one_for_one's use).
//! - **Restart intensity**: more than `max_restarts` restarts within
//!   `period` make the supervisor stop its children (reverse start order) and
//!   exit with "reached max restart intensity", which its parent handles
//!   like any child failure. The root's failure ends [`run`] /
//!   [`Supervisor::wait`] with an error.
//! - **Backoff** (not in OTP): an optional exponential, jittered, capped
//!   delay before a child's restart, for children that crash at start.
//! - **Shutdown**: children stop in reverse start order, each within its
//!   [`Shutdown`] policy. Threads cannot be killed: a worker that ignores its
//!   stop signal past its timeout is *detached* (left running, reported in
//!   the [`ShutdownReport`], the snapshot and a [`EventKind::Detached`]
//!   event); `Brutal` detaches without waiting. A worker should select on
//!   [`ChildContext::stop_signal`] or check [`ChildContext::should_stop`];
//!   one blocked elsewhere (in poll(2), say) registers
//!   [`ChildContext::on_stop`] to be woken.
//! - A panic in a worker is caught and becomes [`ExitReason::Panic`]; it
//!   never takes the process down.
//!
//! ```
//! use supervisor::{ChildSpec, Restart, Strategy, Supervisor, SupervisorSpec};
//! use std::time::Duration;
//!
//! // root (one_for_one)
//! // ├── sessions                       a worker that runs until stopped
//! // └── listeners (rest_for_one)
//! //     ├── tcp
//! //     └── http
//! let idle = |ctx: &supervisor::ChildContext| -> supervisor::WorkerResult {
//!     let _ = ctx.stop_signal().recv(); // returns when asked to stop
//!     Ok(())
//! };
//! let tree = SupervisorSpec::new("root", Strategy::OneForOne)
//!     .intensity(3, Duration::from_secs(10))
//!     .child(ChildSpec::worker("sessions", idle))
//!     .child(ChildSpec::supervisor(
//!         SupervisorSpec::new("listeners", Strategy::RestForOne)
//!             .child(ChildSpec::worker("tcp", idle))
//!             .child(ChildSpec::worker("http", idle).restart(Restart::Transient)),
//!     ));
//! let root = Supervisor::start(tree).expect("tree starts");
//! println!("{}", root.handle().snapshot().unwrap()); // draws the tree
//! let report = root.shutdown().unwrap();
//! assert_eq!(report.stopped, 2);
//! assert!(report.detached.is_empty());
//! ```
#![warn(missing_docs)]

mod child;
mod clock;
mod event;
mod snapshot;
mod spec;
mod supervisor;

pub use child::{ChildContext, ExitReason};
pub use clock::{Clock, ManualClock, SystemClock};
pub use event::{Event, EventHook, EventKind};
pub use snapshot::{ChildCounts, ChildInfo, ChildSnapshot, ChildState, TreeSnapshot};
pub use spec::{
    Backoff, ChildKind, ChildSpec, Restart, Shutdown, Strategy, SupervisorSpec, WorkerFn,
    WorkerResult, DEFAULT_MAX_RESTARTS, DEFAULT_PERIOD, DEFAULT_WORKER_SHUTDOWN, MIN_PERIOD,
};
pub use supervisor::{
    run, ChildError, ShutdownReport, Supervisor, SupervisorError, SupervisorRef,
    MAX_INTENSITY_REASON, SNAPSHOT_TIMEOUT,
};
