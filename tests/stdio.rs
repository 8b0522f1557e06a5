//! `examples/conformance` driven over stdio through the whole lifecycle.

mod common;

use common::Peer;
use serde_json::{json, Value};

const CLIENT_CAPS: fn() -> Value =
    || json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}});

fn ready() -> Peer {
    let mut p = Peer::spawn("conformance", &[]);
    p.initialize("2025-11-25", CLIENT_CAPS());
    p
}

fn assert_serving(p: &mut Peer, id: &str) {
    let r = p.request(json!(id), "ping", json!({}));
    assert_eq!(r["result"], json!({}), "session still serving after {id}");
}

fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error, got {r}"))
}

#[test]
fn lifecycle_phases_and_negotiation() {
    let mut p = Peer::spawn("conformance", &[]);
    // Before initialize: only initialize and ping.
    let r = p.request(json!(1), "tools/list", json!({}));
    assert_eq!(error_code(&r), -32600);
    assert_eq!(r["id"], json!(1));
    assert_eq!(
        p.request(json!("p0"), "ping", json!({}))["result"],
        json!({})
    );
    let init = p.initialize("2025-11-25", CLIENT_CAPS());
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert_eq!(init["serverInfo"]["name"], "mcpvisor-conformance");
    for cap in ["tools", "resources", "prompts", "logging", "completions"] {
        assert!(
            init["capabilities"][cap].is_object(),
            "{cap} must be an object: {init}"
        );
    }
    assert_eq!(init["capabilities"]["resources"]["subscribe"], json!(true));
    // A second initialize is an error and changes nothing.
    let r = p.request(
        json!(2),
        "initialize",
        json!({"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}),
    );
    assert_eq!(error_code(&r), -32600);
    // So is one whose params would be refused: it is refused as a second
    // initialize (-32600), not for its params (-32602).
    let r = p.request(json!(20), "initialize", json!({}));
    assert_eq!(error_code(&r), -32600, "{r}");
    let r = p.request(json!(3), "nope/nope", json!({}));
    assert_eq!(error_code(&r), -32601);
    assert_serving(&mut p, "after-errors");
}

#[test]
fn unsupported_version_gets_the_newest_and_older_ones_are_echoed() {
    let mut p = Peer::spawn("conformance", &[]);
    assert_eq!(
        p.initialize("1999-01-01", json!({}))["protocolVersion"],
        "2025-11-25"
    );
    for v in ["2024-11-05", "2025-03-26", "2025-06-18"] {
        let mut p = Peer::spawn("conformance", &[]);
        assert_eq!(p.initialize(v, json!({}))["protocolVersion"], v);
        // Everything emitted validates against that revision's schema.
        let tools = p.request(json!(1), "tools/list", json!({}));
        assert!(tools["result"]["tools"].as_array().unwrap().len() >= 10);
        p.request(json!(2), "tools/call", json!({"name": "test_simple_text"}));
        p.request(
            json!(3),
            "resources/read",
            json!({"uri": "test://static-text"}),
        );
        p.request(
            json!(4),
            "prompts/get",
            json!({"name": "test_simple_prompt"}),
        );
    }
}

#[test]
fn lists_are_deterministic_and_complete() {
    let mut p = ready();
    let names = |r: &Value, key: &str, field: &str| -> Vec<String> {
        r["result"][key]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t[field].as_str().unwrap().to_owned())
            .collect()
    };
    let a = names(
        &p.request(json!(1), "tools/list", json!({})),
        "tools",
        "name",
    );
    let b = names(
        &p.request(json!(2), "tools/list", json!({})),
        "tools",
        "name",
    );
    assert_eq!(a, b);
    let mut sorted = a.clone();
    sorted.sort();
    assert_eq!(a, sorted);
    for t in [
        "test_simple_text",
        "test_sampling",
        "test_reconnection",
        "json_schema_2020_12_tool",
    ] {
        assert!(a.contains(&t.to_owned()), "{t} missing from {a:?}");
    }
    let r = p.request(json!(3), "resources/list", json!({}));
    assert_eq!(
        names(&r, "resources", "uri"),
        [
            // examples/skills (the skills extension's files are resources)
            "skill://acme/code-review/SKILL.md",
            "skill://acme/code-review/checklists/CORRECTNESS.md",
            "skill://pdf-processing/SKILL.md",
            "skill://pdf-processing/references/FORMS.md",
            "test://static-binary",
            "test://static-text",
            "test://watched-resource"
        ]
    );
    let r = p.request(json!(4), "resources/templates/list", json!({}));
    assert_eq!(
        names(&r, "resourceTemplates", "uriTemplate"),
        ["test://template/{id}/data"]
    );
    let r = p.request(json!(5), "prompts/list", json!({}));
    assert_eq!(names(&r, "prompts", "name").len(), 5);
    let r = p.request(json!(6), "tools/list", json!({"cursor": "garbage"}));
    assert_eq!(error_code(&r), -32602);
    // The 2020-12 keywords survive untouched.
    let tools = p.request(json!(7), "tools/list", json!({}));
    let t = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .unwrap();
    assert_eq!(
        t["inputSchema"]["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(t["inputSchema"]["additionalProperties"], json!(false));
    assert!(t["inputSchema"]["$defs"]["address"].is_object());
}

#[test]
fn every_tool_answers() {
    let mut p = ready();
    let call = |p: &mut Peer, id: u64, name: &str| {
        p.request(
            json!(id),
            "tools/call",
            json!({"name": name, "arguments": {}}),
        )["result"]
            .clone()
    };
    assert_eq!(
        call(&mut p, 1, "test_simple_text")["content"][0]["text"],
        "This is a simple text response for testing."
    );
    assert_eq!(
        call(&mut p, 2, "test_image_content")["content"][0]["mimeType"],
        "image/png"
    );
    assert_eq!(
        call(&mut p, 3, "test_audio_content")["content"][0]["mimeType"],
        "audio/wav"
    );
    let r = call(&mut p, 4, "test_embedded_resource");
    assert_eq!(
        r["content"][0]["resource"]["uri"],
        "test://embedded-resource"
    );
    let types: Vec<Value> = call(&mut p, 5, "test_multiple_content_types")["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].clone())
        .collect();
    assert_eq!(types, [json!("text"), json!("image"), json!("resource")]);
    let r = call(&mut p, 6, "test_error_handling");
    assert_eq!(r["isError"], json!(true));
    assert_eq!(
        r["content"][0]["text"],
        "This tool intentionally returns an error for testing"
    );
    assert_eq!(
        call(&mut p, 7, "test_reconnection")["content"][0]["text"],
        "Reconnection test completed successfully"
    );
    let r = p.request(json!(8), "tools/call", json!({"name": "json_schema_2020_12_tool", "arguments": {"name": "n", "address": {"city": "c"}, "email": "n@example.org"}}));
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("\"city\""));
    // Resources, templates, prompts, completions.
    let r = p.request(
        json!(9),
        "resources/read",
        json!({"uri": "test://template/123/data"}),
    );
    assert!(r["result"]["contents"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Data for ID: 123"));
    let r = p.request(
        json!(10),
        "resources/read",
        json!({"uri": "test://static-binary"}),
    );
    assert!(r["result"]["contents"][0]["blob"].is_string());
    let r = p.request(json!(11), "resources/read", json!({"uri": "test://nope"}));
    assert_eq!(error_code(&r), -32002);
    let r = p.request(json!(12), "prompts/get", json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}));
    assert_eq!(
        r["result"]["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='hello', arg2='world'"
    );
    let r = p.request(
        json!(13),
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}),
    );
    assert_eq!(error_code(&r), -32602);
    let r = p.request(json!(14), "prompts/get", json!({"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://x"}}));
    assert_eq!(
        r["result"]["messages"][0]["content"]["resource"]["uri"],
        "test://x"
    );
    let r = p.request(
        json!(15),
        "prompts/get",
        json!({"name": "test_prompt_with_image"}),
    );
    assert_eq!(r["result"]["messages"][0]["content"]["type"], "image");
    let r = p.request(
        json!(16),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "par"}}),
    );
    assert_eq!(
        r["result"]["completion"]["values"],
        json!(["paris", "park", "party"])
    );
    assert_eq!(
        p.request(
            json!(17),
            "resources/subscribe",
            json!({"uri": "test://watched-resource"})
        )["result"],
        json!({})
    );
    assert_eq!(
        p.request(
            json!(18),
            "resources/unsubscribe",
            json!({"uri": "test://watched-resource"})
        )["result"],
        json!({})
    );
}

#[test]
#[cfg(feature = "schema")] // without it, arguments are not validated
fn unknown_tools_are_invalid_params_and_schema_violations_follow_the_revision() {
    // Since 2025-11-25 (SEP-1303, #11 item 16) arguments that break the
    // input schema are a tool execution error the model can correct;
    // before, -32602. An unknown tool is -32602 in every revision.
    for version in ["2025-11-25", "2025-06-18", "2024-11-05"] {
        let mut p = Peer::spawn("conformance", &[]);
        p.initialize(version, CLIENT_CAPS());
        let r = p.request(json!(1), "tools/call", json!({"name": "no_such_tool"}));
        assert_eq!(error_code(&r), -32602);
        for (id, name, args) in [
            (2, "test_sampling", json!({"prompt": 5})),
            (3, "test_sampling", json!({})),
            (4, "json_schema_2020_12_tool", json!({"bogus": 1})),
        ] {
            let r = p.request(
                json!(id),
                "tools/call",
                json!({"name": name, "arguments": args}),
            );
            if version == "2025-11-25" {
                assert_eq!(r["result"]["isError"], true, "{version}: {r}");
                let text = r["result"]["content"][0]["text"].as_str().unwrap();
                assert!(text.contains("Invalid arguments"), "{text}");
            } else {
                assert_eq!(error_code(&r), -32602, "{version}");
            }
        }
        assert_serving(&mut p, "schema errors");
    }
}

#[test]
fn progress_echoes_the_token_increases_and_precedes_the_response() {
    let mut p = ready();
    for (n, token) in [json!("tok-1"), json!(42)].into_iter().enumerate() {
        let id = json!(100 + n);
        p.request_async(
            id.clone(),
            "tools/call",
            json!({"name": "test_tool_with_progress", "_meta": {"progressToken": token}}),
        );
        let mut seen = Vec::new();
        loop {
            let m = p.recv();
            if m.get("id") == Some(&id) {
                assert!(m["result"].is_object());
                break;
            }
            assert_eq!(m["method"], "notifications/progress");
            assert_eq!(
                m["params"]["progressToken"], token,
                "token echoed exactly as sent"
            );
            seen.push(m["params"]["progress"].as_f64().unwrap());
        }
        assert_eq!(seen, [0.0, 50.0, 100.0]);
    }
    // Without a token: no progress at all.
    let r = p.request(
        json!(200),
        "tools/call",
        json!({"name": "test_tool_with_progress"}),
    );
    assert!(r["result"].is_object());
    assert!(
        p.backlog.is_empty(),
        "no progress without a token: {:?}",
        p.backlog
    );
}

#[test]
fn log_level_filters_notifications_per_session() {
    let mut p = ready();
    assert_eq!(
        p.request(json!(1), "logging/setLevel", json!({"level": "warning"}))["result"],
        json!({})
    );
    p.request(
        json!(2),
        "tools/call",
        json!({"name": "test_tool_with_logging"}),
    );
    assert!(
        p.backlog.is_empty(),
        "info logs must be filtered at warning: {:?}",
        p.backlog
    );
    p.request(json!(3), "logging/setLevel", json!({"level": "debug"}));
    p.request(
        json!(4),
        "tools/call",
        json!({"name": "test_tool_with_logging"}),
    );
    let logs: Vec<&Value> = p
        .backlog
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logs.len(), 3);
    assert_eq!(logs[0]["params"]["level"], "info");
    assert_eq!(logs[0]["params"]["data"], "Tool execution started");
    let r = p.request(json!(5), "logging/setLevel", json!({"level": "loud"}));
    assert_eq!(error_code(&r), -32602);
}

fn expect_request(p: &mut Peer, method: &str) -> Value {
    let m = p.recv();
    assert_eq!(m["method"], method, "expected a {method} request, got {m}");
    m
}

#[test]
fn sampling_and_elicitation_round_trips() {
    let mut p = ready();
    p.request_async(
        json!("s"),
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "hi"}}),
    );
    let req = expect_request(&mut p, "sampling/createMessage");
    assert_eq!(req["params"]["messages"][0]["content"]["text"], "hi");
    p.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "pong"}, "model": "m"}}));
    let r = p.response(&json!("s"));
    assert_eq!(r["result"]["content"][0]["text"], "LLM response: pong");

    p.request_async(
        json!("e"),
        "tools/call",
        json!({"name": "test_elicitation", "arguments": {"message": "who?"}}),
    );
    let req = expect_request(&mut p, "elicitation/create");
    assert_eq!(req["params"]["message"], "who?");
    p.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x"}}}));
    let r = p.response(&json!("e"));
    assert!(r["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("accept"));

    // A client error answer reaches the tool as a failure.
    p.request_async(
        json!("d"),
        "tools/call",
        json!({"name": "test_elicitation_sep1034_defaults"}),
    );
    let req = expect_request(&mut p, "elicitation/create");
    assert_eq!(
        req["params"]["requestedSchema"]["properties"]["age"]["default"],
        json!(30)
    );
    p.send(json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -1, "message": "user closed the dialog"}}));
    let r = p.response(&json!("d"));
    assert_eq!(r["result"]["isError"], json!(true));
}

#[test]
fn sampling_without_the_client_capability_fails_the_tool_cleanly() {
    let mut p = Peer::spawn("conformance", &[]);
    p.initialize("2025-11-25", json!({}));
    let r = p.request(
        json!(1),
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "x"}}),
    );
    assert_eq!(r["result"]["isError"], json!(true));
    assert!(
        p.backlog.is_empty(),
        "no sampling request may be sent: {:?}",
        p.backlog
    );
}

#[test]
fn server_request_timeout_sends_cancelled() {
    let mut p = Peer::spawn("conformance", &["--peer-timeout-ms", "200"]);
    p.initialize("2025-11-25", CLIENT_CAPS());
    p.request_async(
        json!(1),
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "x"}}),
    );
    let req = expect_request(&mut p, "sampling/createMessage");
    // Not answered: the server gives up and says so.
    let cancel = p.recv();
    assert_eq!(cancel["method"], "notifications/cancelled");
    assert_eq!(cancel["params"]["requestId"], req["id"]);
    let r = p.response(&json!(1));
    assert_eq!(r["result"]["isError"], json!(true));
    // A late answer is dropped without harm.
    p.send(json!({"jsonrpc": "2.0", "id": req["id"], "result": {"role": "assistant", "content": {"type": "text", "text": "late"}, "model": "m"}}));
    assert_serving(&mut p, "late answer");
}

#[test]
fn cancellation_stops_the_tool_and_suppresses_its_response() {
    let mut p = ready();
    p.request_async(
        json!("long"),
        "tools/call",
        json!({"name": "test_sampling", "arguments": {"prompt": "x"}}),
    );
    let req = expect_request(&mut p, "sampling/createMessage");
    p.notify(
        "notifications/cancelled",
        json!({"requestId": "long", "reason": "user gave up"}),
    );
    // The tool sees the cancel flag and withdraws its own request to us.
    let m = p.recv();
    assert_eq!(m["method"], "notifications/cancelled");
    assert_eq!(m["params"]["requestId"], req["id"]);
    // Cancelling unknown requests and initialize is ignored.
    p.notify(
        "notifications/cancelled",
        json!({"requestId": "no-such-request"}),
    );
    p.notify("notifications/cancelled", json!({"requestId": "init"}));
    assert_serving(&mut p, "cancel");
    // At EOF every remaining message is flushed: none answers "long".
    p.close_stdin();
    while let Some(m) = p.recv_or_eof() {
        assert_ne!(
            m.get("id"),
            Some(&json!("long")),
            "a cancelled request must not be answered: {m}"
        );
    }
    assert!(p.wait_exit().success());
}

#[test]
fn bad_lines_are_answered_and_the_session_keeps_serving() {
    let mut p = ready();
    p.send_line("{this is not json");
    let r = p.recv();
    assert_eq!((error_code(&r), r["id"].clone()), (-32700, Value::Null));
    assert_serving(&mut p, "invalid json");

    p.send_line(r#"{"jsonrpc":"1.0","id":77,"method":"ping"}"#);
    let r = p.recv();
    assert_eq!((error_code(&r), r["id"].clone()), (-32600, json!(77)));
    p.send_line(r#"{"id":78,"method":"ping"}"#);
    assert_eq!(error_code(&p.recv()), -32600);
    p.send_line(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
    let r = p.recv();
    assert_eq!((error_code(&r), r["id"].clone()), (-32600, Value::Null));
    assert_serving(&mut p, "wrong jsonrpc");

    p.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":79,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(17 * 1024 * 1024)
    ));
    let r = p.recv();
    assert_eq!(error_code(&r), -32600);
    assert!(r["error"]["message"]
        .as_str()
        .unwrap()
        .contains("size limit"));
    assert_serving(&mut p, "over-long line");

    p.send_line(r#"[{"jsonrpc":"2.0","id":80,"method":"ping"}]"#);
    let r = p.recv();
    assert_eq!((error_code(&r), r["id"].clone()), (-32600, Value::Null));
    assert_serving(&mut p, "batch");

    p.send_line("\u{0}\u{1}\u{2}");
    assert_eq!(error_code(&p.recv()), -32700);
    let mut bytes = br#"{"jsonrpc":"2.0","id":81,"method":"p"#.to_vec();
    bytes.extend_from_slice(b"\xff\xfe\"}");
    let stdin_line = unsafe { String::from_utf8_unchecked(bytes) };
    p.send_line(&stdin_line);
    assert_eq!(error_code(&p.recv()), -32700);
    assert_serving(&mut p, "invalid utf-8");
}

#[test]
fn batches_work_for_2025_03_26_clients() {
    let mut p = Peer::spawn("conformance", &[]);
    p.initialize("2025-03-26", json!({}));
    p.send_line(
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text"}}]"#,
    );
    let r = p.recv();
    let items = r
        .as_array()
        .unwrap_or_else(|| panic!("expected a batch response, got {r}"));
    let mut ids: Vec<i64> = items.iter().map(|i| i["id"].as_i64().unwrap()).collect();
    ids.sort();
    assert_eq!(ids, [1, 2]);
}

#[test]
fn eof_ends_the_session_and_the_process() {
    let mut p = ready();
    p.request_async(
        json!(1),
        "tools/call",
        json!({"name": "test_tool_with_progress"}),
    );
    p.close_stdin();
    // In-flight work finishes within the grace period and is written out.
    let mut answered = false;
    while let Some(m) = p.recv_or_eof() {
        answered |= m.get("id") == Some(&json!(1));
    }
    assert!(answered, "in-flight request answered before exit");
    assert!(p.wait_exit().success());
}
