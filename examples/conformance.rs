//! The server that the official MCP conformance suite's server scenarios
//! expect (npm `@modelcontextprotocol/conformance`): exactly its tools,
//! resources, prompts and completions.
//!
//! ```text
//! conformance [--listen LISTEN | --stdio | --tcp ADDR | --http ADDR] [--response-mode sse|json|auto] [--peer-timeout-ms N]
//! ```
//! `LISTEN` is `stdio` (the default), `tcp://ADDR`, `http://ADDR/mcp` or
//! `amqp://USER:PASS@HOST/VHOST?name=NAME`; the bound listener is printed
//! as `listening on ...`.
//! Over HTTP every answer is an SSE stream by default: the suite's
//! multiple-streams check counts SSE streams (`--response-mode auto` answers
//! JSON whenever the response comes first).
//! `--peer-timeout-ms` bounds how long a tool waits for the client's answer
//! to sampling / elicitation (default 60000).

#[path = "common/listen_args.rs"]
mod listen_args;

use listen_args::{listen_flag, LISTEN_USAGE};
use mcpvisor::protocol::{Engine, InputRequest, ListKind};
use mcpvisor::serve::ListenOptions;
use mcpvisor::server::{
    base64, Completion, CompletionRef, Content, Prompt, PromptArgument, PromptResult, Resource,
    ResourceContents, ResourceTemplate, Role, Server, TaskSupport, Tool, ToolError, ToolResult,
};
#[cfg(feature = "http")]
use mcpvisor::transport::http::ResponseMode;
use mcpvisor::transport::listen::Listen;
use mcpvisor::{Context, LogLevel};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::thread::sleep;
use std::time::Duration;

/// A 1x1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A valid WAV file holding one silent 8 kHz mono 8-bit sample.
fn wav() -> String {
    let mut w = Vec::new();
    w.extend_from_slice(b"RIFF");
    w.extend_from_slice(&37u32.to_le_bytes());
    w.extend_from_slice(b"WAVEfmt ");
    w.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    w.extend_from_slice(&1u16.to_le_bytes()); // PCM
    w.extend_from_slice(&1u16.to_le_bytes()); // mono
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&8000u32.to_le_bytes());
    w.extend_from_slice(&1u16.to_le_bytes());
    w.extend_from_slice(&8u16.to_le_bytes());
    w.extend_from_slice(b"data");
    w.extend_from_slice(&1u32.to_le_bytes());
    w.push(128);
    base64(&w)
}

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn image() -> Content {
    Content::Image {
        data: PNG.into(),
        mime_type: "image/png".into(),
    }
}

fn peer_failure(e: mcpvisor::PeerError) -> ToolError {
    ToolError::new(format!("request to the client failed: {e}"))
}

/// Elicits and reports the answer as the SEP-1034 / SEP-1330 scenarios expect.
fn elicit_and_summarise(
    ctx: &Context,
    params: Value,
    timeout: Duration,
) -> Result<ToolResult, ToolError> {
    let answer = ctx.elicit(params, timeout).map_err(peer_failure)?;
    Ok(ToolResult::text(format!(
        "Elicitation completed: action={}, content={}",
        answer["action"].as_str().unwrap_or("?"),
        answer.get("content").unwrap_or(&Value::Null)
    )))
}

/// The name question of the 2026-07-28 input-required scenarios.
fn ask_name(key: &str, message: &str) -> InputRequest {
    InputRequest::elicit(json!({
        "message": message,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    }))
    .key(key)
}

fn ask_confirm() -> InputRequest {
    InputRequest::elicit(json!({
        "message": "Please confirm",
        "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    }))
    .key("confirm")
}

fn ask_llm(key: &str, text: &str, max_tokens: u32) -> InputRequest {
    InputRequest::sample(json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens
    }))
    .key(key)
}

fn content_field(answer: &Value, field: &str) -> String {
    answer
        .pointer(&format!("/content/{field}"))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

/// The tools of the 2026-07-28 scenarios: input-required rounds (SEP-2322),
/// capability and logging rules (SEP-2575), list changes for listen
/// streams, and a tool with an `x-mcp-header` parameter (SEP-2243).
fn stateless_tools(engine: Arc<OnceLock<Arc<Engine>>>) -> Vec<Tool> {
    let announce = |kind: ListKind| {
        let engine = engine.clone();
        move |_: serde_json::Map<String, Value>, _: &Context| {
            if let Some(e) = engine.get() {
                e.notify_list_changed(kind);
            }
            Ok(ToolResult::text("list change announced"))
        }
    };
    vec![
        Tool::new("test_input_required_result_elicitation", no_args(), |_, ctx| {
            let answer = ctx.input(ask_name("user_name", "What is your name?"))?;
            Ok(ToolResult::text(format!("Hello, {}!", content_field(&answer, "name"))))
        })
        .description("Asks the user's name (an input-required round)"),
        Tool::new("test_input_required_result_sampling", no_args(), |_, ctx| {
            let answer = ctx.input(ask_llm("capital_question", "What is the capital of France?", 100))?;
            Ok(ToolResult::text(format!("The model said: {}", content_field(&answer, "text"))))
        })
        .description("Asks the client's LLM (an input-required round)"),
        Tool::new("test_input_required_result_list_roots", no_args(), |_, ctx| {
            let answer = ctx.input(InputRequest::list_roots().key("client_roots"))?;
            Ok(ToolResult::text(format!("Roots: {}", answer["roots"])))
        })
        .description("Asks the client's roots (an input-required round)"),
        Tool::new("test_input_required_result_request_state", no_args(), |_, ctx| {
            ctx.input(ask_confirm())?;
            Ok(ToolResult::text("state-ok: the request state came back intact"))
        })
        .description("An input-required round whose state the server verifies"),
        Tool::new("test_input_required_result_tampered_state", no_args(), |_, ctx| {
            ctx.input(ask_confirm())?;
            Ok(ToolResult::text("state-ok"))
        })
        .description("An input-required round; a changed state is refused"),
        Tool::new("test_input_required_result_multiple_inputs", no_args(), |_, ctx| {
            let answers = ctx.inputs(vec![
                ask_name("user_name", "What is your name?"),
                ask_llm("greeting", "Generate a greeting", 50),
                InputRequest::list_roots().key("client_roots"),
            ])?;
            Ok(ToolResult::text(format!(
                "{} says {} with roots {}",
                content_field(&answers[0], "name"),
                content_field(&answers[1], "text"),
                answers[2]["roots"]
            )))
        })
        .description("Asks three questions in one round"),
        Tool::new("test_input_required_result_multi_round", no_args(), |_, ctx| {
            let name = ctx.input(ask_name("step1", "Step 1: What is your name?"))?;
            let color = ctx.input(
                InputRequest::elicit(json!({
                    "message": "Step 2: What is your favorite color?",
                    "requestedSchema": {"type": "object", "properties": {"color": {"type": "string"}}, "required": ["color"]}
                }))
                .key("step2"),
            )?;
            Ok(ToolResult::text(format!(
                "{} likes {}",
                content_field(&name, "name"),
                content_field(&color, "color")
            )))
        })
        .description("Two input-required rounds, one after the other"),
        Tool::new("test_input_required_result_capabilities", no_args(), |_, ctx| {
            // Only what the request declared it can answer.
            let p = ctx.protocol();
            let mut questions = Vec::new();
            if p.client_supports("elicitation") {
                questions.push(ask_name("user_name", "What is your name?"));
            }
            if p.client_supports("sampling") {
                questions.push(ask_llm("greeting", "Generate a greeting", 50));
            }
            if p.client_supports("roots") {
                questions.push(InputRequest::list_roots().key("client_roots"));
            }
            if questions.is_empty() {
                return Err(ToolError::new("the client declared none of elicitation, sampling, roots"));
            }
            let answers = ctx.inputs(questions)?;
            Ok(ToolResult::text(format!("{} answers", answers.len())))
        })
        .description("Asks only what the client declared"),
        Tool::new("test_missing_capability", no_args(), |_, ctx| {
            let answer = ctx.input(ask_llm("question", "Say something", 10))?;
            Ok(ToolResult::text(content_field(&answer, "text")))
        })
        .description("Needs sampling: without it, the request fails with -32021"),
        Tool::new("test_streaming_elicitation", no_args(), |_, ctx| {
            let answer = ctx.input(ask_name("answer", "What is your name?"))?;
            Ok(ToolResult::text(format!("Hello, {}!", content_field(&answer, "name"))))
        })
        .description("Elicits as an input-required result, never as a request on the stream"),
        Tool::new("test_logging_tool", no_args(), |_, ctx| {
            ctx.log(LogLevel::Info, Some("conformance"), json!("test_logging_tool ran"));
            Ok(ToolResult::text("logged (if the request asked for a log level)"))
        })
        .description("Logs once: only to a request that set a log level"),
        Tool::new("test_wait_for_cancel", no_args(), |_, ctx| {
            // Reports progress once (the client then knows it runs), then
            // waits to be cancelled and says so on stderr (tests watch it).
            ctx.progress(1.0, None, Some("waiting to be cancelled"));
            if ctx.cancelled().recv_timeout(Duration::from_secs(30)).is_ok() || ctx.is_cancelled() {
                eprintln!("test_wait_for_cancel: cancelled");
            }
            Ok(ToolResult::text("not cancelled within 30 s"))
        })
        .description("Runs until cancelled (at most 30 s)"),
        Tool::new("test_trigger_tool_change", no_args(), announce(ListKind::Tools))
            .description("Announces a tool list change"),
        Tool::new("test_trigger_prompt_change", no_args(), announce(ListKind::Prompts))
            .description("Announces a prompt list change"),
        Tool::new(
            "test_trigger_resource_update",
            json!({"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]}),
            {
                let engine = engine.clone();
                move |args, _| {
                    let uri = args["uri"].as_str().unwrap_or_default();
                    if let Some(e) = engine.get() {
                        e.notify_resource_updated(uri);
                    }
                    Ok(ToolResult::text(format!("{uri} updated")))
                }
            },
        )
        .description("Announces that a resource was updated"),
        Tool::new(
            "test_custom_header",
            json!({
                "type": "object",
                "properties": {"region": {"type": "string", "x-mcp-header": "Region", "description": "Mirrored in Mcp-Param-Region"}},
                "required": ["region"]
            }),
            |args, _| Ok(ToolResult::text(format!("region {}", args["region"]))),
        )
        .description("Has a parameter mirrored in an HTTP header (SEP-2243)"),
    ]
}

fn tools(peer_timeout: Duration) -> Vec<Tool> {
    vec![
        Tool::new("test_simple_text", no_args(), |_, _| Ok(ToolResult::text("This is a simple text response for testing.")))
            .description("Returns simple text content"),
        Tool::new("test_image_content", no_args(), |_, _| Ok(ToolResult::new(vec![image()])))
            .description("Returns image content"),
        Tool::new("test_audio_content", no_args(), |_, _| {
            Ok(ToolResult::new(vec![Content::Audio { data: wav(), mime_type: "audio/wav".into() }]))
        })
        .description("Returns audio content"),
        Tool::new("test_embedded_resource", no_args(), |_, _| {
            Ok(ToolResult::new(vec![Content::Resource(ResourceContents::text(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            ))]))
        })
        .description("Returns an embedded resource"),
        Tool::new("test_multiple_content_types", no_args(), |_, _| {
            Ok(ToolResult::new(vec![
                Content::text("Multiple content types test:"),
                image(),
                Content::Resource(ResourceContents::text(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                )),
            ]))
        })
        .description("Returns text, image and resource content"),
        Tool::new("test_tool_with_logging", no_args(), |_, ctx| {
            for (i, msg) in ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate() {
                if i > 0 {
                    sleep(Duration::from_millis(50));
                }
                ctx.log(LogLevel::Info, Some("conformance"), json!(msg));
            }
            Ok(ToolResult::text("Tool with logging executed successfully"))
        })
        .description("Sends three log messages while it runs"),
        Tool::new("test_tool_with_progress", no_args(), |_, ctx| {
            for (i, p) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    sleep(Duration::from_millis(50));
                }
                ctx.progress(p, Some(100.0), None);
            }
            Ok(ToolResult::text("Tool with progress executed successfully"))
        })
        .description("Reports progress 0, 50, 100 of 100"),
        Tool::new("test_error_handling", no_args(), |_, _| {
            Err(ToolError::new("This tool intentionally returns an error for testing"))
        })
        .description("Always fails"),
        Tool::new(
            "test_sampling",
            json!({"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
            move |args, ctx| {
                let prompt = args["prompt"].as_str().unwrap_or_default();
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 100
                });
                let answer = ctx.sample(params, peer_timeout).map_err(peer_failure)?;
                let text = answer.pointer("/content/text").and_then(Value::as_str).unwrap_or_default();
                Ok(ToolResult::text(format!("LLM response: {text}")))
            },
        )
        .description("Asks the client's LLM via sampling/createMessage"),
        Tool::new(
            "test_elicitation",
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            move |args, ctx| {
                let params = json!({
                    "message": args["message"],
                    "requestedSchema": {
                        "type": "object",
                        "properties": {
                            "username": {"type": "string", "description": "User's response"},
                            "email": {"type": "string", "description": "User's email address"}
                        },
                        "required": ["username", "email"]
                    }
                });
                let answer = ctx.elicit(params, peer_timeout).map_err(peer_failure)?;
                Ok(ToolResult::text(format!("User response: {answer}")))
            },
        )
        .description("Asks the user via elicitation/create"),
        Tool::new("test_elicitation_sep1034_defaults", no_args(), move |_, ctx| {
            let params = json!({
                "message": "Please review and update the form fields with defaults",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "description": "User name", "default": "John Doe"},
                        "age": {"type": "integer", "description": "User age", "default": 30},
                        "score": {"type": "number", "description": "User score", "default": 95.5},
                        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                        "verified": {"type": "boolean", "description": "Verification status", "default": true}
                    }
                }
            });
            elicit_and_summarise(ctx, params, peer_timeout)
        })
        .description("Elicitation with default values (SEP-1034)"),
        Tool::new("test_elicitation_sep1330_enums", no_args(), move |_, ctx| {
            let params = json!({
                "message": "Please select options from the enum fields",
                "requestedSchema": {
                    "type": "object",
                    "properties": {
                        "untitledSingle": {"type": "string", "description": "Untitled single-select", "enum": ["option1", "option2", "option3"]},
                        "titledSingle": {"type": "string", "description": "Titled single-select", "oneOf": [
                            {"const": "value1", "title": "First Option"},
                            {"const": "value2", "title": "Second Option"},
                            {"const": "value3", "title": "Third Option"}
                        ]},
                        "legacyEnum": {"type": "string", "description": "Legacy titled enum", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"]},
                        "untitledMulti": {"type": "array", "description": "Untitled multi-select",
                            "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                        "titledMulti": {"type": "array", "description": "Titled multi-select", "items": {"anyOf": [
                            {"const": "value1", "title": "First Choice"},
                            {"const": "value2", "title": "Second Choice"},
                            {"const": "value3", "title": "Third Choice"}
                        ]}}
                    }
                }
            });
            elicit_and_summarise(ctx, params, peer_timeout)
        })
        .description("Elicitation with every enum form (SEP-1330)"),
        Tool::new(
            "json_schema_2020_12_tool",
            json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
                },
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }),
            |args, _| Ok(ToolResult::text(format!("JSON Schema 2020-12 tool called with {}", Value::Object(args)))),
        )
        .description("Tool with JSON Schema 2020-12 features"),
        Tool::new("test_reconnection", no_args(), |_, ctx: &Context| {
            // SSE polling: over HTTP the stream closes now and the client
            // resumes it with Last-Event-ID to get the result.
            ctx.close_stream(Duration::from_millis(100));
            let _ = ctx.cancelled().recv_timeout(Duration::from_millis(200));
            Ok(ToolResult::text("Reconnection test completed successfully"))
        })
        .description("Takes long enough for the HTTP transport to close and resume its stream"),
    ]
}

fn build(peer_timeout: Duration) -> Result<Server, mcpvisor::server::BuildError> {
    let text = |uri: &'static str, body: &'static str| {
        move |_: &str, _: &Context| Ok(vec![ResourceContents::text(uri, "text/plain", body)])
    };
    let mut b = Server::builder("mcpvisor-conformance", env!("CARGO_PKG_VERSION"))
        .title("mcpvisor conformance server")
        .instructions("The server of the MCP conformance suite's scenarios.")
        .resource(
            Resource::new("test://static-text", "static-text", text("test://static-text", "This is the content of the static text resource."))
                .description("A static text resource")
                .mime_type("text/plain"),
        )
        .resource(
            Resource::new("test://static-binary", "static-binary", |_, _| {
                Ok(vec![ResourceContents::Blob { uri: "test://static-binary".into(), mime_type: Some("image/png".into()), blob: PNG.into() }])
            })
            .description("A static binary resource (PNG)")
            .mime_type("image/png"),
        )
        .resource(
            Resource::new("test://watched-resource", "watched-resource", text("test://watched-resource", "Watched resource content"))
                .description("A resource to subscribe to")
                .mime_type("text/plain"),
        )
        .resource_template(
            ResourceTemplate::new("test://template/{id}/data", "template-data", |uri, vars, _| {
                let id = vars.get("id").map(String::as_str).unwrap_or_default();
                let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                Ok(vec![ResourceContents::text(uri, "application/json", body.to_string())])
            })
            .map_err(mcpvisor::server::BuildError::Schema)?
            .description("A resource template with an id parameter")
            .mime_type("application/json"),
        )
        .prompt(
            Prompt::new("test_simple_prompt", |_, _| {
                Ok(PromptResult::new(vec![(Role::User, Content::text("This is a simple prompt for testing."))]))
            })
            .description("A simple prompt without arguments"),
        )
        .prompt(
            Prompt::new("test_prompt_with_arguments", |args, _| {
                let (a1, a2) = (&args["arg1"], &args["arg2"]);
                Ok(PromptResult::new(vec![(Role::User, Content::text(format!("Prompt with arguments: arg1='{a1}', arg2='{a2}'")))]))
            })
            .description("A prompt with two required arguments")
            .argument(PromptArgument::required("arg1", "First test argument"))
            .argument(PromptArgument::required("arg2", "Second test argument")),
        )
        .prompt(
            Prompt::new("test_prompt_with_embedded_resource", |args, _| {
                Ok(PromptResult::new(vec![
                    (
                        Role::User,
                        Content::Resource(ResourceContents::text(
                            args["resourceUri"].clone(),
                            "text/plain",
                            "Embedded resource content for testing.",
                        )),
                    ),
                    (Role::User, Content::text("Please process the embedded resource above.")),
                ]))
            })
            .description("A prompt that embeds a resource")
            .argument(PromptArgument::required("resourceUri", "URI of the resource to embed")),
        )
        .prompt(
            Prompt::new("test_prompt_with_image", |_, _| {
                Ok(PromptResult::new(vec![(Role::User, image()), (Role::User, Content::text("Please analyze the image above."))]))
            })
            .description("A prompt with image content"),
        )
        .prompt(
            Prompt::new("test_input_required_result_prompt", |_, ctx| {
                let answer = ctx.input(
                    InputRequest::elicit(json!({
                        "message": "What context should the prompt use?",
                        "requestedSchema": {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}
                    }))
                    .key("user_context"),
                )?;
                let context = content_field(&answer, "context");
                Ok(PromptResult::new(vec![(Role::User, Content::text(format!("Use this context: {context}")))]))
            })
            .description("A prompt that asks the user first (an input-required round)"),
        )
        .completion(CompletionRef::Prompt("test_prompt_with_arguments".into()), |req, _| {
            let candidates = ["paris", "park", "party", "test", "testValue1", "testValue2"];
            let values: Vec<String> =
                candidates.iter().filter(|c| c.starts_with(req.value.as_str())).map(|c| (*c).to_owned()).collect();
            Ok(Completion { total: Some(values.len() as u64), values, has_more: false })
        });
    for t in tools(peer_timeout) {
        b = b.tool(t);
    }
    let engine = Arc::new(OnceLock::new());
    for t in stateless_tools(engine.clone())
        .into_iter()
        .chain(task_tools())
    {
        b = b.tool(t);
    }
    // The skills extension's scenarios (SEP-2640) read these.
    b = b.skills_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/skills"));
    let server = b.build()?;
    let _ = engine.set(server.engine().clone());
    Ok(server)
}

/// Sleeps `seconds` unless the call (or task) is cancelled first; whether
/// it was.
fn sleep_or_cancel(ctx: &Context, seconds: f64) -> bool {
    let d = Duration::from_secs_f64(seconds.clamp(0.0, 600.0));
    !matches!(
        ctx.cancelled().recv_timeout(d),
        Err(crossbeam_channel::RecvTimeoutError::Timeout)
    ) || ctx.is_cancelled()
}

/// The tools of the tasks extension's scenarios (SEP-2663).
fn task_tools() -> Vec<Tool> {
    let seconds = json!({
        "type": "object",
        "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}
    });
    vec![
        Tool::new(
            "greet",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            |args, _| Ok(ToolResult::text(format!("Hello, {}!", args["name"].as_str().unwrap_or_default()))),
        )
        .description("Greets (never a task)"),
        Tool::new("slow_compute", seconds, |args, ctx| {
            let s = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
            if sleep_or_cancel(ctx, s) {
                return Err(ToolError::new("cancelled"));
            }
            let label = args.get("label").and_then(Value::as_str).unwrap_or("compute");
            Ok(ToolResult::text(format!("{label}: done after {s} s")))
        })
        .task_support(TaskSupport::Optional)
        .description("Works for `seconds` seconds (a task when the client can follow one)"),
        Tool::new("failing_job", no_args(), |_, ctx| {
            sleep_or_cancel(ctx, 1.0);
            Err(ToolError::new("the job failed (a tool error)"))
        })
        .task_support(TaskSupport::Required)
        .description("Fails after a second with a tool error (only as a task)"),
        Tool::new("protocol_error_job", no_args(), |_, ctx| {
            sleep_or_cancel(ctx, 0.5);
            Err(ToolError::rpc(mcpvisor::jsonrpc::ErrorObject::internal("the job hit an internal error")))
        })
        .task_support(TaskSupport::Optional)
        .description("Fails with a JSON-RPC error (a failed task)"),
        Tool::new(
            "confirm_delete",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}}),
            |args, ctx| {
                let file = args.get("filename").and_then(Value::as_str).unwrap_or("the file");
                let answer = ctx.input(InputRequest::elicit(json!({
                    "message": format!("Delete {file}?"),
                    "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}
                })))?;
                let yes = answer["action"] == "accept" && answer.pointer("/content/confirm") == Some(&json!(true));
                Ok(ToolResult::text(if yes { format!("{file} deleted") } else { format!("{file} kept") }))
            },
        )
        .task_support(TaskSupport::Optional)
        .description("Asks before deleting (in a task: through tasks/get and tasks/update)"),
        Tool::new("multi_input", no_args(), |_, ctx| {
            let answers = ctx.inputs(vec![
                ask_name("first", "First name?"),
                ask_name("second", "Second name?"),
            ])?;
            Ok(ToolResult::text(format!(
                "{} and {}",
                content_field(&answers[0], "name"),
                content_field(&answers[1], "name")
            )))
        })
        .task_support(TaskSupport::Optional)
        .description("Asks two questions at once"),
        Tool::new("test_tool_with_task", no_args(), |_, ctx| {
            // Asks first, as a plain call (input-required rounds), then goes
            // on as a task with the answer.
            let answer = ctx.input(ask_name("user_name", "What is your name?"))?;
            ctx.detach();
            sleep_or_cancel(ctx, 0.5);
            Ok(ToolResult::text(format!("Hello, {}! (from a task)", content_field(&answer, "name"))))
        })
        .task_support(TaskSupport::Required)
        .detach_in_handler()
        .description("Asks the user's name, then continues as a task"),
    ]
}

fn main() -> ExitCode {
    mcpvisor::init_logging("warn");
    let mut peer_timeout = Duration::from_secs(60);
    let mut listen = Listen::Stdio;
    #[allow(unused_mut)]
    let mut options = ListenOptions::default();
    // Every answer as SSE: the suite's multiple-streams check counts streams.
    #[cfg(feature = "http")]
    {
        options.http.response_mode = ResponseMode::SseOnly;
    }
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if let Some(l) = listen_flag(&arg, &mut args) {
            match l {
                Ok(l) => listen = l,
                Err(e) => return usage(&e),
            }
            continue;
        }
        match arg.as_str() {
            #[cfg(feature = "http")]
            "--response-mode" => {
                options.http.response_mode = match args.next().as_deref() {
                    Some("sse") => ResponseMode::SseOnly,
                    Some("json") => ResponseMode::JsonOnly,
                    Some("auto") => ResponseMode::Auto,
                    _ => return usage("--response-mode needs sse, json or auto"),
                }
            }
            "--peer-timeout-ms" => match args.next().and_then(|v| v.parse().ok()) {
                Some(ms) => peer_timeout = Duration::from_millis(ms),
                None => return usage("--peer-timeout-ms needs a number of milliseconds"),
            },
            other => return usage(&format!("unknown argument {other:?}")),
        }
    }
    let server = match build(peer_timeout) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let served = if listen == Listen::Stdio {
        server.serve_stdio()
    } else {
        server.start_with(&listen, &options).and_then(|running| {
            // The bound address (port 0 picks one), for scripts and tests.
            println!("listening on {}", running.listener());
            running.wait()
        })
    };
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance: {e}");
            ExitCode::FAILURE
        }
    }
}

fn usage(problem: &str) -> ExitCode {
    eprintln!("conformance: {problem}\nusage: conformance {LISTEN_USAGE} [--response-mode sse|json|auto] [--peer-timeout-ms N]");
    ExitCode::from(2)
}
