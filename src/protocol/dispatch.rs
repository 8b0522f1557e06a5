//! Method routing and the server-side implementation of each MCP method.
//!
//! Cheap methods that run no user code are answered inline on the
//! transport's thread (so `ping`, `logging/setLevel` and the lists are never
//! queued behind slow tools); methods that call user handlers run on the pool.

use super::context::Context;
use super::logging::LogLevel;
use super::pagination::page;
use super::session::Session;
use super::version::ProtocolVersion;
use crate::jsonrpc::{ErrorObject, Request, RESOURCE_NOT_FOUND};
use crate::server::registry::check;
use crate::server::tool::ErrorKind;
use crate::server::{CompletionRef, CompletionRequest};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) type InlineHandler = fn(&Arc<Session>, &Request) -> Result<Value, ErrorObject>;
pub(crate) type PoolHandler = fn(&Context, &Request) -> Result<Value, ErrorObject>;

pub(crate) enum Route {
    Inline(InlineHandler),
    Pool(PoolHandler),
    Unknown,
}

/// Where a method (other than `initialize` / `ping`) is served.
pub(crate) fn route(method: &str) -> Route {
    match method {
        "logging/setLevel" => Route::Inline(set_level),
        "tools/list" => Route::Inline(list_tools),
        "resources/list" => Route::Inline(list_resources),
        "resources/templates/list" => Route::Inline(list_templates),
        "prompts/list" => Route::Inline(list_prompts),
        "resources/subscribe" => Route::Inline(subscribe),
        "resources/unsubscribe" => Route::Inline(unsubscribe),
        "tools/call" => Route::Pool(call_tool),
        "resources/read" => Route::Pool(read_resource),
        "prompts/get" => Route::Pool(get_prompt),
        "completion/complete" => Route::Pool(complete),
        _ => Route::Unknown,
    }
}

fn params(req: &Request) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    req.params().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn required_str<'a>(p: &'a Map<String, Value>, key: &str) -> Result<&'a str, ErrorObject> {
    p.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorObject::invalid_params(format!("params.{key} (a string) is required")))
}

fn cursor(req: &Request) -> Result<Option<&str>, ErrorObject> {
    match params(req).get("cursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => Ok(Some(c)),
        Some(_) => Err(ErrorObject::invalid_params(
            "params.cursor must be a string",
        )),
    }
}

/// Rejects a method whose capability the server does not offer.
fn offered(session: &Session, capability: &str, method: &str) -> Result<(), ErrorObject> {
    if session.engine.registry().has_capability(capability) {
        Ok(())
    } else {
        Err(ErrorObject::method_not_found(method))
    }
}

pub(crate) fn initialize(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let p = req
        .params()
        .ok_or_else(|| ErrorObject::invalid_params("initialize requires params"))?;
    let requested = required_str(p, "protocolVersion")?;
    let capabilities = p
        .get("capabilities")
        .filter(|c| c.is_object())
        .ok_or_else(|| {
            ErrorObject::invalid_params("params.capabilities (an object) is required")
        })?;
    let client_info = p
        .get("clientInfo")
        .filter(|c| c.get("name").is_some_and(Value::is_string))
        .ok_or_else(|| {
            ErrorObject::invalid_params("params.clientInfo (an object with a name) is required")
        })?;
    let version = ProtocolVersion::negotiate(requested);
    session.initialized(version, capabilities, client_info)?;
    let engine = &session.engine;
    let mut result = Map::new();
    result.insert("protocolVersion".into(), version.as_str().into());
    result.insert("capabilities".into(), engine.registry().capabilities());
    result.insert("serverInfo".into(), engine.info.to_value());
    if let Some(i) = &engine.info.instructions {
        result.insert("instructions".into(), i.as_str().into());
    }
    log::info!(
        "session {}: initialized with protocol {version} (client asked for {requested})",
        session.id()
    );
    Ok(Value::Object(result))
}

pub(crate) fn ping(_: &Arc<Session>, _: &Request) -> Result<Value, ErrorObject> {
    Ok(json!({}))
}

fn set_level(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let name = required_str(params(req), "level")?;
    let level = LogLevel::parse(name)
        .ok_or_else(|| ErrorObject::invalid_params(format!("unknown log level {name:?}")))?;
    session.set_log_level(level);
    Ok(json!({}))
}

fn listing(
    session: &Session,
    req: &Request,
    capability: &str,
    key: &str,
    select: impl FnOnce(
        &crate::server::registry::Registry,
        Option<&str>,
        usize,
    ) -> Result<(Vec<Value>, Option<String>), ErrorObject>,
) -> Result<Value, ErrorObject> {
    offered(session, capability, req.method())?;
    let size = session.engine.options.page_size;
    let (items, next) = select(&session.engine.registry(), cursor(req)?, size)?;
    let mut m = Map::new();
    m.insert(key.into(), Value::Array(items));
    if let Some(n) = next {
        m.insert("nextCursor".into(), n.into());
    }
    Ok(Value::Object(m))
}

fn list_tools(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "tools", "tools", |r, c, n| {
        page(&r.tools, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.listing.clone()).collect(), next))
    })
}

fn list_resources(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "resources", "resources", |r, c, n| {
        page(&r.resources, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.listing()).collect(), next))
    })
}

fn list_templates(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "resources", "resourceTemplates", |r, c, n| {
        page(&r.templates, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.listing()).collect(), next))
    })
}

fn list_prompts(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "prompts", "prompts", |r, c, n| {
        page(&r.prompts, c, n).map(|(v, next)| (v.into_iter().map(|t| t.listing()).collect(), next))
    })
}

fn subscription(session: &Arc<Session>, req: &Request, on: bool) -> Result<Value, ErrorObject> {
    offered(session, "resources", req.method())?;
    session.subscribe(required_str(params(req), "uri")?, on);
    Ok(json!({}))
}

fn subscribe(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    subscription(session, req, true)
}

fn unsubscribe(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    subscription(session, req, false)
}

fn call_tool(ctx: &Context, req: &Request) -> Result<Value, ErrorObject> {
    let p = params(req);
    let name = required_str(p, "name")?;
    let tool = ctx.session().engine.registry().tools.get(name).cloned();
    let tool = tool.ok_or_else(|| ErrorObject::invalid_params(format!("Unknown tool: {name}")))?;
    // Validate the arguments where they are; copy them only once valid.
    let empty = Value::Object(Map::new());
    let raw = match p.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(ErrorObject::invalid_params(
                "params.arguments must be an object",
            ))
        }
    };
    tool.check_arguments(raw).map_err(|e| {
        ErrorObject::invalid_params(format!("Invalid arguments for tool {name}: {e}"))
    })?;
    let args = raw.as_object().cloned().unwrap_or_default();
    match (tool.tool.handler)(args, ctx) {
        Ok(result) => {
            if let (Some(v), false) = (&tool.output, result.is_error) {
                let structured = result.structured_content.as_ref().ok_or_else(|| {
                    ErrorObject::internal(format!(
                        "tool {name} declares an outputSchema but returned no structuredContent"
                    ))
                })?;
                check(v, structured).map_err(|e| {
                    ErrorObject::internal(format!("tool {name} returned structuredContent that violates its outputSchema: {e}"))
                })?;
            }
            Ok(result.to_value())
        }
        Err(e) => match e.0 {
            ErrorKind::Failed(m) => Ok(crate::server::ToolResult::error(m).to_value()),
            ErrorKind::Rpc(e) => Err(e),
        },
    }
}

fn read_resource(ctx: &Context, req: &Request) -> Result<Value, ErrorObject> {
    let uri = required_str(params(req), "uri")?;
    let (fixed, template) = {
        let reg = ctx.session().engine.registry();
        let fixed = reg.resources.get(uri).cloned();
        let template = match fixed {
            Some(_) => None,
            None => reg
                .templates
                .values()
                .find_map(|t| t.matcher.matches(uri).map(|vars| (t.clone(), vars))),
        };
        (fixed, template)
    };
    let contents = match (fixed, template) {
        (Some(r), _) => (r.handler)(uri, ctx),
        (None, Some((t, vars))) => (t.handler)(uri, &vars, ctx),
        (None, None) => {
            return Err(
                ErrorObject::new(RESOURCE_NOT_FOUND, format!("Resource not found: {uri}"))
                    .with_data(json!({"uri": uri})),
            )
        }
    }
    .map_err(|e| e.into_rpc())?;
    Ok(json!({"contents": contents.iter().map(|c| c.to_value()).collect::<Vec<_>>()}))
}

fn string_map(v: Option<&Value>, what: &str) -> Result<HashMap<String, String>, ErrorObject> {
    match v {
        None | Some(Value::Null) => Ok(HashMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(ErrorObject::invalid_params(format!(
                    "{what}.{k} must be a string"
                ))),
            })
            .collect(),
        Some(_) => Err(ErrorObject::invalid_params(format!(
            "{what} must be an object"
        ))),
    }
}

fn get_prompt(ctx: &Context, req: &Request) -> Result<Value, ErrorObject> {
    let p = params(req);
    let name = required_str(p, "name")?;
    let prompt = ctx.session().engine.registry().prompts.get(name).cloned();
    let prompt =
        prompt.ok_or_else(|| ErrorObject::invalid_params(format!("Unknown prompt: {name}")))?;
    let args = string_map(p.get("arguments"), "params.arguments")?;
    if let Some(missing) = prompt
        .arguments
        .iter()
        .find(|a| a.required && !args.contains_key(&a.name))
    {
        return Err(ErrorObject::invalid_params(format!(
            "prompt {name}: missing required argument {:?}",
            missing.name
        )));
    }
    (prompt.handler)(&args, ctx)
        .map(|r| r.to_value())
        .map_err(|e| e.into_rpc())
}

fn complete(ctx: &Context, req: &Request) -> Result<Value, ErrorObject> {
    offered(ctx.session(), "completions", req.method())?;
    let p = params(req);
    let r = p
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| ErrorObject::invalid_params("params.ref (an object) is required"))?;
    let reference = match required_str(r, "type")? {
        "ref/prompt" => CompletionRef::Prompt(required_str(r, "name")?.to_owned()),
        "ref/resource" => CompletionRef::Resource(required_str(r, "uri")?.to_owned()),
        other => {
            return Err(ErrorObject::invalid_params(format!(
                "unknown ref type {other:?}"
            )))
        }
    };
    let arg = p
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| ErrorObject::invalid_params("params.argument (an object) is required"))?;
    let request = CompletionRequest {
        argument: required_str(arg, "name")?.to_owned(),
        value: required_str(arg, "value")?.to_owned(),
        context: string_map(
            p.get("context").and_then(|c| c.get("arguments")),
            "params.context.arguments",
        )?,
    };
    let handler = ctx
        .session()
        .engine
        .registry()
        .completions
        .get(&reference)
        .cloned();
    let completion = match handler {
        Some(h) => h(&request, ctx).map_err(|e| e.into_rpc())?,
        None => Default::default(),
    };
    Ok(json!({"completion": completion.to_value()}))
}
