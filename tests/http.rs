//! Streamable HTTP: every status-code rule, Origin/Host, CORS, auth,
//! sessions (expiry on an injectable clock, DELETE, 1,000 at once), JSON vs
//! SSE, flushing, the standalone stream, resumption — against an in-process
//! server on a real socket; every message is schema-checked.

mod common;

use common::http::*;
use common::validate_server_message;
use mcpvisor::server::{Server, Tool, ToolResult};
use mcpvisor::transport::http::{HttpOptions, HttpServer, ResponseMode};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use supervisor::ManualClock;

struct Gate {
    release: crossbeam_channel::Sender<()>,
}

fn test_server(options: HttpOptions) -> (HttpServer, Server, Gate) {
    let (release, wait) = crossbeam_channel::unbounded::<()>();
    let gate_again = wait.clone();
    let gate_silent = wait.clone();
    let server = Server::builder("http-test", "1")
        .tool(Tool::new(
            "echo",
            json!({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}),
            |a, _| Ok(ToolResult::text(a["message"].as_str().unwrap_or(""))),
        ))
        .tool(Tool::new("gated", json!({"type":"object"}), move |_, ctx| {
            // Progress first, then wait for the test to open the gate.
            ctx.progress(1.0, Some(2.0), Some("waiting at the gate"));
            crossbeam_channel::select! {
                recv(wait) -> _ => {}
                recv(ctx.cancelled()) -> _ => {}
            }
            ctx.progress(2.0, Some(2.0), None);
            Ok(ToolResult::text("through"))
        }))
        .tool(Tool::new("silent", json!({"type":"object"}), {
            let wait = gate_silent;
            move |_, ctx| {
                // Says nothing until the gate opens.
                crossbeam_channel::select! {
                    recv(wait) -> _ => {}
                    recv(ctx.cancelled()) -> _ => {}
                }
                Ok(ToolResult::text("at last"))
            }
        }))
        .tool(Tool::new("asks", json!({"type": "object"}), |_, ctx| {
            // A request to the client, with a timeout far beyond the tests'.
            let params = json!({"messages": [], "maxTokens": 1});
            Ok(match ctx.sample(params, Duration::from_secs(600)) {
                Ok(v) => ToolResult::text(v.to_string()),
                Err(e) => ToolResult::error(e.to_string()),
            })
        }))
        .tool(Tool::new("parked", json!({"type": "object"}), move |_, ctx| {
            // Closes its stream, then runs until cancelled.
            ctx.close_stream(Duration::from_millis(50));
            let _ = ctx.cancelled().recv();
            Ok(ToolResult::text("cancelled"))
        }))
        .tool(Tool::new("polls_twice", json!({"type": "object"}), {
            let wait = gate_again;
            move |_, ctx| {
                // Closes its stream; once the gate opens (the client is
                // back), reports progress and closes it again; then waits
                // for the gate once more.
                ctx.close_stream(Duration::from_millis(50));
                let _ = wait.recv_timeout(Duration::from_secs(20));
                ctx.progress(1.0, None, Some("live"));
                ctx.close_stream(Duration::from_millis(50));
                let _ = wait.recv_timeout(Duration::from_secs(20));
                Ok(ToolResult::text("done"))
            }
        }))
        .tool(Tool::new("polling", json!({"type": "object"}), |_, ctx| {
            // SSE polling: close this call's stream, finish later.
            ctx.close_stream(Duration::from_millis(50));
            Ok(ToolResult::text("after the reconnect"))
        }))
        .build()
        .unwrap();
    let http = server
        .start_http(options.with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    (http, server, Gate { release })
}

fn default_server() -> (HttpServer, Server, Gate) {
    test_server(HttpOptions::default())
}

fn call(id: i64, name: &str, args: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}})
}

fn status_of(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> u16 {
    let r = send(addr, method, "/mcp", headers, body.as_bytes());
    let s = r.status;
    drop(r.body());
    s
}

#[test]
fn status_codes_follow_the_spec() {
    let (http, _s, _g) = default_server();
    let addr = http.local_addr();
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    assert_eq!(
        status_of(addr, "POST", &[JSON, ("Accept", "application/json")], init),
        406
    );
    assert_eq!(
        status_of(addr, "POST", &[JSON, ("Accept", "text/event-stream")], init),
        406
    );
    assert_eq!(
        status_of(
            addr,
            "POST",
            &[ACCEPT_BOTH, ("Content-Type", "text/plain")],
            init
        ),
        415
    );
    assert_eq!(
        status_of(
            addr,
            "POST",
            &[ACCEPT_BOTH, JSON, ("MCP-Protocol-Version", "1999-01-01")],
            init
        ),
        400
    );
    // A notification with a malformed version and no session: 400 too,
    // not taken as a stateless one (202).
    assert_eq!(
        status_of(
            addr,
            "POST",
            &[ACCEPT_BOTH, JSON, ("MCP-Protocol-Version", "garbage")],
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        ),
        400
    );
    assert_eq!(
        status_of(addr, "POST", &[ACCEPT_BOTH, JSON], "{not json"),
        400
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    assert_eq!(status_of(addr, "POST", &[ACCEPT_BOTH, JSON], &big), 413);
    assert_eq!(status_of(addr, "PUT", &[ACCEPT_BOTH, JSON], "{}"), 405);
    assert_eq!(send(addr, "GET", "/elsewhere", &[], b"").status, 404);
    // Without a session id: 400; with an unknown one: 404.
    assert_eq!(
        status_of(
            addr,
            "POST",
            &[ACCEPT_BOTH, JSON],
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#
        ),
        400
    );
    assert_eq!(
        status_of(
            addr,
            "POST",
            &[ACCEPT_BOTH, JSON, ("Mcp-Session-Id", "nope")],
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#
        ),
        404
    );
    assert_eq!(
        status_of(
            addr,
            "GET",
            &[("Accept", "text/event-stream"), ("Mcp-Session-Id", "nope")],
            ""
        ),
        404
    );
    assert_eq!(
        status_of(addr, "DELETE", &[("Mcp-Session-Id", "nope")], ""),
        404
    );
    assert_eq!(status_of(addr, "DELETE", &[], ""), 400);

    let sid = initialize(addr, &[]);
    assert!(sid.len() >= 32 && sid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    let sh = ("Mcp-Session-Id", sid.as_str());
    // Notifications and responses: 202, no body.
    let r = post(
        addr,
        Some(&sid),
        &json!({"jsonrpc":"2.0","method":"notifications/whatever"}),
        &[],
    );
    assert_eq!((r.status, r.header("content-length")), (202, Some("0")));
    // Any supported revision is accepted on a session; absent means 2025-03-26.
    for v in ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] {
        let r = send(
            addr,
            "POST",
            "/mcp",
            &[ACCEPT_BOTH, JSON, sh, ("MCP-Protocol-Version", v)],
            br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        );
        assert_eq!(r.status, 200, "{v}");
        let (_, msgs) = answer(r);
        assert_eq!(msgs[0]["result"], json!({}));
    }
    assert_eq!(
        status_of(addr, "GET", &[("Accept", "application/json"), sh], ""),
        406
    );
    // DELETE ends the session; afterwards it is 404.
    assert_eq!(status_of(addr, "DELETE", &[sh], ""), 200);
    assert_eq!(
        status_of(
            addr,
            "POST",
            &[ACCEPT_BOTH, JSON, sh],
            r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#
        ),
        404
    );
    let health = send(addr, "GET", "/healthz", &[], b"");
    assert_eq!(health.status, 200);
    assert_eq!(health.json(), json!({"status": "ok", "sessions": 0}));
    // Through a name the server does not answer to (a rebound DNS name):
    // refused, as everything else.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    std::io::Write::write_all(
        &mut s,
        b"GET /healthz HTTP/1.1\r\nHost: attacker.example:8808\r\n\r\n",
    )
    .unwrap();
    assert_eq!(read_head(std::io::BufReader::new(s)).status, 403);
    http.shutdown().unwrap();
}

#[test]
fn get_and_delete_can_be_switched_off() {
    let (http, _s, _g) = test_server(
        HttpOptions::default()
            .with_get_stream(false)
            .with_delete(false),
    );
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let r = send(
        addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), ("Mcp-Session-Id", &sid)],
        b"",
    );
    assert_eq!(r.status, 405);
    assert!(r.header("allow").is_some_and(|a| !a.contains("GET")));
    assert_eq!(
        status_of(addr, "DELETE", &[("Mcp-Session-Id", &sid)], ""),
        405
    );
    // A preflight offers only what is served.
    let h = [
        ("Origin", "http://localhost"),
        ("Access-Control-Request-Method", "POST"),
    ];
    let preflight = send(addr, "OPTIONS", "/mcp", &h, b"");
    assert_eq!(preflight.status, 204);
    assert_eq!(
        preflight.header("access-control-allow-methods"),
        Some("POST, OPTIONS")
    );
    http.shutdown().unwrap();
}

#[test]
fn origin_host_and_cors() {
    let (http, _s, _g) = default_server();
    let addr = http.local_addr();
    let ping = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let r = send(
        addr,
        "POST",
        "/mcp",
        &[ACCEPT_BOTH, JSON, ("Origin", "http://evil.example")],
        ping,
    );
    assert_eq!(r.status, 403);
    // DNS rebinding: a foreign Host on a loopback server.
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    use std::io::Write;
    write!(s, "POST /mcp HTTP/1.1\r\nHost: evil.example:80\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", ping.len()).unwrap();
    s.write_all(ping).unwrap();
    assert_eq!(read_head(std::io::BufReader::new(s)).status, 403);
    // Preflight from an allowed origin.
    let r = send(
        addr,
        "OPTIONS",
        "/mcp",
        &[
            ("Origin", "http://localhost:5173"),
            ("Access-Control-Request-Method", "POST"),
        ],
        b"",
    );
    assert_eq!(r.status, 204);
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("http://localhost:5173")
    );
    assert!(r
        .header("access-control-allow-methods")
        .unwrap()
        .contains("DELETE"));
    assert!(r
        .header("access-control-allow-headers")
        .unwrap()
        .contains("Mcp-Session-Id"));
    // The real request exposes the session id to the page.
    let r = send(
        addr,
        "POST",
        "/mcp",
        &[ACCEPT_BOTH, JSON, ("Origin", "http://localhost:5173")],
        ping,
    );
    assert_eq!(r.status, 200);
    assert!(r
        .header("access-control-expose-headers")
        .unwrap()
        .contains("Mcp-Session-Id"));
    assert!(r.header("mcp-session-id").is_some());
    http.shutdown().unwrap();
}

#[test]
fn bearer_auth_and_sessions_bound_to_their_credential() {
    let (http, _s, _g) =
        test_server(HttpOptions::default().with_bearer_tokens(vec!["alpha".into(), "beta".into()]));
    let addr = http.local_addr();
    let r = post(
        addr,
        None,
        &json!({"jsonrpc":"2.0","id":1,"method":"ping"}),
        &[],
    );
    assert_eq!(r.status, 401);
    assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
    assert_eq!(
        post(addr, None, &json!({}), &[("Authorization", "Bearer wrong")]).status,
        401
    );
    let sid = initialize(addr, &[("Authorization", "Bearer alpha")]);
    let ping = json!({"jsonrpc":"2.0","id":2,"method":"ping"});
    assert_eq!(
        post(
            addr,
            Some(&sid),
            &ping,
            &[("Authorization", "Bearer alpha")]
        )
        .status,
        200
    );
    assert_eq!(
        post(addr, Some(&sid), &ping, &[("Authorization", "Bearer beta")]).status,
        404,
        "another credential cannot see it"
    );
    http.shutdown().unwrap();
}

/// A token taken away by a reload ends the sessions opened with it at
/// once: their open streams stop (they would carry every server message
/// on, and an open stream keeps a session from expiring), and a session of
/// a token that stays goes on.
#[test]
fn a_revoked_token_ends_its_sessions_and_their_streams() {
    let tokens = |t: &[&str]| {
        HttpOptions::default().with_bearer_tokens(t.iter().map(|t| t.to_string()).collect())
    };
    let (http, _s, _g) = test_server(tokens(&["alpha", "beta"]));
    let addr = http.local_addr();
    let (alpha, beta) = (
        ("Authorization", "Bearer alpha"),
        ("Authorization", "Bearer beta"),
    );
    let revoked = initialize(addr, &[alpha]);
    let kept = initialize(addr, &[beta]);
    let h = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", revoked.as_str()),
        alpha,
    ];
    let mut stream = send(addr, "GET", "/mcp", &h, b"");
    assert_eq!(stream.status, 200);
    stream.event().expect("the priming event");
    http.set_access(&tokens(&["beta"]));
    assert!(
        stream.event().is_none(),
        "the revoked session's stream ended"
    );
    assert_eq!(http.session_count(), 1);
    let ping = json!({"jsonrpc":"2.0","id":2,"method":"ping"});
    assert_eq!(post(addr, Some(&revoked), &ping, &[alpha]).status, 401);
    assert_eq!(post(addr, Some(&kept), &ping, &[beta]).status, 200);
    // Tokens dropped altogether: a session bound to one is unreachable
    // without it, and ends too.
    http.set_access(&HttpOptions::default());
    assert_eq!(http.session_count(), 0);
    http.shutdown().unwrap();
}

#[test]
fn idle_sessions_expire_on_the_injected_clock_and_cancel_their_work() {
    let clock = ManualClock::new();
    let (http, _s, _g) = test_server(
        HttpOptions::default()
            .with_clock(Arc::new(clock.clone()))
            .with_session_idle_timeout(Duration::from_secs(60)),
    );
    let addr = http.local_addr();
    let a = initialize(addr, &[]);
    let b = initialize(addr, &[]);
    // b has a gated call in flight: busy sessions do not expire.
    let mut body = call(5, "gated", json!({}));
    body["params"]["_meta"] = json!({"progressToken": 5});
    let mut r = post(addr, Some(&b), &body, &[]);
    let _ = r.message().expect("progress first");
    clock.advance(Duration::from_secs(61));
    // Facts, not timing: every answer a received had released its stream
    // before it left, and b's call is still unanswered. The supervised
    // sweeper may get there first; either way only a expires.
    http.sweep_sessions();
    assert_eq!(
        http.session_count(),
        1,
        "the idle session expired, the busy one stayed"
    );
    let ping = json!({"jsonrpc":"2.0","id":9,"method":"ping"});
    assert_eq!(
        post(addr, Some(&a), &ping, &[]).status,
        404,
        "expired: the client must re-initialize"
    );
    // DELETE of b cancels its in-flight call: its stream ends with no response.
    assert_eq!(
        status_of(addr, "DELETE", &[("Mcp-Session-Id", &b)], ""),
        200
    );
    assert!(r.message().is_none(), "no response after the session ended");
    assert_eq!(http.session_count(), 0);
    http.shutdown().unwrap();
}

#[test]
fn a_session_is_idle_the_moment_its_client_holds_the_answer() {
    // #11 (CI flake): the stream of an answer was released, and the request
    // counted done, only after the answer was written, so a client that
    // moved on at once could find its session still busy. Every mode, many
    // rounds: each new session must expire on the first sweep after its
    // idle time, right after its last answer arrived.
    for mode in [
        ResponseMode::Auto,
        ResponseMode::JsonOnly,
        ResponseMode::SseOnly,
    ] {
        let clock = ManualClock::new();
        let (http, _s, _g) = test_server(
            HttpOptions::default()
                .with_clock(Arc::new(clock.clone()))
                .with_session_idle_timeout(Duration::from_secs(60))
                .with_response_mode(mode),
        );
        let addr = http.local_addr();
        for round in 0..100 {
            let sid = initialize(addr, &[]);
            let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
            let (_, answers) = answer(post(addr, Some(&sid), &ping, &[]));
            assert_eq!(answers.len(), 1);
            clock.advance(Duration::from_secs(61));
            let expired = http.sweep_sessions();
            // The background sweeper may have taken it first.
            assert!(
                expired == 1 || http.session_count() == 0,
                "{mode:?}, round {round}: the session was still busy"
            );
            assert_eq!(http.session_count(), 0, "{mode:?}, round {round}");
        }
        http.shutdown().unwrap();
    }
}

#[test]
fn a_full_table_makes_room_and_only_all_busy_gives_a_clear_503() {
    // #11 item 11: a full table used to refuse everyone (10,000 sessions
    // that never finished their handshake locked the server for 30 min).
    let clock = ManualClock::new();
    let (http, _s, gate) = test_server(
        HttpOptions::default()
            .with_max_sessions(2)
            .with_clock(Arc::new(clock.clone())),
    );
    let addr = http.local_addr();
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}});
    // A handshake never finished: it lives seconds, not the idle timeout.
    let half = post(addr, None, &init, &[]);
    assert_eq!(half.status, 200);
    drop(half.body());
    clock.advance(Duration::from_secs(11));
    // The background sweeper (on the same clock) may take it first.
    assert!(http.sweep_sessions() <= 1);
    assert_eq!(http.session_count(), 0, "the unfinished handshake expired");
    // Two sessions busy with calls: a third is refused.
    let a = initialize(addr, &[]);
    let b = initialize(addr, &[]);
    let mut busy = Vec::new();
    for (i, sid) in [&a, &b].into_iter().enumerate() {
        let mut body = call(40 + i as i64, "gated", json!({}));
        body["params"]["_meta"] = json!({"progressToken": i});
        let mut r = post(addr, Some(sid), &body, &[]);
        let _ = r.message().expect("progress: the call runs");
        busy.push(r);
    }
    let r = post(addr, None, &init, &[]);
    assert_eq!(r.status, 503);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("too many sessions"));
    // Once idle, the longest-idle session makes room for a new one.
    gate.release.send(()).unwrap();
    gate.release.send(()).unwrap();
    for mut r in busy {
        while r.message().is_some() {}
    }
    clock.advance(Duration::from_secs(1));
    let ping = json!({"jsonrpc":"2.0","id":9,"method":"ping"});
    assert_eq!(answer(post(addr, Some(&b), &ping, &[])).1[0]["id"], 9);
    let c = initialize(addr, &[]);
    assert_eq!(http.session_count(), 2);
    assert_eq!(post(addr, Some(&a), &ping, &[]).status, 404, "a made room");
    for sid in [&b, &c] {
        assert_eq!(answer(post(addr, Some(sid), &ping, &[])).1[0]["id"], 9);
    }
    http.shutdown().unwrap();
}

#[test]
fn a_failed_initialize_names_no_session_and_leaves_none() {
    // #11 items 11 and 32 (repro t03), in every response mode.
    for mode in [
        ResponseMode::Auto,
        ResponseMode::JsonOnly,
        ResponseMode::SseOnly,
    ] {
        let (http, _s, _g) = test_server(HttpOptions::default().with_response_mode(mode));
        let addr = http.local_addr();
        let bad = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{}});
        let r = post(addr, None, &bad, &[]);
        assert_eq!(r.status, 200, "{mode:?}");
        assert_eq!(r.header("mcp-session-id"), None, "{mode:?}");
        let (_, m) = answer(r);
        assert_eq!(m.last().unwrap()["error"]["code"], -32602, "{mode:?}");
        assert_eq!(http.session_count(), 0, "{mode:?}");
        http.shutdown().unwrap();
    }
}

#[test]
fn auto_mode_answers_json_first_and_sse_when_something_comes_first() {
    let (http, _s, gate) = default_server();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let (ct, msgs) = answer(post(
        addr,
        Some(&sid),
        &call(1, "echo", json!({"message":"hi"})),
        &[],
    ));
    assert_eq!(ct, "application/json");
    validate_server_message("2025-11-25", &msgs[0], "tools/call");
    assert_eq!(msgs[0]["result"]["content"][0]["text"], "hi");

    let mut body = call(2, "gated", json!({}));
    body["params"]["_meta"] = json!({"progressToken": "g"});
    let mut r = post(addr, Some(&sid), &body, &[]);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    // Priming event (2025-11-25): an id, a retry, no data.
    let prime = r.event().unwrap();
    assert!(prime.id.is_some() && prime.data.is_empty() && prime.retry.is_some());
    // The progress event arrives while the tool is still blocked: frames are flushed as they happen.
    let (_, progress) = r.message().unwrap();
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "g");
    validate_server_message("2025-11-25", &progress, "");
    gate.release.send(()).unwrap();
    let rest: Vec<Value> = std::iter::from_fn(|| r.message().map(|m| m.1)).collect();
    assert_eq!(rest.len(), 2);
    validate_server_message("2025-11-25", &rest[1], "tools/call");
    assert_eq!(rest[1]["result"]["content"][0]["text"], "through");
    http.shutdown().unwrap();
}

#[test]
fn forced_modes() {
    for (mode, want) in [
        (ResponseMode::SseOnly, "text/event-stream"),
        (ResponseMode::JsonOnly, "application/json"),
    ] {
        let (http, _s, gate) = test_server(HttpOptions::default().with_response_mode(mode));
        let addr = http.local_addr();
        let sid = initialize(addr, &[]);
        gate.release.send(()).unwrap();
        let mut body = call(2, "gated", json!({}));
        body["params"]["_meta"] = json!({"progressToken": 1});
        let (ct, msgs) = answer(post(addr, Some(&sid), &body, &[]));
        assert_eq!(ct, want);
        assert_eq!(
            msgs.last().unwrap()["result"]["content"][0]["text"],
            "through"
        );
        if mode == ResponseMode::JsonOnly {
            assert_eq!(msgs.len(), 1, "JSON-only carries the response alone");
        }
        http.shutdown().unwrap();
    }
}

#[test]
fn json_only_mode_sends_requests_to_the_client_on_the_get_stream_or_fails_them_at_once() {
    // #11 item 13: the request was dropped and ctx.sample() waited 60 s.
    let (http, _s, _g) =
        test_server(HttpOptions::default().with_response_mode(ResponseMode::JsonOnly));
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let (_, msgs) = answer(post(addr, Some(&sid), &call(5, "asks", json!({})), &[]));
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["result"]["isError"], true, "{}", msgs[0]);
    let text = msgs[0]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("no GET stream"), "{text}");
    // With the standalone stream open, the request goes there.
    let answered = asked_on_the_get_stream(addr, &sid, 202, |request| {
        assert_eq!(request["method"], "sampling/createMessage");
        json!({"jsonrpc":"2.0","id":request["id"],"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m"}})
    });
    assert_eq!(answered["result"]["isError"], json!(null), "{answered}");
    http.shutdown().unwrap();
}

/// With session `sid`'s standalone stream open: calls `asks` (a sampling
/// request to the client), answers its request on the GET stream with
/// `reply(request)`, whose POST must get `status`, and gives the call's
/// answer.
fn asked_on_the_get_stream(
    addr: SocketAddr,
    sid: &str,
    status: u16,
    reply: impl FnOnce(&Value) -> Value,
) -> Value {
    let sh = ("Mcp-Session-Id", sid);
    let mut get = send(
        addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), sh],
        b"",
    );
    assert_eq!(get.status, 200);
    let _prime = get.event();
    std::thread::scope(|s| {
        let pending = s.spawn(|| answer(post(addr, Some(sid), &call(6, "asks", json!({})), &[])));
        let (_, request) = get.message().expect("the request on the GET stream");
        assert_eq!(post(addr, Some(sid), &reply(&request), &[]).status, status);
        let (_, mut msgs) = pending.join().unwrap();
        msgs.remove(0)
    })
}

#[test]
fn a_broken_answer_to_the_server_s_request_is_refused_and_fails_it_at_once() {
    let (http, _s, _g) =
        test_server(HttpOptions::default().with_response_mode(ResponseMode::JsonOnly));
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    // Both result and error: refused, and the handler learns now (its own
    // wait is 600 s).
    let answered = asked_on_the_get_stream(
        addr,
        &sid,
        400,
        |request| json!({"jsonrpc":"2.0","id":request["id"],"result":{},"error":{"code":1,"message":"x"}}),
    );
    let text = answered["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("malformed"), "{answered}");
    http.shutdown().unwrap();
}

#[test]
fn standalone_stream_carries_server_messages_and_is_exclusive() {
    let (http, server, _g) = default_server();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let sh = ("Mcp-Session-Id", sid.as_str());
    let mut get = send(
        addr,
        "GET",
        "/mcp",
        &[("Accept", "text/event-stream"), sh],
        b"",
    );
    assert_eq!(get.status, 200);
    let prime = get.event().unwrap();
    assert!(prime.id.is_some() && prime.data.is_empty());
    assert_eq!(
        send(
            addr,
            "GET",
            "/mcp",
            &[("Accept", "text/event-stream"), sh],
            b""
        )
        .status,
        409
    );
    // #11 item 35 (repro t10): resuming is no way around the 409.
    for last in ["0-0", "0-1", prime.id.as_deref().unwrap()] {
        let h = [("Accept", "text/event-stream"), sh, ("Last-Event-ID", last)];
        assert_eq!(send(addr, "GET", "/mcp", &h, b"").status, 409, "{last}");
    }
    // #11 item 24 (repro t01): a batch (not allowed since 2025-06-18) of
    // notifications only is refused with 400 on the POST; nothing goes on
    // the open standalone stream, which keeps working.
    let batch = json!([{"jsonrpc":"2.0","method":"notifications/initialized"}]);
    let r = post(addr, Some(&sid), &batch, &[]);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32600);
    server
        .add_tool(Tool::new("late", json!({"type":"object"}), |_, _| {
            Ok(ToolResult::text(""))
        }))
        .unwrap();
    let (_, m) = get.message().unwrap();
    assert_eq!(m["method"], "notifications/tools/list_changed");
    validate_server_message("2025-11-25", &m, "");
    // A POSTed request's answer never goes to the GET stream.
    let (_, msgs) = answer(post(
        addr,
        Some(&sid),
        &call(3, "echo", json!({"message":"x"})),
        &[],
    ));
    assert_eq!(msgs[0]["id"], 3);
    drop(get);
    http.shutdown().unwrap();
}

#[test]
fn resumption_replays_only_what_that_stream_missed() {
    let (http, _s, gate) = default_server();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let mut body = call(7, "gated", json!({}));
    body["params"]["_meta"] = json!({"progressToken": "r"});
    let mut first = post(addr, Some(&sid), &body, &[]);
    let _prime = first.event().unwrap();
    let (seen_id, m) = first.message().unwrap();
    assert_eq!(m["params"]["progress"], 1);
    drop(first); // the connection drops mid-call: not a cancellation

    // Another stream's traffic meanwhile.
    let (_, other) = answer(post(
        addr,
        Some(&sid),
        &call(8, "echo", json!({"message":"other"})),
        &[],
    ));
    assert_eq!(other[0]["id"], 8);
    gate.release.send(()).unwrap();

    let mut resumed = send(
        addr,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &sid),
            ("Last-Event-ID", &seen_id),
        ],
        b"",
    );
    assert_eq!(resumed.status, 200);
    let replay: Vec<(String, Value)> = std::iter::from_fn(|| resumed.message()).collect();
    let stream_of = |id: &str| id.split('-').next().unwrap().to_owned();
    assert_eq!(replay.len(), 2, "{replay:?}");
    assert!(
        replay
            .iter()
            .all(|(id, _)| stream_of(id) == stream_of(&seen_id)),
        "nothing from another stream"
    );
    assert_eq!(replay[0].1["params"]["progress"], 2);
    assert_eq!(replay[1].1["id"], 7);
    assert_eq!(replay[1].1["result"]["content"][0]["text"], "through");
    // Malformed ids are refused.
    assert_eq!(
        status_of(
            addr,
            "GET",
            &[
                ("Accept", "text/event-stream"),
                ("Mcp-Session-Id", &sid),
                ("Last-Event-ID", "zzz")
            ],
            ""
        ),
        400
    );
    http.shutdown().unwrap();
}

#[test]
fn a_thousand_concurrent_sessions() {
    let (http, _s, _g) = default_server();
    let addr = http.local_addr();
    let workers: Vec<_> = (0..8)
        .map(|w| {
            std::thread::spawn(move || {
                for i in 0..125 {
                    let sid = initialize(addr, &[]);
                    let msg = format!("{w}-{i}");
                    let (_, m) = answer(post(
                        addr,
                        Some(&sid),
                        &call(1, "echo", json!({"message": msg})),
                        &[],
                    ));
                    assert_eq!(m[0]["result"]["content"][0]["text"], msg);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(http.session_count(), 1000);
    http.shutdown().unwrap();
}

#[test]
fn a_handler_can_close_its_stream_and_the_client_resumes_for_the_result() {
    // Also without a standalone stream: resuming a request's stream is
    // another thing (it was refused with 405, and the result lost).
    for get_stream in [true, false] {
        resume_a_closed_stream(HttpOptions::default().with_get_stream(get_stream));
    }
}

fn resume_a_closed_stream(options: HttpOptions) {
    let (http, _s, _g) = test_server(options);
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let mut r = post(addr, Some(&sid), &call(11, "polling", json!({})), &[]);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let prime = r.event().unwrap();
    let last_id = prime.id.clone().expect("priming event id");
    let mut saw_retry = prime.retry.is_some();
    while let Some(e) = r.event() {
        assert!(e.data.is_empty(), "no message before the close: {e:?}");
        saw_retry |= e.retry.is_some();
    }
    assert!(saw_retry, "retry: tells the client when to come back");
    let mut resumed = send(
        addr,
        "GET",
        "/mcp",
        &[
            ("Accept", "text/event-stream"),
            ("Mcp-Session-Id", &sid),
            ("Last-Event-ID", &last_id),
        ],
        b"",
    );
    let (_, m) = resumed.message().expect("the result on the resumed stream");
    assert_eq!(m["id"], 11);
    assert_eq!(m["result"]["content"][0]["text"], "after the reconnect");
    assert!(
        resumed.message().is_none(),
        "the resumed stream ends after the response"
    );
    http.shutdown().unwrap();
}

#[test]
fn a_request_cancelled_while_its_stream_is_closed_leaves_nothing_behind() {
    // #11 item 33 (repro t12): the finished stream stayed until DELETE.
    let (http, _s, _g) = default_server();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let mut r = post(addr, Some(&sid), &call(21, "parked", json!({})), &[]);
    let last_id = r.event().unwrap().id.expect("priming event id");
    while r.event().is_some() {}
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":21}});
    assert_eq!(post(addr, Some(&sid), &cancel, &[]).status, 202);
    // The handler ends on its own thread: wait for the fact that the
    // stream is gone (a resumption then names an unknown stream).
    let h = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", sid.as_str()),
        ("Last-Event-ID", last_id.as_str()),
    ];
    let deadline = std::time::Instant::now() + common::WAIT;
    loop {
        let resumed = send(addr, "GET", "/mcp", &h, b"");
        let status = resumed.status;
        drop(resumed.body());
        if status == 400 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the cancelled request's stream is still kept"
        );
        std::thread::yield_now();
    }
    http.shutdown().unwrap();
}

/// What the server sends on the standalone stream before the client opens
/// it (a request or notification made as the session starts) goes to the
/// client's first GET instead of being kept only for a resumption that
/// never comes.
#[test]
fn what_the_server_sends_before_the_get_stream_opens_reaches_it() {
    use mcpvisor::server::SessionEvent;
    let (http, server, _g) = default_server();
    let events = server.session_events();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let session = match events.recv_timeout(common::WAIT) {
        Ok(SessionEvent::Opened(h)) => h,
        other => panic!("{other:?}"),
    };
    let note = |data: &str| {
        session
            .notify(
                "notifications/message",
                json!({"level": "info", "data": data}),
            )
            .unwrap()
    };
    note("early");
    let mut first = get_stream(addr, &sid, None);
    // What was kept for it comes first, then the priming event, under an
    // id of its own after the event's: a client that resumes from either
    // has missed nothing, and gets nothing twice.
    let early = first.event().expect("the early notification");
    let m: Value = serde_json::from_str(&early.data).unwrap();
    assert_eq!(m["params"]["data"], "early");
    let priming = first.event().expect("the priming event");
    assert!(priming.data.is_empty(), "{priming:?}");
    let seq = |id: &Option<String>| -> u64 {
        let id = id.as_deref().expect("an event id");
        id.rsplit('-').next().unwrap().parse().unwrap()
    };
    assert!(
        seq(&early.id) < seq(&priming.id),
        "priming {priming:?}, event {early:?}"
    );
    note("live");
    let (_, m) = first.message().expect("the next one, live");
    assert_eq!(m["params"]["data"], "live");
    http.shutdown().unwrap();
}

/// A stream closed for polling twice: after the second close, on the
/// resumed stream, the client resumes from the newest event written on
/// it, not from the one the stream was resumed from (it would get that
/// event again), and no event id is written twice.
#[test]
fn a_resumed_stream_closed_again_names_its_newest_event() {
    let (http, _s, gate) = default_server();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let mut body = call(41, "polls_twice", json!({}));
    body["params"]["_meta"] = json!({"progressToken": "p"});
    let mut r = post(addr, Some(&sid), &body, &[]);
    let mut last = None;
    while let Some(e) = r.event() {
        last = e.id.or(last);
    }
    let last = last.expect("an id to resume from");
    let mut resumed = get_stream(addr, &sid, Some(&last));
    assert_eq!(resumed.status, 200);
    // Attached: the progress is written live on this connection.
    gate.release.send(()).unwrap();
    let (mut ids, mut progress_id) = (Vec::new(), None);
    while let Some(e) = resumed.event() {
        if e.data.contains("notifications/progress") {
            progress_id = e.id.clone();
        }
        ids.extend(e.id);
    }
    let progress_id = progress_id.expect("the progress");
    assert_eq!(ids.last(), Some(&progress_id), "after {last}: {ids:?}");
    // Event ids are unique in a session: the close does not repeat the
    // newest event's id (the client keeps it), nor the one resumed from.
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len(), "after {last}: {ids:?}");
    assert!(!ids.contains(&last), "after {last}: {ids:?}");
    gate.release.send(()).unwrap();
    http.shutdown().unwrap();
}

#[test]
fn a_standalone_stream_whose_client_left_makes_room_for_the_next() {
    let (http, _server, _g) = default_server();
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let h = [
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", sid.as_str()),
    ];
    let mut first = send(addr, "GET", "/mcp", &h, b"");
    assert_eq!(first.status, 200);
    first.event().unwrap();
    // Open: the next is refused.
    assert_eq!(send(addr, "GET", "/mcp", &h, b"").status, 409);
    // Closed by its client (the server has written nothing since): the
    // next takes over at once, resuming or not, instead of 409 until a
    // keep-alive fails to be written.
    drop(first);
    let mut second = send(addr, "GET", "/mcp", &h, b"");
    assert_eq!(second.status, 200);
    assert!(second.event().is_some());
    assert_eq!(send(addr, "GET", "/mcp", &h, b"").status, 409, "it is open");
    http.shutdown().unwrap();
}

#[test]
fn an_sse_only_answer_starts_its_stream_before_the_handler_says_anything() {
    // The head and a priming event come at once (a proxy sees bytes, the
    // client an id to resume from); before, nothing was written until the
    // handler's first message, however long the call.
    let (http, _s, gate) =
        test_server(HttpOptions::default().with_response_mode(ResponseMode::SseOnly));
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let mut r = post(addr, Some(&sid), &call(31, "silent", json!({})), &[]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let prime = r
        .event()
        .expect("a priming event while the handler is silent");
    assert!(prime.id.is_some() && prime.data.is_empty(), "{prime:?}");
    gate.release.send(()).unwrap();
    let (_, m) = r.message().expect("the answer");
    assert_eq!(m["id"], 31);
    assert_eq!(m["result"]["content"][0]["text"], "at last");
    http.shutdown().unwrap();
}

#[test]
fn an_auto_answer_silent_for_a_keep_alive_interval_becomes_a_stream() {
    let (http, _s, gate) = test_server(HttpOptions {
        sse_keepalive: Duration::from_secs(2),
        ..Default::default()
    });
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    // Nothing comes within 2 s: the answer is a stream, opened with a
    // priming id while the handler is still silent.
    let mut r = post(addr, Some(&sid), &call(41, "silent", json!({})), &[]);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let prime = r.event().expect("a priming event");
    assert!(prime.id.is_some() && prime.data.is_empty(), "{prime:?}");
    gate.release.send(()).unwrap();
    let (_, m) = r.message().expect("the answer on the stream");
    assert_eq!(m["id"], 41);
    // A quick answer is still JSON.
    let quick = post(
        addr,
        Some(&sid),
        &call(42, "echo", json!({"message": "x"})),
        &[],
    );
    assert_eq!(quick.header("content-type"), Some("application/json"));
    http.shutdown().unwrap();
}

/// A server whose `waits` tool reports progress (when asked for), tells
/// the test it runs, and waits to be cancelled.
fn waiting_server(mode: ResponseMode) -> (HttpServer, crossbeam_channel::Receiver<()>) {
    let (started_tx, started) = crossbeam_channel::unbounded();
    let server = Server::builder("http-waits", "1")
        .tool(Tool::new(
            "waits",
            json!({"type": "object"}),
            move |_, ctx| {
                ctx.progress(1.0, None, Some("started"));
                let _ = started_tx.send(());
                let _ = ctx.cancelled().recv();
                Ok(ToolResult::text("cancelled"))
            },
        ))
        .build()
        .unwrap();
    let http = server
        .start_http(
            HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_response_mode(mode),
        )
        .unwrap();
    (http, started)
}

/// A request cancelled before it produced anything is still answered as a
/// request's POST must be, with an SSE stream (that ends without a
/// response), not 202; where only JSON may be sent, 202 it is.
#[test]
fn a_request_cancelled_before_any_output_gets_an_empty_stream() {
    for (mode, status) in [(ResponseMode::Auto, 200), (ResponseMode::JsonOnly, 202)] {
        let (http, started) = waiting_server(mode);
        let addr = http.local_addr();
        let sid = initialize(addr, &[]);
        let s = sid.clone();
        let call = std::thread::spawn(move || {
            let r = post(addr, Some(&s), &call(31, "waits", json!({})), &[]);
            let ct = r.header("content-type").map(str::to_owned);
            (
                r.status,
                ct,
                String::from_utf8_lossy(&r.body()).into_owned(),
            )
        });
        started.recv_timeout(common::WAIT).expect("the tool runs");
        let cancel =
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":31}});
        assert_eq!(post(addr, Some(&sid), &cancel, &[]).status, 202);
        let (got, ct, body) = call.join().unwrap();
        assert_eq!(got, status, "{mode:?}: {body}");
        if status == 200 {
            assert_eq!(ct.as_deref(), Some("text/event-stream"), "{body}");
        }
        assert!(!body.contains("\"id\":31"), "{mode:?}: a response: {body}");
        http.shutdown().unwrap();
    }
}

/// JSON only: a client that gives up on a long call (closes its
/// connection) frees the connection's thread while the call runs on,
/// instead of holding it, and a connection slot, until the answer comes.
#[test]
fn json_only_a_client_that_leaves_frees_its_connection_while_the_call_runs() {
    use std::io::Write;
    let (http, started) = waiting_server(ResponseMode::JsonOnly);
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let body = call(33, "waits", json!({})).to_string();
    let mut raw = std::net::TcpStream::connect(addr).unwrap();
    write!(
        raw,
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\
         Mcp-Session-Id: {sid}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    started.recv_timeout(common::WAIT).expect("the tool runs");
    let connections_become = |n: usize| {
        let deadline = std::time::Instant::now() + common::WAIT;
        while http.connection_count() != n {
            assert!(
                std::time::Instant::now() < deadline,
                "{} connections, not {n}",
                http.connection_count()
            );
            std::thread::yield_now();
        }
    };
    // The call's connection is the only one open (initialize's is done).
    connections_become(1);
    drop(raw);
    connections_become(0);
    http.shutdown().unwrap();
}

/// JSON only: a session that ends while its request runs (after output
/// that JSON drops) answers the request 404, not a connection closed with
/// no response.
#[test]
fn json_only_a_session_ended_mid_request_is_answered_404() {
    let (http, started) = waiting_server(ResponseMode::JsonOnly);
    let addr = http.local_addr();
    let sid = initialize(addr, &[]);
    let s = sid.clone();
    let call = std::thread::spawn(move || {
        let mut body = call(32, "waits", json!({}));
        body["params"]["_meta"] = json!({"progressToken": 32});
        post(addr, Some(&s), &body, &[]).status
    });
    started.recv_timeout(common::WAIT).expect("the tool runs");
    assert_eq!(
        status_of(addr, "DELETE", &[("Mcp-Session-Id", &sid)], ""),
        200
    );
    assert_eq!(call.join().unwrap(), 404);
    http.shutdown().unwrap();
}

/// A stream whose reader falls a whole queue behind (a burst of log
/// messages while its client reads nothing) is detached: its connection
/// closes without the last chunk, so that the client sees the stream cut,
/// not ended, and resumes it from the last event it got, which brings the
/// response. Before, the stream ended as if complete, without one.
#[test]
fn a_stream_detached_from_a_slow_reader_is_cut_and_resumes_with_its_response() {
    let (done_tx, done) = crossbeam_channel::unbounded();
    let server = Server::builder("burst", "1")
        .tool(Tool::new(
            "burst",
            json!({"type":"object"}),
            move |_, ctx| {
                // Far more than the socket buffers and the connection's queue
                // (1024 frames) hold together.
                let filler = "x".repeat(4096);
                for i in 0..6000 {
                    ctx.log(
                        mcpvisor::LogLevel::Info,
                        None,
                        json!(format!("{i} {filler}")),
                    );
                }
                let _ = done_tx.send(());
                Ok(ToolResult::text("after the burst"))
            },
        ))
        .build()
        .unwrap();
    let http = server
        .start_http(
            HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_response_mode(ResponseMode::SseOnly),
        )
        .unwrap();
    let addr = http.local_addr();
    let session = initialize(addr, &[]);
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"burst","arguments":{}}});
    let mut r = post(addr, Some(&session), &call, &[]);
    assert_eq!(r.status, 200);
    done.recv_timeout(Duration::from_secs(60))
        .expect("the burst ends");
    let mut last = None;
    while let Some((id, m)) = r.message() {
        assert!(
            m.get("id").is_none(),
            "the response came on the first stream"
        );
        last = Some(id);
    }
    assert!(!r.terminated, "the stream was ended, not cut");
    let last = last.expect("events before the cut");
    let mut resumed = get_stream(addr, &session, Some(&last));
    assert_eq!(resumed.status, 200);
    let response = loop {
        let (_, m) = resumed
            .message()
            .expect("the response on the resumed stream");
        if m.get("id").is_some() {
            break m;
        }
    };
    assert_eq!(response["result"]["content"][0]["text"], "after the burst");
}
