//! Catalog entries that stand for an upstream's tools, prompts, resources
//! and templates: each call is relayed to the upstream with our own id,
//! carrying the downstream request's cancellation, its progress (which
//! restarts the call's timeout) and the upstream's requests during the
//! call (sampling, elicitation, roots), which go to the session that made
//! the call.

use super::names;
use crate::client::{CallOptions, Client, ClientError};
use crate::jsonrpc::ErrorObject;
use crate::model::{is_reserved_meta_key, Answer, CompletionRef, CompletionRequest, ToolResult};
use crate::protocol::catalog::{
    CompletionEntry, PromptEntry, ResourceEntry, TemplateEntry, ToolEntry,
};
use crate::protocol::{
    capability_for, CancelToken, PeerError, PeerRequestHandler, ProgressHandler,
};
use crate::Context;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// One running connection to an upstream.
pub(crate) struct Link {
    /// The upstream's key (in messages).
    pub name: String,
    pub namespace: String,
    pub client: Client,
    /// Per-call timeout (restarted by progress).
    pub timeout: Duration,
    /// Largest tool result passed on whole (as JSON).
    pub max_output_bytes: usize,
    /// Whether its tools' calls may run as tasks here (`task`).
    pub task: crate::protocol::tasks::TaskSupport,
}

/// Where an entry's requests go: the upstream's one shared connection, or
/// (`perSession`) the calling session's own.
pub(crate) struct Route {
    /// The shared connection (the lists come from it).
    pub shared: Arc<Link>,
    /// The per-session connections, for a `perSession` upstream.
    pub sessions: Option<Arc<super::sessions::Sessions>>,
}

impl Route {
    fn relay(&self, method: &str, params: Value, ctx: &Context) -> Result<Value, Relay> {
        match &self.sessions {
            // A stateless (2026-07-28) request has no session to give a
            // connection of its own, and the shared one must not mix what
            // one user's connection holds with another's.
            Some(_) if ctx.protocol().version.is_stateless() => Err(Relay::Failed(format!(
                "upstream {}: perSession: it serves session clients only (a stateless \
                 2026-07-28 request has no session to give a connection of its own)",
                self.shared.name
            ))),
            None => self.shared.relay(method, params, ctx),
            Some(s) => s
                .link(ctx)
                .map_err(Relay::Failed)?
                .relay(method, params, ctx),
        }
    }

    fn namespace(&self) -> &str {
        &self.shared.namespace
    }
}

/// A result without what names the upstream's generation and software
/// (a stateless upstream's `resultType` and `_meta` server info): the
/// gateway's own are added as its clients' generation asks.
fn upstream_marks_removed(mut result: Value) -> Value {
    if let Some(r) = result.as_object_mut() {
        r.remove("resultType");
        remove_within(r, "_meta", crate::protocol::stateless::META_SERVER_INFO);
    }
    result
}

/// Removes `inner` from the object at `outer` in `map`, and `outer` too
/// when nothing is left in it.
pub(super) fn remove_within(map: &mut Map<String, Value>, outer: &str, inner: &str) {
    let emptied = map
        .get_mut(outer)
        .and_then(Value::as_object_mut)
        .is_some_and(|o| {
            o.remove(inner);
            o.is_empty()
        });
    if emptied {
        map.remove(outer);
    }
}

/// Why a relayed request failed.
enum Relay {
    /// The upstream answered with an error: passed on as it is.
    Rpc(ErrorObject),
    /// No answer (the upstream is gone, timed out, or the call was
    /// cancelled): said in the upstream's name.
    Failed(String),
}

impl Link {
    /// `method` with `params` on the upstream, on behalf of `ctx`.
    fn relay(&self, method: &str, mut params: Value, ctx: &Context) -> Result<Value, Relay> {
        pass_meta(&mut params, ctx.meta());
        // One copy of the context serves both callbacks. What the upstream
        // asks the client during the call ends with the call (or with the
        // caller's cancellation, which ends the call), or when the upstream
        // withdraws it.
        let scope = CancelToken::new();
        ctx.cancel_token().cancels(&scope);
        let relayed = Arc::new(ctx.with_cancel(scope.clone()));
        // Progress only when the caller asked for it (its token).
        let asked = ctx.meta().is_some_and(|m| m.contains_key("progressToken"));
        let progress: Option<ProgressHandler> = asked.then(|| {
            let relayed = relayed.clone();
            Arc::new(move |p: f64, total: Option<f64>, message: Option<&str>| {
                relayed.progress(p, total, message);
            }) as ProgressHandler
        });
        let timeout = self.timeout;
        let ends = scope.clone();
        let session = ctx.session();
        let on_request: PeerRequestHandler = Arc::new(move |method, params| {
            // Roots are the session's, not the call's: asked on the
            // session's own stream, they are answered also when the call
            // ends first (an upstream asking as it starts, during the call
            // that started it). A stateless request has no session: asked
            // as a question of the call.
            if let (Some(session), "roots/list") = (&session, method) {
                return session
                    .request(method, params, timeout)
                    .map_err(super::upstream::relayed_error);
            }
            // Only what a server may ask its client is asked on; the
            // client would take anything else as the gateway's own.
            let Some(capability) = capability_for(method) else {
                return Err(ErrorObject::method_not_found(method));
            };
            // The question ends with the call, or when the upstream
            // withdraws it (its `notifications/cancelled`): the client is
            // told either way.
            let question = CancelToken::new();
            ends.cancels(&question);
            if let Some(withdrawn) = crate::client::callback_cancel_token() {
                withdrawn.cancels(&question);
            }
            let asked = relayed.with_cancel(question).peer_request(
                method,
                params,
                Some(capability),
                timeout,
            );
            // A stateless client answers in its retry, which makes the
            // call again: this one is cancelled now (the upstream is
            // told), rather than left to go on without the answer and do
            // its work twice.
            if matches!(asked, Err(PeerError::InputRequired)) {
                // What the upstream asks next is not of this call's.
                crate::protocol::excuse_the_call();
                ends.cancel();
            }
            asked.map_err(super::upstream::relayed_error)
        });
        let options = CallOptions {
            timeout: Some(self.timeout),
            progress,
            cancel: Some(scope.clone()),
            on_request: Some(on_request),
        };
        let result = self.client.request_with(method, params, options);
        scope.cancel();
        result.map(upstream_marks_removed).map_err(|e| match e {
            ClientError::Rpc(e) => Relay::Rpc(e),
            other => Relay::Failed(format!("upstream {}: {other}", self.name)),
        })
    }
}

/// Copies the downstream request's `_meta` into the relayed `params`:
/// what a client adds (trace context, its own keys) reaches the upstream,
/// as the upstream's `_meta` comes back. Not the progress token (the
/// upstream client gives its own), nor keys of a prefix MCP reserves (a
/// label `modelcontextprotocol` or `mcp`): those belong to one hop.
fn pass_meta(params: &mut Value, meta: Option<&Map<String, Value>>) {
    let (Some(meta), Some(params)) = (meta, params.as_object_mut()) else {
        return;
    };
    let passed: Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| k.as_str() != "progressToken" && !is_reserved_meta_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !passed.is_empty() {
        params.insert("_meta".into(), Value::Object(passed));
    }
}

/// An upstream's tool as the gateway lists it.
pub(crate) struct Tool {
    pub definition: Value,
    pub original: String,
    pub route: Arc<Route>,
}

impl ToolEntry for Tool {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn task_support(&self) -> crate::protocol::tasks::TaskSupport {
        self.route.shared.task
    }
    fn call(&self, arguments: Value, ctx: &Context) -> Result<Answer, ErrorObject> {
        // The arguments are moved in (`json!` would copy them).
        let mut params = Map::with_capacity(2);
        params.insert("name".into(), self.original.clone().into());
        params.insert("arguments".into(), arguments);
        match self.route.relay("tools/call", Value::Object(params), ctx) {
            Ok(mut v) => {
                let Some(content) = v.get_mut("content").filter(|c| c.is_array()) else {
                    // Not a CallToolResult: nothing of it is passed on.
                    let upstream = &self.route.shared.name;
                    log::warn!(
                        "upstream {upstream}: tools/call {}: a result without a content list dropped",
                        self.original
                    );
                    return Ok(Answer::Tool(ToolResult::error(format!(
                        "upstream {upstream}: its result for {} has no content list",
                        self.original
                    ))));
                };
                ours(content, self.route.namespace());
                Ok(Answer::Json(cut(
                    v,
                    self.route.shared.max_output_bytes,
                    &self.route.shared.name,
                )))
            }
            Err(Relay::Rpc(e)) => Err(e),
            // A tool error the model can read, naming the upstream.
            Err(Relay::Failed(m)) => Ok(Answer::Tool(ToolResult::error(m))),
        }
    }
}

/// An upstream's prompt.
pub(crate) struct Prompt {
    pub definition: Value,
    pub original: String,
    pub route: Arc<Route>,
}

impl PromptEntry for Prompt {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn get(&self, arguments: &Value, ctx: &Context) -> Result<Value, ErrorObject> {
        let params = json!({"name": self.original, "arguments": arguments});
        let mut result = self
            .route
            .relay("prompts/get", params, ctx)
            .map_err(into_error)?;
        if let Some(messages) = result.get_mut("messages").and_then(Value::as_array_mut) {
            for content in messages.iter_mut().filter_map(|m| m.get_mut("content")) {
                ours(content, self.route.namespace());
            }
        }
        Ok(result)
    }
}

/// An upstream's resource.
pub(crate) struct Resource {
    pub definition: Value,
    pub original: String,
    pub route: Arc<Route>,
}

impl ResourceEntry for Resource {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn read(&self, _uri: &str, ctx: &Context) -> Result<Value, ErrorObject> {
        read(&self.route, &self.original, ctx)
    }
}

/// An upstream's resource template.
pub(crate) struct Template {
    pub definition: Value,
    pub route: Arc<Route>,
}

impl TemplateEntry for Template {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn matches(&self, uri: &str) -> bool {
        names::split_uri(uri).is_some_and(|(ns, _)| ns == self.route.namespace())
    }
    fn read(&self, uri: &str, ctx: &Context) -> Result<Value, ErrorObject> {
        let (_, original) = names::split_uri(uri)
            .ok_or_else(|| ErrorObject::invalid_params(format!("{uri}: not this upstream's")))?;
        read(&self.route, original, ctx)
    }
}

/// `resources/read` upstream, with the contents' URIs made ours again.
fn read(route: &Route, original: &str, ctx: &Context) -> Result<Value, ErrorObject> {
    let mut result = route
        .relay("resources/read", json!({"uri": original}), ctx)
        .map_err(into_error)?;
    if let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) {
        for c in contents {
            if let Some(u) = c.get("uri").and_then(Value::as_str) {
                let public = names::public_uri(route.namespace(), u);
                c["uri"] = Value::String(public);
            }
        }
    }
    Ok(result)
}

/// `result` as it is when its JSON fits in `max` bytes; otherwise its
/// text, cut to fit, with a note saying so (other content and
/// `structuredContent` are left out), as a tool error: what is left is
/// not the tool's result (nor would it meet an output schema).
fn cut(result: Value, max: usize, upstream: &str) -> Value {
    let size = json_len(&result);
    if size <= max {
        return result;
    }
    let mut text: String = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n");
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!(
        "\n[cut by the gateway: the result of upstream {upstream} was {size} bytes, more than maxOutputBytes {max}]"
    ));
    json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    })
}

/// Makes the upstream's URIs in content blocks (`resource_link`, an
/// embedded `resource`; one block or a list) ours, so that reading them
/// reaches the upstream again, and so that no upstream can label what it
/// returns as another's resource (or the daemon's own).
fn ours(content: &mut Value, namespace: &str) {
    let blocks: Vec<&mut Value> = match content {
        Value::Array(list) => list.iter_mut().collect(),
        block @ Value::Object(_) => vec![block],
        _ => return,
    };
    for block in blocks {
        let uri = match block.get("type").and_then(Value::as_str) {
            Some("resource_link") => block.get_mut("uri"),
            Some("resource") => block.get_mut("resource").and_then(|r| r.get_mut("uri")),
            _ => None,
        };
        if let Some(u) = uri {
            if let Some(original) = u.as_str() {
                *u = Value::String(names::public_uri(namespace, original));
            }
        }
    }
}

/// Completions of an upstream's prompt arguments or template variables.
pub(crate) struct Completions {
    /// The upstream's own reference (its prompt name or URI template).
    pub original: CompletionRef,
    pub route: Arc<Route>,
}

impl Completions {
    /// Completes `original` on the upstream of `route`.
    pub fn of(original: CompletionRef, route: &Arc<Route>) -> Arc<Completions> {
        Arc::new(Completions {
            original,
            route: route.clone(),
        })
    }
}

impl CompletionEntry for Completions {
    fn complete(
        &self,
        _reference: &CompletionRef,
        request: &CompletionRequest,
        ctx: &Context,
    ) -> Result<Value, ErrorObject> {
        let reference = match &self.original {
            CompletionRef::Prompt(name) => json!({"type": "ref/prompt", "name": name}),
            CompletionRef::Resource(uri) => json!({"type": "ref/resource", "uri": uri}),
        };
        let mut params = json!({
            "ref": reference,
            "argument": {"name": request.argument, "value": request.value},
        });
        if !request.context.is_empty() {
            params["context"] = json!({"arguments": request.context});
        }
        self.route
            .relay("completion/complete", params, ctx)
            .map_err(into_error)
    }
}

/// The length of `v` as JSON, counted without building the text (every
/// relayed result is measured).
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, v);
    n.0
}

fn into_error(r: Relay) -> ErrorObject {
    match r {
        Relay::Rpc(e) => e,
        Relay::Failed(m) => ErrorObject::internal(m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_in_content_blocks_become_ours() {
        let mut content = json!([
            {"type": "resource_link", "uri": "file:///a", "name": "a"},
            {"type": "resource", "resource": {"uri": "test://b", "text": "b"}},
            {"type": "text", "text": "file:///c"},
        ]);
        ours(&mut content, "fs");
        assert_eq!(content[0]["uri"], "mcpvisor://fs/file:///a");
        assert_eq!(content[1]["resource"]["uri"], "mcpvisor://fs/test://b");
        assert_eq!(content[2]["text"], "file:///c");
        let mut one = json!({"type": "resource_link", "uri": "x:y"});
        ours(&mut one, "n");
        assert_eq!(one["uri"], "mcpvisor://n/x:y");
    }

    #[test]
    fn an_oversized_result_is_cut_with_a_note_and_a_small_one_passes_whole() {
        let small = json!({"content": [{"type": "text", "text": "ok"}], "_meta": {"x": 1}});
        assert_eq!(cut(small.clone(), 1000, "u"), small);
        assert_eq!(json_len(&small), small.to_string().len());
        let big = json!({"content": [{"type": "text", "text": "é".repeat(600)}], "structuredContent": {"a": 1}});
        let r = cut(big, 501, "u");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(&"é".repeat(250)), "{text}");
        assert!(
            text.contains("cut by the gateway") && text.contains("upstream u"),
            "{text}"
        );
        assert!(r.get("structuredContent").is_none());
        assert_eq!(r["isError"], true, "what is left is not the tool's result");
    }

    #[test]
    fn an_upstream_s_generation_and_software_are_not_passed_on() {
        let from_upstream = json!({"content": [], "resultType": "complete",
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "up"}}});
        assert_eq!(
            upstream_marks_removed(from_upstream),
            json!({"content": []})
        );
        let own_meta = json!({"content": [], "_meta": {"x": 1,
            "io.modelcontextprotocol/serverInfo": {"name": "up"}}});
        assert_eq!(
            upstream_marks_removed(own_meta),
            json!({"content": [], "_meta": {"x": 1}})
        );
    }

    #[test]
    fn a_request_s_own_meta_is_relayed_but_not_what_belongs_to_one_hop() {
        let meta = json!({
            "traceparent": "00-1-2-01",
            "com.example/k": 1,
            "progressToken": 7,
            "io.modelcontextprotocol/clientInfo": {},
            "mcp.dev/x": 2,
            "example.mcpish.com/y": 3,
        });
        let mut params = json!({"name": "t"});
        pass_meta(&mut params, meta.as_object());
        assert_eq!(
            params["_meta"],
            json!({"traceparent": "00-1-2-01", "com.example/k": 1, "example.mcpish.com/y": 3})
        );
        let mut bare = json!({"name": "t"});
        pass_meta(&mut bare, Some(&Map::new()));
        assert_eq!(bare, json!({"name": "t"}));
    }
}
