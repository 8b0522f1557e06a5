//! Sampling with tools (SEP-1577), synchronously: the tool `forecast`
//! asks the client's model about a city, offering it a tool of the
//! server's own (`get_temperature`). Each time the model answers with
//! `tool_use`, the handler runs that tool right here, on its own thread,
//! and samples again with the `tool_result`, until the model answers in
//! text (at most `MAX_ROUNDS` rounds).
//!
//! ```text
//! sampling_tools        # serves stdio
//! ```
//! A client must declare `sampling.tools`; without it the call fails with
//! a tool error that says so, and nothing is sent.

use mcpvisor::server::{Content, Role};
use mcpvisor::{Server, Tool, ToolError, ToolResult};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// Most sampling rounds one call makes before it gives up.
const MAX_ROUNDS: usize = 5;
/// How long one sampling request may take.
const SAMPLING_TIMEOUT: Duration = Duration::from_secs(60);

/// The server's own tool the model may call.
fn get_temperature(input: &Map<String, Value>) -> Content {
    let city = input.get("city").and_then(Value::as_str).unwrap_or("?");
    // A stand-in for a lookup in the legacy system.
    let celsius = city.len() as i64 * 3 % 35;
    Content::text(format!("{celsius} °C in {city}"))
}

fn message(role: Role, content: Vec<Content>) -> Value {
    let blocks: Vec<Value> = content.iter().map(Content::to_value).collect();
    json!({"role": role.as_str(), "content": blocks})
}

fn forecast(args: Map<String, Value>, ctx: &mcpvisor::Context) -> Result<ToolResult, ToolError> {
    let city = args.get("city").and_then(Value::as_str).unwrap_or_default();
    let tools = json!([{
        "name": "get_temperature",
        "description": "The current temperature in a city",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }]);
    let ask = format!("What should I wear in {city} today?");
    let mut messages = vec![message(Role::User, vec![Content::text(ask)])];
    for _ in 0..MAX_ROUNDS {
        let params = json!({
            "messages": messages,
            "maxTokens": 400,
            "tools": tools,
            "toolChoice": {"mode": "auto"},
        });
        let answer = ctx.sample(params, SAMPLING_TIMEOUT)?;
        // One block or several, as the 2025-11-25 schema allows.
        let blocks: Vec<Content> = match &answer["content"] {
            Value::Array(items) => items.iter().map(Content::from_value).collect(),
            one => vec![Content::from_value(one)],
        };
        let uses: Vec<(String, &str, Map<String, Value>)> = blocks
            .iter()
            .filter_map(|b| match b.block() {
                Content::ToolUse { id, name, input } => {
                    Some((id.clone(), name.as_str(), input.clone()))
                }
                _ => None,
            })
            .collect();
        if uses.is_empty() {
            let text: Vec<&str> = blocks.iter().filter_map(Content::as_text).collect();
            return Ok(ToolResult::text(text.join("\n")));
        }
        // The results of every tool it asked for (each `tool_use` must get
        // one; a tool we do not have is a failed result), after its turn.
        let results = uses
            .iter()
            .map(|(id, name, input)| match *name {
                "get_temperature" => Content::tool_result(id.clone(), vec![get_temperature(input)]),
                other => Content::ToolResult {
                    tool_use_id: id.clone(),
                    content: vec![Content::text(format!("no tool named {other:?}"))],
                    structured_content: None,
                    is_error: true,
                },
            })
            .collect();
        messages.push(message(Role::Assistant, blocks));
        messages.push(message(Role::User, results));
    }
    Err(ToolError::new(format!(
        "the model still wanted tools after {MAX_ROUNDS} rounds"
    )))
}

fn main() -> std::io::Result<()> {
    mcpvisor::init_logging("warn");
    let server = Server::builder("sampling-tools-example", env!("CARGO_PKG_VERSION"))
        .tool(
            Tool::new(
                "forecast",
                json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
                forecast,
            )
            .description("Asks the client's model what to wear, with a temperature tool"),
        )
        .build()
        .map_err(std::io::Error::other)?;
    server.serve_stdio()
}
