//! The Streamable HTTP client keeps its connections alive: requests one
//! after the other share one connection, and one the server closed while
//! it sat idle is not used again (its request goes on a new one).

mod common;

use crossbeam_channel::{Receiver, Sender};
use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The tool call after whose answer the fake server closes its connection.
const THEN_CLOSE: &str = "then close";
/// The tool call whose first request the fake server reads and then closes
/// its connection on, unanswered: as a server closing an idle connection
/// just as the request came looks to the client.
const UNANSWERED_ONCE: &str = "unanswered once";

/// The fake server's reports.
struct Fake {
    url: String,
    /// Connections accepted.
    accepted: Arc<AtomicUsize>,
    /// The client's end of each connection closed after [`THEN_CLOSE`].
    closed: Receiver<SocketAddr>,
    /// One for every GET (the standalone stream), once it is answered.
    gets: Receiver<()>,
}

/// A keep-alive HTTP/1.1 server speaking just enough MCP: it counts the
/// connections it accepted, refuses the standalone stream (405), and after
/// answering a call whose message is [`THEN_CLOSE`] it closes that
/// connection (without saying so in the answer).
fn fake_server() -> Fake {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", l.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let (closed_tx, closed) = crossbeam_channel::unbounded();
    let (gets_tx, gets) = crossbeam_channel::unbounded();
    let count = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming().map_while(Result::ok) {
            count.fetch_add(1, Ordering::SeqCst);
            let (closed, gets) = (closed_tx.clone(), gets_tx.clone());
            std::thread::spawn(move || serve(s, &closed, &gets));
        }
    });
    Fake {
        url,
        accepted,
        closed,
        gets,
    }
}

/// Whether the fake server already dropped an [`UNANSWERED_ONCE`] request.
static DROPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Answers the requests of one connection until the client hangs up.
fn serve(s: TcpStream, closed: &Sender<SocketAddr>, gets: &Sender<()>) {
    let peer = s.peer_addr().unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    loop {
        let (mut get, mut length) = (false, 0);
        let mut first = true;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if first {
                get = line.starts_with("GET");
                first = false;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        let reply = |w: &mut TcpStream, status: &str, extra: &str, body: &str| {
            let head = format!(
                "HTTP/1.1 {status}\r\n{extra}Content-Length: {}\r\n\r\n",
                body.len()
            );
            w.write_all(format!("{head}{body}").as_bytes()).is_ok()
        };
        if get {
            reply(&mut w, "405 Method Not Allowed", "", "");
            let _ = gets.send(());
            continue;
        }
        let Ok(m) = serde_json::from_slice::<Value>(&body) else {
            return;
        };
        let json = "Content-Type: application/json\r\n";
        let (answered, then_close) = match m["method"].as_str().unwrap_or_default() {
            "initialize" => {
                let result = json!({"protocolVersion":"2025-11-25","capabilities":{"tools":{}},
                    "serverInfo":{"name":"keepalive","version":"0"}});
                let answer = json!({"jsonrpc":"2.0","id":m["id"],"result":result});
                let extra = format!("{json}Mcp-Session-Id: s1\r\n");
                (reply(&mut w, "200 OK", &extra, &answer.to_string()), false)
            }
            "tools/call" => {
                let said = m["params"]["arguments"]["message"].clone();
                if said == UNANSWERED_ONCE && !DROPPED.swap(true, Ordering::SeqCst) {
                    return;
                }
                let result = json!({"content":[{"type":"text","text":said}]});
                let answer = json!({"jsonrpc":"2.0","id":m["id"],"result":result});
                let sent = reply(&mut w, "200 OK", json, &answer.to_string());
                (sent, said == THEN_CLOSE)
            }
            // What some servers answer a notification with (202 is the
            // rule): an empty 200, which must not end the session.
            _ => (reply(&mut w, "200 OK", "", ""), false),
        };
        if !answered {
            return;
        }
        if then_close {
            let _ = w.shutdown(std::net::Shutdown::Both);
            let _ = closed.send(peer);
            return;
        }
    }
}

/// A client of `fake` once its standalone stream was refused: that GET
/// took the connection `initialize` left idle, so every request from now
/// on finds the pool empty or holding what the last one left.
fn connect(fake: &Fake) -> Client {
    let c = Client::connect(
        Connection::http(&fake.url).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    fake.gets
        .recv_timeout(common::WAIT)
        .expect("the standalone stream's GET");
    c
}

fn echo(c: &Client, message: &str) {
    let r = c.call_tool("echo", json!({ "message": message })).unwrap();
    assert_eq!(r["content"][0]["text"], message, "{r}");
}

/// Whether the client's end `local` of a TCP connection has seen the
/// server's close (CLOSE_WAIT in /proc/net/tcp).
fn sees_close(local: SocketAddr) -> bool {
    let SocketAddr::V4(v4) = local else {
        panic!("an IPv4 loopback address: {local}")
    };
    let want = format!(
        "{:08X}:{:04X}",
        u32::from_le_bytes(v4.ip().octets()),
        v4.port()
    );
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"08")
    })
}

#[test]
fn calls_one_after_the_other_share_one_connection() {
    let fake = fake_server();
    let c = connect(&fake);
    for i in 0..20 {
        echo(&c, &format!("m{i}"));
    }
    // One for initialize, initialized and then the GET that took it over
    // (refused, and closed then), one for all the calls.
    assert_eq!(fake.accepted.load(Ordering::SeqCst), 2);
    c.close();
}

#[test]
fn a_connection_the_server_closed_while_idle_is_not_used_again() {
    let fake = fake_server();
    let accepted = &fake.accepted;
    let c = connect(&fake);
    echo(&c, "first");
    let before = accepted.load(Ordering::SeqCst);
    echo(&c, THEN_CLOSE);
    let local = fake
        .closed
        .recv_timeout(common::WAIT)
        .expect("the server closed");
    // The close has reached the client's end before the next request.
    let deadline = Instant::now() + common::WAIT;
    while !sees_close(local) {
        assert!(Instant::now() < deadline, "the client never saw the close");
        std::thread::yield_now();
    }
    echo(&c, "after");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        before + 1,
        "one new connection"
    );
    echo(&c, "again");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        before + 1,
        "and it is kept"
    );
    c.close();
}

/// A kept connection that the server closes as a request arrives on it
/// (before any byte of an answer): the request goes again on a new one.
#[test]
fn a_request_the_server_closed_a_kept_connection_on_goes_again() {
    let fake = fake_server();
    let c = connect(&fake);
    echo(&c, "first");
    let before = fake.accepted.load(Ordering::SeqCst);
    echo(&c, UNANSWERED_ONCE);
    assert!(
        DROPPED.load(Ordering::SeqCst),
        "the first request was dropped"
    );
    assert_eq!(fake.accepted.load(Ordering::SeqCst), before + 1);
    echo(&c, "then");
    assert_eq!(fake.accepted.load(Ordering::SeqCst), before + 1);
    c.close();
}
