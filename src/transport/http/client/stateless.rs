//! The client side of stateless requests (2026-07-28): the SEP-2243
//! headers a request carries, taken from its body, and the tool
//! declarations that say which arguments a `tools/call` mirrors.

use crate::jsonrpc::RequestId;
use crate::model::{self, ParamHeader};
use crate::sync::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// The SEP-2243 headers of a stateless (2026-07-28) request, taken from
/// its body: its version, method and name, and for `tools/call` the
/// arguments the tool's schema mirrors (`params`, from its listing). None
/// for a session message.
pub(super) fn stateless_headers(message: &Value, params: &ParamBindings) -> Vec<(String, String)> {
    let p = message.get("params");
    let version = p
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(crate::protocol::stateless::META_PROTOCOL_VERSION))
        .and_then(Value::as_str);
    let (Some(version), Some(method)) = (version, message.get("method").and_then(Value::as_str))
    else {
        return Vec::new();
    };
    let mut h = vec![
        ("MCP-Protocol-Version".to_owned(), header_value(version)),
        ("Mcp-Method".to_owned(), header_value(method)),
    ];
    let field = crate::protocol::stateless::name_field(method);
    let name = field
        .and_then(|f| p.and_then(|p| p.get(f)))
        .and_then(Value::as_str);
    if let Some(name) = name {
        h.push(("Mcp-Name".to_owned(), header_value(name)));
    }
    if let (Some(name), Some(args)) = (name, p.and_then(|p| p.get("arguments"))) {
        if method == "tools/call" {
            for b in lock(params).get(name).into_iter().flatten() {
                if let Some(text) = b.argument(args).and_then(model::param_text) {
                    h.push((b.header_name(), header_value(&text)));
                }
            }
        }
    }
    h
}

/// The `x-mcp-header` declarations of the tools the server listed, by
/// tool name (SEP-2243): what a `tools/call` mirrors into headers.
pub(super) type ParamBindings = Mutex<HashMap<String, Vec<ParamHeader>>>;

/// Most tools whose declarations are remembered; past it the memory
/// starts over (a later listing fills it again).
const MAX_BOUND_TOOLS: usize = 4096;

/// Remembers the declarations of the tools in a `tools/list` result.
/// A tool whose declarations are invalid is not remembered (the client
/// drops it from its listing).
pub(super) fn learn_bindings(result: &Value, params: &ParamBindings) {
    let Some(tools) = result.get("tools").and_then(Value::as_array) else {
        return;
    };
    let mut known = lock(params);
    for t in tools {
        let (Some(name), Some(schema)) =
            (t.get("name").and_then(Value::as_str), t.get("inputSchema"))
        else {
            continue;
        };
        match model::param_headers(schema) {
            Ok(b) if !b.is_empty() => {
                if known.len() >= MAX_BOUND_TOOLS && !known.contains_key(name) {
                    known.clear();
                }
                known.insert(name.to_owned(), b);
            }
            _ => {
                known.remove(name);
            }
        }
    }
}

/// The id of a stateless (2026-07-28) call: a request whose `_meta` names
/// its protocol version.
pub(super) fn stateless_call(message: &Value) -> Option<RequestId> {
    message.get("method")?;
    message
        .get("params")?
        .get("_meta")?
        .get(crate::protocol::stateless::META_PROTOCOL_VERSION)?;
    message.get("id").and_then(RequestId::from_value)
}

/// A header value as SEP-2243 sends it: plain when it is visible ASCII
/// (and spaces) without whitespace at either end, else `=?base64?…?=`.
fn header_value(v: &str) -> String {
    let plain = v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && v.trim() == v
        && !(v.starts_with("=?base64?") && v.ends_with("?="));
    if plain {
        v.to_owned()
    } else {
        format!("=?base64?{}?=", crate::model::base64(v.as_bytes()))
    }
}
