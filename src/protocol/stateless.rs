//! The 2026-07-28 revision (SEP-2575, stateless MCP): what a request must
//! carry in `_meta`, which methods are gone, and what every result carries
//! (`resultType`, the server's info, caching hints of SEP-2549).
//!
//! A session that receives a stateless request first (or, over HTTP, every
//! request without a session) serves each request on its own: the
//! protocol facts come from the request's `_meta`, never from an earlier
//! request.

use super::ServerInfo;
use crate::jsonrpc::{ErrorObject, Request, UNSUPPORTED_PROTOCOL_VERSION};
use crate::model::{LogLevel, ProtocolVersion};
use serde_json::{json, Map, Value};
use std::time::Duration;

/// `_meta` key: the request's protocol version (required).
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: the client's capabilities for this request (required).
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: the client's name and version (optional).
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: the lowest log level the request wants (absent: no logs).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key: the server's name and version.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// Notification and result `_meta` key: the `subscriptions/listen` stream.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Methods of the session revisions that 2026-07-28 removed: answered
/// -32601 (HTTP 404) to a stateless request.
pub const REMOVED_METHODS: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Whether a request speaks the stateless revision: it names a protocol
/// version in `_meta`, or it is `server/discover` (which only exists there).
pub(crate) fn announces(req: &Request) -> bool {
    req.method() == "server/discover"
        || req
            .meta()
            .is_some_and(|m| m.contains_key(META_PROTOCOL_VERSION))
}

/// The body field a request's `Mcp-Name` header repeats (SEP-2243), for
/// the methods that have one.
#[cfg(feature = "http")]
pub(crate) fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// The protocol facts a stateless request carries.
#[derive(Clone, Debug)]
pub(crate) struct Envelope {
    /// The version as the client wrote it.
    pub(crate) requested: String,
    pub(crate) capabilities: Value,
    pub(crate) client_info: Value,
    pub(crate) log_level: Option<LogLevel>,
}

impl Envelope {
    /// Reads `_meta`; a missing or malformed required key is -32602.
    pub(crate) fn parse(req: &Request) -> Result<Envelope, ErrorObject> {
        let meta = req.meta().ok_or_else(|| {
            ErrorObject::invalid_params(format!(
                "params._meta is required (with {META_PROTOCOL_VERSION} and {META_CLIENT_CAPABILITIES})"
            ))
        })?;
        let requested = meta
            .get(META_PROTOCOL_VERSION)
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "params._meta[{META_PROTOCOL_VERSION:?}] (a string) is required"
                ))
            })?;
        let capabilities = meta
            .get(META_CLIENT_CAPABILITIES)
            .filter(|c| c.is_object())
            .ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "params._meta[{META_CLIENT_CAPABILITIES:?}] (an object) is required"
                ))
            })?;
        let log_level = match meta.get(META_LOG_LEVEL) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_str().and_then(LogLevel::parse).ok_or_else(|| {
                ErrorObject::invalid_params(format!(
                    "params._meta[{META_LOG_LEVEL:?}] must be a log level name"
                ))
            })?),
        };
        Ok(Envelope {
            requested: requested.to_owned(),
            capabilities: capabilities.clone(),
            client_info: meta.get(META_CLIENT_INFO).cloned().unwrap_or(Value::Null),
            log_level,
        })
    }

    /// The stateless revision asked for, or -32022 with the supported list.
    pub(crate) fn version(&self) -> Result<ProtocolVersion, ErrorObject> {
        ProtocolVersion::parse(&self.requested)
            .filter(|v| v.is_stateless())
            .ok_or_else(|| unsupported_version(&self.requested))
    }
}

/// The revisions served without sessions (`server/discover`'s
/// `supportedVersions`).
pub fn supported_versions() -> Vec<&'static str> {
    ProtocolVersion::ALL
        .into_iter()
        .filter(|v| v.is_stateless())
        .map(ProtocolVersion::as_str)
        .collect()
}

/// -32022 for `requested`, listing what is served.
pub(crate) fn unsupported_version(requested: &str) -> ErrorObject {
    ErrorObject::new(
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "unsupported protocol version {}",
            crate::jsonrpc::excerpt(requested)
        ),
    )
    .with_data(json!({"supported": supported_versions(), "requested": requested}))
}

/// Who may reuse a cached result (SEP-2549 `cacheScope`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CacheScope {
    /// Holds nothing specific to the caller: any cache may share it.
    Public,
    /// Reusable only within the same authorization context.
    Private,
}

impl CacheScope {
    /// `public` or `private`.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// A caching hint: how long a result stays fresh, and for whom.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CacheHint {
    /// Fresh for this long (`ttlMs`; zero: stale at once).
    pub ttl: Duration,
    /// Who may reuse it.
    pub scope: CacheScope,
}

/// Default hint of the lists (`tools/list` and the others) and of
/// `server/discover`: a minute, shared. The lists hold nothing specific to
/// a caller, and a change reaches `subscriptions/listen` streams at once.
pub const DEFAULT_LIST_CACHE: CacheHint = CacheHint {
    ttl: Duration::from_secs(60),
    scope: CacheScope::Public,
};
/// Default hint of `resources/read`: stale at once, private (a resource
/// handler may answer per caller). A handler may put its own `ttlMs` and
/// `cacheScope` in the result; they are kept.
pub const DEFAULT_READ_CACHE: CacheHint = CacheHint {
    ttl: Duration::ZERO,
    scope: CacheScope::Private,
};

/// The caching hints of 2026-07-28 results, per kind of result.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CachePolicy {
    /// `server/discover` (default [`DEFAULT_LIST_CACHE`]).
    pub discover: CacheHint,
    /// `tools/list`, `prompts/list`, `resources/list`,
    /// `resources/templates/list` (default [`DEFAULT_LIST_CACHE`]).
    pub lists: CacheHint,
    /// `resources/read` (default [`DEFAULT_READ_CACHE`]).
    pub read: CacheHint,
}

impl Default for CachePolicy {
    fn default() -> Self {
        CachePolicy {
            discover: DEFAULT_LIST_CACHE,
            lists: DEFAULT_LIST_CACHE,
            read: DEFAULT_READ_CACHE,
        }
    }
}

impl CachePolicy {
    fn hint(&self, method: &str) -> Option<CacheHint> {
        match method {
            "server/discover" => Some(self.discover),
            "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "skills/list"
            | "skills/get"
            | "resources/directory/read" => Some(self.lists),
            "resources/read" => Some(self.read),
            _ => None,
        }
    }
}

/// What every 2026-07-28 result carries: `resultType` (`complete` unless
/// the result says otherwise), the server's info in `_meta`, and for
/// cacheable methods `ttlMs` and `cacheScope` (a handler's own are kept).
pub(crate) fn decorate(
    method: &str,
    result: Value,
    info: &ServerInfo,
    cache: &CachePolicy,
) -> Value {
    let mut m = match result {
        Value::Object(m) => m,
        // Results are objects; anything else is wrapped rather than lost.
        other => {
            let mut m = Map::new();
            m.insert("value".into(), other);
            m
        }
    };
    m.entry("resultType").or_insert_with(|| "complete".into());
    let meta = m.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry(META_SERVER_INFO)
            .or_insert_with(|| info.to_value());
    }
    if m.get("resultType").and_then(Value::as_str) == Some("complete") {
        if let Some(hint) = cache.hint(method) {
            let ttl = u64::try_from(hint.ttl.as_millis()).unwrap_or(u64::MAX);
            m.entry("ttlMs").or_insert_with(|| ttl.into());
            m.entry("cacheScope")
                .or_insert_with(|| hint.scope.as_str().into());
        }
    }
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{RequestId, INVALID_PARAMS};

    fn req(method: &str, params: Value) -> Request {
        Request::new(RequestId::Number(1), method, Some(params))
    }

    fn meta(version: &str) -> Value {
        json!({META_PROTOCOL_VERSION: version, META_CLIENT_CAPABILITIES: {}})
    }

    #[test]
    fn envelope_requires_version_and_capabilities() {
        for params in [
            json!({}),
            json!({"_meta": {META_CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28"}}),
            json!({"_meta": {META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: []}}),
            json!({"_meta": {META_PROTOCOL_VERSION: 7, META_CLIENT_CAPABILITIES: {}}}),
        ] {
            let e = Envelope::parse(&req("tools/list", params.clone())).unwrap_err();
            assert_eq!(e.code, INVALID_PARAMS, "{params}");
        }
        let ok = Envelope::parse(&req("tools/list", json!({"_meta": meta("2026-07-28")}))).unwrap();
        assert_eq!(ok.version().unwrap(), ProtocolVersion::V2026_07_28);
        assert_eq!(ok.log_level, None);
    }

    #[test]
    fn unsupported_versions_list_what_is_served() {
        for v in ["v999.0.0", "2025-11-25"] {
            let env = Envelope::parse(&req("server/discover", json!({"_meta": meta(v)}))).unwrap();
            let e = env.version().unwrap_err();
            assert_eq!(e.code, UNSUPPORTED_PROTOCOL_VERSION);
            let data = e.data.unwrap();
            assert_eq!(data["requested"], v);
            assert_eq!(data["supported"], json!(["2026-07-28"]));
        }
    }

    #[test]
    fn results_carry_result_type_server_info_and_cache_hints() {
        let info = ServerInfo {
            name: "s".into(),
            version: "1".into(),
            ..Default::default()
        };
        let cache = CachePolicy::default();
        let listed = decorate("tools/list", json!({"tools": []}), &info, &cache);
        assert_eq!(listed["resultType"], "complete");
        assert_eq!(listed["ttlMs"], 60000);
        assert_eq!(listed["cacheScope"], "public");
        assert_eq!(listed["_meta"][META_SERVER_INFO]["name"], "s");
        let read = decorate(
            "resources/read",
            json!({"contents": [], "ttlMs": 5, "_meta": {"k": 1}}),
            &info,
            &cache,
        );
        assert_eq!(read["ttlMs"], 5, "a handler's own hint is kept");
        assert_eq!(read["cacheScope"], "private");
        assert_eq!(read["_meta"]["k"], 1);
        let call = decorate("tools/call", json!({"content": []}), &info, &cache);
        assert!(call.get("ttlMs").is_none());
        let asked = decorate(
            "tools/call",
            json!({"resultType": "input_required", "requestState": "x"}),
            &info,
            &cache,
        );
        assert_eq!(asked["resultType"], "input_required");
    }
}
