//! The soak bench (on demand, not in CI): the daemon (`mcpvisor`, release)
//! listening on stdio, TCP, Streamable HTTP and AMQP at once, with an
//! upstream (`examples/echo`) and a command tool, under a mixed load on
//! every transport for `--secs` seconds: calls through the gateway,
//! `tools/list`, `ping`, command runs (a process each), stateless HTTP
//! calls, and sessions opened and closed all along. Every `--interval`
//! seconds it prints the daemon's RSS, threads and open descriptors; at
//! the end it compares the last sample with the first after warm-up.
//!
//! An AMQP client cannot tell the server it is gone (there is no
//! connection to close): its session stays until it has been idle for the
//! expiry time, 30 minutes by default. The soak sets it (HTTP's too) to
//! `--session-idle-secs` (default 60), so that a run reaches the steady
//! state in which as many sessions expire as start.
//!
//! ```text
//! cargo bench --bench soak -- [--secs 1800] [--interval 60] [--session-idle-secs 60] [--url amqp://guest:guest@127.0.0.1:5672] [--wrap "COMMAND ARGS..."]
//! ```
//! `--wrap` runs the daemon under that command, for a heap profile say:
//! `--wrap "valgrind --tool=massif --massif-out-file=/tmp/massif.out"`. The
//! command must become the daemon (as valgrind and `env` do), not fork it
//! (as `perf record` and `strace` do): the footprint is read off the
//! process started. Its words are split at white space; no quoting.

mod common;

use mcpvisor::client::{Client, ClientOptions, Connection, Generation};
use mcpvisor::transport::amqp::config::AmqpConfig;
use serde_json::json;
use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Counts of the load so far.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    errors: AtomicU64,
    sessions: AtomicU64,
}

/// One mixed step on `c`: mostly calls through the gateway, some lists and
/// pings, now and then a command (a process).
fn step(c: &Client, k: u64, tally: &Tally) {
    let ok = match k % 20 {
        0 => c.list_tools().map(|_| ()),
        1 => c.ping(),
        2 if k % 100 == 2 => c.call_tool("hi", json!({})).map(|_| ()),
        _ => c
            .call_tool("up__echo", json!({"message": "soak"}))
            .map(|r| assert_eq!(r["content"][0]["text"], "soak", "{r}")),
    };
    tally.calls.fetch_add(1, Ordering::Relaxed);
    if let Err(e) = ok {
        tally.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("soak: {e}");
    }
}

/// Sessions of `connect()` one after another, each making 500 steps,
/// until `stop`.
fn churn(
    what: &str,
    connect: impl Fn() -> std::io::Result<Connection>,
    options: ClientOptions,
    stop: &AtomicBool,
    tally: &Tally,
) {
    let mut k = 0;
    while !stop.load(Ordering::Relaxed) {
        let connected = connect()
            .map_err(|e| e.to_string())
            .and_then(|c| Client::connect(c, options.clone()).map_err(|e| e.to_string()));
        let c = match connected {
            Ok(c) => c,
            Err(e) => {
                tally.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("soak: {what}: connect: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        tally.sessions.fetch_add(1, Ordering::Relaxed);
        for _ in 0..500 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            step(&c, k, tally);
            k += 1;
        }
        c.close();
    }
}

/// (RSS KiB, threads, open descriptors) of `pid`.
fn footprint(pid: u32) -> (u64, u64, usize) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (
        common::proc_status(pid, "VmRSS:"),
        common::proc_status(pid, "Threads:"),
        fds,
    )
}

fn main() {
    let (mut secs, mut interval, mut idle) = (60u64, 10u64, 60u64);
    let mut url = "amqp://guest:guest@127.0.0.1:5672".to_owned();
    let mut wrap: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--secs" => secs = args.next().and_then(|v| v.parse().ok()).expect("--secs S"),
            "--interval" => {
                interval = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--interval S")
            }
            "--url" => url = args.next().expect("--url URL"),
            "--wrap" => {
                wrap = args
                    .next()
                    .expect("--wrap \"COMMAND ARGS...\"")
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect()
            }
            "--session-idle-secs" => {
                idle = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--session-idle-secs S")
            }
            _ => {}
        }
    }
    for what in [&["--bin", "mcpvisor"][..], &["--example", "echo"][..]] {
        let status = common::cargo()
            .args(["build", "--release", "--quiet"])
            .args(what)
            .status()
            .expect("cargo");
        assert!(status.success(), "building {what:?} failed");
    }
    let name = format!("soak-{}", &mcpvisor::protocol::new_session_id()[..8]);
    let dir = std::env::temp_dir().join(&name);
    std::fs::create_dir_all(&dir).unwrap();
    // Free ports, chosen now (stdio carries MCP, so nothing is announced).
    let port = || {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port()
    };
    let (http_port, tcp_port) = (port(), port());
    let http = format!("http://127.0.0.1:{http_port}/mcp");
    let tcp_addr: std::net::SocketAddr = format!("127.0.0.1:{tcp_port}").parse().unwrap();
    let config = json!({
        "listen": ["stdio", http, format!("tcp://{tcp_addr}"), format!("{url}/%2f?name={name}")],
        "commands": {"hi": {"argv": ["echo", "hi"]}},
        "http": {"sessionIdleTimeoutMs": idle * 1000},
        "amqp": {"sessionIdleTimeoutMs": idle * 1000},
        "mcpServers": {"up": {"command": format!("{ROOT}/target/release/examples/echo")}},
        "logLevel": "warn",
    });
    let path = dir.join("mcpvisor.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let binary = format!("{ROOT}/target/release/mcpvisor");
    let mut daemon = match wrap.split_first() {
        Some((wrapper, args)) => {
            let mut c = Command::new(wrapper);
            c.args(args).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    daemon.arg("--config").arg(&path);
    let stdio = Connection::child(daemon).expect("mcpvisor");
    let pid = stdio.process_id().expect("its pid");
    // The stdio session answers once every listener is up.
    let stdio = Client::connect(stdio, ClientOptions::default()).expect("stdio session");
    let amqp = AmqpConfig::new(&url, name.as_str()).expect("--url");
    // stdio serves first; wait for the AMQP instance (the last listener).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match Connection::amqp(&amqp).and_then(|c| {
            Client::connect(c, ClientOptions::default()).map_err(std::io::Error::other)
        }) {
            Ok(c) => break c.close(),
            Err(e) if Instant::now() > deadline => panic!("the AMQP listener: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let (stop, tally) = (AtomicBool::new(false), Tally::default());
    let stdio = std::thread::scope(|s| {
        let (stop, tally, http, amqp) = (&stop, &tally, http.as_str(), &amqp);
        // stdio: one session for the whole run (stdio has one).
        let stdio = s.spawn(move || {
            let mut k = 0;
            while !stop.load(Ordering::Relaxed) {
                step(&stdio, k, tally);
                k += 1;
            }
            stdio
        });
        let stateless = ClientOptions {
            generation: Generation::Stateless,
            ..Default::default()
        };
        // Two sessions at a time on TCP and on HTTP, one stateless HTTP
        // client, one AMQP client.
        type Connect<'a> = Arc<dyn Fn() -> std::io::Result<Connection> + Send + Sync + 'a>;
        let tcp: Connect = Arc::new(move || Connection::tcp(tcp_addr));
        let http: Connect = Arc::new(move || Connection::http(http));
        let amqp: Connect = Arc::new(move || Connection::amqp(amqp));
        let loads = [
            ("tcp", 2, tcp, ClientOptions::default()),
            ("http", 2, http.clone(), ClientOptions::default()),
            ("stateless http", 1, http, stateless),
            ("amqp", 1, amqp, ClientOptions::default()),
        ];
        for (what, copies, connect, options) in loads {
            for _ in 0..copies {
                let (connect, options) = (connect.clone(), options.clone());
                s.spawn(move || churn(what, &*connect, options, stop, tally));
            }
        }
        println!(
            "{:>7} {:>10} {:>8} {:>8} {:>5} {:>10} {:>7}",
            "secs", "RSS KiB", "threads", "fds", "", "calls", "errors"
        );
        let start = Instant::now();
        let mut samples = Vec::new();
        loop {
            let (rss, threads, fds) = footprint(pid);
            let t = start.elapsed().as_secs();
            println!(
                "{t:>7} {rss:>10} {threads:>8} {fds:>8} {:>5} {:>10} {:>7}",
                "",
                tally.calls.load(Ordering::Relaxed),
                tally.errors.load(Ordering::Relaxed)
            );
            samples.push((rss, threads, fds));
            if t >= secs {
                break;
            }
            std::thread::sleep(Duration::from_secs(interval).min(Duration::from_secs(secs - t)));
        }
        stop.store(true, Ordering::Relaxed);
        // The first sample after warm-up (the second) against the last.
        let (first, last) = (
            samples[samples.len().min(2) - 1],
            samples[samples.len() - 1],
        );
        println!(
            "after warm-up -> end: RSS {} -> {} KiB ({:+.1} %), threads {} -> {}, descriptors {} -> {}; {} calls, {} sessions, {} errors",
            first.0,
            last.0,
            100.0 * (last.0 as f64 - first.0 as f64) / first.0.max(1) as f64,
            first.1,
            last.1,
            first.2,
            last.2,
            tally.calls.load(Ordering::Relaxed),
            tally.sessions.load(Ordering::Relaxed),
            tally.errors.load(Ordering::Relaxed)
        );
        stdio.join().unwrap()
    });
    // Ends the daemon: its stdin closes, then SIGTERM.
    stdio.close();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = Write::flush(&mut std::io::stdout());
}
