//! Engine tests through the server API and an in-process sink: concurrency,
//! panics, catalog changes, subscriptions, pagination.

use crate::protocol::{EngineOptions, Outgoing, Session, Sink};
use crate::server::{Resource, ResourceContents, Server, Tool, ToolResult};
use crossbeam_channel::{Receiver, Sender};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

struct Chan(Sender<Value>);
impl Sink for Chan {
    fn send(&self, out: Outgoing) {
        if let Some(m) = out.message() {
            let _ = self.0.send(m.into_owned());
        }
    }
}

struct Client {
    session: Arc<Session>,
    sink: Arc<dyn Sink>,
    rx: Receiver<Value>,
}

impl Client {
    fn new(server: &Server) -> Client {
        let mut c = Client::initializing(server);
        c.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        c
    }
    /// A client whose `initialize` was answered, `initialized` not sent yet.
    fn initializing(server: &Server) -> Client {
        let (tx, rx) = crossbeam_channel::unbounded();
        let sink: Arc<dyn Sink> = Arc::new(Chan(tx));
        let session = server.engine().open_session(sink.clone());
        let mut c = Client { session, sink, rx };
        c.send(json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}));
        assert!(c.recv()["result"].is_object());
        c
    }
    fn send(&mut self, v: Value) {
        self.session.receive(v.to_string().as_bytes(), &self.sink);
    }
    fn recv(&self) -> Value {
        self.rx
            .recv_timeout(WAIT)
            .expect("a message within the wait")
    }
    fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        loop {
            let m = self.recv();
            if m["id"] == json!(id) {
                return m;
            }
        }
    }
}

/// The text of a tool result's first content block.
fn text(response: &Value) -> Option<String> {
    response["result"]["content"][0]["text"]
        .as_str()
        .map(str::to_owned)
}

fn tool(name: &str, f: impl Fn(&crate::Context) -> ToolResult + Send + Sync + 'static) -> Tool {
    Tool::new(name, json!({"type":"object"}), move |_, ctx| Ok(f(ctx)))
}

fn server_with(tools: Vec<Tool>, threads: usize) -> Server {
    let mut b = Server::builder("t", "0").options(EngineOptions {
        pool_threads: threads,
        page_size: 2,
        ..Default::default()
    });
    for t in tools {
        b = b.tool(t);
    }
    b.build().expect("server")
}

/// A tool `stuck` that says when a call of it starts and ends only once
/// released, with what tells and what releases.
fn stuck_tool() -> (Tool, Receiver<()>, Sender<()>) {
    let (release_tx, release_rx) = crossbeam_channel::unbounded::<()>();
    let (started_tx, started_rx) = crossbeam_channel::unbounded::<()>();
    let stuck = tool("stuck", move |_| {
        let _ = started_tx.send(());
        let _ = release_rx.recv();
        ToolResult::text("released")
    });
    (stuck, started_rx, release_tx)
}

#[test]
fn one_session_has_a_bounded_share_and_cancelled_jobs_never_run() {
    // #11 item 12: one session could fill the queue and every thread, and a
    // queued job ran its handler after it was cancelled.
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (stuck, started_rx, release_tx) = stuck_tool();
    let ran = Arc::new(AtomicUsize::new(0));
    let ran2 = ran.clone();
    let server = Server::builder("t", "0")
        .options(EngineOptions {
            pool_threads: 1,
            max_inflight_per_session: 3,
            ..Default::default()
        })
        .tool(stuck)
        .tool(tool("effect", move |_| {
            ran2.fetch_add(1, Ordering::SeqCst);
            ToolResult::text("done")
        }))
        .build()
        .unwrap();
    let mut c = Client::new(&server);
    let call = |name: &str| json!({"name": name, "arguments": {}});
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":call("stuck")}));
    started_rx.recv_timeout(WAIT).unwrap();
    // Queued behind the stuck handler: 2 and 3; 4 is over the limit of 3.
    c.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":call("effect")}));
    c.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":call("effect")}));
    let refused = c.call(4, "tools/call", call("effect"));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    // Another session still gets in.
    let mut other = Client::new(&server);
    other.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":call("effect")}));
    // 2 is cancelled while queued: its handler must never run.
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}));
    release_tx.send(()).unwrap();
    assert_eq!(c.recv()["id"], 1);
    assert_eq!(c.recv()["id"], 3, "2 was cancelled: no answer");
    assert_eq!(other.recv()["id"], 1);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        2,
        "3 and the other session's call"
    );
}

#[test]
fn a_stuck_handler_delays_neither_ping_nor_other_sessions() {
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    let server = server_with(
        vec![
            tool("stuck", move |_| {
                let _ = release_rx.recv();
                ToolResult::text("released")
            }),
            tool("quick", |_| ToolResult::text("quick")),
        ],
        2,
    );
    let mut a = Client::new(&server);
    a.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stuck"}}));
    assert_eq!(a.call(2, "ping", json!({}))["result"], json!({}));
    let mut b = Client::new(&server);
    assert_eq!(
        b.call(3, "tools/call", json!({"name":"quick"}))["result"]["content"][0]["text"],
        "quick"
    );
    release_tx.send(()).unwrap();
    assert_eq!(a.recv()["result"]["content"][0]["text"], "released");
}

#[test]
fn a_panicking_handler_is_one_internal_error_and_the_pool_keeps_its_size() {
    let server = server_with(
        vec![
            tool("boom", |_| panic!("kaboom")),
            tool("ok", |_| ToolResult::text("fine")),
        ],
        1,
    );
    let mut c = Client::new(&server);
    for id in 0..5 {
        let r = c.call(id, "tools/call", json!({"name":"boom"}));
        assert_eq!(r["error"]["code"], json!(-32603), "{r}");
    }
    // With a single pool thread, this only works if the thread survived.
    assert_eq!(
        c.call(9, "tools/call", json!({"name":"ok"}))["result"]["content"][0]["text"],
        "fine"
    );
}

#[test]
fn duplicate_ids_in_flight_are_rejected() {
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
    let server = server_with(
        vec![tool("wait", move |_| {
            let _ = release_rx.recv();
            ToolResult::text("done")
        })],
        2,
    );
    let mut c = Client::new(&server);
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait"}}));
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait"}}));
    // Refused with id null: the client must not take it for the answer to
    // the call in flight. The same for a request answered inline.
    let refused = c.recv();
    assert_eq!(refused["error"]["code"], json!(-32600));
    assert_eq!(refused["id"], Value::Null);
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"ping"}));
    let refused = c.recv();
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    assert_eq!(refused["id"], Value::Null);
    release_tx.send(()).unwrap();
    let done = c.recv();
    assert_eq!(done["id"], json!(1));
    assert_eq!(done["result"]["content"][0]["text"], "done");
}

/// A client may reuse an id as soon as it reads the answer, which can be
/// before the handler's thread has taken the request out of the table:
/// here the client sends its next request, with the same id, from within
/// the delivery of the answer. The first request's end then leaves the
/// second in flight, holding the id.
#[test]
fn an_id_may_be_reused_the_moment_its_answer_is_delivered() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{OnceLock, Weak};
    const REUSE: &str =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wait"}}"#;
    struct Eager {
        tx: Sender<Value>,
        session: OnceLock<Weak<Session>>,
        me: OnceLock<Weak<Eager>>,
        reused: AtomicBool,
    }
    impl Sink for Eager {
        fn send(&self, out: Outgoing) {
            let Some(m) = out.message().map(|m| m.into_owned()) else {
                return;
            };
            let first_answer = m["id"] == json!(1) && !self.reused.swap(true, Ordering::SeqCst);
            let _ = self.tx.send(m);
            if first_answer {
                let session = self.session.get().and_then(Weak::upgrade).unwrap();
                let me: Arc<dyn Sink> = self.me.get().and_then(Weak::upgrade).unwrap();
                session.receive(REUSE.as_bytes(), &me);
            }
        }
    }
    let (started_tx, started) = crossbeam_channel::bounded::<()>(1);
    let (release, release_rx) = crossbeam_channel::bounded::<()>(1);
    let server = server_with(
        vec![
            tool("done", |_| ToolResult::text("done")),
            tool("wait", move |_| {
                let _ = started_tx.send(());
                let _ = release_rx.recv();
                ToolResult::text("waited")
            }),
        ],
        2,
    );
    let (tx, rx) = crossbeam_channel::unbounded();
    let eager = Arc::new(Eager {
        tx,
        session: OnceLock::new(),
        me: OnceLock::new(),
        reused: AtomicBool::new(false),
    });
    let _ = eager.me.set(Arc::downgrade(&eager));
    let sink: Arc<dyn Sink> = eager.clone();
    let session = server.engine().open_session(sink.clone());
    let _ = eager.session.set(Arc::downgrade(&session));
    session.receive(br#"{"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#, &sink);
    session.receive(
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        &sink,
    );
    assert!(rx.recv_timeout(WAIT).unwrap()["result"].is_object());
    session.receive(
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"done"}}"#,
        &sink,
    );
    let first = rx.recv_timeout(WAIT).expect("the first call answered");
    assert_eq!(text(&first).as_deref(), Some("done"), "{first}");
    // The second runs (one job at a time with two threads: the first's
    // job, its end included, is over), holding the id.
    started
        .recv_timeout(WAIT)
        .expect("the reused id's call runs");
    assert_eq!(session.inflight(), 1);
    session.receive(REUSE.as_bytes(), &sink);
    let refused = rx.recv_timeout(WAIT).expect("a third call refused");
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    assert_eq!(refused["id"], Value::Null);
    release.send(()).unwrap();
    let second = rx.recv_timeout(WAIT).expect("the second call answered");
    assert_eq!(second["id"], json!(1), "{second}");
    assert_eq!(text(&second).as_deref(), Some("waited"), "{second}");
    assert!(session.wait_idle(WAIT));
}

#[test]
fn cursor_pagination_walks_every_tool_in_order() {
    let names = ["e", "a", "d", "b", "c"];
    let server = server_with(
        names
            .iter()
            .map(|n| tool(n, |_| ToolResult::text("")))
            .collect(),
        1,
    );
    let mut c = Client::new(&server);
    let (mut seen, mut cursor, mut id) = (Vec::new(), None::<String>, 10);
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let r = c.call(id, "tools/list", params);
        id += 1;
        let page = r["result"]["tools"].as_array().unwrap().clone();
        assert!(page.len() <= 2);
        seen.extend(page.iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        match r["result"]["nextCursor"].as_str() {
            Some(n) => cursor = Some(n.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, ["a", "b", "c", "d", "e"]);
}

#[test]
fn registry_changes_at_run_time_notify_operating_sessions() {
    let server = server_with(vec![tool("a", |_| ToolResult::text(""))], 1);
    let c = Client::new(&server);
    server
        .add_tool(tool("b", |_| ToolResult::text("")))
        .unwrap();
    assert_eq!(c.recv()["method"], "notifications/tools/list_changed");
    assert!(server.remove_tool("a"));
    assert_eq!(c.recv()["method"], "notifications/tools/list_changed");
    assert!(!server.remove_tool("a"));
    assert!(
        c.rx.try_recv().is_err(),
        "no notification for a no-op removal"
    );
    assert!(server
        .add_tool(Tool::new("bad", json!({"type": "string"}), |_, _| Ok(
            ToolResult::text("")
        )))
        .is_err());
}

/// A server with one resource, `r://x`.
fn one_resource_server() -> Server {
    Server::builder("t", "0")
        .resource(Resource::new("r://x", "x", |u, _| {
            Ok(vec![ResourceContents::text(u, "text/plain", "x")])
        }))
        .build()
        .unwrap()
}

#[test]
fn resource_updates_reach_only_subscribers() {
    let server = one_resource_server();
    let mut sub = Client::new(&server);
    let other = Client::new(&server);
    assert_eq!(
        sub.call(1, "resources/subscribe", json!({"uri": "r://x"}))["result"],
        json!({})
    );
    server.notify_resource_updated("r://x");
    assert_eq!(
        sub.recv(),
        json!({"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"r://x"}})
    );
    assert!(other.rx.try_recv().is_err());
    sub.call(2, "resources/unsubscribe", json!({"uri": "r://x"}));
    server.notify_resource_updated("r://x");
    assert!(sub.rx.try_recv().is_err());
}

#[test]
fn all_sessions_subscriptions_together_are_bounded() {
    use crate::protocol::{
        MAX_SUBSCRIBED_BYTES, MAX_SUBSCRIBED_BYTES_PER_SESSION, MAX_SUBSCRIPTION_URI_BYTES,
    };
    let server = one_resource_server();
    let uri = |s: usize, i: usize| {
        let head = format!("r://{s}/{i}/");
        head.clone() + &"u".repeat(MAX_SUBSCRIPTION_URI_BYTES - head.len())
    };
    // Sessions each within their own limits fill the engine's budget.
    let per_session = MAX_SUBSCRIBED_BYTES_PER_SESSION / MAX_SUBSCRIPTION_URI_BYTES;
    let full = MAX_SUBSCRIBED_BYTES / MAX_SUBSCRIBED_BYTES_PER_SESSION;
    let mut clients: Vec<Client> = Vec::new();
    for s in 0..full {
        let mut c = Client::new(&server);
        for i in 0..per_session {
            let r = c.call(i as i64, "resources/subscribe", json!({"uri": uri(s, i)}));
            assert_eq!(r["result"], json!({}), "session {s}, {i}");
        }
        // One more is past the session's own share.
        let over = c.call(
            -9,
            "resources/subscribe",
            json!({"uri": uri(s, per_session)}),
        );
        assert_eq!(over["error"]["code"], -32602, "{over}");
        clients.push(c);
    }
    let mut late = Client::new(&server);
    let refused = late.call(1, "resources/subscribe", json!({"uri": "r://x"}));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    // A listen stream (2026-07-28) naming resources is refused the same way.
    let (tx, rx) = crossbeam_channel::unbounded();
    let sink: Arc<dyn Sink> = Arc::new(Chan(tx));
    let stateless = server.engine().open_session(sink.clone());
    let listen = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"}
        },
        "notifications": {"resourceSubscriptions": ["r://x"]}}});
    stateless.receive(listen.to_string().as_bytes(), &sink);
    let refused = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused.to_string().contains("as many subscriptions"),
        "{refused}"
    );
    // What one session lets go, another may take.
    clients[0].call(-1, "resources/unsubscribe", json!({"uri": uri(0, 0)}));
    let taken = late.call(3, "resources/subscribe", json!({"uri": "r://x"}));
    assert_eq!(taken["result"], json!({}), "{taken}");
    // A session that ends gives all of its subscriptions back, even while
    // something (a task, a handler) still holds it.
    let held: Vec<Arc<Session>> = clients.iter().map(|c| c.session.clone()).collect();
    for s in &held {
        s.close();
    }
    late.session.close();
    assert_eq!(server.engine().subscribed.used(), 0);
}

#[test]
fn per_session_state_is_bounded() {
    // #11 items 15 and 30 (repro t04): subscriptions and the client's
    // description are kept per session: both have a limit.
    use crate::protocol::{
        MAX_CLIENT_DESCRIPTION_BYTES, MAX_SUBSCRIPTIONS, MAX_SUBSCRIPTION_URI_BYTES,
    };
    let server = one_resource_server();
    let mut c = Client::new(&server);
    for i in 0..MAX_SUBSCRIPTIONS {
        let r = c.call(
            i as i64,
            "resources/subscribe",
            json!({"uri": format!("r://{i}")}),
        );
        assert_eq!(r["result"], json!({}), "{r}");
    }
    let over = c.call(-1, "resources/subscribe", json!({"uri": "r://one-more"}));
    assert_eq!(over["error"]["code"], -32602, "{over}");
    // Subscribing again to one already held, or after letting one go, works.
    assert_eq!(
        c.call(-2, "resources/subscribe", json!({"uri": "r://0"}))["result"],
        json!({})
    );
    c.call(-3, "resources/unsubscribe", json!({"uri": "r://0"}));
    assert_eq!(
        c.call(-4, "resources/subscribe", json!({"uri": "r://new"}))["result"],
        json!({})
    );
    let long = "r://".to_owned() + &"u".repeat(MAX_SUBSCRIPTION_URI_BYTES);
    c.call(-5, "resources/unsubscribe", json!({"uri": "r://new"}));
    assert_eq!(
        c.call(-6, "resources/subscribe", json!({"uri": long}))["error"]["code"],
        -32602
    );
    // An initialize describing the client in more than the limit is refused.
    let (tx, rx) = crossbeam_channel::unbounded();
    let sink: Arc<dyn Sink> = Arc::new(Chan(tx));
    let session = server.engine().open_session(sink.clone());
    let huge = "x".repeat(MAX_CLIENT_DESCRIPTION_BYTES);
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"experimental":{"x":huge}},"clientInfo":{"name":"t","version":"0"}}});
    session.receive(init.to_string().as_bytes(), &sink);
    let answer = rx.recv_timeout(WAIT).unwrap();
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer.to_string().len() < 1024);
}

#[test]
fn output_schema_is_enforced_and_missing_capabilities_are_method_not_found() {
    let server = Server::builder("t", "0")
        .tool(
            Tool::new("typed", json!({"type":"object"}), |_, _| {
                Ok(ToolResult::structured(json!({"n": "not a number"})))
            })
            .output_schema(json!({"type":"object","properties":{"n":{"type":"number"}}})),
        )
        .build()
        .unwrap();
    let mut c = Client::new(&server);
    let r = c.call(1, "tools/call", json!({"name":"typed"}));
    if cfg!(feature = "schema") {
        assert_eq!(r["error"]["code"], json!(-32603), "{r}");
    } else {
        // Without the `schema` feature nothing is validated.
        assert_eq!(r["result"]["structuredContent"]["n"], "not a number", "{r}");
    }
    assert_eq!(
        c.call(2, "prompts/list", json!({}))["error"]["code"],
        json!(-32601)
    );
    assert_eq!(
        c.call(3, "completion/complete", json!({}))["error"]["code"],
        json!(-32601)
    );
}

#[test]
fn progress_is_never_sent_after_the_response_nor_backwards() {
    let (tx, rx) = crossbeam_channel::bounded::<bool>(4);
    let server = server_with(
        vec![tool("p", move |ctx| {
            assert!(ctx.progress(2.0, None, None));
            let _ = tx.send(ctx.progress(1.0, None, None));
            ToolResult::text("")
        })],
        1,
    );
    let mut c = Client::new(&server);
    let r = c.call(
        1,
        "tools/call",
        json!({"name":"p","_meta":{"progressToken":"t"}}),
    );
    assert!(r["result"].is_object());
    assert_eq!(
        rx.recv_timeout(WAIT),
        Ok(false),
        "a decreasing value is dropped"
    );
}

#[test]
fn progress_needs_a_token_of_the_right_kind_and_a_finite_value() {
    let (tx, rx) = crossbeam_channel::unbounded::<bool>();
    let server = server_with(
        vec![tool("p", move |ctx| {
            let _ = tx.send(ctx.progress(f64::NAN, None, None));
            let _ = tx.send(ctx.progress(1.0, Some(f64::INFINITY), None));
            let _ = tx.send(ctx.progress(1.0, None, None));
            ToolResult::text("")
        })],
        1,
    );
    let mut c = Client::new(&server);
    let long = "t".repeat(crate::jsonrpc::MAX_ID_BYTES + 1);
    for (id, token, sent) in [
        (1, json!("t"), [false, false, true]),
        (2, json!(7), [false, false, true]),
        (3, json!(long), [false, false, false]),
        (4, json!({"an": "object"}), [false, false, false]),
        (5, json!(1.5), [false, false, false]),
    ] {
        let params = json!({"name": "p", "_meta": {"progressToken": token}});
        assert!(c.call(id, "tools/call", params)["result"].is_object());
        let got: Vec<bool> = (0..3).map(|_| rx.recv_timeout(WAIT).unwrap()).collect();
        assert_eq!(got, sent, "token {token}");
    }
}

/// A server whose tool `hold` runs until told to go on, and a client with
/// a call of it (id 1) running: the server, the client, and the go-ahead.
fn a_call_held() -> (Server, Client, Sender<()>) {
    let (started_tx, started) = crossbeam_channel::bounded(1);
    let (go_tx, go) = crossbeam_channel::bounded::<()>(1);
    let server = Server::builder("held", "1")
        .tool(tool("hold", move |_| {
            let _ = started_tx.send(());
            let _ = go.recv();
            ToolResult::text("done")
        }))
        .build()
        .unwrap();
    let mut c = Client::new(&server);
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{}}}));
    started.recv_timeout(WAIT).unwrap();
    (server, c, go_tx)
}

#[test]
fn a_drain_waits_for_calls_in_flight_and_refuses_new_ones() {
    let (server, mut c, go_tx) = a_call_held();
    let engine = server.engine().clone();
    let drained = std::thread::spawn(move || engine.drain(WAIT));
    // A request after the drain began is refused at once.
    let deadline = std::time::Instant::now() + WAIT;
    while !server.engine().is_draining() {
        assert!(std::time::Instant::now() < deadline, "never draining");
        std::thread::yield_now();
    }
    let refused = c.call(2, "tools/call", json!({"name":"hold","arguments":{}}));
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{refused}"
    );
    assert_eq!(refused["error"]["code"], -32603);
    go_tx.send(()).unwrap();
    assert_eq!(
        drained.join().unwrap(),
        0,
        "the call in flight was waited for"
    );
    let answer = c.recv();
    assert_eq!(answer["id"], 1);
    assert_eq!(answer["result"]["content"][0]["text"], "done");
}

#[test]
fn a_wait_for_a_session_to_be_idle_is_woken_by_the_last_request_ending() {
    let (_server, c, go_tx) = a_call_held();
    let (idle_tx, idle) = crossbeam_channel::bounded(1);
    let session = c.session.clone();
    std::thread::spawn(move || {
        // Far longer than the test waits: only a wake-up ends it in time.
        let _ = idle_tx.send(session.wait_idle(Duration::from_secs(3600)));
    });
    // The waiter is counted (and about to wait) before the call ends.
    let deadline = std::time::Instant::now() + WAIT;
    while c.session.idle_waiters() == 0 {
        assert!(std::time::Instant::now() < deadline, "never waiting");
        std::thread::yield_now();
    }
    assert!(idle.try_recv().is_err(), "a call is in flight");
    go_tx.send(()).unwrap();
    assert_eq!(
        idle.recv_timeout(WAIT),
        Ok(true),
        "woken when the call ended"
    );
    assert_eq!(c.recv()["id"], 1);
}

/// Sends a request into its session from inside `send`, on the first
/// response: a client that answers the instant it reads.
struct Eager {
    out: Sender<Value>,
    session: std::sync::OnceLock<(Arc<Session>, Arc<dyn Sink>)>,
    next: std::sync::Mutex<Option<Value>>,
}

impl Sink for Eager {
    fn send(&self, out: Outgoing) {
        if let Some(m) = out.message() {
            let _ = self.out.send(m.into_owned());
        }
        let next = self.next.lock().unwrap().take();
        if let (Some(next), Some((session, sink))) = (next, self.session.get()) {
            session.receive(next.to_string().as_bytes(), sink);
        }
    }
}

#[test]
fn an_answered_request_no_longer_counts_against_the_in_flight_limit() {
    // A client at the limit sends its next request as soon as it reads an
    // answer, which may be before the answered request left the table.
    let (release_tx, release) = crossbeam_channel::unbounded::<()>();
    let server = Server::builder("t", "0")
        .options(EngineOptions {
            max_inflight_per_session: 2,
            ..Default::default()
        })
        .tool(Tool::new("work", json!({"type":"object"}), move |a, _| {
            if a["hold"] == true {
                let _ = release.recv_timeout(WAIT);
            }
            Ok(ToolResult::text("done"))
        }))
        .build()
        .unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let eager = Arc::new(Eager {
        out: tx,
        session: std::sync::OnceLock::new(),
        next: std::sync::Mutex::new(None),
    });
    let sink: Arc<dyn Sink> = eager.clone();
    let session = server.engine().open_session(sink.clone());
    let _ = eager.session.set((session.clone(), sink.clone()));
    let send = |v: Value| session.receive(v.to_string().as_bytes(), &sink);
    let call = |id: i64, hold: bool| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"work","arguments":{"hold":hold}}});
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}),
    );
    assert!(rx.recv_timeout(WAIT).unwrap()["result"].is_object());
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    // 2 holds; 1's answer sends 3 while 1 and 2 are both in the table.
    send(call(2, true));
    *eager.next.lock().unwrap() = Some(call(3, false));
    send(call(1, false));
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 2 {
        let m = rx.recv_timeout(WAIT).expect("answers to 1 and 3");
        answers.insert(m["id"].as_i64().unwrap(), m);
    }
    release_tx.send(()).unwrap();
    let m = rx.recv_timeout(WAIT).expect("the answer to 2");
    answers.insert(m["id"].as_i64().unwrap(), m);
    for id in 1..=3 {
        assert_eq!(
            answers[&id]["result"]["content"][0]["text"], "done",
            "{id}: {}",
            answers[&id]
        );
    }
}

#[test]
fn a_quick_tool_runs_on_the_reading_thread_and_cannot_wait_for_its_client() {
    let reader = std::thread::current().id();
    let on_reader = move |_: &crate::Context| {
        ToolResult::text(format!("{}", std::thread::current().id() == reader))
    };
    let asks = |ctx: &crate::Context| {
        // ping needs no capability: only quickness refuses it, at once,
        // through the context and through the session's handle alike.
        let asked = ctx.peer_request("ping", json!({}), None, WAIT);
        let pinged = ctx.session().map(|s| s.ping(WAIT));
        ToolResult::text(match (asked, pinged) {
            (Err(crate::PeerError::Rpc(a)), Some(Err(crate::PeerError::Rpc(b)))) => {
                format!("{} / {}", a.message, b.message)
            }
            other => format!("unexpected: {other:?}"),
        })
    };
    let server = server_with(
        vec![
            tool("quick", on_reader).quick(),
            tool("pooled", on_reader),
            tool("asks", asks).quick(),
            tool("detaches", |ctx| ToolResult::text(ctx.detach().to_string())).quick(),
            tool("panics", |_| panic!("quick boom")).quick(),
        ],
        2,
    );
    let mut c = Client::new(&server);

    // Answered before `receive` returned: no other thread was involved.
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"quick","arguments":{}}}));
    let answer = c.rx.try_recv().expect("answered on the reading thread");
    assert_eq!(text(&answer).as_deref(), Some("true"), "{answer}");
    let pooled = c.call(2, "tools/call", json!({"name":"pooled","arguments":{}}));
    assert_eq!(text(&pooled).as_deref(), Some("false"), "{pooled}");

    let asked = c.call(3, "tools/call", json!({"name":"asks","arguments":{}}));
    let said = text(&asked).unwrap_or_default();
    assert_eq!(
        said.matches("a quick tool cannot wait for an answer")
            .count(),
        2,
        "{asked}"
    );
    let detached = c.call(4, "tools/call", json!({"name":"detaches","arguments":{}}));
    assert_eq!(text(&detached).as_deref(), Some("false"), "{detached}");

    // Quick, and making its call a task from the handler: refused at build.
    let both = Server::builder("t", "0")
        .tool(
            tool("both", |_| ToolResult::text(""))
                .quick()
                .detach_in_handler(),
        )
        .build();
    assert!(matches!(both, Err(crate::server::BuildError::Schema(e)) if e.contains("quick")));

    // A panic is that call's -32603; the connection goes on.
    let panicked = c.call(5, "tools/call", json!({"name":"panics","arguments":{}}));
    assert_eq!(panicked["error"]["code"], -32603, "{panicked}");
    let again = c.call(6, "tools/call", json!({"name":"quick","arguments":{}}));
    assert_eq!(text(&again).as_deref(), Some("true"), "{again}");
}

#[test]
fn a_tool_gets_its_arguments_as_sent_and_an_empty_object_for_none_or_null() {
    let echo = Tool::new("args", json!({"type":"object"}), |args, _| {
        Ok(ToolResult::text(Value::from(args).to_string()))
    });
    let server = server_with(vec![echo], 1);
    let mut c = Client::new(&server);
    let sent = json!({"name":"args","arguments":{"a":[1,{"b":null}],"c":"d"}});
    assert_eq!(
        text(&c.call(1, "tools/call", sent)).as_deref(),
        Some(r#"{"a":[1,{"b":null}],"c":"d"}"#)
    );
    for (id, params) in [
        (2, json!({"name":"args"})),
        (3, json!({"name":"args","arguments":null})),
    ] {
        assert_eq!(
            text(&c.call(id, "tools/call", params)).as_deref(),
            Some("{}")
        );
    }
    let refused = c.call(4, "tools/call", json!({"name":"args","arguments":"a"}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert_eq!(
        refused["error"]["message"],
        "params.arguments must be an object"
    );
}

#[test]
fn one_session_s_stuck_handlers_leave_a_thread_for_another_session() {
    let (stuck_tool, started_rx, release_tx) = stuck_tool();
    let server = server_with(
        vec![stuck_tool, tool("effect", |_| ToolResult::text("done"))],
        2,
    );
    let call = |name: &str| json!({"name": name, "arguments": {}});
    let mut stuck = Client::new(&server);
    stuck.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":call("stuck")}));
    started_rx.recv_timeout(WAIT).unwrap();
    // Its second stuck call waits for its first, not for the last thread.
    stuck.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":call("stuck")}));
    let mut other = Client::new(&server);
    assert_eq!(
        text(&other.call(1, "tools/call", call("effect"))).as_deref(),
        Some("done")
    );
    // Released, the first ends and its thread runs the second.
    release_tx.send(()).unwrap();
    release_tx.send(()).unwrap();
    assert_eq!(stuck.recv()["id"], 1);
    assert_eq!(stuck.recv()["id"], 2);
}

#[test]
fn a_panicking_observer_keeps_no_answer_and_a_closed_session_runs_nothing() {
    struct Panics;
    impl crate::protocol::Observer for Panics {
        fn request_done(&self, _: &str, _: crate::protocol::Outcome, _: Duration) {
            panic!("the observer's own bug");
        }
    }
    let server = server_with(vec![tool("effect", |_| ToolResult::text("done"))], 2);
    server.engine().observe(Arc::new(Panics));
    let mut c = Client::new(&server);
    let call = json!({"name": "effect", "arguments": {}});
    assert_eq!(
        text(&c.call(1, "tools/call", call.clone())).as_deref(),
        Some("done")
    );
    assert_eq!(
        text(&c.call(2, "tools/call", call.clone())).as_deref(),
        Some("done")
    );
    // A request that comes as (or after) the session closes is refused,
    // never run for a session that is gone.
    c.session.close();
    let refused = c.call(3, "tools/call", call);
    assert_eq!(
        refused["error"]["message"], "the session has ended",
        "{refused}"
    );
}

#[test]
fn a_list_the_session_was_not_told_of_is_no_news_to_it() {
    let server = server_with(vec![tool("effect", |_| ToolResult::text("done"))], 2);
    let c = Client::new(&server);
    // Told of tools only: a prompt added later is not announced to it,
    // a tool is.
    let prompt =
        crate::server::Prompt::new("p", |_, _| Ok(crate::server::PromptResult::new(vec![])));
    server.add_prompt(prompt);
    server
        .add_tool(tool("more", |_| ToolResult::text("more")))
        .unwrap();
    assert_eq!(c.recv()["method"], "notifications/tools/list_changed");
    assert!(c.rx.try_recv().is_err());
}

#[test]
fn a_cancelled_request_waiting_for_its_session_s_share_leaves_at_once() {
    let (stuck, started_rx, release_tx) = stuck_tool();
    let server = Server::builder("t", "0")
        .options(EngineOptions {
            pool_threads: 2,
            max_inflight_per_session: 2,
            ..Default::default()
        })
        .tool(stuck)
        .tool(tool("effect", |_| ToolResult::text("done")))
        .build()
        .unwrap();
    let mut c = Client::new(&server);
    let call = |name: &str| json!({"name": name, "arguments": {}});
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":call("stuck")}));
    started_rx.recv_timeout(WAIT).unwrap();
    // Waits for the session's one thread; cancelled, it leaves the
    // in-flight table now, not when the stuck call ends.
    c.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":call("effect")}));
    c.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}));
    assert_eq!(c.session.inflight(), 1);
    c.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":call("effect")}));
    release_tx.send(()).unwrap();
    assert_eq!(c.recv()["id"], 1);
    let third = c.recv();
    assert_eq!(
        third["id"], 3,
        "accepted, not refused as one too many: {third}"
    );
    assert_eq!(text(&third).as_deref(), Some("done"));
}

/// A list declared at `initialize` stays served when it empties: the
/// client told of tools (and then of their change) gets an empty list,
/// not -32601; a server that never had any still refuses the method.
#[test]
fn a_list_declared_at_initialize_is_served_when_it_empties() {
    let server = server_with(vec![tool("only", |_| ToolResult::text(""))], 2);
    let mut c = Client::new(&server);
    assert!(server.remove_tool("only"));
    let r = c.call(1, "tools/list", json!({}));
    assert_eq!(r["result"]["tools"], json!([]), "{r}");
    let r = c.call(2, "prompts/list", json!({}));
    assert_eq!(r["error"]["code"], -32601, "{r}");
}

/// A session subscribed before its `initialized` is sent no update until
/// then (the spec: nothing but pings and logs before `initialized`).
#[test]
fn no_resource_update_before_initialized() {
    let server = one_resource_server();
    let mut c = Client::initializing(&server);
    assert_eq!(
        c.call(1, "resources/subscribe", json!({"uri": "r://x"}))["result"],
        json!({})
    );
    server.notify_resource_updated("r://x");
    assert!(c.rx.try_recv().is_err(), "an update before initialized");
    c.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    server.notify_resource_updated("r://x");
    assert_eq!(c.recv()["method"], "notifications/resources/updated");
}

/// A tool whose `x-mcp-header` declarations break SEP-2243's rules is
/// refused at build (2026-07-28 clients would drop it, and none of its
/// headers would be checked).
#[test]
fn a_tool_with_a_broken_header_declaration_is_refused_at_build() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "number", "x-mcp-header": "N"}}});
    let built = Server::builder("t", "0")
        .tool(Tool::new("bad", schema, |_, _| Ok(ToolResult::text(""))))
        .build();
    match built {
        Err(crate::server::BuildError::Schema(e)) => assert!(e.contains("tool bad"), "{e}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("built"),
    }
}

#[test]
fn a_broken_answer_to_the_server_s_request_fails_it_at_once() {
    let server = server_with(
        vec![tool("roots", |ctx| {
            match ctx.list_roots(Duration::from_secs(3600)) {
                Ok(v) => ToolResult::text(v.to_string()),
                Err(e) => ToolResult::text(format!("failed: {e}")),
            }
        })],
        2,
    );
    let (tx, rx) = crossbeam_channel::unbounded();
    let sink: Arc<dyn Sink> = Arc::new(Chan(tx));
    let session = server.engine().open_session(sink.clone());
    let mut c = Client { session, sink, rx };
    c.send(json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"0"}}}));
    assert!(c.recv()["result"].is_object());
    c.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    c.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"roots"}}));
    let asked = c.recv();
    assert_eq!(asked["method"], "roots/list", "{asked}");
    // Both result and error: broken, but its id can be read.
    c.send(json!({"jsonrpc":"2.0","id":asked["id"],"result":{"roots":[]},"error":{"code":1,"message":"x"}}));
    let answer = c.recv();
    let said = text(&answer).unwrap_or_default();
    assert!(
        said.starts_with("failed") && said.contains("malformed"),
        "{answer}"
    );
}
