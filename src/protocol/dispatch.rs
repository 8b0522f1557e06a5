//! Method routing and the server-side implementation of each MCP method.
//!
//! Cheap methods that run no user code are answered inline on the
//! transport's thread (so `ping`, `logging/setLevel` and the lists are never
//! queued behind slow tools); methods that call user handlers run on the pool,
//! but for a quick tool's calls (`ToolEntry::is_quick`), which run on the
//! transport's thread too.

use super::catalog::View;
use super::context::Context;
use super::pagination::{page, paged};
use super::session::Session;
use super::tasks;
use super::Engine;
use crate::jsonrpc::{excerpt, ErrorObject, Request, INVALID_PARAMS, RESOURCE_NOT_FOUND};
use crate::model::{Answer, CompletionRef, CompletionRequest, LogLevel, ProtocolVersion};
use serde_json::{json, Map, Value};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) type InlineHandler = fn(&Arc<Session>, &Request) -> Result<Value, ErrorObject>;
pub(crate) type PoolHandler = fn(&Context, Request) -> Result<Answer, ErrorObject>;

pub(crate) enum Route {
    Inline(InlineHandler),
    Pool(PoolHandler),
}

/// Where a method (other than `initialize` / `ping`) is served. Methods the
/// engine does not know go to the catalog's fallback when there is one.
pub(crate) fn route(session: &Session, method: &str) -> Route {
    match engine_route(method) {
        Some(route) => route,
        None if session.engine.catalog.fallback().is_some() => {
            Route::Pool(|c, r| fallback(c, r).map(Answer::Json))
        }
        None => Route::Inline(unknown),
    }
}

/// Whether the engine itself serves `method` (a custom method of that
/// name would never be reached).
pub(crate) fn is_engine_method(method: &str) -> bool {
    matches!(
        method,
        "initialize" | "ping" | "server/discover" | super::LISTEN
    ) || engine_route(method).is_some()
}

/// The engine's own methods that run on the pool (they call handlers),
/// each with what serves it.
static POOL_ROUTES: [(&str, PoolHandler); 4] = [
    ("tools/call", call_tool),
    ("resources/read", |c, r| {
        read_resource(c, r).map(Answer::Json)
    }),
    ("prompts/get", |c, r| get_prompt(c, r).map(Answer::Json)),
    ("completion/complete", |c, r| {
        complete(c, r).map(Answer::Json)
    }),
];

/// `method`, not copied when it is one of the engine's methods that run
/// on the pool (a request's context keeps its method's name: one
/// allocation less a call).
pub(crate) fn method_name(method: &str) -> Cow<'static, str> {
    match pool_route(method) {
        Some((m, _)) => Cow::Borrowed(m),
        None => Cow::Owned(method.to_owned()),
    }
}

/// `method`'s entry in [`POOL_ROUTES`].
fn pool_route(method: &str) -> Option<&'static (&'static str, PoolHandler)> {
    POOL_ROUTES.iter().find(|(m, _)| *m == method)
}

fn engine_route(method: &str) -> Option<Route> {
    if let Some((_, handler)) = pool_route(method) {
        return Some(Route::Pool(*handler));
    }
    Some(match method {
        "logging/setLevel" => Route::Inline(set_level),
        "tools/list" => Route::Inline(list_tools),
        "resources/list" => Route::Inline(list_resources),
        "resources/templates/list" => Route::Inline(list_templates),
        "prompts/list" => Route::Inline(list_prompts),
        "resources/subscribe" => Route::Inline(subscribe),
        "resources/unsubscribe" => Route::Inline(unsubscribe),
        "skills/list" => Route::Inline(super::skills::list),
        "skills/get" => Route::Inline(super::skills::get),
        "resources/directory/read" => Route::Inline(super::skills::read_directory),
        "tasks/get" => Route::Inline(tasks::methods::get),
        "tasks/update" => Route::Inline(tasks::methods::update),
        "tasks/cancel" => Route::Inline(tasks::methods::cancel),
        // The tasks of 2025-11-25 that the extension removed: never passed
        // to a fallback, which could answer them in the old shapes.
        "tasks/result" | "tasks/list" => Route::Inline(unknown),
        _ => return None,
    })
}

/// A request's params (`{}` when absent).
pub(crate) fn params(req: &Request) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    req.params().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// The string `key` of `p`, or -32602 saying it is required.
pub(crate) fn required_str<'a>(
    p: &'a Map<String, Value>,
    key: &str,
) -> Result<&'a str, ErrorObject> {
    p.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorObject::invalid_params(format!("params.{key} (a string) is required")))
}

/// `params.cursor`, if any (-32602 when not a string).
pub(crate) fn cursor(req: &Request) -> Result<Option<&str>, ErrorObject> {
    match params(req).get("cursor") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(c)) => Ok(Some(c)),
        Some(_) => Err(ErrorObject::invalid_params(
            "params.cursor must be a string",
        )),
    }
}

/// Rejects a method whose capability the server does not offer, and
/// never told the client (`told`) it offers: a list declared at
/// `initialize` stays served when it empties.
fn offered(engine: &Engine, told: bool, capability: &str, method: &str) -> Result<(), ErrorObject> {
    if told || engine.catalog.has_capability(capability) {
        Ok(())
    } else {
        Err(ErrorObject::method_not_found(method))
    }
}

pub(crate) fn initialize(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    session.awaits_initialize()?;
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
    let capabilities = engine.capabilities();
    // Told in whole: what it serves does not depend on the revision.
    session.told_capabilities(&capabilities);
    let capabilities = crate::model::adapt::capabilities(version, capabilities);
    result.insert("capabilities".into(), capabilities);
    let info = crate::model::adapt::implementation(version, engine.info.to_value());
    result.insert("serverInfo".into(), info);
    if let Some(i) = engine.instructions() {
        result.insert("instructions".into(), i.into());
    }
    log::info!(
        "session {}: initialized with protocol {version} (client asked for {requested})",
        session.log_name()
    );
    Ok(Value::Object(result))
}

/// `server/discover` (2026-07-28): versions, capabilities, instructions;
/// the server's info goes in the result's `_meta` as on every result.
pub(crate) fn discover(session: &Arc<Session>, _: &Request) -> Result<Value, ErrorObject> {
    let engine = &session.engine;
    let mut result = Map::new();
    result.insert(
        "supportedVersions".into(),
        json!(super::stateless::supported_versions()),
    );
    result.insert("capabilities".into(), engine.capabilities());
    if let Some(i) = engine.instructions() {
        result.insert("instructions".into(), i.into());
    }
    Ok(Value::Object(result))
}

pub(crate) fn ping(_: &Arc<Session>, _: &Request) -> Result<Value, ErrorObject> {
    Ok(json!({}))
}

fn unknown(_: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    Err(ErrorObject::method_not_found(req.method()))
}

fn fallback(ctx: &Context, req: Request) -> Result<Value, ErrorObject> {
    match ctx.engine().catalog.fallback() {
        Some(f) => f.handle(req.method(), req.params(), ctx),
        None => Err(ErrorObject::method_not_found(req.method())),
    }
}

fn set_level(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let name = required_str(params(req), "level")?;
    let level = LogLevel::parse(name).ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "unknown log level {}",
            excerpt(format!("{name:?}"))
        ))
    })?;
    session.set_log_level(level);
    Ok(json!({}))
}

fn listing(
    session: &Session,
    req: &Request,
    capability: &str,
    key: &str,
    select: impl FnOnce(&View, Option<&str>, usize) -> Result<(Vec<Value>, Option<String>), ErrorObject>,
) -> Result<Value, ErrorObject> {
    offered(
        &session.engine,
        session.was_told(capability),
        capability,
        req.method(),
    )?;
    let size = session.engine.options.page_size;
    let (items, next) = select(&session.engine.catalog.view(), cursor(req)?, size)?;
    Ok(paged(key, items, next))
}

fn list_tools(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "tools", "tools", |r, c, n| {
        page(&r.tools, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.definition.clone()).collect(), next))
    })
}

fn list_resources(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "resources", "resources", |r, c, n| {
        page(&r.resources, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.definition.clone()).collect(), next))
    })
}

fn list_templates(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "resources", "resourceTemplates", |r, c, n| {
        page(&r.templates, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.definition.clone()).collect(), next))
    })
}

fn list_prompts(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    listing(session, req, "prompts", "prompts", |r, c, n| {
        page(&r.prompts, c, n)
            .map(|(v, next)| (v.into_iter().map(|t| t.definition.clone()).collect(), next))
    })
}

fn subscription(session: &Arc<Session>, req: &Request, on: bool) -> Result<Value, ErrorObject> {
    let told = session.was_told("resources");
    offered(&session.engine, told, "resources", req.method())?;
    session.subscribe(required_str(params(req), "uri")?, on)?;
    Ok(json!({}))
}

fn subscribe(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    subscription(session, req, true)
}

fn unsubscribe(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    subscription(session, req, false)
}

/// Whether `req` calls a tool declared quick (`ToolEntry::is_quick`): it
/// runs on the thread that read it.
pub(crate) fn is_quick_call(session: &Session, req: &Request) -> bool {
    req.method() == "tools/call"
        && params(req)
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| {
                session
                    .engine
                    .catalog
                    .view()
                    .tools
                    .get(name)
                    .is_some_and(|t| t.entry.is_quick())
            })
}

fn call_tool(ctx: &Context, req: Request) -> Result<Answer, ErrorObject> {
    let p = params(&req);
    let name = required_str(p, "name")?;
    let tool = ctx.engine().catalog.view().tools.get(name).cloned();
    let tool = tool
        .ok_or_else(|| ErrorObject::invalid_params(format!("Unknown tool: {}", excerpt(name))))?;
    // The arguments are handed to the tool, not copied; taken out in place
    // (removing the entry shifts the ones after it: 100 instructions more).
    let taken = req
        .into_params()
        .and_then(|mut p| p.get_mut("arguments").map(Value::take));
    let arguments = match taken {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(v @ Value::Object(_)) => v,
        Some(_) => {
            return Err(ErrorObject::invalid_params(
                "params.arguments must be an object",
            ))
        }
    };
    let entry = &tool.entry;
    match tasks::plan(ctx, entry.task_support(), entry.detaches_itself()) {
        tasks::Plan::Refuse(e) => Err(e),
        tasks::Plan::Call => {
            if entry.detaches_itself() && entry.task_support() != tasks::TaskSupport::Forbidden {
                ctx.allow_detach();
            }
            entry.call(arguments, ctx)
        }
        tasks::Plan::Task => {
            let args = arguments.clone();
            let run_entry = tool.entry.clone();
            if let Some((created, task)) = tasks::start(ctx, move |c| run_entry.call(args, c)) {
                // A call cancelled before it is answered gets no answer, so
                // no one would learn of the task: it ends with the call
                // (`Context::finish`).
                ctx.started_task(task);
                return Ok(Answer::Json(created));
            }
            if entry.task_support() == tasks::TaskSupport::Required {
                return Err(ErrorObject::internal(
                    "this tool runs only as a task, and the server holds as many tasks as it can, in all or for this client; retry later",
                ));
            }
            // Storage full: the server decides, and this call runs plainly.
            entry.call(arguments, ctx)
        }
    }
}

fn read_resource(ctx: &Context, req: Request) -> Result<Value, ErrorObject> {
    let uri = required_str(params(&req), "uri")?;
    let view = ctx.engine().catalog.view();
    if let Some(r) = view.resources.get(uri) {
        return r.entry.read(uri, ctx);
    }
    // SEP-2164: since 2026-07-28 an unknown resource is invalid params.
    let code = if ctx.protocol().version.is_stateless() {
        INVALID_PARAMS
    } else {
        RESOURCE_NOT_FOUND
    };
    let template = view.templates.values().map(|t| &t.entry);
    match template.chain(&view.readers).find(|t| t.matches(uri)) {
        Some(t) => t.read(uri, ctx),
        None => Err(
            ErrorObject::new(code, format!("Resource not found: {}", excerpt(uri)))
                .with_data(json!({"uri": uri})),
        ),
    }
}

/// A map whose every value must be a string (prompt arguments, completion context).
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

fn get_prompt(ctx: &Context, req: Request) -> Result<Value, ErrorObject> {
    let p = params(&req);
    let name = required_str(p, "name")?;
    let prompt = ctx.engine().catalog.view().prompts.get(name).cloned();
    let prompt = prompt
        .ok_or_else(|| ErrorObject::invalid_params(format!("Unknown prompt: {}", excerpt(name))))?;
    string_map(p.get("arguments"), "params.arguments")?;
    let empty = Value::Object(Map::new());
    let arguments = match p.get("arguments") {
        Some(v @ Value::Object(_)) => v,
        _ => &empty,
    };
    prompt.entry.get(arguments, ctx)
}

fn complete(ctx: &Context, req: Request) -> Result<Value, ErrorObject> {
    offered(
        ctx.engine(),
        ctx.was_told("completions"),
        "completions",
        req.method(),
    )?;
    let p = params(&req);
    let r = p
        .get("ref")
        .and_then(Value::as_object)
        .ok_or_else(|| ErrorObject::invalid_params("params.ref (an object) is required"))?;
    let reference = match required_str(r, "type")? {
        "ref/prompt" => CompletionRef::Prompt(required_str(r, "name")?.to_owned()),
        "ref/resource" => CompletionRef::Resource(required_str(r, "uri")?.to_owned()),
        other => {
            return Err(ErrorObject::invalid_params(format!(
                "unknown ref type {}",
                excerpt(format!("{other:?}"))
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
    let view = ctx.engine().catalog.view();
    if let Some(e) = view.completions.get(&reference).cloned() {
        drop(view);
        // A provider of any kind (a gateway's upstream, a source of the
        // caller's) is held to the spec's 100 values, as local ones are.
        return e.complete(&reference, &request, ctx).map(|mut result| {
            if let Some(c) = result
                .get("completion")
                .and_then(crate::model::Completion::from_value)
            {
                result["completion"] = c.to_value();
            }
            result
        });
    }
    // Something served without a provider completes to nothing; what is
    // not served at all is an invalid reference (the spec's -32602).
    let known = match &reference {
        CompletionRef::Prompt(name) => view.prompts.contains_key(name),
        CompletionRef::Resource(uri) => {
            view.templates.contains_key(uri) || view.resources.contains_key(uri)
        }
    };
    if !known {
        return Err(ErrorObject::invalid_params(match &reference {
            CompletionRef::Prompt(name) => format!("Unknown prompt: {}", excerpt(name)),
            CompletionRef::Resource(uri) => {
                format!("Unknown resource or template: {}", excerpt(uri))
            }
        }));
    }
    Ok(json!({"completion": crate::model::Completion::default().to_value()}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_method_routes_to_the_pool_and_its_name_is_not_copied() {
        for &(m, _) in &POOL_ROUTES {
            assert!(matches!(engine_route(m), Some(Route::Pool(_))), "{m}");
            assert!(matches!(method_name(m), Cow::Borrowed(b) if b == m), "{m}");
        }
        for m in ["tools/list", "tools/cal", "tools/call ", "x/y"] {
            assert!(!matches!(engine_route(m), Some(Route::Pool(_))), "{m}");
            assert!(matches!(method_name(m), Cow::Owned(ref o) if o == m), "{m}");
        }
    }
}
