//! Hostile load against the HTTP transport, bounded in time: idle
//! connections, giant headers, slowloris, and running out of descriptors.

mod common;

use common::http::*;
use mcpvisor::server::{Server, Tool, ToolResult};
use mcpvisor::transport::http::{HttpOptions, HttpServer, WireLimits};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn echo_server(options: HttpOptions) -> HttpServer {
    let server = Server::builder("hostile", "1")
        .tool(Tool::new("echo", json!({"type":"object"}), |a, _| {
            Ok(ToolResult::text(a["message"].as_str().unwrap_or("")))
        }))
        .build()
        .unwrap();
    server
        .start_http(options.with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap()
}

fn round_trip(addr: SocketAddr, sid: &str, n: i64) {
    let (_, m) = answer(post(
        addr,
        Some(sid),
        &json!({"jsonrpc":"2.0","id":n,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ok"}}}),
        &[],
    ));
    assert_eq!(m[0]["result"]["content"][0]["text"], "ok");
}

/// The conformance example over HTTP as a child process (optionally with a
/// descriptor limit); returns it and its address, read from its stdout.
fn child_server(nofile: Option<u32>) -> (Child, SocketAddr) {
    child_server_logging(nofile, "warn")
}

fn child_server_logging(nofile: Option<u32>, log: &str) -> (Child, SocketAddr) {
    let exe = common::example("conformance");
    let mut cmd = match nofile {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}")).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let mut child = cmd
        .args(["--listen", "http://127.0.0.1:0/mcp"])
        .env("RUST_LOG", log)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("listening line");
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .trim_end_matches("/mcp")
        .parse()
        .expect("address");
    (child, addr)
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn a_thousand_idle_connections_do_not_starve_a_real_client() {
    let http = echo_server(HttpOptions::default());
    let addr = http.local_addr();
    let idle: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(addr).expect("connect"))
        .collect();
    let sid = initialize(addr, &[]);
    for n in 0..20 {
        round_trip(addr, &sid, n);
    }
    assert!(
        http.connection_count() >= 1000,
        "the idle connections are really open: {}",
        http.connection_count()
    );
    drop(idle);
    http.shutdown().unwrap();
}

#[test]
fn connections_beyond_the_limit_get_503_and_others_recover() {
    // Streams whose clients left are noticed at their next keep-alive.
    let mut options = HttpOptions::default().with_max_connections(8);
    options.sse_keepalive = Duration::from_millis(50);
    let http = echo_server(options);
    let addr = http.local_addr();
    // Eight connections serving a request each (a session's stream).
    let sessions: Vec<String> = (0..8).map(|_| initialize(addr, &[])).collect();
    let held: Vec<Resp> = sessions
        .iter()
        .map(|sid| {
            let r = get_stream(addr, sid, None);
            assert_eq!(r.status, 200);
            r
        })
        .collect();
    let r = send(addr, "GET", "/healthz", &[], b"");
    assert_eq!(r.status, 503);
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(10);
    while http.connection_count() > 0 {
        assert!(Instant::now() < deadline, "connections were not released");
        std::thread::yield_now();
    }
    assert_eq!(send(addr, "GET", "/healthz", &[], b"").status, 200);
    http.shutdown().unwrap();
}

/// At the cap, the oldest connection idle between requests (or before its
/// first: one that sends nothing) is closed to make room: connections that
/// send nothing cannot keep every client out until their idle timeout.
#[test]
fn at_the_cap_an_idle_connection_makes_room_for_a_new_one() {
    let http = echo_server(HttpOptions::default().with_max_connections(8));
    let addr = http.local_addr();
    let mut silent: Vec<TcpStream> = (0..8).map(|_| TcpStream::connect(addr).unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while http.connection_count() < 8 {
        assert!(Instant::now() < deadline, "the connections were taken");
        std::thread::yield_now();
    }
    for i in 0..3 {
        assert_eq!(
            send(addr, "GET", "/healthz", &[], b"").status,
            200,
            "request {i}"
        );
    }
    // The oldest silent ones were closed for them.
    silent[0]
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(silent[0].read(&mut [0u8; 1]).unwrap_or(0), 0);
    http.shutdown().unwrap();
}

fn huge_head(addr: SocketAddr, prefix: &str) -> u16 {
    let mut s = TcpStream::connect(addr).unwrap();
    let writer = {
        let mut s = s.try_clone().unwrap();
        let prefix = prefix.to_owned();
        std::thread::spawn(move || {
            let chunk = vec![b'a'; 1024 * 1024];
            let _ = s.write_all(prefix.as_bytes());
            for _ in 0..64 {
                if s.write_all(&chunk).is_err() {
                    break;
                }
            }
        })
    };
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = [0u8; 64];
    let n = s.read(&mut head).unwrap_or(0);
    let _ = s.shutdown(std::net::Shutdown::Both);
    writer.join().unwrap();
    String::from_utf8_lossy(&head[..n])
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_64_mib_header_line_is_refused_with_bounded_memory() {
    let (mut child, addr) = child_server(None);
    let before = rss_kib(child.id());
    assert_eq!(
        huge_head(addr, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "),
        431
    );
    assert_eq!(huge_head(addr, "GET /"), 414);
    let after = rss_kib(child.id());
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    // Still serving.
    let sid = initialize(addr, &[]);
    assert!(!sid.is_empty());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn slowloris_is_cut_off_while_others_are_served() {
    let limits = WireLimits {
        max_request_line: 8192,
        max_head: 32 * 1024,
        max_body: 1024 * 1024,
        head_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_secs(30),
    };
    let http = echo_server(HttpOptions::default().with_limits(limits));
    let addr = http.local_addr();
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let sid = initialize(addr, &[]);
    let started = Instant::now();
    let mut cut_off = false;
    // One header byte every 50 ms: the head never completes in time.
    for (i, b) in b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter().enumerate() {
        if slow.write_all(&[*b]).is_err() {
            cut_off = true;
            break;
        }
        round_trip(addr, &sid, i as i64);
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    assert!(
        cut_off || text.starts_with("HTTP/1.1 408") || buf.is_empty(),
        "slow client got {text:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    http.shutdown().unwrap();
}

#[test]
fn running_out_of_descriptors_and_recovering() {
    let (mut child, addr) = child_server(Some(64));
    let (log_tx, log_rx) = crossbeam_channel::unbounded::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = log_tx.send(line);
        }
    });
    // Far more connections than the server has descriptors for, held open
    // until the server reports that accept() failed.
    let hogs: Vec<TcpStream> = (0..120)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(hogs.len() >= 60);
    loop {
        let line = log_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the server reports running out of descriptors");
        if line.contains("accept failed") {
            break;
        }
    }
    drop(hogs);
    // Once they are gone the listener (which never died) accepts again.
    let deadline = Instant::now() + Duration::from_secs(15);
    let sid = loop {
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let init = br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
        let req = format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", init.len());
        let ok = s
            .write_all(req.as_bytes())
            .and_then(|()| s.write_all(init))
            .is_ok();
        let mut head = String::new();
        if ok && BufReader::new(&s).read_line(&mut head).is_ok() && head.contains(" 200 ") {
            break "recovered";
        }
        assert!(
            Instant::now() < deadline,
            "the server did not recover after descriptors were freed"
        );
    };
    assert_eq!(sid, "recovered");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the server is still running"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_failed_listener_is_restarted_by_the_supervisor_and_rebinds() {
    let http = echo_server(HttpOptions::default());
    let addr = http.local_addr();
    assert_eq!(send(addr, "GET", "/healthz", &[], b"").status, 200);
    http.break_listener_for_tests();
    // accept() now fails for good: the worker exits with an error, the
    // supervisor restarts it, and the new worker binds the same address.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let restarts = http
            .supervisor()
            .which_children()
            .unwrap()
            .into_iter()
            .find(|c| c.id == "http-listener")
            .map_or(0, |c| c.restarts);
        if restarts >= 1 {
            if let Ok(s) = TcpStream::connect(addr) {
                if send_on(s, "GET", "/healthz", &[], b"").status == 200 {
                    break;
                }
            }
        }
        assert!(Instant::now() < deadline, "the listener did not come back");
        std::thread::yield_now();
    }
    let sid = initialize(addr, &[]);
    round_trip(addr, &sid, 1);
    http.shutdown().unwrap();
}

#[test]
fn huge_chunk_sizes_are_refused_without_overflow() {
    // #11 item 5: `ffffffffffffffff` wrapped `body.len() + size`.
    let http = echo_server(HttpOptions::default());
    let addr = http.local_addr();
    for (size, status) in [
        ("ffffffffffffffff", 413),
        ("FFFFFFFFFFFFFFFE", 413),
        ("7fffffffffffffff", 413),
        ("10000000000000000", 400),
        ("400001", 413),
    ] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{size}\r\n"
        );
        let _ = s.write_all(head.as_bytes());
        assert_eq!(
            read_head(BufReader::new(s)).status,
            status,
            "chunk size {size}"
        );
    }
    assert_eq!(send(addr, "GET", "/healthz", &[], b"").status, 200);
    http.shutdown().unwrap();
}

#[test]
fn head_responses_carry_no_body_and_keep_alive_framing_holds() {
    // #11 item 28 (repro t17).
    let http = echo_server(HttpOptions::default());
    let mut s = TcpStream::connect(http.local_addr()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let req =
        |method: &str, path: &str| format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let mut all = String::new();
    for (m, p) in [("HEAD", "/healthz"), ("HEAD", "/mcp"), ("GET", "/healthz")] {
        all.push_str(&req(m, p));
    }
    s.write_all(all.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let head = |r: &mut BufReader<TcpStream>| -> (u16, usize) {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        let status = status.unwrap_or_else(|| panic!("a status line, not {line:?}"));
        let mut length = 0;
        loop {
            let mut h = String::new();
            r.read_line(&mut h).unwrap();
            if h.trim().is_empty() {
                return (status, length);
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
    };
    let (status, length) = head(&mut r);
    assert_eq!(status, 200);
    assert!(length > 0, "HEAD announces the GET body's length");
    // No body follows: the next bytes are the next response's head.
    assert_eq!(head(&mut r).0, 405, "HEAD /mcp");
    let (status, length) = head(&mut r);
    assert_eq!(status, 200, "GET after two HEADs on one connection");
    let mut body = vec![0; length];
    r.read_exact(&mut body).unwrap();
    assert!(String::from_utf8_lossy(&body).contains("\"ok\""));
    http.shutdown().unwrap();
}

#[test]
fn logs_name_sessions_by_a_digest_and_never_quote_huge_input() {
    // #11 items 18 and 34: the session id is the capability to use a
    // session (no bearer tokens here), so it never reaches the log; a huge
    // bad member is neither logged nor echoed whole.
    let (mut child, addr) = child_server_logging(None, "info");
    let sid = initialize(addr, &[]);
    let huge = "A".repeat(1024 * 1024);
    let bad = json!({"jsonrpc": huge, "id": 1, "method": "ping"});
    let r = post(addr, Some(&sid), &bad, &[]);
    let answer = r.body();
    assert!(answer.len() < 1024, "echoed {} bytes", answer.len());
    let _ = child.kill();
    let _ = child.wait();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(log.contains("initialized with protocol"), "{log}");
    assert!(!log.contains(&sid), "the session id was logged");
    assert!(
        log.contains(&mcpvisor::protocol::session_log_name(&sid)),
        "{log}"
    );
    assert!(log.len() < 64 * 1024, "the log grew by {} bytes", log.len());
}
