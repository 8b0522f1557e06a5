//! The 2026-07-28 revision (stateless MCP) served beside the session
//! revisions, against the built `examples/conformance`: over stdio (a
//! connection speaks the generation of its first request) and over
//! Streamable HTTP (a POST without a session is one stateless request).
//! Every message the server sends is checked against the official
//! 2026-07-28 schema.

mod common;

use common::http::{self, ACCEPT_BOTH, JSON};
use common::Peer;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const V: &str = "2026-07-28";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {}, "roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "mcpvisor-tests", "version": "0"}
    })
}

/// `params` with the standard `_meta` (and `extra` merged into it).
fn with_meta(mut params: Value, extra: Value) -> Value {
    let mut m = meta();
    for (k, v) in extra.as_object().unwrap() {
        m[k] = v.clone();
    }
    params["_meta"] = m;
    params
}

fn stateless_peer() -> Peer {
    let mut p = Peer::spawn("conformance", &[]);
    p.version = V.into();
    p
}

fn call(p: &mut Peer, id: i64, tool: &str, extra: Value) -> Value {
    let mut params = with_meta(json!({"name": tool, "arguments": {}}), json!({}));
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    p.request(json!(id), "tools/call", params)
}

#[test]
fn stdio_serves_discover_and_the_results_2026_07_28_requires() {
    let mut p = stateless_peer();
    let d = p.request(json!(1), "server/discover", json!({"_meta": meta()}));
    let r = &d["result"];
    assert_eq!(r["supportedVersions"], json!([V]));
    assert!(r["capabilities"]["tools"].is_object());
    assert_eq!(r["resultType"], "complete");
    assert_eq!(
        r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcpvisor-conformance"
    );
    let tools = p.request(json!(2), "tools/list", json!({"_meta": meta()}));
    assert_eq!(tools["result"]["ttlMs"], 60000);
    assert_eq!(tools["result"]["cacheScope"], "public");
    let read = p.request(
        json!(3),
        "resources/read",
        with_meta(json!({"uri": "test://static-text"}), json!({})),
    );
    assert_eq!(read["result"]["ttlMs"], 0);
    assert_eq!(read["result"]["cacheScope"], "private");
    // SEP-2164: an unknown resource is invalid params, naming the URI.
    let missing = p.request(
        json!(4),
        "resources/read",
        with_meta(json!({"uri": "test://nope"}), json!({})),
    );
    assert_eq!(missing["error"]["code"], -32602);
    assert_eq!(missing["error"]["data"]["uri"], "test://nope");
    // The session methods are gone, and the connection stays stateless.
    for (id, method) in [
        (5, "initialize"),
        (6, "ping"),
        (7, "logging/setLevel"),
        (8, "resources/subscribe"),
    ] {
        let r = p.request(json!(id), method, json!({"_meta": meta()}));
        assert_eq!(r["error"]["code"], -32601, "{method}: {r}");
    }
    // Every request carries its own facts: none is inferred from before.
    let r = p.request(json!(9), "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    let mut old = meta();
    old["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let r = p.request(json!(10), "tools/list", json!({"_meta": old}));
    assert_eq!(r["error"]["code"], -32022);
    assert_eq!(
        r["error"]["data"],
        json!({"supported": [V], "requested": "v999.0.0"})
    );
}

#[test]
fn a_session_connection_stays_a_session() {
    let mut p = Peer::spawn("conformance", &[]);
    p.initialize("2025-11-25", json!({}));
    let r = p.request(json!(1), "server/discover", json!({"_meta": meta()}));
    assert_eq!(r["error"]["code"], -32601);
    let r = p.request(json!(2), "resources/read", json!({"uri": "test://nope"}));
    assert_eq!(
        r["error"]["code"], -32002,
        "the session revisions keep their code"
    );
    assert!(r["result"].is_null());
}

#[test]
fn input_required_rounds_carry_a_signed_state() {
    let mut p = stateless_peer();
    let r1 = call(
        &mut p,
        1,
        "test_input_required_result_multi_round",
        json!({}),
    );
    let r1 = &r1["result"];
    assert_eq!(r1["resultType"], "input_required");
    assert_eq!(r1["inputRequests"]["step1"]["method"], "elicitation/create");
    let s1 = r1["requestState"].as_str().unwrap().to_owned();
    let answer = |k: &str, v: Value| json!({k: {"action": "accept", "content": v}});
    let r2 = call(
        &mut p,
        2,
        "test_input_required_result_multi_round",
        json!({"requestState": s1, "inputResponses": answer("step1", json!({"name": "Alice"}))}),
    );
    let r2 = &r2["result"];
    assert_eq!(r2["resultType"], "input_required");
    assert!(r2["inputRequests"]["step2"].is_object());
    let s2 = r2["requestState"].as_str().unwrap().to_owned();
    assert_ne!(s1, s2);
    let r3 = call(
        &mut p,
        3,
        "test_input_required_result_multi_round",
        json!({"requestState": s2, "inputResponses": answer("step2", json!({"color": "blue"}))}),
    );
    assert_eq!(r3["result"]["resultType"], "complete");
    assert_eq!(r3["result"]["content"][0]["text"], "Alice likes blue");

    // A changed state, or a state moved to another tool, is refused.
    let tampered = call(
        &mut p,
        4,
        "test_input_required_result_multi_round",
        json!({"requestState": format!("{s2}-TAMPERED"), "inputResponses": answer("step2", json!({"color": "x"}))}),
    );
    assert_eq!(tampered["error"]["code"], -32602);
    let moved = call(
        &mut p,
        5,
        "test_input_required_result_request_state",
        json!({"requestState": s2, "inputResponses": answer("confirm", json!({"ok": true}))}),
    );
    assert_eq!(moved["error"]["code"], -32602);
    // Several questions in one round.
    let many = call(
        &mut p,
        6,
        "test_input_required_result_multiple_inputs",
        json!({}),
    );
    let keys: Vec<&String> = many["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys.len(), 3, "{many}");
    // An answer of the wrong shape fails the request.
    let bad = call(
        &mut p,
        7,
        "test_input_required_result_elicitation",
        json!({"inputResponses": {"user_name": 12345}}),
    );
    assert_eq!(bad["error"]["code"], -32602);
}

#[test]
fn undeclared_capabilities_and_log_levels_are_per_request() {
    let mut p = stateless_peer();
    let mut caps = meta();
    caps["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let r = p.request(
        json!(1),
        "tools/call",
        json!({"name": "test_missing_capability", "arguments": {}, "_meta": caps}),
    );
    assert_eq!(r["error"]["code"], -32021);
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    // The next request declares sampling: it is asked, not refused.
    let r = call(&mut p, 2, "test_missing_capability", json!({}));
    assert_eq!(r["result"]["resultType"], "input_required");

    // No log level: no notifications/message before the answer.
    p.backlog.clear();
    call(&mut p, 3, "test_logging_tool", json!({}));
    assert!(p.backlog.is_empty(), "{:?}", p.backlog);
    let params = with_meta(
        json!({"name": "test_logging_tool", "arguments": {}}),
        json!({"io.modelcontextprotocol/logLevel": "info"}),
    );
    p.request(json!(4), "tools/call", params);
    assert!(
        p.backlog
            .iter()
            .any(|m| m["method"] == "notifications/message"),
        "{:?}",
        p.backlog
    );
}

#[test]
fn a_listen_stream_acknowledges_filters_and_ends_when_cancelled() {
    let mut p = stateless_peer();
    p.request_async(
        json!("listen"),
        "subscriptions/listen",
        json!({"_meta": meta(), "notifications": {"toolsListChanged": true, "resourcesListChanged": false}}),
    );
    let ack = p.recv();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen"
    );
    // The change reaches the stream (before the trigger's own answer).
    p.backlog.clear();
    call(&mut p, 1, "test_trigger_tool_change", json!({}));
    let changed: Vec<&Value> = p
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .collect();
    assert_eq!(changed.len(), 1, "{:?}", p.backlog);
    assert_eq!(
        changed[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen"
    );
    // A kind it did not ask for never comes.
    p.backlog.clear();
    call(&mut p, 2, "test_trigger_prompt_change", json!({}));
    assert!(p.backlog.is_empty(), "{:?}", p.backlog);
    // Cancelled: the next change goes nowhere.
    p.notify("notifications/cancelled", json!({"requestId": "listen"}));
    call(&mut p, 3, "test_trigger_tool_change", json!({}));
    assert!(p.backlog.is_empty(), "{:?}", p.backlog);
}

#[test]
fn one_connection_s_listen_streams_are_bounded_and_their_ids_unique() {
    let mut p = stateless_peer();
    let listen = |p: &mut common::Peer, id: String, uris: Vec<String>| {
        p.request_async(
            json!(id),
            "subscriptions/listen",
            json!({"_meta": meta(), "notifications": {"toolsListChanged": true, "resourceSubscriptions": uris}}),
        );
        p.recv()
    };
    for n in 0..16 {
        let ack = listen(&mut p, format!("l{n}"), vec![]);
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
    }
    // An id a stream has: refused with id null (with its id, the client
    // would take it for the end of that stream).
    let refused = listen(&mut p, "l3".into(), vec![]);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert_eq!(refused["id"], Value::Null, "{refused}");
    // A request with a stream's id: refused with id null too.
    p.request_async(
        json!("l4"),
        "tools/call",
        with_meta(
            json!({"name": "test_simple_text", "arguments": {}}),
            json!({}),
        ),
    );
    let refused = p.recv();
    assert_eq!(
        (&refused["error"]["code"], &refused["id"]),
        (&json!(-32600), &Value::Null),
        "{refused}"
    );
    // One stream too many.
    let refused = listen(&mut p, "l16".into(), vec![]);
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    // With two cancelled, others open; the resources they name count
    // together.
    p.notify("notifications/cancelled", json!({"requestId": "l0"}));
    p.notify("notifications/cancelled", json!({"requestId": "l1"}));
    let uris = |from: usize, n: usize| (from..from + n).map(|i| format!("test://r/{i}")).collect();
    let ack = listen(&mut p, "all".into(), uris(0, 1024));
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let refused = listen(&mut p, "more".into(), uris(1024, 1));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let ack = listen(&mut p, "l18".into(), vec![]);
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
}

// ---- Streamable HTTP ----

fn server() -> (std::process::Child, SocketAddr) {
    let (child, url) = common::spawn_listening(
        "conformance",
        &[
            "--listen",
            "http://127.0.0.1:0/mcp",
            "--response-mode",
            "auto",
        ],
    );
    (child, addr_of(&url))
}

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap()
}

/// POSTs `body` with the 2026-07-28 headers for its method, plus `extra`
/// (a header given twice takes the later value; an empty value drops it).
fn post(addr: SocketAddr, body: &Value, extra: &[(&str, &str)]) -> http::Resp {
    let method = body["method"].as_str().unwrap_or_default().to_owned();
    let name = body["params"]["name"]
        .as_str()
        .or(body["params"]["uri"].as_str())
        .map(str::to_owned);
    let mut h: Vec<(&str, &str)> = vec![
        ACCEPT_BOTH,
        JSON,
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", &method),
    ];
    if let Some(n) = &name {
        h.push(("Mcp-Name", n));
    }
    for (k, v) in extra {
        h.retain(|(n, _)| !n.eq_ignore_ascii_case(k));
        if !v.is_empty() {
            h.push((k, v));
        }
    }
    http::send(addr, "POST", "/mcp", &h, body.to_string().as_bytes())
}

fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The JSON answer: (status, message), checked against the schema.
fn json_answer(r: http::Resp, method: &str) -> (u16, Value) {
    let status = r.status;
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    assert!(
        r.header("mcp-session-id").is_none(),
        "no sessions in 2026-07-28"
    );
    let m = r.json();
    validate(&m, method);
    (status, m)
}

fn validate(m: &Value, method: &str) {
    if m.get("method").is_some() {
        common::assert_valid(V, "ServerNotification", m);
    } else if let Some(result) = m.get("result") {
        common::assert_valid(V, "JSONRPCResultResponse", m);
        if result["resultType"] == "input_required" {
            common::assert_valid(V, "InputRequiredResult", result);
        } else if method == "server/discover" {
            common::assert_valid(V, "DiscoverResult", result);
        }
    } else {
        common::assert_valid(V, common::error_def(m), m);
    }
}

/// A request, extra headers, and the status and code it must be refused with.
type Refusal = (Value, Vec<(&'static str, &'static str)>, u16, i64);

#[test]
fn http_checks_headers_against_the_body() {
    let (mut child, addr) = server();
    let list = rpc(1, "tools/list", json!({"_meta": meta()}));
    let call = |id: i64, tool: &str, args: Value| {
        rpc(
            id,
            "tools/call",
            with_meta(json!({"name": tool, "arguments": args}), json!({})),
        )
    };
    let cases: Vec<Refusal> = vec![
        (rpc(2, "server/discover", json!({})), vec![], 400, -32602),
        (
            list.clone(),
            vec![("MCP-Protocol-Version", "2025-11-25")],
            400,
            -32020,
        ),
        (
            list.clone(),
            vec![("Mcp-Method", "prompts/list")],
            400,
            -32020,
        ),
        (
            list.clone(),
            vec![("Mcp-Method", "TOOLS/LIST")],
            400,
            -32020,
        ),
        (list.clone(), vec![("Mcp-Method", "")], 400, -32020),
        (
            call(3, "test_simple_text", json!({})),
            vec![("Mcp-Name", "other")],
            400,
            -32020,
        ),
        (
            call(4, "test_simple_text", json!({})),
            vec![("Mcp-Name", "")],
            400,
            -32020,
        ),
        (
            call(5, "test_custom_header", json!({"region": "eu"})),
            vec![],
            400,
            -32020,
        ),
        (
            call(6, "test_custom_header", json!({"region": "eu"})),
            vec![("Mcp-Param-Region", "us")],
            400,
            -32020,
        ),
        (
            call(7, "test_custom_header", json!({"region": "Hello"})),
            vec![("Mcp-Param-Region", "=?base64?SGVsbG8?=")],
            400,
            -32020,
        ),
        (
            rpc(8, "ping", json!({"_meta": meta()})),
            vec![],
            404,
            -32601,
        ),
        (
            rpc(9, "no/such", json!({"_meta": meta()})),
            vec![],
            404,
            -32601,
        ),
    ];
    for (body, extra, status, code) in cases {
        let (s, m) = json_answer(post(addr, &body, &extra), body["method"].as_str().unwrap());
        assert_eq!(
            (s, m["error"]["code"].as_i64().unwrap()),
            (status, code),
            "{body} {extra:?}: {m}"
        );
        assert_eq!(m["id"], body["id"], "errors name their request");
    }
    // Unsupported version: named in header and body alike.
    let mut v999 = meta();
    v999["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let (s, m) = json_answer(
        post(
            addr,
            &rpc(10, "server/discover", json!({"_meta": v999})),
            &[("MCP-Protocol-Version", "v999.0.0")],
        ),
        "server/discover",
    );
    assert_eq!(
        (s, &m["error"]["data"]["requested"]),
        (400, &json!("v999.0.0"))
    );
    // Accepted: whitespace around values, header names in any case, base64.
    let ok: Vec<(Value, Vec<(&str, &str)>)> = vec![
        (list.clone(), vec![("mcp-method", "  tools/list\t")]),
        (
            call(11, "test_simple_text", json!({})),
            vec![("Mcp-Name", "  test_simple_text  ")],
        ),
        (
            call(12, "test_custom_header", json!({"region": "Hello"})),
            vec![("MCP-PARAM-REGION", "=?base64?SGVsbG8=?=")],
        ),
        (
            call(13, "test_custom_header", json!({"region": "SGVsbG8="})),
            vec![("Mcp-Param-Region", "SGVsbG8=")],
        ),
    ];
    for (body, extra) in ok {
        let (s, m) = json_answer(post(addr, &body, &extra), body["method"].as_str().unwrap());
        assert_eq!(s, 200, "{body} {extra:?}: {m}");
        assert_eq!(m["result"]["resultType"], "complete", "{m}");
    }
    // -32021 is a 400 too.
    let mut no_caps = meta();
    no_caps["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let body = rpc(
        14,
        "tools/call",
        json!({"name": "test_missing_capability", "arguments": {}, "_meta": no_caps}),
    );
    let (s, m) = json_answer(post(addr, &body, &[]), "tools/call");
    assert_eq!((s, m["error"]["code"].as_i64()), (400, Some(-32021)));
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn http_serves_both_generations_side_by_side() {
    let (mut child, addr) = server();
    let sid = http::initialize(addr, &[]);
    let r = http::post(addr, Some(&sid), &rpc(1, "tools/list", json!({})), &[]);
    let (_, msgs) = http::answer(r);
    assert!(msgs[0]["result"]["tools"].is_array());
    assert!(
        msgs[0]["result"].get("resultType").is_none(),
        "2025 results stay 2025"
    );
    let (s, m) = json_answer(
        post(
            addr,
            &rpc(2, "server/discover", json!({"_meta": meta()})),
            &[],
        ),
        "server/discover",
    );
    assert_eq!(s, 200);
    assert_eq!(m["result"]["supportedVersions"], json!([V]));
    // A session request without its session still gets the session error.
    let r = http::post(addr, None, &rpc(3, "tools/list", json!({})), &[]);
    assert_eq!(r.status, 400);
    let _ = child.kill();
    let _ = child.wait();
}

/// The HTTP server, with every line of its stderr sent to the receiver.
fn server_telling() -> (
    std::process::Child,
    SocketAddr,
    crossbeam_channel::Receiver<String>,
) {
    let mut child = Command::new(common::example("conformance"))
        .args([
            "--listen",
            "http://127.0.0.1:0/mcp",
            "--response-mode",
            "auto",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = addr_of(line.trim().trim_start_matches("listening on "));
    let (tx, said) = crossbeam_channel::unbounded();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    (child, addr, said)
}

/// Waits (at most 10 s) for the server to say `what` on stderr.
fn server_says(said: &crossbeam_channel::Receiver<String>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match said.recv_timeout(left) {
            Ok(l) if l.contains(what) => return,
            Ok(_) => {}
            Err(_) => panic!("the server never said {what:?}"),
        }
    }
}

#[test]
fn http_progress_streams_and_closing_the_stream_cancels_the_request() {
    let (mut child, addr, said) = server_telling();
    let body = rpc(
        1,
        "tools/call",
        with_meta(
            json!({"name": "test_wait_for_cancel", "arguments": {}}),
            json!({"progressToken": "p"}),
        ),
    );
    let mut r = post(addr, &body, &[]);
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().contains("event-stream"));
    let (_, progress) = r.message().expect("the progress event");
    validate(&progress, "tools/call");
    assert_eq!(progress["params"]["progressToken"], "p");
    // The client goes away: the handler sees its request cancelled.
    drop(r);
    server_says(&said, "test_wait_for_cancel: cancelled");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn http_json_only_answers_json_and_drops_the_notifications_on_the_way() {
    let (mut child, url) = common::spawn_listening(
        "conformance",
        &[
            "--listen",
            "http://127.0.0.1:0/mcp",
            "--response-mode",
            "json",
        ],
    );
    let body = rpc(
        1,
        "tools/call",
        with_meta(
            json!({"name": "test_tool_with_progress", "arguments": {}}),
            json!({"progressToken": "p"}),
        ),
    );
    let (status, answer) = json_answer(post(addr_of(&url), &body, &[]), "tools/call");
    assert_eq!(status, 200);
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["content"].is_array(), "{answer}");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn http_listen_stream_gets_list_changes() {
    let (mut child, addr) = server();
    let body = rpc(
        7,
        "subscriptions/listen",
        json!({"_meta": meta(), "notifications": {"promptsListChanged": true}}),
    );
    let mut r = post(addr, &body, &[]);
    assert!(r.header("content-type").unwrap().contains("event-stream"));
    let (_, ack) = r.message().unwrap();
    validate(&ack, "subscriptions/listen");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    let trigger = rpc(
        8,
        "tools/call",
        with_meta(
            json!({"name": "test_trigger_prompt_change", "arguments": {}}),
            json!({}),
        ),
    );
    let (s, _) = json_answer(post(addr, &trigger, &[]), "tools/call");
    assert_eq!(s, 200);
    let (_, changed) = r.message().unwrap();
    validate(&changed, "subscriptions/listen");
    assert_eq!(changed["method"], "notifications/prompts/list_changed");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        7
    );
    let _ = child.kill();
    let _ = child.wait();
}

// ---- The official Python SDK 2.x client ----

/// Runs tests/py2/client_2026.py (PyPI `mcp` 2.3.0, default mode) against
/// `kind` (`stdio` COMMAND or `http` URL) and returns its report.
fn python_sdk(kind: &str, target: &str) -> Value {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py2");
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "the Python SDK 2.x: python3 -m venv tests/py2/.venv && tests/py2/.venv/bin/pip install -r tests/py2/requirements.txt (.ci/run does)"
    );
    let out = Command::new(python)
        .arg(dir.join("client_2026.py"))
        .args([kind, target])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{kind}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

#[test]
fn the_python_sdk_2_client_ends_up_on_2026_07_28_over_stdio_and_http() {
    let stdio = python_sdk("stdio", common::example("conformance").to_str().unwrap());
    let (mut child, url) =
        common::spawn_listening("conformance", &["--listen", "http://127.0.0.1:0/mcp"]);
    let http = python_sdk("http", &url);
    let _ = child.kill();
    let _ = child.wait();
    for report in [stdio, http] {
        assert_eq!(report["version"], V, "{report}");
        assert_eq!(
            report["text"],
            "This is a simple text response for testing."
        );
        // The tool elicits: an input-required round the SDK answers.
        assert_eq!(report["elicited"], json!(["What is your name?"]));
        assert_eq!(report["hello"], "Hello, Alice!");
    }
}

// ---- Our client ----

mod client {
    use super::*;
    use mcpvisor::client::{
        CallOptions, Client, ClientError, ClientOptions, Connection, Generation,
    };
    use mcpvisor::protocol::CancelToken;
    use mcpvisor::ProtocolVersion;
    use std::sync::Arc;

    fn options(generation: Generation) -> ClientOptions {
        ClientOptions {
            generation,
            elicitation: Some(Arc::new(|p: Value| {
                Ok(
                    json!({"action": "accept", "content": {"name": format!("Alice ({})", p["message"].as_str().unwrap_or(""))}}),
                )
            })),
            ..Default::default()
        }
    }

    fn exercise(c: &Client) {
        assert_eq!(c.protocol_version(), ProtocolVersion::V2026_07_28);
        assert_eq!(c.server_info()["name"], "mcpvisor-conformance");
        assert!(c.server_capabilities()["tools"].is_object());
        assert!(!c.list_tools().unwrap().is_empty());
        let r = c.call_tool("test_simple_text", json!({})).unwrap();
        assert_eq!(
            r["content"][0]["text"],
            "This is a simple text response for testing."
        );
        // Input-required rounds answered by the elicitation callback.
        let r = c
            .call_tool("test_input_required_result_elicitation", json!({}))
            .unwrap();
        assert_eq!(
            r["content"][0]["text"],
            "Hello, Alice (What is your name?)!"
        );
        let r = c
            .call_tool("test_input_required_result_multi_round", json!({}))
            .unwrap();
        assert_eq!(r["resultType"], "complete", "{r}");
        // Mcp-Name carries a resource URI too.
        let r = c.read_resource("test://static-text").unwrap();
        assert_eq!(r["contents"][0]["uri"], "test://static-text");
        c.ping().unwrap();
    }

    #[test]
    fn our_client_speaks_2026_07_28_over_stdio_and_http() {
        let conn = Connection::child(Command::new(common::example("conformance"))).unwrap();
        let c = Client::connect(conn, options(Generation::Auto)).unwrap();
        exercise(&c);
        c.close();
        let (mut child, url) =
            common::spawn_listening("conformance", &["--listen", "http://127.0.0.1:0/mcp"]);
        let c = Client::connect(
            Connection::http(&url).unwrap(),
            options(Generation::Stateless),
        )
        .unwrap();
        exercise(&c);
        c.close();
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn our_client_falls_back_to_initialize_with_a_session_server() {
        let script =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py2/legacy_server.py");
        let mut cmd = Command::new("python3");
        cmd.arg(&script);
        let c =
            Client::connect(Connection::child(cmd).unwrap(), options(Generation::Auto)).unwrap();
        assert_eq!(c.protocol_version(), ProtocolVersion::V2025_11_25);
        let r = c.call_tool("hello", json!({})).unwrap();
        assert_eq!(r["content"][0]["text"], "hello from a session server");
        c.close();
        // Stateless only: the connection is refused with the reason.
        let mut cmd = Command::new("python3");
        cmd.arg(&script);
        let e = Client::connect(
            Connection::child(cmd).unwrap(),
            options(Generation::Stateless),
        )
        .err()
        .unwrap();
        assert!(
            e.to_string().contains("-32601") || e.to_string().contains("not found"),
            "{e}"
        );
    }

    /// [`options`] whose notifications go to the receiver.
    fn hearing(
        generation: Generation,
    ) -> (ClientOptions, crossbeam_channel::Receiver<(String, Value)>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let o = ClientOptions {
            on_notification: Some(Arc::new(move |m: &str, p: &Value| {
                let _ = tx.send((m.to_owned(), p.clone()));
            })),
            ..options(generation)
        };
        (o, rx)
    }

    /// The next notification `method` the client heard (at most 10 s).
    fn heard(rx: &crossbeam_channel::Receiver<(String, Value)>, method: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((m, p)) if m == method => return p,
                Ok(_) => {}
                Err(_) => panic!("the client never heard {method}"),
            }
        }
    }

    /// List changes and resource updates reach a stateless client on its
    /// listen stream.
    fn listens(c: &Client, rx: &crossbeam_channel::Receiver<(String, Value)>) {
        let ack = heard(rx, "notifications/subscriptions/acknowledged");
        assert_eq!(ack["notifications"]["toolsListChanged"], true, "{ack}");
        c.call_tool("test_trigger_tool_change", json!({})).unwrap();
        heard(rx, "notifications/tools/list_changed");
        c.subscribe("test://watched-resource").unwrap();
        let ack = heard(rx, "notifications/subscriptions/acknowledged");
        assert_eq!(
            ack["notifications"]["resourceSubscriptions"],
            json!(["test://watched-resource"])
        );
        c.call_tool(
            "test_trigger_resource_update",
            json!({"uri": "test://watched-resource"}),
        )
        .unwrap();
        let updated = heard(rx, "notifications/resources/updated");
        assert_eq!(updated["uri"], "test://watched-resource");
        // Unsubscribed: the next stream asks for list changes alone.
        c.unsubscribe("test://watched-resource").unwrap();
        let ack = heard(rx, "notifications/subscriptions/acknowledged");
        assert!(
            ack["notifications"].get("resourceSubscriptions").is_none(),
            "{ack}"
        );
    }

    #[test]
    fn our_client_listens_statelessly_over_stdio_and_http() {
        let (o, rx) = hearing(Generation::Stateless);
        let conn = Connection::child(Command::new(common::example("conformance"))).unwrap();
        let c = Client::connect(conn, o).unwrap();
        listens(&c, &rx);
        c.close();
        let (mut child, url) =
            common::spawn_listening("conformance", &["--listen", "http://127.0.0.1:0/mcp"]);
        let (o, rx) = hearing(Generation::Stateless);
        let c = Client::connect(Connection::http(&url).unwrap(), o).unwrap();
        listens(&c, &rx);
        c.close();
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn our_client_cancels_a_stateless_http_call_by_closing_its_stream() {
        let (mut child, addr, said) = server_telling();
        let url = format!("http://{addr}/mcp");
        let c = Client::connect(
            Connection::http(&url).unwrap(),
            options(Generation::Stateless),
        )
        .unwrap();
        let token = CancelToken::new();
        let (running_tx, running) = crossbeam_channel::bounded(1);
        let opts = CallOptions {
            cancel: Some(token.clone()),
            progress: Some(Arc::new(move |_, _, _| {
                let _ = running_tx.try_send(());
            })),
            ..Default::default()
        };
        let call = {
            let c = c.clone();
            std::thread::spawn(move || c.call_tool_with("test_wait_for_cancel", json!({}), opts))
        };
        running
            .recv_timeout(Duration::from_secs(10))
            .expect("the call runs");
        token.cancel();
        assert_eq!(call.join().unwrap().unwrap_err(), ClientError::Cancelled);
        server_says(&said, "test_wait_for_cancel: cancelled");
        // The connection serves on.
        c.call_tool("test_simple_text", json!({})).unwrap();
        c.close();
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn draining_ends_listen_streams_and_opens_no_more() {
        use mcpvisor::transport::memory;
        use mcpvisor::{Server, Tool, ToolResult};
        let s = Server::builder("drained", "1.0")
            .tool(Tool::new("t", json!({"type": "object"}), |_, _| {
                Ok(ToolResult::text("t"))
            }))
            .build()
            .unwrap();
        let (a, b) = memory::pair();
        s.serve_memory(a).unwrap();
        let c = Client::connect(b.into_connection(), options(Generation::Stateless)).unwrap();
        let params = json!({"notifications": {"toolsListChanged": true}});
        let listening = {
            let c = c.clone();
            let params = params.clone();
            std::thread::spawn(move || c.request("subscriptions/listen", params))
        };
        // Its acknowledgement is not seen here: wait until the stream is
        // open by asking the engine to drain only once one is.
        common::eventually("the stream opens", || match s.engine().listen_streams() {
            0 => Err("none open".into()),
            _ => Ok(()),
        });
        s.engine().drain(Duration::from_secs(1));
        let ended = listening.join().unwrap().unwrap();
        assert_eq!(ended["resultType"], "complete", "{ended}");
        let e = c.request("subscriptions/listen", params).unwrap_err();
        assert!(e.to_string().contains("shutting down"), "{e}");
        c.close();
    }

    #[test]
    fn reshaping_the_listen_stream_in_a_burst_leaves_one_stream_open() {
        use mcpvisor::{Server, Tool, ToolResult};
        let s = Server::builder("listened", "1.0")
            .tool(Tool::new("t", json!({"type": "object"}), |_, _| {
                Ok(ToolResult::text("t"))
            }))
            .build()
            .unwrap();
        let (_http, url) = common::serve_http(&s);
        let (o, _heard) = hearing(Generation::Stateless);
        let c = Client::connect(Connection::http(&url).unwrap(), o).unwrap();
        // Each change cancels the stream open (or about to open) and asks
        // for the next: a cancel that beats its own POST must still win.
        for i in 0..20 {
            c.subscribe(&format!("test://r{i}")).unwrap();
        }
        common::eventually("one listen stream", || match s.engine().listen_streams() {
            1 => Ok(()),
            n => Err(format!("{n} open")),
        });
        c.close();
    }
}
