//! HTTP load bench: `tools/call echo` against `examples/echo --http`
//! (release) with 1 and 32 concurrent sessions, each on its own keep-alive
//! connection calling back to back; calls/s, p50, p99. Then the same load
//! of stateless (2026-07-28) calls: each POST carries its `_meta` and the
//! SEP-2243 headers, and no session. Then resident memory per idle session
//! with `--idle-sessions N` sessions open.
//!
//! ```text
//! cargo bench --bench http_load -- [--calls N] [--idle-sessions N] [--baseline-url http://HOST:PORT/mcp]
//! ```
//! `--baseline-url` runs the same load against another, already running
//! server in the same run (e.g. an rmcp Streamable HTTP echo server).

use std::net::SocketAddr;
use std::process::Child;
mod common;

use common::keepalive::{parse_url, Conn};
use common::Stats;
use std::time::Duration;

const ECHO_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello world"}}}"#;

const STATELESS_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello world"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"0"}}}}"#;
const STATELESS_HEADERS: &str =
    "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n";

/// `clients` clients on keep-alive connections, each calling back to back
/// statelessly (no `initialize`, no session).
fn load_stateless(addr: SocketAddr, path: &str, clients: usize, calls_per_client: usize) -> Stats {
    let call = |c: &mut Conn| c.post_with(STATELESS_CALL, STATELESS_HEADERS);
    common::concurrent(
        clients,
        calls_per_client,
        || {
            let mut c = Conn::open(addr, path);
            // A refused call (a header rule, say) must not be timed as one.
            let first = call(&mut c);
            assert!(first.contains("hello world"), "{first}");
            for _ in 0..200 {
                call(&mut c); // warm-up
            }
            c
        },
        |c| {
            let answer = call(c);
            debug_assert!(answer.contains("hello world"));
        },
    )
}

fn load(addr: SocketAddr, path: &str, sessions: usize, calls_per_session: usize) -> Stats {
    common::concurrent(
        sessions,
        calls_per_session,
        || {
            let mut c = Conn::open(addr, path);
            c.initialize();
            for _ in 0..200 {
                c.post(ECHO_CALL); // warm-up
            }
            c
        },
        |c| {
            let answer = c.post(ECHO_CALL);
            debug_assert!(answer.contains("hello world"));
        },
    )
}

fn idle_sessions(addr: SocketAddr, n: usize) {
    let threads = 8;
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let mut c = Conn::open(addr, "/mcp");
                for _ in (t..n).step_by(threads) {
                    c.session = None;
                    c.initialize();
                }
            });
        }
    });
}

fn spawn_ours(max_sessions: usize) -> (Child, SocketAddr) {
    let (child, what) = common::spawn_echo(&[
        "--listen",
        "http://127.0.0.1:0/mcp",
        "--max-sessions",
        &max_sessions.to_string(),
    ]);
    let addr = what
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    (child, addr)
}

fn main() {
    let mut calls = 20_000;
    let mut idle = 100_000;
    let mut baseline: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--idle-sessions" => {
                idle = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--idle-sessions N")
            }
            "--baseline-url" => baseline = args.next(),
            _ => {}
        }
    }
    let (mut child, addr) = spawn_ours(idle + 100);
    common::header("sessions");
    let mut session_rows = Vec::new();
    for sessions in [1, 32] {
        let per = (calls / sessions).max(100);
        let us = load(addr, "/mcp", sessions, per);
        common::row("mcpvisor", sessions, &us);
        if let Some(url) = &baseline {
            let (baddr, bpath) = parse_url(url);
            let them = load(baddr, &bpath, sessions, per);
            common::compare(sessions, &us, &them);
        }
        session_rows.push(us);
    }
    // The same calls in the stateless revision (2026-07-28), same run,
    // against our own session rows above.
    common::header("stateless");
    for (clients, sessions) in [1, 32].into_iter().zip(&session_rows) {
        let per = (calls / clients).max(100);
        let us = load_stateless(addr, "/mcp", clients, per);
        common::row("mcpvisor", clients, &us);
        println!(
            "{:<10} {clients:>9} {:>11.2}x   (stateless calls/s over session calls/s)",
            "ratio",
            us.calls_per_sec / sessions.calls_per_sec
        );
    }
    if idle > 0 {
        std::thread::sleep(Duration::from_millis(200)); // let the load's connections close
        let before = common::proc_status(child.id(), "VmRSS:");
        idle_sessions(addr, idle);
        let after = common::proc_status(child.id(), "VmRSS:");
        println!(
            "idle sessions: {idle}, RSS {before} KiB -> {after} KiB, {:.0} bytes per session",
            (after.saturating_sub(before) * 1024) as f64 / idle as f64
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
