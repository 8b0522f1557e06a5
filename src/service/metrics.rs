//! `GET /metrics` in the Prometheus text format (version 0.0.4): the
//! daemon's sessions, requests, latency, restarts and command runs, on a
//! listener of its own (`--metrics ADDR`, off by default).

use super::local::left;
use super::state::State;
use crate::protocol::{Observer, Outcome};
use crate::sync::lock;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use supervisor::{ChildSpec, Event, EventKind};

/// Upper bounds (seconds) of the request latency histogram's buckets.
pub const LATENCY_BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0,
];
/// Most distinct method names counted; others count as `other` (a client
/// choosing method names cannot grow the registry without bound).
pub const MAX_METHODS: usize = 64;
/// How long a scraper may take to send its request or read the answer.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest request head read from a scraper.
const MAX_REQUEST_BYTES: usize = 8 * 1024;

#[derive(Default)]
struct MethodStats {
    // By [`Outcome`]: ok, error, cancelled.
    outcomes: [u64; 3],
    buckets: [u64; LATENCY_BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// What the daemon counts: fed by the engine (requests) and the
/// supervisors (restarts).
#[derive(Default)]
pub struct Metrics {
    methods: Mutex<BTreeMap<String, MethodStats>>,
    restarts: Mutex<BTreeMap<(String, String), u64>>,
}

impl Observer for Metrics {
    fn request_done(&self, method: &str, outcome: Outcome, elapsed: Duration) {
        let mut methods = lock(&self.methods);
        let key = if methods.contains_key(method) || methods.len() < MAX_METHODS {
            method
        } else {
            "other"
        };
        if !methods.contains_key(key) {
            methods.insert(key.to_owned(), MethodStats::default());
        }
        let Some(m) = methods.get_mut(key) else {
            return;
        };
        m.outcomes[outcome as usize] += 1;
        let secs = elapsed.as_secs_f64();
        for (b, le) in m.buckets.iter_mut().zip(LATENCY_BUCKETS) {
            if secs <= le {
                *b += 1;
            }
        }
        m.sum += secs;
        m.count += 1;
    }
}

impl Metrics {
    /// Counts a supervisor event (restarts).
    pub fn event(&self, e: &Event) {
        if let EventKind::Restarting { child, .. } = &e.kind {
            *lock(&self.restarts)
                .entry((e.supervisor.clone(), child.clone()))
                .or_default() += 1;
        }
    }

    /// Restarts counted so far.
    pub fn restarts(&self) -> u64 {
        lock(&self.restarts).values().sum()
    }

    /// The exposition of everything `state` knows.
    pub(crate) fn render(&self, state: &State) -> String {
        let mut o = String::new();
        let family = |o: &mut String, name: &str, kind: &str, help: &str| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        family(&mut o, "mcpvisor_up", "gauge", "1 while the daemon serves.");
        let _ = writeln!(o, "mcpvisor_up 1");
        family(
            &mut o,
            "mcpvisor_uptime_seconds",
            "gauge",
            "Seconds since the daemon started.",
        );
        let _ = writeln!(
            o,
            "mcpvisor_uptime_seconds {}",
            state.started.elapsed().as_secs_f64()
        );
        family(
            &mut o,
            "mcpvisor_sessions",
            "gauge",
            "Open sessions by transport and listener.",
        );
        for l in lock(&state.listeners).iter() {
            if let Some(n) = l.listener.session_count() {
                let _ = writeln!(
                    o,
                    "mcpvisor_sessions{{transport=\"{}\",listener=\"{}\"}} {n}",
                    l.listener.transport(),
                    escape(&l.url())
                );
            }
        }
        family(
            &mut o,
            "mcpvisor_requests_total",
            "counter",
            "Requests handled, by method and outcome.",
        );
        let methods = lock(&self.methods);
        for (method, m) in methods.iter() {
            for (outcome, n) in ["ok", "error", "cancelled"].iter().zip(m.outcomes) {
                let _ = writeln!(
                    o,
                    "mcpvisor_requests_total{{method=\"{}\",outcome=\"{outcome}\"}} {n}",
                    escape(method)
                );
            }
        }
        family(
            &mut o,
            "mcpvisor_request_duration_seconds",
            "histogram",
            "Time from a request's arrival to its answer, by method.",
        );
        for (method, m) in methods.iter() {
            let method = escape(method);
            for (le, n) in LATENCY_BUCKETS.iter().zip(m.buckets) {
                let _ = writeln!(
                    o,
                    "mcpvisor_request_duration_seconds_bucket{{method=\"{method}\",le=\"{le}\"}} {n}"
                );
            }
            let _ = writeln!(
                o,
                "mcpvisor_request_duration_seconds_bucket{{method=\"{method}\",le=\"+Inf\"}} {}\n\
                 mcpvisor_request_duration_seconds_sum{{method=\"{method}\"}} {}\n\
                 mcpvisor_request_duration_seconds_count{{method=\"{method}\"}} {}",
                m.count, m.sum, m.count
            );
        }
        drop(methods);
        family(
            &mut o,
            "mcpvisor_restarts_total",
            "counter",
            "Restarts of supervised children, by supervisor and child.",
        );
        for ((sup, child), n) in lock(&self.restarts).iter() {
            let _ = writeln!(
                o,
                "mcpvisor_restarts_total{{supervisor=\"{}\",child=\"{}\"}} {n}",
                escape(sup),
                escape(child)
            );
        }
        family(
            &mut o,
            "mcpvisor_command_runs_total",
            "counter",
            "Runs of command tools, by tool and how they ended.",
        );
        let ends = state.runs.ends();
        for (tool, end, n) in &ends {
            let _ = writeln!(
                o,
                "mcpvisor_command_runs_total{{tool=\"{}\",end=\"{}\"}} {n}",
                escape(tool),
                end.as_str()
            );
        }
        family(
            &mut o,
            "mcpvisor_command_kills_total",
            "counter",
            "Command tools whose process group was killed, by tool and reason.",
        );
        for (tool, end, n) in &ends {
            if matches!(
                end,
                super::command::RunEnd::TimedOut | super::command::RunEnd::Cancelled
            ) {
                let _ = writeln!(
                    o,
                    "mcpvisor_command_kills_total{{tool=\"{}\",reason=\"{}\"}} {n}",
                    escape(tool),
                    end.as_str()
                );
            }
        }
        family(
            &mut o,
            "mcpvisor_upstream_up",
            "gauge",
            "1 while an upstream serves its lists, 0 while it starts or after it failed.",
        );
        let states = state.upstream_states();
        for (name, st, _) in &states {
            let _ = writeln!(
                o,
                "mcpvisor_upstream_up{{upstream=\"{}\"}} {}",
                escape(name),
                u8::from(*st == "serving")
            );
        }
        family(
            &mut o,
            "mcpvisor_upstream_failed",
            "gauge",
            "1 once an upstream went past its restart intensity.",
        );
        for (name, st, _) in &states {
            let _ = writeln!(
                o,
                "mcpvisor_upstream_failed{{upstream=\"{}\"}} {}",
                escape(name),
                u8::from(*st == "failed")
            );
        }
        family(
            &mut o,
            "mcpvisor_commands_running",
            "gauge",
            "Command tools running now.",
        );
        let _ = writeln!(o, "mcpvisor_commands_running {}", state.runs.running());
        family(
            &mut o,
            "mcpvisor_tasks",
            "gauge",
            "Tasks kept now (the tasks extension), by status.",
        );
        for (status, n) in state.server.engine().task_counts() {
            let _ = writeln!(o, "mcpvisor_tasks{{status=\"{}\"}} {n}", status.as_str());
        }
        family(
            &mut o,
            "mcpvisor_reloads_total",
            "counter",
            "Configuration reloads (SIGHUP), by result.",
        );
        let (ok, failed) = *lock(&state.reloads);
        let _ = writeln!(
            o,
            "mcpvisor_reloads_total{{result=\"ok\"}} {ok}\nmcpvisor_reloads_total{{result=\"failed\"}} {failed}"
        );
        o
    }
}

/// A label value as the text format writes it.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The `/metrics` listener as a child of the root: one scrape at a time,
/// each (request and answer) within [`SCRAPE_TIMEOUT`].
pub(crate) fn child(socket: TcpListener, state: Arc<State>) -> ChildSpec {
    super::local::worker(
        "metrics",
        socket,
        SCRAPE_TIMEOUT,
        move |stream, deadline| scrape(stream, deadline, &state),
        || {},
    )
}

fn scrape(mut stream: TcpStream, deadline: Instant, state: &State) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    // The whole request within the deadline, not each read: a byte at a
    // time must not hold the listener.
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        stream.set_read_timeout(Some(left(deadline)?))?;
        let n = stream.read(&mut chunk)?;
        if n == 0 || head.len() + n > MAX_REQUEST_BYTES {
            return respond(
                &mut stream,
                deadline,
                "400 Bad Request",
                "text/plain",
                "bad request\n",
            );
        }
        head.extend_from_slice(&chunk[..n]);
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|b| *b == b' ');
    match (parts.next(), parts.next()) {
        (Some(b"GET"), Some(b"/metrics")) => {
            let body = state.metrics.render(state);
            respond(
                &mut stream,
                deadline,
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                &body,
            )
        }
        (Some(b"GET"), _) => respond(
            &mut stream,
            deadline,
            "404 Not Found",
            "text/plain",
            "try /metrics\n",
        ),
        _ => respond(
            &mut stream,
            deadline,
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n",
        ),
    }
}

/// Writes the answer in pieces, each within what is left of `deadline`:
/// a reader that drains slowly cannot hold the listener past it.
fn respond(
    stream: &mut TcpStream,
    deadline: Instant,
    status: &str,
    kind: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    for piece in [head.as_bytes(), body.as_bytes()] {
        for chunk in piece.chunks(16 * 1024) {
            stream.set_write_timeout(Some(left(deadline)?))?;
            stream.write_all(chunk)?;
        }
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_lands_in_every_bucket_above_it_and_methods_are_bounded() {
        let m = Metrics::default();
        m.request_done("tools/call", Outcome::Ok, Duration::from_millis(3));
        m.request_done("tools/call", Outcome::Error, Duration::from_secs(60));
        let methods = lock(&m.methods);
        let s = &methods["tools/call"];
        assert_eq!(s.outcomes, [1, 1, 0]);
        assert_eq!(s.count, 2);
        // 3 ms: in the 5 ms bucket and every larger one; 60 s in none.
        assert_eq!(s.buckets[2], 0);
        assert_eq!(s.buckets[3], 1);
        assert_eq!(s.buckets[LATENCY_BUCKETS.len() - 1], 1);
        drop(methods);
        for i in 0..MAX_METHODS + 10 {
            m.request_done(&format!("x/{i}"), Outcome::Ok, Duration::ZERO);
        }
        let methods = lock(&m.methods);
        assert_eq!(methods.len(), MAX_METHODS + 1, "the rest count as other");
        assert!(methods["other"].count >= 10);
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
