//! The client side of the 2026-07-28 revision (stateless MCP): choosing a
//! generation at connect time, the `_meta` every request carries, and
//! answering input-required results by retrying with the answers.

use crate::jsonrpc::ErrorObject;
use crate::protocol::stateless::{
    META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_PROTOCOL_VERSION,
    META_SERVER_INFO,
};
use crate::protocol::PeerRequestHandler;
use crate::ProtocolVersion;
use serde_json::{json, Map, Value};

/// Most input-required rounds one call may take before the client gives up.
pub const MAX_INPUT_ROUNDS: usize = 16;

/// Which protocol generation a client speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Generation {
    /// `initialize` and a session (2024-11-05 … 2025-11-25); the default.
    #[default]
    Sessions,
    /// `server/discover` first; stateless (2026-07-28) when the server
    /// answers it with a version this client speaks, else `initialize`.
    Auto,
    /// Stateless (2026-07-28) only: connecting fails if the server does
    /// not answer `server/discover`.
    Stateless,
}

/// The `_meta` a stateless request carries (before per-call keys).
pub(crate) fn envelope(capabilities: &Value, client_info: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        META_PROTOCOL_VERSION.into(),
        ProtocolVersion::V2026_07_28.as_str().into(),
    );
    m.insert(META_CLIENT_CAPABILITIES.into(), capabilities.clone());
    m.insert(META_CLIENT_INFO.into(), client_info.clone());
    m
}

/// `params` with `meta` merged into its `_meta` (keys already there win:
/// a caller's own `_meta` entries are kept).
pub(crate) fn with_meta(params: Value, meta: &Map<String, Value>) -> Value {
    let mut p = match params {
        Value::Object(p) => p,
        _ => Map::new(),
    };
    let entry = p.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = entry.as_object_mut() {
        for (k, v) in meta {
            m.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    Value::Object(p)
}

/// Sets (or with `None` clears) the per-request log level of `meta`.
pub(crate) fn set_log_level(meta: &mut Map<String, Value>, level: Option<crate::LogLevel>) {
    match level {
        Some(l) => {
            meta.insert(META_LOG_LEVEL.into(), l.as_str().into());
        }
        None => {
            meta.remove(META_LOG_LEVEL);
        }
    }
}

/// What a `server/discover` answer says, shaped like an initialize result
/// (`serverInfo`, `capabilities`, `instructions`), if the server speaks a
/// stateless version this client does.
pub(crate) fn adopt(discovered: &Value) -> Option<Value> {
    let speaks = discovered
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|v| v == ProtocolVersion::V2026_07_28.as_str()));
    if !speaks {
        return None;
    }
    let info = discovered
        .pointer(&format!("/_meta/{}", META_SERVER_INFO.replace('/', "~1")))
        .or_else(|| discovered.get("serverInfo"))
        .cloned()
        .unwrap_or(Value::Null);
    let mut init = Map::new();
    init.insert(
        "protocolVersion".into(),
        ProtocolVersion::V2026_07_28.as_str().into(),
    );
    init.insert("serverInfo".into(), info);
    init.insert(
        "capabilities".into(),
        discovered.get("capabilities").cloned().unwrap_or(json!({})),
    );
    if let Some(i) = discovered.get("instructions") {
        init.insert("instructions".into(), i.clone());
    }
    Some(Value::Object(init))
}

/// Whether a refused `server/discover` is worth one retry: -32022 listing
/// the version this client speaks.
pub(crate) fn may_retry(e: &ErrorObject) -> bool {
    e.code == crate::jsonrpc::UNSUPPORTED_PROTOCOL_VERSION
        && e.data
            .as_ref()
            .and_then(|d| d.get("supported"))
            .and_then(Value::as_array)
            .is_some_and(|s| s.iter().any(|v| v == ProtocolVersion::V2026_07_28.as_str()))
}

/// Whether a result asks for input before the request can complete.
pub(crate) fn input_required(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}

/// The retry of a request whose answer was `asked` (an input-required
/// result): `params` with `inputResponses` answered by `answer`, and the
/// server's `requestState` echoed exactly (absent when it sent none).
/// The first failure fails the retry; with `ask_all`, only after every
/// question was put (a gateway relaying them to its own stateless client
/// asks them all in one round; a person is asked nothing in vain).
pub(crate) fn retry_params(
    mut params: Value,
    asked: &Value,
    answer: &dyn Fn(&str, Value) -> Result<Value, ErrorObject>,
    ask_all: bool,
) -> Result<Value, ErrorObject> {
    let mut responses = Map::new();
    let mut failed = None;
    if let Some(requests) = asked.get("inputRequests").and_then(Value::as_object) {
        for (key, request) in requests {
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let p = request.get("params").cloned().unwrap_or(json!({}));
            match answer(method, p) {
                Ok(a) => {
                    responses.insert(key.clone(), a);
                }
                Err(e) if !ask_all => return Err(e),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if let Some(p) = params.as_object_mut() {
        p.insert("inputResponses".into(), Value::Object(responses));
        match asked.get("requestState") {
            Some(s) => p.insert("requestState".into(), s.clone()),
            None => p.remove("requestState"),
        };
    }
    Ok(params)
}

/// Answers one input request with the call's own handler, else the
/// client's callback for its method.
pub(crate) fn answer_with(
    method: &str,
    params: Value,
    association: Option<&PeerRequestHandler>,
    callback: Option<&super::RequestHandler>,
) -> Result<Value, ErrorObject> {
    if let Some(h) = association {
        return h(method, params);
    }
    match callback {
        Some(cb) => cb(params),
        None => Err(ErrorObject::method_not_found(method)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_carry_answers_and_echo_the_state_exactly() {
        let asked = json!({"resultType": "input_required", "requestState": "s.1",
            "inputRequests": {"a": {"method": "elicitation/create", "params": {"message": "m"}}}});
        let answer = |m: &str, p: Value| Ok(json!({"method": m, "got": p}));
        let p = retry_params(
            json!({"name": "t", "requestState": "old"}),
            &asked,
            &answer,
            false,
        )
        .unwrap();
        assert_eq!(p["requestState"], "s.1");
        assert_eq!(p["inputResponses"]["a"]["got"]["message"], "m");
        let no_state = json!({"resultType": "input_required", "inputRequests": {}});
        let p = retry_params(p, &no_state, &answer, false).unwrap();
        assert!(p.get("requestState").is_none(), "no state: no key at all");
    }

    #[test]
    fn a_failed_answer_stops_the_questions_unless_all_are_to_be_asked() {
        let asked = json!({"resultType": "input_required", "inputRequests": {
            "a": {"method": "elicitation/create", "params": {}},
            "b": {"method": "elicitation/create", "params": {}}}});
        for (ask_all, expected) in [(false, 1), (true, 2)] {
            let n = std::cell::Cell::new(0);
            let answer = |_: &str, _: Value| {
                n.set(n.get() + 1);
                Err(ErrorObject::internal("no"))
            };
            assert!(retry_params(json!({}), &asked, &answer, ask_all).is_err());
            assert_eq!(n.get(), expected, "ask_all {ask_all}");
        }
    }

    #[test]
    fn meta_merges_without_overriding_the_callers_keys() {
        let meta = envelope(&json!({}), &json!({"name": "c", "version": "1"}));
        let p = with_meta(
            json!({"_meta": {"progressToken": 1, META_CLIENT_INFO: "mine"}}),
            &meta,
        );
        assert_eq!(p["_meta"]["progressToken"], 1);
        assert_eq!(p["_meta"][META_CLIENT_INFO], "mine");
        assert_eq!(p["_meta"][META_PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(
            with_meta(Value::Null, &meta)["_meta"][META_CLIENT_CAPABILITIES],
            json!({})
        );
    }

    #[test]
    fn discover_answers_are_adopted_only_for_a_shared_version() {
        let d = json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "_meta": {META_SERVER_INFO: {"name": "s", "version": "1"}}});
        let init = adopt(&d).unwrap();
        assert_eq!(init["serverInfo"]["name"], "s");
        assert_eq!(init["protocolVersion"], "2026-07-28");
        assert!(adopt(&json!({"supportedVersions": ["2099-01-01"]})).is_none());
    }
}
