//! What the running daemon knows about itself, shared by the control
//! socket (`mcpvisor status`) and `/metrics`.

use super::command::Runs;
use super::listeners::Active;
use super::metrics::Metrics;
use crate::server::Server;
use crate::sync::lock;
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;
use supervisor::{ChildSnapshot, ChildState, SupervisorRef, TreeSnapshot};

/// The catalog source the command tools are served as.
pub const COMMANDS_SOURCE: &str = "commands";

/// The daemon's shared facts.
pub(crate) struct State {
    pub server: Server,
    pub runs: Arc<Runs>,
    pub metrics: Arc<Metrics>,
    pub listeners: Mutex<Vec<Active>>,
    /// Set once the tree runs.
    pub root: OnceLock<SupervisorRef>,
    pub started: Instant,
    /// Reloads that applied, and that were refused.
    pub reloads: Mutex<(u64, u64)>,
    /// Upstreams past their restart intensity, with why.
    pub failed: Mutex<std::collections::BTreeMap<String, String>>,
    /// The enabled upstreams, by key.
    pub upstreams: Mutex<Vec<String>>,
    /// Upstreams whose failure is the daemon's (`required`).
    pub required: Mutex<std::collections::BTreeSet<String>>,
    /// Told when a required upstream fails for good.
    pub fatal: (
        crossbeam_channel::Sender<String>,
        crossbeam_channel::Receiver<String>,
    ),
}

impl State {
    pub fn new(server: Server, runs: Arc<Runs>, metrics: Arc<Metrics>) -> State {
        State {
            server,
            runs,
            metrics,
            listeners: Mutex::new(Vec::new()),
            root: OnceLock::new(),
            started: Instant::now(),
            reloads: Mutex::new((0, 0)),
            failed: Mutex::new(std::collections::BTreeMap::new()),
            upstreams: Mutex::new(Vec::new()),
            required: Mutex::new(std::collections::BTreeSet::new()),
            fatal: crossbeam_channel::unbounded(),
        }
    }

    /// A supervisor event: counted for metrics; an upstream the root saw
    /// exit (its supervisor gave up) is remembered as failed.
    pub fn event(&self, e: &supervisor::Event) {
        self.metrics.event(e);
        if let supervisor::EventKind::Exited { child, reason } = &e.kind {
            if let Some(name) = child.strip_prefix("upstream ") {
                if e.supervisor == "mcpvisor" && reason.is_abnormal() {
                    log::error!(
                        "upstream {name} failed for good: {reason}; its tools stay withdrawn"
                    );
                    lock(&self.failed).insert(name.to_owned(), reason.to_string());
                    if lock(&self.required).contains(name) {
                        let _ = self
                            .fatal
                            .0
                            .send(format!("required upstream {name} failed: {reason}"));
                    }
                }
            }
        }
        if let supervisor::EventKind::Started { child } = &e.kind {
            if let Some(name) = child.strip_prefix("upstream ") {
                lock(&self.failed).remove(name);
            }
        }
    }

    /// Each enabled upstream: its key, its state (`serving`, `starting`
    /// or `failed`) and the tools it serves.
    pub fn upstream_states(&self) -> Vec<(String, &'static str, usize)> {
        let failed = lock(&self.failed);
        lock(&self.upstreams)
            .iter()
            .map(|name| {
                let source = self
                    .server
                    .engine()
                    .source(&super::gateway::names::source_id(name));
                let state = match (&source, failed.contains_key(name)) {
                    (_, true) => "failed",
                    (Some(_), false) => "serving",
                    (None, false) => "starting",
                };
                (name.clone(), state, source.map_or(0, |s| s.tools.len()))
            })
            .collect()
    }

    /// Command tools served now.
    pub fn tool_count(&self) -> usize {
        self.server
            .engine()
            .source(COMMANDS_SOURCE)
            .map_or(0, |s| s.tools.len())
    }

    fn tree(&self) -> Option<TreeSnapshot> {
        // The control socket asks from inside the tree: never wait on a
        // root that is busy stopping it.
        self.root
            .get()
            .and_then(|r| r.snapshot_within(supervisor::SNAPSHOT_TIMEOUT).ok())
    }

    /// `mcpvisor status --json`.
    pub fn status_json(&self) -> Value {
        let listeners: Vec<Value> = lock(&self.listeners)
            .iter()
            .map(|l| {
                json!({
                    "url": l.url(),
                    "transport": l.listener.transport(),
                    "sessions": l.listener.session_count(),
                    "inherited": l.inherited,
                    "child": l.id,
                })
            })
            .collect();
        let (ok, failed) = *lock(&self.reloads);
        let mut sources = vec![json!({"id": COMMANDS_SOURCE, "tools": self.tool_count()})];
        let upstreams: Vec<Value> = self
            .upstream_states()
            .into_iter()
            .map(|(name, state, tools)| {
                sources
                    .push(json!({"id": super::gateway::names::source_id(&name), "tools": tools}));
                json!({"name": name, "state": state, "tools": tools})
            })
            .collect();
        json!({
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "uptimeSeconds": self.started.elapsed().as_secs_f64(),
            "tree": self.tree().as_ref().map(tree_json),
            "listeners": listeners,
            "sources": sources,
            "upstreams": upstreams,
            "commandsRunning": self.runs.running(),
            "requestsInFlight": self.server.engine().inflight(),
            "tasks": self
                .server
                .engine()
                .task_counts()
                .into_iter()
                .map(|(s, n)| (s.as_str().to_owned(), Value::from(n)))
                .collect::<serde_json::Map<_, _>>(),
            "reloads": {"ok": ok, "failed": failed},
            "failedUpstreams": *lock(&self.failed),
        })
    }

    /// `mcpvisor status`: the tree as Erlang's observer draws it, then
    /// the listeners and the catalog's sources.
    pub fn status_text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "mcpvisor {} (pid {}), up {:.0}s",
            env!("CARGO_PKG_VERSION"),
            std::process::id(),
            self.started.elapsed().as_secs_f64()
        );
        match self.tree() {
            Some(t) => {
                let _ = write!(o, "\nsupervision tree:\n{t}");
            }
            None => o.push_str("\nsupervision tree: not answering\n"),
        }
        o.push_str("\nlisteners:\n");
        for l in lock(&self.listeners).iter() {
            let sessions = l
                .listener
                .session_count()
                .map_or_else(|| "-".to_owned(), |n| n.to_string());
            let from = if l.inherited {
                " (inherited socket)"
            } else {
                ""
            };
            let _ = writeln!(o, "  {}  sessions {sessions}{from}", l.url());
        }
        let _ = writeln!(
            o,
            "\ncatalog sources:\n  {COMMANDS_SOURCE}  tools {}",
            self.tool_count()
        );
        for (name, state, tools) in self.upstream_states() {
            let _ = writeln!(o, "  upstream:{name}  tools {tools}  ({state})");
        }
        for (name, why) in lock(&self.failed).iter() {
            let _ = writeln!(o, "\nupstream {name} FAILED: {why}");
        }
        let _ = writeln!(
            o,
            "\ncommands running: {}\nrequests in flight: {}",
            self.runs.running(),
            self.server.engine().inflight()
        );
        let tasks: Vec<String> = self
            .server
            .engine()
            .task_counts()
            .into_iter()
            .map(|(s, n)| format!("{} {n}", s.as_str()))
            .collect();
        let _ = writeln!(o, "tasks: {}", tasks.join(", "));
        o
    }
}

fn tree_json(t: &TreeSnapshot) -> Value {
    json!({
        "id": t.id,
        "strategy": t.strategy.to_string(),
        "children": t.children.iter().map(child_json).collect::<Vec<_>>(),
        "detached": t.detached,
    })
}

fn child_json(c: &ChildSnapshot) -> Value {
    let i = &c.info;
    json!({
        "id": i.id,
        "kind": format!("{:?}", i.kind).to_lowercase(),
        "state": match i.state {
            ChildState::Running => "running",
            ChildState::Restarting => "restarting",
            ChildState::Stopped => "stopped",
        },
        "restarts": i.restarts,
        "lastExit": i.last_exit.as_ref().map(|e| e.to_string()),
        "uptimeSeconds": i.uptime.map(|u| u.as_secs_f64()),
        "subtree": c.subtree.as_ref().map(tree_json),
    })
}
