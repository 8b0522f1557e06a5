//! Fault injection under load: a handler that panics, a transport worker
//! that panics. Each test bounds its time (every read has a timeout) and
//! checks that nothing is lost: every request is answered exactly once.
//! (The others of #16: SIGTERM with 100 calls in flight in
//! tests/daemon.rs, RabbitMQ stopped and started under load in
//! tests/amqp_broker.rs, an upstream killed under load in tests/gateway.rs,
//! descriptor exhaustion and oversized messages in tests/http_hostile.rs
//! and tests/stdio.rs.)
mod common;

use common::http::{answer, initialize, post};
use mcpvisor::transport::http::HttpOptions;
use mcpvisor::transport::tcp::TcpOptions;
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Sets its flag when dropped (also when a check fails), so that load
/// threads waiting for it stop and a failing test fails instead of hanging.
struct Release<'a>(&'a AtomicBool);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// `work` answers its `n`; it panics when `n % 50 == 7`.
fn server() -> Server {
    Server::builder("faults", "1")
        .tool(Tool::new("work", json!({"type": "object"}), |a, _| {
            let n = a["n"].as_i64().unwrap_or(-1);
            if n % 50 == 7 {
                panic!("injected fault for call {n}");
            }
            Ok(ToolResult::text(n.to_string()))
        }))
        .build()
        .unwrap()
}

/// [`server`] on a TCP listener of a free loopback port.
fn tcp_server() -> mcpvisor::transport::tcp::TcpServer {
    server()
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap()
}

fn call(n: i64) -> Value {
    json!({"jsonrpc":"2.0","id":n,"method":"tools/call","params":{"name":"work","arguments":{"n":n}}})
}

const SESSIONS: i64 = 8;
const CALLS: i64 = 300;
const IN_FLIGHT: i64 = 16;

/// One TCP session sending `CALLS` calls with `in_flight` outstanding;
/// returns each id's answer.
fn session(
    addr: std::net::SocketAddr,
    first: i64,
    in_flight: i64,
    calls: i64,
) -> HashMap<i64, Value> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    writeln!(w, r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#).unwrap();
    r.read_line(&mut line).expect("initialize answered");
    writeln!(
        w,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let mut answers = HashMap::new();
    let mut next = first;
    let end = first + calls;
    while next < first + in_flight {
        writeln!(w, "{}", call(next)).unwrap();
        next += 1;
    }
    while answers.len() < calls as usize {
        line.clear();
        r.read_line(&mut line).expect("an answer within 10 s");
        let v: Value = serde_json::from_str(&line).unwrap();
        let id = v["id"].as_i64().expect("an answer to a call");
        assert!(answers.insert(id, v).is_none(), "call {id} answered twice");
        if next < end {
            writeln!(w, "{}", call(next)).unwrap();
            next += 1;
        }
    }
    answers
}

#[test]
fn handlers_that_panic_under_load_cost_exactly_their_own_requests() {
    let tcp = tcp_server();
    let addr = tcp.local_addr();
    let all: Vec<HashMap<i64, Value>> = std::thread::scope(|s| {
        let sessions: Vec<_> = (0..SESSIONS)
            .map(|i| s.spawn(move || session(addr, 1 + i * CALLS, IN_FLIGHT, CALLS)))
            .collect();
        sessions.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut panicked = 0;
    for (id, v) in all.iter().flatten() {
        if id % 50 == 7 {
            panicked += 1;
            assert_eq!(v["error"]["code"], -32603, "{v}");
            assert!(
                v["error"]["message"].as_str().unwrap().contains("panicked"),
                "{v}"
            );
        } else {
            assert_eq!(v["result"]["content"][0]["text"], id.to_string(), "{v}");
        }
    }
    assert_eq!(
        all.iter().map(HashMap::len).sum::<usize>(),
        (SESSIONS * CALLS) as usize
    );
    assert_eq!(panicked, SESSIONS * CALLS / 50);
    tcp.shutdown().unwrap();
}

/// A client that keeps exactly the session's limit of requests in flight
/// sends the next one as soon as it reads an answer, before the server has
/// taken the answered one off its table: it is never refused.
#[test]
fn a_client_at_the_in_flight_limit_is_never_refused() {
    let tcp = tcp_server();
    let limit = mcpvisor::protocol::DEFAULT_MAX_INFLIGHT_PER_SESSION as i64;
    // The window (between an answer queued and its request leaving the
    // table) is short; the unit test in src/server/tests.rs forces it.
    let answers = session(tcp.local_addr(), 1, limit, 2_000);
    for (id, v) in &answers {
        let refused = v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("too many"));
        assert!(!refused, "call {id}: {v}");
    }
    assert_eq!(answers.len(), 2_000);
    tcp.shutdown().unwrap();
}

#[test]
fn a_listener_that_panics_under_load_is_restarted_and_sessions_go_on() {
    let server = server();
    let http = server
        .start_http(HttpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let addr = http.local_addr();
    let restarts = || {
        http.supervisor()
            .which_children()
            .unwrap()
            .into_iter()
            .find(|c| c.id == "http-listener")
            .map_or(0, |c| c.restarts)
    };
    let sessions: Vec<String> = (0..SESSIONS).map(|_| initialize(addr, &[])).collect();
    let (started_tx, started) = crossbeam_channel::unbounded();
    let restarted = AtomicBool::new(false);
    std::thread::scope(|s| {
        // However this scope ends, the workers see `restarted` and stop.
        let _stop = Release(&restarted);
        let workers: Vec<_> = sessions
            .iter()
            .enumerate()
            .map(|(i, sid)| {
                let (started, restarted) = (started_tx.clone(), &restarted);
                s.spawn(move || {
                    // A fresh connection per call: some wait in the
                    // backlog while the listener restarts. Each session
                    // goes on until it made 10 calls after the restart.
                    let mut after = 0;
                    for k in 0i64..100_000 {
                        let n = 100_000 * (i as i64 + 1) + k;
                        let r = post(addr, Some(sid), &call(n), &[]);
                        assert_eq!(r.status, 200, "the session survived");
                        let (_, m) = answer(r);
                        let expected = (n % 50 != 7).then(|| n.to_string());
                        assert_eq!(
                            m[0]["result"]["content"][0]["text"]
                                .as_str()
                                .map(str::to_owned),
                            expected,
                            "{m:?}"
                        );
                        if k == 10 {
                            started.send(()).unwrap();
                        }
                        if restarted.load(Ordering::SeqCst) {
                            after += 1;
                            if after == 10 {
                                break;
                            }
                        }
                    }
                })
            })
            .collect();
        drop(started_tx);
        // Every session is calling: now the listener panics.
        for _ in 0..SESSIONS {
            started
                .recv_timeout(Duration::from_secs(30))
                .expect("every session made 10 calls");
        }
        http.panic_listener_for_tests();
        let deadline = Instant::now() + Duration::from_secs(15);
        while restarts() == 0 {
            assert!(Instant::now() < deadline, "the listener was not restarted");
            std::thread::sleep(Duration::from_millis(1));
        }
        restarted.store(true, Ordering::SeqCst);
        for w in workers {
            w.join().unwrap();
        }
    });
    assert_eq!(restarts(), 1);
    http.shutdown().unwrap();
}
