//! The Streamable HTTP client when things go wrong (#11 item 9): a server
//! that went away, a response without end (also to the DELETE at close),
//! and closing. One test, run
//! alone in its binary, because it counts the process's client threads.

mod common;

use mcpvisor::client::{Client, ClientError, ClientOptions, Connection};
use mcpvisor::server::{Server, Tool, ToolResult};
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Threads of this process whose name starts with `mcpvisor-client`.
fn client_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("mcpvisor-client"))
        .count()
}

/// A fake server: answers the handshake, and every `tools/call` with a
/// body announced as 1 GiB that it streams until the client hangs up.
fn endless_server() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming().map_while(Result::ok) {
            std::thread::spawn(move || answer(s));
        }
    });
    url
}

fn answer(s: TcpStream) {
    let mut r = BufReader::new(s.try_clone().unwrap());
    let (mut head, mut length) = (String::new(), 0);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).unwrap();
    let body = String::from_utf8(body).unwrap();
    let mut w = s;
    let reply = |w: &mut TcpStream, status: &str, extra: &str, body: &str| {
        let _ = write!(
            w,
            "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    };
    if head.starts_with("GET") {
        reply(&mut w, "405 Method Not Allowed", "", "");
    } else if body.contains("\"initialize\"") {
        let init = json!({"jsonrpc":"2.0","id":json!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]),"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"endless","version":"0"}}});
        let extra = "Content-Type: application/json\r\nMcp-Session-Id: s1\r\n";
        reply(&mut w, "200 OK", extra, &init.to_string());
    } else if body.contains("tools/call") {
        let _ = write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n"
        );
        let chunk = vec![b' '; 64 * 1024];
        while w.write_all(&chunk).is_ok() {}
    } else if head.starts_with("DELETE") {
        // An answer that never ends, a byte at a time.
        let _ = write!(w, "HTTP/1.1 200 OK\r\nX-Slow: ");
        for _ in 0..120 {
            if w.write_all(b"a").is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        DRIBBLED_FOR_A_MINUTE.store(true, std::sync::atomic::Ordering::SeqCst);
    } else {
        reply(&mut w, "202 Accepted", "", "");
    }
}

/// Set when the fake server sent its never-ending DELETE answer for a
/// whole minute without the client hanging up.
static DRIBBLED_FOR_A_MINUTE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

#[test]
fn failures_reach_the_caller_at_once_and_closing_leaves_nothing_running() {
    let baseline = client_threads();

    // A response body without end is refused at the size limit; the call
    // fails with the reason, the client goes on.
    let c = Client::connect(
        Connection::http(&endless_server()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let started = Instant::now();
    let e = c.call_tool("anything", json!({})).unwrap_err();
    assert!(!matches!(e, ClientError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("bytes"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // Its DELETE's answer comes a byte every half second, for good: the
    // close does not wait for it past CLOSE_TIMEOUT.
    c.close();
    assert!(
        !DRIBBLED_FOR_A_MINUTE.load(std::sync::atomic::Ordering::SeqCst),
        "close() waited for the DELETE's answer"
    );

    // A server that went away: calls fail at once (not after the request
    // timeout) and the client learns the connection is over.
    let server = Server::builder("gone", "1")
        .tool(Tool::new("echo", json!({"type":"object"}), |_, _| {
            Ok(ToolResult::text("x"))
        }))
        .build()
        .unwrap();
    let (http, url) = common::serve_http(&server);
    let (closed_tx, closed_rx) = crossbeam_channel::bounded(1);
    let options = ClientOptions {
        on_closed: Some(Arc::new(move |e| {
            let _ = closed_tx.send(e.to_string());
        })),
        request_timeout: Duration::from_secs(600),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&url).unwrap(), options).unwrap();
    c.call_tool("echo", json!({})).unwrap();
    http.shutdown().unwrap();
    let e = c.call_tool("echo", json!({})).unwrap_err();
    assert!(!matches!(e, ClientError::Timeout { .. }), "{e}");
    closed_rx
        .recv_timeout(common::WAIT)
        .expect("on_closed fired");
    c.close();

    // Many clients opened and closed: every thread of theirs ends.
    let server = Server::builder("many", "1").build().unwrap();
    let (http, url) = common::serve_http(&server);
    for _ in 0..10 {
        let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
        c.ping().unwrap();
        c.close();
    }
    common::eventually("client threads are still running after close()", || {
        let running = client_threads();
        (running <= baseline)
            .then_some(())
            .ok_or(format!("{running} against {baseline} before"))
    });
    http.shutdown().unwrap();
}
