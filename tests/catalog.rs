//! The catalog seen by a client over a real TCP connection: whole sources
//! replaced and withdrawn at once (one `list_changed` per change, exactly
//! their entries), pass-through entries whose JSON arrives untouched, and
//! the fallback for custom methods.

use mcpvisor::client::{Client, ClientError, ClientOptions, Connection};
use mcpvisor::jsonrpc::ErrorObject;
use mcpvisor::protocol::catalog::MethodFallback;
use mcpvisor::protocol::{Context, Source};
use mcpvisor::server::{PassThroughTool, Server, Tool, ToolResult};
use mcpvisor::transport::tcp::{TcpOptions, TcpServer};
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};

/// A server on a loopback TCP port with one local tool, and a client that
/// records every notification it gets.
struct Fixture {
    server: Server,
    _tcp: TcpServer,
    client: Client,
    seen: Arc<Mutex<Vec<String>>>,
}

fn fixture() -> Fixture {
    let server = Server::builder("catalog-test", "1")
        .tool(Tool::new("local", json!({"type": "object"}), |_, _| {
            Ok(ToolResult::text("local"))
        }))
        .build()
        .unwrap();
    let tcp = server
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let options = ClientOptions {
        on_notification: Some(Arc::new(move |method, _| {
            s.lock().unwrap().push(method.to_owned())
        })),
        ..Default::default()
    };
    let client = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    // Once `ping` is answered the server has read `notifications/initialized`
    // (sent before it): the session is operating and gets list changes.
    client.ping().unwrap();
    Fixture {
        server,
        _tcp: tcp,
        client,
        seen,
    }
}

impl Fixture {
    /// The notifications received so far, taken. A ping first: the server
    /// writes everything it queued before the ping's answer, and the client
    /// handles it before the answer, so the list is complete.
    fn notifications(&self) -> Vec<String> {
        self.client.ping().unwrap();
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    fn tool_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .client
            .list_tools()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    }
}

fn tools(prefix: &str, n: usize) -> Source {
    (0..n).fold(Source::new(), |s, i| {
        let tool = Tool::new(
            format!("{prefix}{i:02}"),
            json!({"type": "object"}),
            |_, _| Ok(ToolResult::text("x")),
        );
        s.tool(tool.into_entry().unwrap())
    })
}

#[test]
fn replacing_a_source_of_50_tools_sends_exactly_one_list_changed() {
    let f = fixture();
    assert!(f.notifications().is_empty());
    let changes = f
        .server
        .replace_source("upstream", tools("up", 50))
        .unwrap();
    assert!(changes.tools && !changes.resources && !changes.prompts);
    assert_eq!(
        f.notifications(),
        ["notifications/tools/list_changed"],
        "one notification for 50 tools"
    );
    assert_eq!(f.tool_names().len(), 51, "the 50 and the local tool");

    // The same definitions again: the list did not change, nothing is sent.
    f.server
        .replace_source("upstream", tools("up", 50))
        .unwrap();
    assert!(f.notifications().is_empty());
    // One fewer: one notification again.
    f.server
        .replace_source("upstream", tools("up", 49))
        .unwrap();
    assert_eq!(f.notifications(), ["notifications/tools/list_changed"]);
}

#[test]
fn withdrawing_a_source_removes_exactly_its_entries() {
    let f = fixture();
    f.server.replace_source("a", tools("a", 3)).unwrap();
    f.server.replace_source("b", tools("b", 2)).unwrap();
    assert_eq!(f.notifications().len(), 2);
    let changes = f.server.withdraw_source("a");
    assert!(changes.tools);
    assert_eq!(f.notifications(), ["notifications/tools/list_changed"]);
    assert_eq!(f.tool_names(), ["b00", "b01", "local"]);
    // A source that is not there: nothing changes, nothing is sent.
    assert!(!f.server.withdraw_source("a").tools);
    assert!(f.notifications().is_empty());
    // add_tool / remove_tool still work, one notification each.
    f.server
        .add_tool(Tool::new("later", json!({"type": "object"}), |_, _| {
            Ok(ToolResult::text(""))
        }))
        .unwrap();
    assert!(f.server.remove_tool("later"));
    assert_eq!(f.notifications().len(), 2);
    assert_eq!(f.tool_names(), ["b00", "b01", "local"]);
}

#[test]
fn a_pass_through_tools_definition_and_result_arrive_untouched() {
    let f = fixture();
    let definition = json!({
        "name": "proxied",
        "description": "kept as given",
        "inputSchema": {"type": "object", "$defs": {"x": {"type": "integer"}}, "properties": {"n": {"$ref": "#/$defs/x"}}},
        "x-vendor-extension": {"nested": [1, 2, {"deep": null}]},
        "_meta": {"io.example/origin": "upstream-a"}
    });
    let result = json!({
        "content": [{"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 0.5}}],
        "structuredContent": {"n": 7, "unlisted": true},
        "isError": false,
        "_meta": {"io.example/trace": "abc-123"},
        "someFutureMember": [1, "two", {"three": 3.5}]
    });
    let answer = result.clone();
    let seen_args = Arc::new(Mutex::new(Value::Null));
    let seen = seen_args.clone();
    let tool = PassThroughTool::new(definition.clone(), move |args: &Value, _: &Context| {
        *seen.lock().unwrap() = args.clone();
        Ok(answer.clone())
    });
    f.server
        .replace_source("upstream-a", Source::new().tool(Arc::new(tool)))
        .unwrap();
    let listed = f.client.list_tools().unwrap();
    let listed = listed.iter().find(|t| t["name"] == "proxied").unwrap();
    assert_eq!(
        listed, &definition,
        "the definition is listed exactly as given"
    );
    // No schema check on a pass-through tool: the arguments reach it as sent.
    let args = json!({"n": "not an integer", "extra": {"kept": true}});
    let got = f.client.call_tool("proxied", args.clone()).unwrap();
    assert_eq!(
        got, result,
        "every member of the result, unknown ones and _meta too"
    );
    assert_eq!(*seen_args.lock().unwrap(), args);
}

/// Reads every `x://` URI, listed nowhere.
struct Unlisted;

impl mcpvisor::protocol::catalog::TemplateEntry for Unlisted {
    fn definition(&self) -> &Value {
        &Value::Null
    }
    fn matches(&self, uri: &str) -> bool {
        uri.starts_with("x://")
    }
    fn read(&self, uri: &str, _: &Context) -> Result<Value, ErrorObject> {
        Ok(json!({"contents": [{"uri": uri, "text": "read"}]}))
    }
}

#[test]
fn a_reader_reads_what_it_matches_and_is_listed_nowhere() {
    let f = fixture();
    f.server
        .replace_source("up", Source::new().reader(Arc::new(Unlisted)))
        .unwrap();
    let read = f.client.read_resource("x://anything/at/all").unwrap();
    assert_eq!(read["contents"][0]["text"], "read");
    assert!(f.client.list_resource_templates().unwrap().is_empty());
    assert!(f.client.list_resources().unwrap().is_empty());
    assert!(f.client.read_resource("y://other").is_err());
}

struct Custom;

impl MethodFallback for Custom {
    fn handle(
        &self,
        method: &str,
        params: Option<&Map<String, Value>>,
        ctx: &Context,
    ) -> Result<Value, ErrorObject> {
        match method {
            "x-acme/echo" => Ok(json!({"params": params, "session": ctx.session_id()})),
            _ => Err(ErrorObject::method_not_found(method)),
        }
    }
}

#[test]
fn custom_methods_reach_the_fallback_and_others_stay_unknown() {
    let f = fixture();
    let unknown = |e: ClientError| matches!(e, ClientError::Rpc(e) if e.code == -32601);
    assert!(unknown(
        f.client.request("x-acme/echo", json!({})).unwrap_err()
    ));
    f.server.engine().set_fallback(Some(Arc::new(Custom)));
    let got = f.client.request("x-acme/echo", json!({"a": 1})).unwrap();
    assert_eq!(got["params"], json!({"a": 1}));
    assert_eq!(got["session"].as_str().map(str::len), Some(32));
    assert!(unknown(
        f.client.request("x-acme/other", json!({})).unwrap_err()
    ));
}
