//! The Streamable HTTP client keeps its connections alive: requests one
//! after the other share one connection; one the server closed while it sat
//! idle, or said it would close, is not used again (the request goes on a
//! new one), and closing the client closes the idle ones. A call the
//! client gives up on has its connection closed, and a stateless call
//! gets a connection of its own.

mod common;

use crossbeam_channel::{Receiver, Sender};
use mcpvisor::client::{CallOptions, Client, ClientError, ClientOptions, Connection, Generation};
use mcpvisor::protocol::CancelToken;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The tool call after whose answer the fake server closes its connection.
const THEN_CLOSE: &str = "then close";
/// The tool call whose first request the fake server reads and then closes
/// its connection on, unanswered: as a server closing an idle connection
/// just as the request came looks to the client.
const UNANSWERED_ONCE: &str = "unanswered once";
/// The tool call answered with `Connection: close` on a connection the
/// fake server then keeps serving: only the header says not to reuse it.
const SAYS_CLOSE: &str = "says close";
/// The tool call the fake server answers only once the test sends on
/// [`Fake::release`].
const HELD: &str = "held";
/// The tool call the fake server never answers, reading on for the next
/// request meanwhile (so it sees the client close the connection).
const NEVER: &str = "never";

/// The fake server's reports.
struct Fake {
    url: String,
    /// Connections accepted.
    accepted: Arc<AtomicUsize>,
    /// The client's end of each connection closed after [`THEN_CLOSE`].
    closed: Receiver<SocketAddr>,
    /// One for every GET (the standalone stream), once it is answered.
    gets: Receiver<()>,
    /// The client's end of each connection the client closed.
    hangups: Receiver<SocketAddr>,
    /// Lets one [`HELD`] call be answered.
    release: Sender<()>,
    /// The client's end of the connection each [`NEVER`] call came on.
    nevers: Receiver<SocketAddr>,
    /// Every `notifications/cancelled`.
    cancels: Receiver<Value>,
    /// Every `tools/call`, as it came.
    calls: Receiver<Call>,
}

/// What a connection of the fake server reports.
struct Reports {
    closed: Sender<SocketAddr>,
    gets: Sender<()>,
    hangups: Sender<SocketAddr>,
    release: Receiver<()>,
    nevers: Sender<SocketAddr>,
    cancels: Sender<Value>,
    calls: Sender<Call>,
}

/// A `tools/call` as the fake server saw it.
struct Call {
    /// The client's end of its connection.
    peer: SocketAddr,
    /// Whether the request said `Connection: close`.
    says_close: bool,
    /// Its `MCP-Protocol-Version` and `Mcp-Param-Region` headers.
    version: Option<String>,
    region: Option<String>,
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
    let (hangups_tx, hangups) = crossbeam_channel::unbounded();
    let (release, release_rx) = crossbeam_channel::unbounded();
    let (nevers_tx, nevers) = crossbeam_channel::unbounded();
    let (cancels_tx, cancels) = crossbeam_channel::unbounded();
    let (calls_tx, calls) = crossbeam_channel::unbounded();
    let count = accepted.clone();
    std::thread::spawn(move || {
        for s in l.incoming().map_while(Result::ok) {
            count.fetch_add(1, Ordering::SeqCst);
            let reports = Reports {
                closed: closed_tx.clone(),
                gets: gets_tx.clone(),
                hangups: hangups_tx.clone(),
                release: release_rx.clone(),
                nevers: nevers_tx.clone(),
                cancels: cancels_tx.clone(),
                calls: calls_tx.clone(),
            };
            std::thread::spawn(move || serve(s, &reports));
        }
    });
    Fake {
        url,
        accepted,
        closed,
        gets,
        hangups,
        release,
        nevers,
        cancels,
        calls,
    }
}

/// Whether the fake server already dropped an [`UNANSWERED_ONCE`] request.
static DROPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Answers the requests of one connection until the client hangs up.
fn serve(s: TcpStream, reports: &Reports) {
    let peer = s.peer_addr().unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    loop {
        let (mut get, mut delete, mut length, mut says_close) = (false, false, 0, false);
        let (mut version, mut region) = (None, None);
        let mut first = true;
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                let _ = reports.hangups.send(peer);
                return;
            }
            if first {
                get = line.starts_with("GET");
                delete = line.starts_with("DELETE");
                first = false;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(v) = lower.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
            says_close |= lower.starts_with("connection:") && lower.contains("close");
            let value = || line.split_once(':').map(|(_, v)| v.trim().to_owned());
            if lower.starts_with("mcp-protocol-version:") {
                version = value();
            }
            if lower.starts_with("mcp-param-region:") {
                region = value();
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
            let _ = reports.gets.send(());
            continue;
        }
        if delete {
            reply(&mut w, "200 OK", "", "");
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
            // Stateless (2026-07-28): what the client needs to go on.
            "server/discover" => {
                let result = json!({"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},
                    "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"keepalive","version":"0"}}});
                let answer = json!({"jsonrpc":"2.0","id":m["id"],"result":result});
                (reply(&mut w, "200 OK", json, &answer.to_string()), false)
            }
            // One tool, whose `region` argument a stateless call mirrors in
            // a header (SEP-2243).
            "tools/list" => {
                let schema = json!({"type":"object","properties":{
                    "message":{"type":"string"},
                    "region":{"type":"string","x-mcp-header":"Region"}}});
                let result = json!({"tools":[{"name":"echo","inputSchema":schema}]});
                let answer = json!({"jsonrpc":"2.0","id":m["id"],"result":result});
                (reply(&mut w, "200 OK", json, &answer.to_string()), false)
            }
            "tools/call" => {
                let _ = reports.calls.send(Call {
                    peer,
                    says_close,
                    version: version.clone(),
                    region: region.clone(),
                });
                let said = m["params"]["arguments"]["message"].clone();
                if said == HELD && reports.release.recv_timeout(common::WAIT).is_err() {
                    return;
                }
                if said == UNANSWERED_ONCE && !DROPPED.swap(true, Ordering::SeqCst) {
                    return;
                }
                if said == NEVER {
                    let _ = reports.nevers.send(peer);
                    continue;
                }
                let result = json!({"content":[{"type":"text","text":said}]});
                let answer = json!({"jsonrpc":"2.0","id":m["id"],"result":result});
                let extra = match said == SAYS_CLOSE {
                    true => format!("{json}Connection: close\r\n"),
                    false => json.to_owned(),
                };
                let sent = reply(&mut w, "200 OK", &extra, &answer.to_string());
                (sent, said == THEN_CLOSE)
            }
            // What some servers answer a notification with (202 is the
            // rule): an empty 200, which must not end the session.
            method => {
                if method == "notifications/cancelled" {
                    let _ = reports.cancels.send(m.clone());
                }
                (reply(&mut w, "200 OK", "", ""), false)
            }
        };
        if !answered {
            return;
        }
        if then_close {
            let _ = w.shutdown(std::net::Shutdown::Both);
            let _ = reports.closed.send(peer);
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

/// A stateless (2026-07-28) client of `fake`.
fn connect_stateless(fake: &Fake) -> Client {
    let options = ClientOptions {
        generation: Generation::Stateless,
        ..ClientOptions::default()
    };
    Client::connect(Connection::http(&fake.url).unwrap(), options).unwrap()
}

/// Waits until the client has closed its end `peer` of a connection
/// (others closing meanwhile are passed over).
fn hung_up(fake: &Fake, peer: SocketAddr, what: &str) {
    while fake.hangups.recv_timeout(common::WAIT).expect(what) != peer {}
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
        let call = fake.calls.recv_timeout(common::WAIT).unwrap();
        // The revision the initialize answer gave, on every request.
        assert_eq!(call.version.as_deref(), Some("2025-11-25"));
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
    common::eventually("the client never saw the close", || {
        sees_close(local)
            .then_some(())
            .ok_or_else(|| format!("{local} open"))
    });
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

#[test]
fn an_answer_saying_close_leaves_its_connection_unused() {
    let fake = fake_server();
    let c = connect(&fake);
    echo(&c, "first");
    let before = fake.accepted.load(Ordering::SeqCst);
    echo(&c, SAYS_CLOSE);
    echo(&c, "after");
    assert_eq!(fake.accepted.load(Ordering::SeqCst), before + 1);
    c.close();
}

#[test]
fn closing_the_client_closes_its_idle_connections() {
    let fake = fake_server();
    let c = Arc::new(connect(&fake));
    // Two connections idle: a call held by the server keeps one busy while
    // another call opens a second.
    // Counted before the held call can connect.
    let before = fake.accepted.load(Ordering::SeqCst);
    let held = {
        let c = c.clone();
        std::thread::spawn(move || echo(&c, HELD))
    };
    common::eventually("the held call never connected", || {
        let now = fake.accepted.load(Ordering::SeqCst);
        (now > before)
            .then_some(())
            .ok_or_else(|| format!("{now} accepted"))
    });
    echo(&c, "meanwhile");
    fake.release.send(()).unwrap();
    held.join().unwrap();
    assert_eq!(fake.accepted.load(Ordering::SeqCst), before + 2);
    // The standalone stream's connection, refused, is closed by the client.
    let gone = fake
        .hangups
        .recv_timeout(common::WAIT)
        .expect("the GET's connection");
    c.close();
    // The DELETE takes one idle connection (and closes it after its
    // answer); the close closes the other while `c` still lives.
    for _ in 0..2 {
        let next = fake
            .hangups
            .recv_timeout(common::WAIT)
            .expect("an idle connection outlived the close");
        assert_ne!(next, gone);
    }
}

/// A call the client gives up on has the connection its answer was to come
/// on closed, so a server that never answers holds nothing of the
/// client's; the server is told with `notifications/cancelled`, and the
/// session goes on.
#[test]
fn a_call_given_up_on_has_its_connection_closed() {
    let fake = fake_server();
    let c = Arc::new(connect(&fake));
    let token = CancelToken::new();
    let call = {
        let (c, token) = (c.clone(), token.clone());
        std::thread::spawn(move || {
            let opts = CallOptions {
                cancel: Some(token),
                ..CallOptions::default()
            };
            c.call_tool_with("echo", json!({ "message": NEVER }), opts)
        })
    };
    let peer = fake
        .nevers
        .recv_timeout(common::WAIT)
        .expect("the call reached the server");
    token.cancel();
    let e = call.join().unwrap().unwrap_err();
    assert!(matches!(e, ClientError::Cancelled), "{e:?}");
    hung_up(
        &fake,
        peer,
        "the connection of the call given up on stayed open",
    );
    let cancel = fake
        .cancels
        .recv_timeout(common::WAIT)
        .expect("the server was told");
    assert!(cancel["params"]["requestId"].is_number(), "{cancel}");
    echo(&c, "after");
    c.close();
}

/// A stateless (2026-07-28) call says `Connection: close` and goes on a
/// connection of its own, which the client closes after the answer: it is
/// never kept for another request, since closing it is how such a call is
/// cancelled.
#[test]
fn a_stateless_call_gets_a_connection_of_its_own() {
    let fake = fake_server();
    let c = connect_stateless(&fake);
    for i in 0..3 {
        let before = fake.accepted.load(Ordering::SeqCst);
        echo(&c, &format!("stateless {i}"));
        assert_eq!(fake.accepted.load(Ordering::SeqCst), before + 1);
        let Call {
            peer, says_close, ..
        } = fake.calls.recv_timeout(common::WAIT).unwrap();
        assert!(says_close, "the call said Connection: close");
        hung_up(&fake, peer, "the stateless call's connection stayed open");
    }
    c.close();
}

/// What a stateless client learns from a `tools/list` answered with a
/// JSON body: the arguments a tool's calls mirror in headers (SEP-2243).
#[test]
fn a_listed_tools_declared_argument_is_mirrored_in_a_header() {
    let fake = fake_server();
    let c = connect_stateless(&fake);
    assert_eq!(c.list_tools().unwrap().len(), 1);
    let args = json!({"message": "hi", "region": "eu-west"});
    let r = c.call_tool("echo", args).unwrap();
    assert_eq!(r["content"][0]["text"], "hi", "{r}");
    let call = fake.calls.recv_timeout(common::WAIT).unwrap();
    assert_eq!(call.region.as_deref(), Some("eu-west"));
    assert_eq!(call.version.as_deref(), Some("2026-07-28"));
    c.close();
}
