//! The request rules of Streamable HTTP, one small function each. Each
//! returns `Ok` or the response to send; the endpoint chains them with `?`
//! in the order the specification lists them.

use super::headers::{is_media_type, split_ascii, trim_ows};
use super::wire::{Request, Response};
use crate::jsonrpc::{ErrorObject, Reply};
use crate::protocol::ProtocolVersion;
use crate::transport::session_table::Owner;

/// Who may talk to the endpoint, by `Origin` or `Host`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowList {
    /// Loopback names (`localhost`, `127.0.0.1`, `[::1]`) on any port.
    Loopback,
    /// Exactly these origins (`scheme://host[:port]`) or host names.
    List(Vec<String>),
    /// Everything (no check).
    Any,
}

/// An error response with a JSON-RPC error body (`id: null`).
pub fn reject(status: u16, code: i64, message: &str) -> Response {
    Response::json(status, &Reply::error(None, ErrorObject::new(code, message)))
}

const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// `host[:port]` -> host (IPv6 keeps its brackets), lowercase.
fn host_name(authority: &str) -> &str {
    let a = trim_ows(authority);
    if a.starts_with('[') {
        return a.split_inclusive(']').next().unwrap_or("");
    }
    split_ascii(a, b':').next().unwrap_or("")
}

/// Whether the host of `authority` is a loopback name (any case).
fn is_loopback(authority: &str) -> bool {
    let host = host_name(authority);
    LOOPBACK.iter().any(|l| l.eq_ignore_ascii_case(host))
}

/// Whether an allowed `name` covers the `Host` header `authority`: a name
/// with a port (`example.com:8808`, `[::1]:8808`) must match host and port,
/// a name without one matches the host on any port.
fn host_matches(name: &str, authority: &str) -> bool {
    let name = name.trim();
    let with_port = match name.rfind(']') {
        Some(close) => name[close..].contains(':'),
        None => name.contains(':'),
    };
    if with_port {
        name.eq_ignore_ascii_case(trim_ows(authority))
    } else {
        name.eq_ignore_ascii_case(host_name(authority))
    }
}

/// `Host` must name this server when it is bound to loopback (DNS rebinding).
pub fn host(req: &Request, allowed: &AllowList) -> Result<(), Response> {
    let ok = match allowed {
        AllowList::Any => true,
        AllowList::Loopback => req.header("host").is_some_and(is_loopback),
        AllowList::List(names) => req
            .header("host")
            .is_some_and(|h| names.iter().any(|n| host_matches(n, h))),
    };
    if ok {
        Ok(())
    } else {
        Err(reject(403, -32000, "Forbidden: Host header not allowed"))
    }
}

/// Whether a present `Origin` is allowed.
pub fn origin_allowed(origin: &str, allowed: &AllowList) -> bool {
    match allowed {
        AllowList::Any => true,
        AllowList::List(list) => list
            .iter()
            // A configured entry may be written with its slash too.
            .any(|o| {
                o.trim_end_matches('/')
                    .eq_ignore_ascii_case(origin.trim_end_matches('/'))
            }),
        AllowList::Loopback => {
            let Some((scheme, rest)) = origin.split_once("://") else {
                return false;
            };
            // Schemes and host names compare in any case (RFC 3986 §3.1, §3.2.2).
            let web = ["http", "https"]
                .iter()
                .any(|s| s.eq_ignore_ascii_case(scheme));
            web && is_loopback(rest.trim_end_matches('/'))
        }
    }
}

/// A present `Origin` that is not allowed is 403 (absent: not a browser).
pub fn origin(req: &Request, allowed: &AllowList) -> Result<(), Response> {
    match req.header("origin") {
        Some(o) if !origin_allowed(o, allowed) => {
            Err(reject(403, -32000, "Forbidden: Origin not allowed"))
        }
        _ => Ok(()),
    }
}

/// SHA-256 of a bearer token: the credential a session is bound to.
pub fn token_digest(token: &str) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// With tokens configured, a valid `Authorization: Bearer` is required
/// (401 with `WWW-Authenticate` otherwise). Digests are compared in
/// constant time. Returns the credential the request acts as.
pub fn auth(req: &Request, tokens: &[[u8; 32]]) -> Result<Owner, Response> {
    if tokens.is_empty() {
        return Ok(None);
    }
    let presented = req
        .header("authorization")
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(|t| token_digest(trim_ows(t)));
    let matched = presented.filter(|p| {
        // Visit every token and every byte: no early exit leaks which matched.
        tokens.iter().fold(false, |found, t| {
            found | (t.iter().zip(p).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0)
        })
    });
    match matched {
        Some(d) => Ok(Some(d)),
        None => Err(reject(
            401,
            -32001,
            "Unauthorized: a valid bearer token is required",
        )
        .header(
            "WWW-Authenticate",
            "Bearer realm=\"mcp\", error=\"invalid_token\"",
        )),
    }
}

/// Whether the Accept header lists all of `media` (parameters ignored),
/// read in one pass.
fn accepts<const N: usize>(req: &Request, media: [&str; N]) -> bool {
    let mut found = [false; N];
    for part in req.header_items("accept") {
        let range = trim_ows(split_ascii(part, b';').next().unwrap_or(""));
        for (found, media) in found.iter_mut().zip(media) {
            *found |= range.eq_ignore_ascii_case(media);
        }
    }
    found.iter().all(|&f| f)
}

/// POST must accept both `application/json` and `text/event-stream`.
pub fn accept_post(req: &Request) -> Result<(), Response> {
    if accepts(req, ["application/json", "text/event-stream"]) {
        Ok(())
    } else {
        Err(reject(
            406,
            -32000,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        ))
    }
}

/// GET must accept `text/event-stream`.
pub fn accept_sse(req: &Request) -> Result<(), Response> {
    if accepts(req, ["text/event-stream"]) {
        Ok(())
    } else {
        Err(reject(
            406,
            -32000,
            "Not Acceptable: Accept must list text/event-stream",
        ))
    }
}

/// POST bodies are `application/json`.
pub fn content_type(req: &Request) -> Result<(), Response> {
    let ok = req
        .header("content-type")
        .is_some_and(|c| is_media_type(c, "application/json"));
    if ok {
        Ok(())
    } else {
        Err(reject(
            415,
            -32000,
            "Unsupported Media Type: Content-Type must be application/json",
        ))
    }
}

/// `MCP-Protocol-Version`: absent means 2025-03-26; anything unsupported is 400.
pub fn protocol_version(req: &Request) -> Result<ProtocolVersion, Response> {
    match req.header("mcp-protocol-version") {
        None => Ok(ProtocolVersion::V2025_03_26),
        Some(v) => ProtocolVersion::parse(v).ok_or_else(|| {
            reject(
                400,
                -32000,
                &format!("Bad Request: unsupported MCP-Protocol-Version {v:?}"),
            )
        }),
    }
}

/// Requests other than `initialize` carry `MCP-Session-Id` (400 without).
pub fn session_id(req: &Request) -> Result<&str, Response> {
    req.header("mcp-session-id").ok_or_else(|| {
        reject(
            400,
            -32000,
            "Bad Request: MCP-Session-Id header is required",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request {
        Request {
            method: "POST".into(),
            path: "/mcp".into(),
            headers: headers.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn origins() {
        for ok in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:8080",
            "http://LocalHost:3000",
            "HTTP://LOCALHOST",
        ] {
            assert!(
                origin(&req(&[("origin", ok)]), &AllowList::Loopback).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "http://evil.com",
            "http://localhost.evil.com",
            "null",
            "file://localhost",
        ] {
            assert_eq!(
                origin(&req(&[("origin", bad)]), &AllowList::Loopback)
                    .unwrap_err()
                    .status,
                403,
                "{bad}"
            );
        }
        assert!(
            origin(&req(&[]), &AllowList::List(vec![])).is_ok(),
            "no Origin: not a browser"
        );
        let list = AllowList::List(vec!["https://app.example".into()]);
        assert!(origin(&req(&[("origin", "https://app.example")]), &list).is_ok());
        assert!(origin(&req(&[("origin", "https://other.example")]), &list).is_err());
        // An entry configured with a trailing slash matches too.
        let list = AllowList::List(vec!["https://app.example/".into()]);
        assert!(origin(&req(&[("origin", "https://app.example")]), &list).is_ok());
    }

    #[test]
    fn hosts() {
        assert!(host(&req(&[("host", "localhost:8808")]), &AllowList::Loopback).is_ok());
        assert!(host(&req(&[("host", "[::1]:1")]), &AllowList::Loopback).is_ok());
        // Host names compare in any case; the port is not part of the name.
        for ok in ["LocalHost", "LOCALHOST:1", " 127.0.0.1:80 ", "[::1]"] {
            assert!(
                host(&req(&[("host", ok)]), &AllowList::Loopback).is_ok(),
                "{ok}"
            );
        }
        for bad in ["localhost.evil.com", "localhostx:1", "[::2]:1", ":80", ""] {
            assert!(
                host(&req(&[("host", bad)]), &AllowList::Loopback).is_err(),
                "{bad}"
            );
        }
        assert_eq!(
            host(&req(&[("host", "evil.com:8808")]), &AllowList::Loopback)
                .unwrap_err()
                .status,
            403
        );
        assert!(host(&req(&[]), &AllowList::Loopback).is_err());
        assert!(host(&req(&[("host", "anything")]), &AllowList::Any).is_ok());
        // #11 item 14: names with a port match host and port; without, any port.
        let list = AllowList::List(vec![
            "mcp.example:8808".into(),
            "Other.Example".into(),
            "[::1]:9".into(),
        ]);
        assert!(host(&req(&[("host", "mcp.example:8808")]), &list).is_ok());
        assert!(host(&req(&[("host", "mcp.example:9999")]), &list).is_err());
        assert!(host(&req(&[("host", "mcp.example")]), &list).is_err());
        assert!(host(&req(&[("host", "other.example:1234")]), &list).is_ok());
        assert!(host(&req(&[("host", "[::1]:9")]), &list).is_ok());
        assert!(host(&req(&[("host", "[::1]:10")]), &list).is_err());
    }

    #[test]
    fn headers() {
        assert!(accept_post(&req(&[("accept", "application/json, text/event-stream")])).is_ok());
        // Any order, parameters, case, spaces and tabs; both must be listed.
        for (accept, post, sse) in [
            (
                "text/event-stream;q=0.9,\tApplication/JSON ; q=1",
                true,
                true,
            ),
            ("text/html, text/event-stream", false, true),
            ("application/jsonx, text/event-stream", false, true),
            ("application/json", false, false),
            ("", false, false),
        ] {
            let r = req(&[("accept", accept)]);
            assert_eq!(accept_post(&r).is_ok(), post, "{accept:?}");
            assert_eq!(accept_sse(&r).is_ok(), sse, "{accept:?}");
        }
        assert!(accept_post(&req(&[])).is_err() && accept_sse(&req(&[])).is_err());
        // Repeated lines are one list (RFC 9110 §5.3).
        let split = req(&[
            ("accept", "application/json"),
            ("accept", "text/event-stream"),
        ]);
        assert!(accept_post(&split).is_ok() && accept_sse(&split).is_ok());
        assert_eq!(
            accept_post(&req(&[("accept", "application/json")]))
                .unwrap_err()
                .status,
            406
        );
        assert_eq!(
            accept_sse(&req(&[("accept", "application/json")]))
                .unwrap_err()
                .status,
            406
        );
        assert!(content_type(&req(&[("content-type", "application/json; charset=utf-8")])).is_ok());
        assert_eq!(
            content_type(&req(&[("content-type", "text/plain")]))
                .unwrap_err()
                .status,
            415
        );
        assert_eq!(
            protocol_version(&req(&[])).unwrap(),
            ProtocolVersion::V2025_03_26
        );
        assert_eq!(
            protocol_version(&req(&[("mcp-protocol-version", "2024-11-05")])).unwrap(),
            ProtocolVersion::V2024_11_05
        );
        assert_eq!(
            protocol_version(&req(&[("mcp-protocol-version", "garbage")]))
                .unwrap_err()
                .status,
            400
        );
        assert_eq!(session_id(&req(&[])).unwrap_err().status, 400);
    }

    #[test]
    fn bearer_tokens() {
        let tokens = [token_digest("s3cret")];
        assert_eq!(
            auth(&req(&[("authorization", "Bearer s3cret")]), &tokens).unwrap(),
            Some(token_digest("s3cret"))
        );
        let e = auth(&req(&[("authorization", "Bearer nope")]), &tokens).unwrap_err();
        assert_eq!(e.status, 401);
        assert!(e.headers.iter().any(|(n, _)| n == "WWW-Authenticate"));
        assert!(auth(&req(&[]), &tokens).is_err());
        assert_eq!(auth(&req(&[]), &[]).unwrap(), None);
    }
}
