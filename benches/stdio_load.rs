//! stdio load bench: `tools/call echo` against `examples/echo` (release),
//! with 1 and 32 requests in flight; calls/s, p50 and p99. Then the same
//! server over TCP (`--tcp`) with 1 and 32 connections, one call in flight
//! on each, in the same run.
//!
//! ```text
//! cargo bench --bench stdio_load -- [--calls N] [--baseline "COMMAND ARGS..."]
//! ```
//! With `--baseline`, the same load runs against that server command in the
//! same run (e.g. an rmcp echo server) and the ratios are printed.

mod common;

use common::Stats;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

fn spawn(command: &[String]) -> Child {
    Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"))
}

/// Runs `calls` echo calls with `inflight` outstanding; returns stats.
fn run(command: &[String], inflight: usize, calls: usize) -> Stats {
    let mut child = spawn(command);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{}", common::INIT).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    stdin.flush().unwrap();

    let warmup = 2000.min(calls / 5);
    let total = warmup + calls;
    // One thread: `inflight` requests go out, then each response read sends
    // the next request, so exactly `inflight` are outstanding at all times.
    let mut w = std::io::BufWriter::new(stdin);
    let mut sent_at = vec![Instant::now(); total + 1];
    let mut next = 1;
    let send = |w: &mut std::io::BufWriter<_>, id: usize, sent_at: &mut Vec<Instant>| {
        sent_at[id] = Instant::now();
        writeln!(w, r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"hello world"}}}}}}"#).unwrap();
    };
    while next <= inflight.min(total) {
        send(&mut w, next, &mut sent_at);
        next += 1;
    }
    w.flush().unwrap();
    let mut latencies = Vec::with_capacity(calls);
    let mut measured_from = Instant::now();
    for done in 1..=total {
        line.clear();
        stdout.read_line(&mut line).unwrap();
        let id = common::response_id(&line).unwrap_or_else(|| panic!("unexpected line: {line}"));
        let now = Instant::now();
        if next <= total {
            send(&mut w, next, &mut sent_at);
            next += 1;
        }
        // Flush once nothing more is already read: requests go out in
        // batches when many responses arrived together.
        if stdout.buffer().is_empty() {
            w.flush().unwrap();
        }
        if done == warmup {
            measured_from = Instant::now();
        }
        if id > warmup {
            latencies.push((now - sent_at[id]).as_nanos() as u64);
        }
    }
    let elapsed = measured_from.elapsed();
    drop(w);
    let _ = child.wait();
    common::stats(latencies, elapsed)
}

/// `connections` TCP connections to `echo --tcp`, each calling back to back.
fn run_tcp(echo: &str, connections: usize, calls: usize) -> Stats {
    let mut child = Command::new(echo)
        .args(["--listen", "tcp://127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("echo --tcp");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: std::net::SocketAddr = line
        .trim()
        .trim_start_matches("listening on tcp://")
        .parse()
        .expect("address");
    let per = (calls / connections).max(100);
    let req = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello world"}}}"#.to_owned() + "\n";
    let result = common::concurrent(
        connections,
        per,
        || {
            let s = std::net::TcpStream::connect(addr).unwrap();
            s.set_nodelay(true).unwrap();
            let mut w = s.try_clone().unwrap();
            let mut r = BufReader::new(s);
            let mut line = String::new();
            writeln!(w, "{}", common::INIT).unwrap();
            r.read_line(&mut line).unwrap();
            writeln!(
                w,
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
            )
            .unwrap();
            for _ in 0..200 {
                w.write_all(req.as_bytes()).unwrap();
                line.clear();
                r.read_line(&mut line).unwrap();
            }
            (w, r, line)
        },
        |(w, r, line)| {
            w.write_all(req.as_bytes()).unwrap();
            line.clear();
            r.read_line(line).unwrap();
        },
    );
    let _ = child.kill();
    let _ = child.wait();
    result
}

fn main() {
    let mut calls = 100_000;
    let mut baseline: Option<Vec<String>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--baseline" => {
                baseline = Some(
                    args.next()
                        .expect("--baseline COMMAND")
                        .split_whitespace()
                        .map(String::from)
                        .collect(),
                )
            }
            _ => {} // cargo bench passes --bench
        }
    }
    let status = common::cargo()
        .args(["build", "--release", "--quiet", "--example", "echo"])
        .status()
        .expect("cargo");
    assert!(status.success(), "building examples/echo failed");
    let ours =
        vec![concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/examples/echo").to_owned()];
    common::header("in-flight");
    for inflight in [1, 32] {
        let n = if inflight == 1 { calls / 4 } else { calls };
        let us = run(&ours, inflight, n);
        common::row("mcpvisor", inflight, &us);
        if let Some(b) = &baseline {
            let them = run(b, inflight, n);
            common::compare(inflight, &us, &them);
        }
    }
    for connections in [1, 32] {
        let tcp = run_tcp(&ours[0], connections, calls / 4);
        common::row("tcp-conns", connections, &tcp);
    }
}
