//! Events a supervisor reports: for logs and metrics.

use crate::child::ExitReason;
use std::sync::Arc;
use std::time::Duration;

/// A callback receiving every event of a tree.
pub type EventHook = Arc<dyn Fn(&Event) + Send + Sync>;

/// Something that happened in a supervisor.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The supervisor's id.
    pub supervisor: String,
    /// What happened.
    pub kind: EventKind,
}

/// The kinds of [`Event`].
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// A child started.
    Started {
        /// Its id.
        child: String,
    },
    /// A child could not be started.
    StartFailed {
        /// Its id.
        child: String,
        /// Why.
        error: String,
    },
    /// A child exited.
    Exited {
        /// Its id.
        child: String,
        /// Why.
        reason: ExitReason,
    },
    /// A child is going to be restarted after `delay`.
    Restarting {
        /// Its id.
        child: String,
        /// Backoff delay (zero without backoff).
        delay: Duration,
        /// Restarts of this child so far, including this one.
        restarts: u32,
    },
    /// A child did not stop within its shutdown timeout (or was `Brutal`)
    /// and its thread was left running, detached.
    Detached {
        /// Its id.
        child: String,
    },
    /// The supervisor reached its restart intensity and is failing.
    Escalated {
        /// The failure reason reported to the parent.
        reason: String,
    },
}
