//! The 2025-11-25 surface of the synchronous API, server and client (#17):
//! one test per feature, each through a tap that checks every message
//! both ways against the official 2025-11-25 schema.

mod common;

use common::tap::{tap, Tap};
use common::WAIT;
use mcpvisor::client::{callback_cancel_token, Client, ClientError, ClientOptions};
use mcpvisor::jsonrpc::ErrorObject;
use mcpvisor::protocol::Source;
use mcpvisor::server::{
    Annotations, BuildError, Completion, CompletionRef, Content, Icon, IconTheme, PassThroughTool,
    Prompt, PromptArgument, PromptResult, Resource, ResourceContents, ResourceTemplate, Role,
    SessionEvent,
};
use mcpvisor::transport::tcp::{TcpOptions, TcpServer};
use mcpvisor::{LogLevel, PeerError, Server, Tool, ToolError, ToolResult};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const V: &str = "2025-11-25";

fn object() -> Value {
    json!({"type": "object"})
}

/// `server` on TCP with a tap in front.
fn start(server: &Server) -> (TcpServer, Tap) {
    let tcp = server
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let tap = tap(tcp.local_addr());
    (tcp, tap)
}

fn connect(tap: &Tap, options: ClientOptions) -> Client {
    Client::connect(tap.connection(), options).unwrap()
}

fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Notifications the client gets, as a channel.
fn notifications(options: &mut ClientOptions) -> crossbeam_channel::Receiver<(String, Value)> {
    let (tx, rx) = crossbeam_channel::unbounded();
    options.on_notification = Some(Arc::new(move |m: &str, p: &Value| {
        let _ = tx.send((m.to_owned(), p.clone()));
    }));
    rx
}

fn next_notification(rx: &crossbeam_channel::Receiver<(String, Value)>, method: &str) -> Value {
    loop {
        let (m, p) = rx.recv_timeout(WAIT).expect("notification");
        if m == method {
            return p;
        }
    }
}

#[test]
fn definitions_and_results_carry_icons_annotations_and_meta() {
    let icon = Icon::new("https://example.com/icon.png")
        .mime_type("image/png")
        .size("48x48")
        .theme(IconTheme::Light);
    let seen = Annotations::new()
        .audience(Role::User)
        .priority(0.8)
        .last_modified("2025-01-12T15:00:58Z");
    let block = Content::text("done")
        .annotate(seen.clone())
        .with_meta("example.com/block", json!(1));
    let (b, i) = (block.clone(), icon.clone());
    let server = Server::builder("surface", "1.0.0")
        .description("A server with every decoration")
        .website_url("https://example.com")
        .icon(icon.clone())
        .tool(
            Tool::new("report", object(), move |_, _| {
                Ok(ToolResult::new(vec![b.clone()]).with_meta("example.com/trace", json!("t-1")))
            })
            .icon(i)
            .meta("example.com/tool", json!({"v": 1})),
        )
        .resource(
            Resource::new("test://doc", "doc", |uri, _| {
                let c = ResourceContents::text(uri, "text/plain", "hello");
                Ok(vec![c.with_meta("example.com/etag", json!("e1"))])
            })
            .annotations(seen.clone())
            .size(5)
            .icon(icon.clone())
            .meta("example.com/resource", json!(true)),
        )
        .resource_template(
            ResourceTemplate::new("test://items/{id}", "item", |uri, vars, _| {
                Ok(vec![ResourceContents::text(uri, "text/plain", &vars["id"])])
            })
            .unwrap()
            .annotations(Annotations::new().audience(Role::Assistant))
            .icon(icon.clone())
            .meta("example.com/template", json!(2)),
        )
        .prompt(
            Prompt::new("hello", |_, _| {
                let hi = Content::text("hi").annotate(Annotations::new().priority(0.1));
                Ok(PromptResult::new(vec![(Role::User, hi)]).with_meta("example.com/p", json!(3)))
            })
            .icon(icon.clone())
            .meta("example.com/prompt", json!("x")),
        )
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let c = connect(&tap, ClientOptions::default());

    let info = c.server_info();
    assert_eq!(info["description"], "A server with every decoration");
    assert_eq!(info["websiteUrl"], "https://example.com");
    assert_eq!(info["icons"][0], icon.to_value());

    let tools = c.list_tools_typed().unwrap();
    assert_eq!(tools[0].decorations.icons, std::slice::from_ref(&icon));
    assert_eq!(
        tools[0].decorations.meta["example.com/tool"],
        json!({"v": 1})
    );
    let result = c.call_tool_typed("report", json!({})).unwrap();
    assert_eq!(result.content, [block]);
    assert_eq!(result.meta["example.com/trace"], "t-1");

    let resources = c.list_resources().unwrap();
    assert_eq!(resources[0]["annotations"], seen.to_value());
    assert_eq!(resources[0]["size"], 5);
    assert_eq!(resources[0]["icons"][0], icon.to_value());
    assert_eq!(resources[0]["_meta"]["example.com/resource"], true);
    let contents = c.read_resource_typed("test://doc").unwrap();
    assert_eq!(
        contents,
        [ResourceContents::text("test://doc", "text/plain", "hello")
            .with_meta("example.com/etag", json!("e1"))]
    );
    let templates = c.list_resource_templates().unwrap();
    assert_eq!(
        templates[0]["annotations"]["audience"],
        json!(["assistant"])
    );
    assert_eq!(templates[0]["_meta"]["example.com/template"], 2);

    let prompts = c.list_prompts().unwrap();
    assert_eq!(prompts[0]["icons"][0], icon.to_value());
    assert_eq!(prompts[0]["_meta"]["example.com/prompt"], "x");
    let prompt = c.get_prompt_typed("hello", json!({})).unwrap();
    assert_eq!(prompt.meta["example.com/p"], 3);
    assert_eq!(prompt.messages[0].1.as_text(), Some("hi"));
    assert!(matches!(prompt.messages[0].1, Content::Annotated { .. }));
    c.close();
    assert!(tap.validate(V, &[]) >= 16);
}

#[test]
fn tool_names_schemas_and_structured_content_follow_the_spec() {
    let build = |tool: Tool| Server::builder("s", "1").tool(tool).build().err();
    let noop = |_, _: &mcpvisor::Context| Ok(ToolResult::text("x"));
    for bad in ["has space", "", "ünï", &"x".repeat(129)] {
        match build(Tool::new(bad, object(), noop)) {
            Some(BuildError::Schema(e)) => assert!(e.contains("tool name"), "{e}"),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert!(build(Tool::new("ok.name-1_A", object(), noop)).is_none());
    match build(Tool::new("t", object(), noop).output_schema(json!({"type": "array"}))) {
        Some(BuildError::Schema(e)) => assert!(e.contains("outputSchema"), "{e}"),
        other => panic!("{other:?}"),
    }
    let twice = Server::builder("s", "1")
        .tool(Tool::new("t", object(), noop))
        .tool(Tool::new("t", object(), noop))
        .build();
    assert!(matches!(twice, Err(BuildError::Duplicate(e)) if e.contains("\"t\"")));
    let twice = Server::builder("s", "1")
        .prompt(Prompt::new("p", |_, _| Ok(PromptResult::default())))
        .prompt(Prompt::new("p", |_, _| Ok(PromptResult::default())))
        .build();
    assert!(matches!(twice, Err(BuildError::Duplicate(_))));

    // At run time, structuredContent must be an object.
    let server = Server::builder("s", "1")
        .tool(Tool::new("array", object(), |_, _| {
            Ok(ToolResult {
                structured_content: Some(json!([1, 2])),
                ..ToolResult::text("[1,2]")
            })
        }))
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let c = connect(&tap, ClientOptions::default());
    match c.call_tool("array", json!({})) {
        Err(ClientError::Rpc(e)) => {
            assert_eq!(e.code, -32603);
            assert!(e.message.contains("not a JSON object"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    c.close();
    tap.validate(V, &[]);
}

#[test]
fn resource_templates_match_rfc6570_forms_with_decoded_values() {
    let echo =
        |uri: &str, vars: &std::collections::HashMap<String, String>, _: &mcpvisor::Context| {
            let mut vars: Vec<String> = vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
            vars.sort();
            Ok(vec![ResourceContents::text(
                uri,
                "text/plain",
                vars.join(";"),
            )])
        };
    let server = Server::builder("s", "1")
        .resource_template(
            ResourceTemplate::new("test://items/{id}{?lang,fmt}", "item", echo).unwrap(),
        )
        .resource_template(ResourceTemplate::new("file:///{+path}", "file", echo).unwrap())
        .resource_template(ResourceTemplate::new("test://tree{/a,b}", "tree", echo).unwrap())
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let c = connect(&tap, ClientOptions::default());
    let read = |uri: &str| match c.read_resource_typed(uri).unwrap().remove(0) {
        ResourceContents::Text { text, .. } => text,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        read("test://items/a%20b?fmt=json&lang=fr"),
        "fmt=json;id=a b;lang=fr"
    );
    assert_eq!(read("test://items/42"), "id=42");
    assert_eq!(read("test://items/%E2%82%AC?lang=en"), "id=€;lang=en");
    assert_eq!(read("file:///dir/sub/f.txt"), "path=dir/sub/f.txt");
    assert_eq!(read("test://tree/x/y"), "a=x;b=y");
    // No template matches: the spec's -32002.
    match c.read_resource("test://items/a/b") {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32002),
        other => panic!("{other:?}"),
    }
    c.close();
    tap.validate(V, &[]);
    for unsupported in ["a://{x*}", "a://{x:3}", "a://{=x}", "a://{x"] {
        let e = ResourceTemplate::new(unsupported, "n", echo)
            .err()
            .expect(unsupported);
        assert!(e.contains(unsupported), "{unsupported}: {e}");
    }
}

/// A tool that signs the user in through a URL-mode elicitation, then
/// says so out of band with `notifications/elicitation/complete`.
fn sign_in(
    _: serde_json::Map<String, Value>,
    ctx: &mcpvisor::Context,
) -> Result<ToolResult, ToolError> {
    let ask = json!({"mode": "url", "message": "Sign in", "url": "https://example.com/auth?s=1", "elicitationId": "e-1"});
    let answer = ctx.elicit(ask, WAIT)?;
    if answer["action"] != "accept" {
        return Ok(ToolResult::error("declined"));
    }
    let session = ctx.session().expect("a session client");
    session
        .elicitation_complete("e-1")
        .map_err(ToolError::from)?;
    Ok(ToolResult::text("signed in"))
}

#[test]
fn url_elicitation_goes_only_to_clients_that_declared_it() {
    let server = Server::builder("s", "1")
        .tool(Tool::new("sign_in", object(), sign_in))
        .tool(Tool::new("needs_auth", object(), |_, _| {
            let url = json!({"mode": "url", "message": "Authorize", "url": "https://example.com/oauth", "elicitationId": "e-2"});
            Err(ToolError::rpc(ErrorObject::url_elicitation_required(
                "authorization is required first",
                vec![url],
            )))
        }))
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let (asked_tx, asked) = crossbeam_channel::unbounded();
    let mut options = ClientOptions {
        elicitation: Some(Arc::new(move |p: Value| {
            asked_tx.send(p).unwrap();
            Ok(json!({"action": "accept"}))
        })),
        elicitation_url: true,
        sampling: Some(Arc::new(|_| Err(ErrorObject::internal("no model here")))),
        sampling_tools: true,
        ..ClientOptions::default()
    };
    let notes = notifications(&mut options);
    let c = connect(&tap, options);
    let r = c.call_tool("sign_in", json!({})).unwrap();
    assert_eq!(text(&r), "signed in");
    assert_eq!(
        asked.recv_timeout(WAIT).unwrap()["url"],
        "https://example.com/auth?s=1"
    );
    let done = next_notification(&notes, "notifications/elicitation/complete");
    assert_eq!(done["elicitationId"], "e-1");
    // -32042 with the elicitations to complete.
    match c.call_tool("needs_auth", json!({})) {
        Err(ClientError::Rpc(e)) => {
            assert_eq!(e.code, -32042);
            assert_eq!(e.data.unwrap()["elicitations"][0]["elicitationId"], "e-2");
        }
        other => panic!("{other:?}"),
    }
    let refusal = tap
        .seen()
        .into_iter()
        .find(|s| s.message["error"]["code"] == -32042)
        .expect("the -32042 answer");
    common::assert_valid(V, "URLElicitationRequiredError", &refusal.message);
    let declared = &tap.seen()[0].message["params"]["capabilities"];
    assert_eq!(declared["elicitation"], json!({"form": {}, "url": {}}));
    assert_eq!(declared["sampling"], json!({"tools": {}}));
    c.close();

    // A client with form mode only is never sent a URL-mode request.
    let form_only = ClientOptions {
        elicitation: Some(Arc::new(|_| {
            panic!("a URL elicitation reached a form-only client")
        })),
        ..ClientOptions::default()
    };
    let c = connect(&tap, form_only);
    let r = c.call_tool("sign_in", json!({})).unwrap();
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("elicitation.url"), "{r}");
    c.close();
    let second: Vec<_> = tap
        .seen()
        .into_iter()
        .filter(|s| s.connection == 1)
        .collect();
    assert!(second
        .iter()
        .all(|s| s.message["method"] != "elicitation/create"));
    tap.validate(V, &[]);
}

#[test]
fn sampling_with_tools_runs_the_tool_loop_synchronously() {
    let mut p = common::Peer::spawn("sampling_tools", &[]);
    p.initialize(V, json!({"sampling": {"tools": {}}}));
    p.request_async(
        json!(1),
        "tools/call",
        json!({"name": "forecast", "arguments": {"city": "Oslo"}}),
    );
    let ask = p.recv();
    assert_eq!(ask["method"], "sampling/createMessage");
    assert_eq!(ask["params"]["tools"][0]["name"], "get_temperature");
    let tool_use = json!({"role": "assistant", "model": "m", "stopReason": "toolUse", "content": [
        {"type": "tool_use", "id": "u1", "name": "get_temperature", "input": {"city": "Oslo"}}]});
    common::assert_valid(V, "CreateMessageResult", &tool_use);
    p.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": tool_use}));
    let again = p.recv();
    let messages = again["params"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    let result = &messages[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["toolUseId"], "u1");
    assert_eq!(result["content"][0]["text"], "12 °C in Oslo");
    let answer = json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "Wear a coat"}});
    common::assert_valid(V, "CreateMessageResult", &answer);
    p.send(json!({"jsonrpc": "2.0", "id": again["id"], "result": answer}));
    assert_eq!(text(&p.response(&json!(1))["result"]), "Wear a coat");

    // Without `sampling.tools`, nothing is sent and the tool says why.
    let mut p = common::Peer::spawn("sampling_tools", &[]);
    p.initialize(V, json!({"sampling": {}}));
    p.request_async(
        json!(1),
        "tools/call",
        json!({"name": "forecast", "arguments": {"city": "Oslo"}}),
    );
    let r = p.recv();
    assert_eq!(r["id"], 1, "no sampling request may come first: {r}");
    assert_eq!(r["result"]["isError"], true);
    assert!(text(&r["result"]).contains("sampling.tools"), "{r}");
}

#[test]
fn a_worker_thread_reaches_a_session_through_its_handle_and_events() {
    let server = Server::builder("s", "1")
        .tool(Tool::new("whoami", object(), |_, ctx| {
            let handle = ctx.session().expect("a session");
            Ok(ToolResult::text(handle.id().to_owned()))
        }))
        .build()
        .unwrap();
    let events = server.session_events();
    let (_tcp, tap) = start(&server);
    let mut options = ClientOptions {
        roots: Some(Arc::new(|_| {
            Ok(json!({"roots": [{"uri": "file:///work", "name": "work"}]}))
        })),
        ..ClientOptions::default()
    };
    let notes = notifications(&mut options);
    let c = connect(&tap, options);
    let handle = match events.recv_timeout(WAIT).unwrap() {
        SessionEvent::Opened(h) => h,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        text(&c.call_tool("whoami", json!({})).unwrap()),
        handle.id()
    );
    c.set_log_level(LogLevel::Info).unwrap();
    assert!(!handle.log(LogLevel::Debug, None, json!("below the level asked for")));
    // The embedding program's own thread, outside any request.
    let worker = handle.clone();
    let roots = std::thread::spawn(move || {
        assert!(worker.log(LogLevel::Warning, Some("legacy"), json!("disk almost full")));
        worker
            .notify("notifications/tools/list_changed", json!({}))
            .unwrap();
        worker.ping(WAIT).unwrap();
        worker.list_roots(WAIT).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(roots["roots"][0]["uri"], "file:///work");
    assert_eq!(
        next_notification(&notes, "notifications/message")["data"],
        "disk almost full"
    );
    next_notification(&notes, "notifications/tools/list_changed");
    c.roots_changed().unwrap();
    match events.recv_timeout(WAIT).unwrap() {
        SessionEvent::RootsChanged(h) => assert_eq!(h.id(), handle.id()),
        other => panic!("{other:?}"),
    }
    let declared = &tap.seen()[0].message["params"]["capabilities"];
    assert_eq!(declared["roots"], json!({"listChanged": true}));
    c.close();
    match events.recv_timeout(WAIT).unwrap() {
        SessionEvent::Closed(id) => assert_eq!(id, handle.id()),
        other => panic!("{other:?}"),
    }
    assert!(!handle.is_open());
    assert_eq!(handle.ping(WAIT), Err(PeerError::Closed));
    tap.validate(V, &[]);
}

#[test]
fn completion_sees_context_and_refuses_unknown_references() {
    let server = Server::builder("s", "1")
        .prompt(
            Prompt::new("greet", |_, _| Ok(PromptResult::default()))
                .argument(PromptArgument::required("name", "who"))
                .argument(PromptArgument::optional("lang", "language")),
        )
        .prompt(Prompt::new("plain", |_, _| Ok(PromptResult::default())))
        .completion(CompletionRef::Prompt("greet".into()), |req, _| {
            let names = match req.context.get("lang").map(String::as_str) {
                Some("fr") => vec!["Amélie", "Arnaud"],
                _ => vec!["Alice", "Bob"],
            };
            Ok(Completion {
                values: names
                    .into_iter()
                    .filter(|n| n.starts_with(&req.value))
                    .map(str::to_owned)
                    .collect(),
                ..Completion::default()
            })
        })
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let c = connect(&tap, ClientOptions::default());
    let greet = json!({"type": "ref/prompt", "name": "greet"});
    let fr = c
        .complete_typed(greet.clone(), "name", "Am", &[("lang", "fr")])
        .unwrap();
    assert_eq!(fr.values, ["Amélie"]);
    assert_eq!(
        c.complete_typed(greet, "name", "A", &[]).unwrap().values,
        ["Alice"]
    );
    let plain = json!({"type": "ref/prompt", "name": "plain"});
    assert!(c
        .complete_typed(plain, "x", "", &[])
        .unwrap()
        .values
        .is_empty());
    for unknown in [
        json!({"type": "ref/prompt", "name": "nope"}),
        json!({"type": "ref/resource", "uri": "test://nothing/{x}"}),
    ] {
        match c.complete(unknown, "x", "") {
            Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602),
            other => panic!("{other:?}"),
        }
    }
    c.close();
    tap.validate(V, &[]);
}

#[test]
fn custom_methods_and_experimental_capabilities_are_served() {
    let server = Server::builder("s", "1")
        .method("example.com/echo", |params, _| {
            Ok(json!({"echo": params.get("say")}))
        })
        .method("example.com/fail", |_, _| {
            Err(ToolError::rpc(ErrorObject::invalid_params("say something")))
        })
        .experimental("example.com/feature", json!({"level": 2}))
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let c = connect(&tap, ClientOptions::default());
    assert_eq!(
        c.server_capabilities()["experimental"]["example.com/feature"]["level"],
        2
    );
    let r = c.request("example.com/echo", json!({"say": "hi"})).unwrap();
    assert_eq!(r, json!({"echo": "hi"}));
    match c.request("example.com/fail", json!({})) {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602),
        other => panic!("{other:?}"),
    }
    match c.request("example.com/none", json!({})) {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32601),
        other => panic!("{other:?}"),
    }
    c.close();
    tap.validate(
        V,
        &["example.com/echo", "example.com/fail", "example.com/none"],
    );
    let shadow = Server::builder("s", "1")
        .method("tools/list", |_, _| Ok(json!({})))
        .build();
    assert!(matches!(shadow, Err(BuildError::Duplicate(e)) if e.contains("tools/list")));
    let not_object = Server::builder("s", "1")
        .experimental("x", json!(true))
        .build();
    assert!(not_object.is_err());
}

#[test]
fn typed_tool_results_are_checked_against_the_output_schema() {
    let server = Server::builder("s", "1").enable_tools().build().unwrap();
    let tool = |name: &str, n: Value| {
        let definition = json!({"name": name, "inputSchema": object(), "outputSchema": {
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}});
        let result = json!({"content": [{"type": "text", "text": n.to_string()}], "structuredContent": {"n": n}});
        Arc::new(PassThroughTool::new(definition, move |_, _| {
            Ok(result.clone())
        }))
    };
    let source = Source::new()
        .tool(tool("honest", json!(3)))
        .tool(tool("liar", json!("three")));
    server.replace_source("upstream", source).unwrap();
    let (_tcp, tap) = start(&server);
    let c = connect(&tap, ClientOptions::default());
    let tools = c.list_tools_typed().unwrap();
    assert!(tools.iter().all(|t| t.output_schema.is_some()));
    let honest = c.call_tool_typed("honest", json!({})).unwrap();
    assert_eq!(honest.structured_content, Some(json!({"n": 3})));
    match c.call_tool_typed("liar", json!({})) {
        Err(ClientError::Protocol(e)) => assert!(e.contains("violates its outputSchema"), "{e}"),
        other => panic!("{other:?}"),
    }
    // The raw call hands over what came, unchecked.
    assert_eq!(
        c.call_tool("liar", json!({})).unwrap()["structuredContent"]["n"],
        "three"
    );
    c.close();
    tap.validate(V, &[]);
}

#[test]
fn initialize_is_never_cancelled() {
    // A server that reads but never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let (stream, _) = listener.accept().unwrap();
        std::io::BufReader::new(stream)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<String>>()
    });
    let options = ClientOptions {
        request_timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let outcome = Client::connect(mcpvisor::client::Connection::tcp(addr).unwrap(), options);
    assert!(
        matches!(outcome, Err(ClientError::Timeout { .. })),
        "{:?}",
        outcome.err()
    );
    // The client closed its side: everything it sent is here.
    let lines = reader.join().unwrap();
    assert_eq!(lines.len(), 1, "{lines:?}");
    let initialize: Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(initialize["method"], "initialize");
    common::assert_valid(V, "InitializeRequest", &initialize);
}

#[test]
fn a_request_the_server_cancelled_is_not_answered() {
    let server = Server::builder("s", "1")
        .tool(Tool::new("impatient", object(), |_, ctx| {
            let ask = json!({"message": "slow", "requestedSchema": {"type": "object", "properties": {}}});
            match ctx.elicit(ask, Duration::from_millis(300)) {
                Err(PeerError::Timeout(_)) => Ok(ToolResult::text("gave up")),
                other => Ok(ToolResult::error(format!("{other:?}"))),
            }
        }))
        .tool(Tool::new("patient", object(), |_, ctx| {
            let ask = json!({"message": "quick", "requestedSchema": {"type": "object", "properties": {}}});
            ctx.elicit(ask, WAIT)?;
            Ok(ToolResult::text("answered"))
        }))
        .build()
        .unwrap();
    let (_tcp, tap) = start(&server);
    let told = Arc::new(AtomicBool::new(false));
    let (t, cancelled_tx) = (told.clone(), crossbeam_channel::unbounded());
    let cancelled = cancelled_tx.1;
    let tx = cancelled_tx.0;
    let options = ClientOptions {
        // One callback thread: the second question runs after the first
        // callback and whatever it would have sent.
        callback_threads: 1,
        elicitation: Some(Arc::new(move |p: Value| {
            if p["message"] == "slow" {
                let token = callback_cancel_token().expect("inside a callback");
                let _ = token.receiver().recv_timeout(WAIT);
                t.store(token.is_cancelled(), Ordering::SeqCst);
                tx.send(()).unwrap();
            }
            Ok(json!({"action": "accept", "content": {}}))
        })),
        ..ClientOptions::default()
    };
    let c = connect(&tap, options);
    // The callback thread is started (and idle) before the 300 ms begin.
    assert_eq!(
        text(&c.call_tool("patient", json!({})).unwrap()),
        "answered"
    );
    assert_eq!(
        text(&c.call_tool("impatient", json!({})).unwrap()),
        "gave up"
    );
    cancelled.recv_timeout(WAIT).unwrap();
    assert!(
        told.load(Ordering::SeqCst),
        "the callback was told of the cancellation"
    );
    assert_eq!(
        text(&c.call_tool("patient", json!({})).unwrap()),
        "answered"
    );
    c.close();
    let seen = tap.seen();
    let slow = seen
        .iter()
        .find(|s| s.message["params"]["message"] == "slow")
        .expect("the slow question");
    let id = &slow.message["id"];
    assert!(seen
        .iter()
        .any(|s| !s.from_client && s.message["method"] == "notifications/cancelled"));
    assert!(
        !seen
            .iter()
            .any(|s| s.from_client && s.message.get("method").is_none() && &s.message["id"] == id),
        "the cancelled question was answered"
    );
    tap.validate(V, &[]);
}

#[test]
fn a_client_refuses_requests_it_did_not_declare() {
    use std::io::{BufRead, BufReader, Write};
    // A server of the test's own that asks for what the client never declared.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut out = stream.try_clone().unwrap();
        let mut lines = BufReader::new(stream).lines().map_while(Result::ok);
        let init: Value = serde_json::from_str(&lines.next().unwrap()).unwrap();
        let result = json!({"protocolVersion": V, "capabilities": {}, "serverInfo": {"name": "s", "version": "1"}});
        writeln!(
            out,
            "{}",
            json!({"jsonrpc": "2.0", "id": init["id"], "result": result})
        )
        .unwrap();
        lines.next(); // notifications/initialized
        let asks = [
            json!({"mode": "url", "message": "m", "url": "https://example.com", "elicitationId": "e"}),
            json!({"messages": [], "maxTokens": 1, "tools": []}),
        ];
        let mut answers = Vec::new();
        for (id, (method, params)) in ["elicitation/create", "sampling/createMessage"]
            .into_iter()
            .zip(asks)
            .enumerate()
        {
            let ask = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            common::assert_valid(V, "ServerRequest", &ask);
            writeln!(out, "{ask}").unwrap();
            answers.push(serde_json::from_str::<Value>(&lines.next().unwrap()).unwrap());
        }
        answers
    });
    let called = Arc::new(AtomicBool::new(false));
    let (a, b) = (called.clone(), called.clone());
    let options = ClientOptions {
        elicitation: Some(Arc::new(move |_| {
            a.store(true, Ordering::SeqCst);
            Ok(json!({"action": "accept"}))
        })),
        sampling: Some(Arc::new(move |_| {
            b.store(true, Ordering::SeqCst);
            Err(ErrorObject::internal("no model"))
        })),
        ..ClientOptions::default()
    };
    let c = Client::connect(mcpvisor::client::Connection::tcp(addr).unwrap(), options).unwrap();
    let answers = server.join().unwrap();
    for (answer, says) in answers.iter().zip(["elicitation.url", "sampling.tools"]) {
        common::assert_valid(V, "JSONRPCErrorResponse", answer);
        assert_eq!(answer["error"]["code"], -32602);
        assert!(
            answer["error"]["message"].as_str().unwrap().contains(says),
            "{answer}"
        );
    }
    assert!(
        !called.load(Ordering::SeqCst),
        "a callback saw a request the client never declared"
    );
    c.close();
}

#[test]
fn session_events_end_with_the_server() {
    let server = Server::builder("s", "1").build().unwrap();
    let events = server.session_events();
    drop(server);
    assert_eq!(
        events.recv_timeout(WAIT).err(),
        Some(crossbeam_channel::RecvTimeoutError::Disconnected)
    );
}
