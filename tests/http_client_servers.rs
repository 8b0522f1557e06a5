//! The Streamable HTTP client against small fake servers that take the
//! spec's corners (a call's stream ended again and again, a session
//! forgotten while the client only listens, a quiet stream) or misbehave
//! (no answer to `initialize` or `DELETE`, 202 to a call, a bad session id).

mod common;

use mcpvisor::client::{Client, ClientError, ClientOptions, Connection};
use serde_json::{json, Value};
use std::io::{BufRead, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// One request as a fake server sees it.
struct Request {
    method: String,
    last_event_id: Option<String>,
    /// The JSON-RPC message of a POST (`Null` for none).
    message: Value,
}

impl Request {
    fn rpc_method(&self) -> Option<&str> {
        self.message["method"].as_str()
    }
}

fn read_request(s: &TcpStream) -> Option<Request> {
    let mut r = std::io::BufReader::new(s);
    let mut first = String::new();
    r.read_line(&mut first).ok()?;
    let (mut length, mut last_event_id) = (0, None);
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        let (name, value) = line.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().ok()?,
            "last-event-id" => last_event_id = Some(value.trim().to_owned()),
            _ => {}
        }
    }
    let mut body = vec![0; length];
    r.read_exact(&mut body).ok()?;
    Some(Request {
        method: first.split(' ').next()?.to_owned(),
        last_event_id,
        message: serde_json::from_slice(&body).unwrap_or_default(),
    })
}

/// A fake server at the returned URL: each connection carries one
/// request, which `answer` answers with what to write (`None`: nothing,
/// and the connection is kept open, unanswered). `answer` may also use
/// the connection itself.
fn fake_server(
    mut answer: impl FnMut(&TcpStream, Request) -> Option<String> + Send + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().map_while(Result::ok) {
            let Some(request) = read_request(&s) else {
                continue;
            };
            match answer(&s, request) {
                Some(reply) => {
                    let _ = (&s).write_all(reply.as_bytes());
                }
                None => held.push(s),
            }
        }
    });
    url
}

const ACCEPTED: &str = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const NO_STREAM: &str =
    "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
const SSE: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";

/// The answer to `initialize` (in `request`), giving `session` as the
/// session id.
fn initialized(request: &Request, session: &str) -> String {
    let init = json!({"jsonrpc":"2.0","id":request.message["id"],"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"0"}}});
    format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: {session}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{init}", init.to_string().len())
}

/// A server may end a long call's stream again and again for the client
/// to come back (SSE polling): the client resumes from the last event id
/// it saw, also after a pass that brought no event (and no id), with the
/// last `retry:` the server gave, and gives up only after
/// `MAX_RESUME_ATTEMPTS` passes in a row without a message or a new event
/// id (passes that bring only a priming event, a new id with no data, are
/// the spec's polling). Once the response came it reads no further,
/// though the stream stays open.
#[test]
fn a_call_s_stream_ended_many_times_is_resumed_from_the_last_event_seen() {
    const PASSES: usize = 8;
    let (resumed_tx, resumed) = crossbeam_channel::unbounded::<Option<String>>();
    let (hung_up_tx, hung_up) = crossbeam_channel::bounded::<()>(1);
    let (mut call_id, mut passes) = (Value::Null, 0);
    let url = fake_server(move |s, r| {
        Some(match (r.method.as_str(), r.rpc_method()) {
            ("POST", Some("initialize")) => initialized(&r, "s1"),
            ("POST", Some("tools/call")) => {
                call_id = r.message["id"].clone();
                let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1}});
                format!("{SSE}id: 1\nretry: 1\ndata: {note}\n\n")
            }
            ("GET", _) if r.last_event_id.is_some() => {
                passes += 1;
                let _ = resumed_tx.send(r.last_event_id);
                match passes {
                    // Nothing, not even an id: resumed from "1" again.
                    1 => SSE.to_owned(),
                    PASSES => {
                        // The stream stays open after the response: the
                        // client hangs up on it.
                        let done = json!({"jsonrpc":"2.0","id":call_id,"result":{"content":[{"type":"text","text":"done"}]}});
                        let open = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
                        let mut w = s;
                        let _ = write!(w, "{open}data: {done}\n\n");
                        let _ = s.set_read_timeout(Some(common::WAIT));
                        if matches!(w.read(&mut [0u8; 16]), Ok(0)) {
                            let _ = hung_up_tx.send(());
                        }
                        return None;
                    }
                    // A priming event: a new id, no message.
                    n => format!("{SSE}id: {}\nretry: 1\ndata:\n\n", n + 1),
                }
            }
            ("GET", _) => NO_STREAM.to_owned(),
            _ => ACCEPTED.to_owned(),
        })
    });
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    let r = c.call_tool("long", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "done");
    hung_up
        .recv_timeout(common::WAIT)
        .expect("the client hung up on the stream once it had the response");
    let ids: Vec<Option<String>> = resumed.try_iter().collect();
    let expected: Vec<Option<String>> = ["1", "1", "3", "4", "5", "6", "7", "8"]
        .map(|s| Some(s.to_owned()))
        .into();
    assert_eq!(ids, expected);
    c.close();
}

/// A session that ends while the client only listens (its standalone
/// stream ends, and opening it again gets 404) is started again at once,
/// not at the next call.
#[test]
fn a_404_on_the_session_s_stream_leads_to_a_fresh_initialize() {
    let mut gets = 0;
    let url = fake_server(move |_, r| {
        Some(match (r.method.as_str(), r.rpc_method()) {
            ("POST", Some("initialize")) => initialized(&r, "s1"),
            ("GET", _) => {
                gets += 1;
                match gets {
                    // The stream ends at once (the server forgot the
                    // session): come back in 10 ms.
                    1 => format!("{SSE}retry: 10\n\n"),
                    _ => "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_owned(),
                }
            }
            _ => ACCEPTED.to_owned(),
        })
    });
    let (options, re_rx) = common::reconnecting();
    let c = Client::connect_with(move || Connection::http(&url), options).unwrap();
    re_rx
        .recv_timeout(common::WAIT)
        .expect("re-initialized without a call");
    c.close();
}

/// A standalone stream the server keeps ending without a word (a quiet
/// server, a proxy closing idle connections) is opened again every time:
/// a stream that opens is no failure, however little it brings.
#[test]
fn a_quiet_session_stream_is_opened_again_every_time_it_ends() {
    let (opened_tx, opened) = crossbeam_channel::unbounded::<()>();
    let url = fake_server(move |_, r| {
        Some(match (r.method.as_str(), r.rpc_method()) {
            ("POST", Some("initialize")) => initialized(&r, "s1"),
            ("GET", _) => {
                let _ = opened_tx.send(());
                format!("{SSE}retry: 1\n\n")
            }
            _ => ACCEPTED.to_owned(),
        })
    });
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    for i in 0..20 {
        opened
            .recv_timeout(common::WAIT)
            .unwrap_or_else(|_| panic!("the stream was not opened again after {i} times"));
    }
    c.close();
}

/// Closing tells the server with a `DELETE`, but a server that takes the
/// connection and never answers holds `close()` for `CLOSE_TIMEOUT` (5 s
/// of silence), not for the 5 minutes other requests may wait.
#[test]
fn closing_waits_briefly_for_a_server_that_never_answers_its_delete() {
    let url = fake_server(|_, r| match (r.method.as_str(), r.rpc_method()) {
        ("POST", Some("initialize")) => Some(initialized(&r, "s1")),
        ("GET", _) => Some(NO_STREAM.to_owned()),
        ("DELETE", _) => None,
        _ => Some(ACCEPTED.to_owned()),
    });
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    let started = Instant::now();
    c.close();
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(60),
        "close() waited {took:?} for the DELETE"
    );
}

/// Connecting to a server that takes the `initialize` and never answers
/// fails after the client's request timeout, not after the 5 minutes a
/// silent response may take.
#[test]
fn connecting_to_a_server_that_never_answers_initialize_fails_at_the_request_timeout() {
    let url = fake_server(|_, _| None);
    let options = ClientOptions {
        request_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let started = Instant::now();
    let e = Client::connect(Connection::http(&url).unwrap(), options)
        .err()
        .expect("no answer to initialize");
    let took = started.elapsed();
    assert!(matches!(e, ClientError::Timeout { .. }), "{e}");
    assert!(took < Duration::from_secs(60), "connect took {took:?}");
}

/// A server that answers notifications with 204 (no content) where the
/// spec says 202 is served all the same: the handshake completes (its
/// `notifications/initialized` was answered so) and calls are answered.
#[test]
fn a_server_that_answers_notifications_with_204_is_served() {
    let url = fake_server(|_, r| {
        Some(match (r.method.as_str(), r.rpc_method()) {
            ("POST", Some("initialize")) => initialized(&r, "s1"),
            ("POST", Some("tools/call")) => {
                let answer = json!({"jsonrpc": "2.0", "id": r.message["id"],
                    "result": {"content": [{"type": "text", "text": "served"}]}})
                .to_string();
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len())
            }
            ("GET", _) => NO_STREAM.to_owned(),
            _ => "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".to_owned(),
        })
    });
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    let r = c.call_tool("any", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "served", "{r}");
    c.close();
}

/// A call the server accepts (202) without answering fails at once, not
/// at its timeout; a session id that is not visible ASCII is refused
/// rather than sent back in every request.
#[test]
fn a_call_accepted_unanswered_fails_at_once_and_a_bad_session_id_is_refused() {
    let accepting = |session: &'static str| {
        fake_server(move |_, r| {
            Some(match (r.method.as_str(), r.rpc_method()) {
                ("POST", Some("initialize")) => initialized(&r, session),
                ("GET", _) => NO_STREAM.to_owned(),
                _ => ACCEPTED.to_owned(),
            })
        })
    };
    let options = || ClientOptions {
        request_timeout: Duration::from_secs(3600),
        ..Default::default()
    };
    let url = accepting("s1");
    let c = Client::connect(Connection::http(&url).unwrap(), options()).unwrap();
    let e = c.call_tool("any", json!({})).unwrap_err();
    assert!(e.to_string().contains("202"), "{e}");
    c.close();
    let url = accepting("s\u{1}1");
    let e = Client::connect(Connection::http(&url).unwrap(), options())
        .err()
        .expect("refused");
    assert!(e.to_string().contains("visible ASCII"), "{e}");
}
