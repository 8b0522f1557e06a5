//! Shared by the load benches: latency statistics and the "N clients, each
//! calling back to back" driver.
#![allow(dead_code)]

pub mod keepalive;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `cargo` command for a build from inside a bench. What cargo set for
/// the bench itself (`CARGO_PKG_NAME`, `CARGO_MANIFEST_DIR` …) is removed:
/// build scripts that read those (ring's) would otherwise see them change
/// and rebuild on every switch between `cargo bench` and this build.
pub fn cargo() -> Command {
    let mut c = Command::new(env!("CARGO"));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_for_us = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
        ]
        .iter()
        .any(|p| name.starts_with(p))
            || name == "CARGO_PRIMARY_PACKAGE"
            || name == "CARGO_TARGET_TMPDIR";
        if set_for_us {
            c.env_remove(&*name);
        }
    }
    c
}

/// Builds `examples/echo` in release and starts it with `args`; returns the
/// child and what its first line says after "listening on ".
pub fn spawn_echo(args: &[&str]) -> (Child, String) {
    let status = cargo()
        .args(["build", "--release", "--quiet", "--example", "echo"])
        .status()
        .expect("cargo");
    assert!(status.success());
    let mut child = Command::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/target/release/examples/echo"
    ))
    .args(args)
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .expect("echo");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let what = line.trim().trim_start_matches("listening on ").to_owned();
    (child, what)
}

/// The `initialize` request every bench client sends.
pub const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#;
/// The notification that ends the handshake.
pub const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// A number of KiB (or a count) from `/proc/PID/status`, e.g. `VmRSS:`,
/// `VmHWM:`, `Threads:`; 0 if the process is gone.
pub fn proc_status(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// CPU time (user and system, in clock ticks) process `pid` has used so
/// far; 0 if it is gone.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // utime and stime: fields 14 and 15 of proc(5), 12 and 13 after the
    // command name (in parentheses, and it may hold spaces).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum()
}

/// [`cpu_ticks`] as a duration.
pub fn cpu_time(pid: u32) -> Duration {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_nanos(cpu_ticks(pid) * 1_000_000_000 / hz)
}

/// min, median and max of `values` (at least one; the median of an even
/// count is the mean of the middle two).
pub fn spread(values: impl IntoIterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (v[0], (v[(n - 1) / 2] + v[n / 2]) / 2.0, v[n - 1])
}

/// The numeric id of a response line (the benches number their requests).
pub fn response_id(line: &str) -> Option<usize> {
    let at = line.find("\"id\":")? + 5;
    let digits: String = line[at..]
        .chars()
        .skip_while(|c| *c == ' ')
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Throughput and latency of one run.
#[derive(Default)]
pub struct Stats {
    pub calls_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Statistics of `lat` (nanoseconds per call) over `elapsed`.
pub fn stats(mut lat: Vec<u64>, elapsed: Duration) -> Stats {
    lat.sort_unstable();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    Stats {
        calls_per_sec: lat.len() as f64 / elapsed.as_secs_f64(),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
    }
}

/// `clients` threads each run `setup` (connect, initialize, warm up), wait
/// for the others, then time `calls` back-to-back `call`s.
pub fn concurrent<S>(
    clients: usize,
    calls: usize,
    setup: impl Fn() -> S + Sync,
    call: impl Fn(&mut S) + Sync,
) -> Stats {
    let barrier = std::sync::Barrier::new(clients + 1);
    let (lat, elapsed) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                let (barrier, setup, call) = (&barrier, &setup, &call);
                scope.spawn(move || {
                    let mut state = setup();
                    barrier.wait();
                    let mut lat = Vec::with_capacity(calls);
                    for _ in 0..calls {
                        let t = Instant::now();
                        call(&mut state);
                        lat.push(t.elapsed().as_nanos() as u64);
                    }
                    lat
                })
            })
            .collect();
        barrier.wait();
        let t = Instant::now();
        let lat: Vec<u64> = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        (lat, t.elapsed())
    });
    stats(lat, elapsed)
}

/// One table row.
pub fn row(server: &str, n: usize, s: &Stats) {
    println!(
        "{server:<10} {n:>9} {:>12.0} {:>9.1} {:>9.1}",
        s.calls_per_sec, s.p50_us, s.p99_us
    );
}

/// The table header; `unit` names the concurrency column.
pub fn header(unit: &str) {
    println!(
        "{:<10} {unit:>9} {:>12} {:>9} {:>9}",
        "server", "calls/s", "p50 µs", "p99 µs"
    );
}

/// The baseline's row and the ratios (ours over theirs; higher is better).
pub fn compare(n: usize, us: &Stats, them: &Stats) {
    row("baseline", n, them);
    println!(
        "{:<10} {n:>9} {:>11.2}x {:>8.2}x {:>8.2}x",
        "ratio",
        us.calls_per_sec / them.calls_per_sec,
        them.p50_us / us.p50_us,
        them.p99_us / us.p99_us
    );
}
