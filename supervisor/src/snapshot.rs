//! Introspection: which children, how many, and a snapshot of a whole tree
//! that prints like Erlang's observer.

use crate::child::ExitReason;
use crate::spec::{ChildKind, Strategy};
use std::fmt;
use std::time::Duration;

/// The state of a child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChildState {
    /// Its thread runs.
    Running,
    /// It failed and waits for its (backoff-delayed) restart.
    Restarting,
    /// Not running and not scheduled (terminated, or exited and not restarted).
    Stopped,
}

/// One child as `which_children` reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildInfo {
    /// Its id.
    pub id: String,
    /// Worker or supervisor.
    pub kind: ChildKind,
    /// Its state.
    pub state: ChildState,
    /// How often it was restarted.
    pub restarts: u32,
    /// Why it last exited.
    pub last_exit: Option<ExitReason>,
    /// How long the current run has lasted (per the supervisor's clock).
    pub uptime: Option<Duration>,
}

/// Counts as OTP's `count_children` gives them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildCounts {
    /// All child specs.
    pub specs: usize,
    /// Children that are running.
    pub active: usize,
    /// Children that are supervisors.
    pub supervisors: usize,
    /// Children that are workers.
    pub workers: usize,
}

/// A child in a tree snapshot; supervisors carry their own subtree.
#[derive(Clone, Debug, PartialEq)]
pub struct ChildSnapshot {
    /// The child's facts.
    pub info: ChildInfo,
    /// The nested tree, for running supervisors that answered in time.
    pub subtree: Option<TreeSnapshot>,
}

/// A supervisor and everything below it.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeSnapshot {
    /// The supervisor's id.
    pub id: String,
    /// Its strategy.
    pub strategy: Strategy,
    /// Its children in start order.
    pub children: Vec<ChildSnapshot>,
    /// Ids of child threads detached after ignoring their stop signal.
    pub detached: Vec<String>,
}

impl fmt::Display for TreeSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} ({})", self.id, self.strategy)?;
        self.draw(f, "")
    }
}

impl TreeSnapshot {
    fn draw(&self, f: &mut fmt::Formatter<'_>, prefix: &str) -> fmt::Result {
        for (i, c) in self.children.iter().enumerate() {
            let last = i + 1 == self.children.len();
            let (branch, indent) = if last {
                ("└── ", "    ")
            } else {
                ("├── ", "│   ")
            };
            let i = &c.info;
            let state = match i.state {
                ChildState::Running => "running",
                ChildState::Restarting => "restarting",
                ChildState::Stopped => "stopped",
            };
            write!(f, "{prefix}{branch}{}", i.id)?;
            match &c.subtree {
                Some(t) => write!(f, " ({})", t.strategy)?,
                None if i.kind == ChildKind::Supervisor => write!(f, " [supervisor]")?,
                None => {}
            }
            write!(f, " {state}, restarts {}", i.restarts)?;
            if let Some(u) = i.uptime {
                write!(f, ", up {:.1}s", u.as_secs_f64())?;
            }
            if let Some(e) = &i.last_exit {
                write!(f, ", last exit: {e}")?;
            }
            writeln!(f)?;
            if let Some(t) = &c.subtree {
                t.draw(f, &format!("{prefix}{indent}"))?;
            }
        }
        for d in &self.detached {
            writeln!(f, "{prefix}(detached thread: {d})")?;
        }
        Ok(())
    }
}
