//! The client side of the official conformance suite: it runs this program
//! with the server URL as the last argument and the scenario's name in
//! `MCP_CONFORMANCE_SCENARIO`.
//!
//! ```text
//! ../shared/tools/conformance.sh client target/debug/examples/conformance_client --scenario initialize
//! ```

use mcpvisor::client::{Client, ClientOptions, Connection, Generation};
use serde_json::{json, Map, Value};
use std::process::ExitCode;
use std::sync::Arc;

/// Accepts an elicitation with every default the requested schema offers
/// (SEP-1034).
fn accept_with_defaults(params: Value) -> Result<Value, mcpvisor::jsonrpc::ErrorObject> {
    let mut content = Map::new();
    if let Some(props) = params
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
    {
        for (name, schema) in props {
            if let Some(d) = schema.get("default") {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    Ok(json!({"action": "accept", "content": content}))
}

fn run(url: &str, scenario: &str) -> Result<(), Box<dyn std::error::Error>> {
    // The suite names the revision to speak: 2026-07-28 is stateless.
    let stateless =
        std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").as_deref() == Ok("2026-07-28");
    let options = ClientOptions {
        name: "mcpvisor-conformance-client".into(),
        elicitation: Some(Arc::new(accept_with_defaults)),
        generation: if stateless {
            Generation::Stateless
        } else {
            Generation::Sessions
        },
        ..Default::default()
    };
    let client = Client::connect(Connection::http(url)?, options)?;
    let tools = client.list_tools()?;
    let first = |items: Vec<Value>, key: &str| {
        items
            .first()
            .and_then(|i| i[key].as_str())
            .map(str::to_owned)
    };
    match scenario {
        "initialize" | "request-metadata" | "json-schema-ref-no-deref" => {}
        "sep-2322-client-request-state" => {
            for tool in [
                "test_mrtr_echo_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_state",
                "test_mrtr_no_result_type",
            ] {
                client.call_tool(tool, json!({}))?;
            }
        }
        "http-standard-headers" => {
            if let Some(t) = first(tools, "name") {
                client.call_tool(&t, json!({}))?;
            }
            if let Some(uri) = first(client.list_resources()?, "uri") {
                client.read_resource(&uri)?;
            }
            if let Some(p) = first(client.list_prompts()?, "name") {
                client.get_prompt(&p, json!({}))?;
            }
        }
        // The calls the suite names in its context (SEP-2243 header values).
        "http-custom-headers" => {
            let context: Value = serde_json::from_str(&std::env::var("MCP_CONFORMANCE_CONTEXT")?)?;
            for call in context["toolCalls"].as_array().into_iter().flatten() {
                let name = call["name"].as_str().unwrap_or_default();
                client.call_tool(name, call["arguments"].clone())?;
            }
        }
        // Echo the focal tool's schema as listed: whatever was lost shows.
        "json-schema-2020-12-preservation" => {
            if let Some(t) = tools
                .iter()
                .find(|t| t["name"] == "json_schema_2020_12_tool")
            {
                client.call_tool("json_schema_echo", json!({"schema": t["inputSchema"]}))?;
            }
        }
        "tools_call" => {
            let r = client.call_tool("add_numbers", json!({"a": 5, "b": 3}))?;
            println!("{r}");
        }
        "elicitation-sep1034-client-defaults" => {
            client.call_tool("test_client_elicitation_defaults", json!({}))?;
        }
        // Skills (SEP-2640): listing reads no file; loading a skill reads
        // its SKILL.md, verified, and its other files only after that.
        "sep-2640-client-no-prefetch" => {
            client.list_skills()?;
        }
        s if s.starts_with("sep-2640-client-verify-") => {
            for skill in client.list_skills()? {
                client.read_skill_file(&skill, &skill.uri)?;
                for f in skill.files.iter().flatten().filter(|f| f.uri != skill.uri) {
                    client.read_skill_file(&skill, &f.uri)?;
                }
            }
        }
        "sse-retry" => {
            let r = client.call_tool("test_reconnection", json!({}))?;
            println!("{r}");
        }
        _ => {
            for t in tools {
                if let Some(name) = t["name"].as_str() {
                    let _ = client.call_tool(name, json!({}));
                }
            }
        }
    }
    client.close();
    Ok(())
}

fn main() -> ExitCode {
    mcpvisor::init_logging("warn");
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance_client URL   (scenario in MCP_CONFORMANCE_SCENARIO)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    match run(&url, &scenario) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}
