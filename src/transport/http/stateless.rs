//! Streamable HTTP for the stateless revision (2026-07-28): one POST is
//! one request, served by a session of its own that ends with it; no
//! session header, no GET stream, no resumption.
//!
//! Before the request runs, the standardized headers (SEP-2243) must agree
//! with the body, one small rule each, in the order the specification
//! lists them: the `_meta` envelope (-32602), `MCP-Protocol-Version`
//! against `_meta` (-32020), the version itself (-32022), `Mcp-Method`,
//! `Mcp-Name`, and the `Mcp-Param-*` headers a tool's schema declares
//! with `x-mcp-header` (-32020). Every error goes out as JSON with the
//! status the specification gives its code.
//!
//! The response is JSON when the result comes first, else an SSE stream
//! (progress, logs, a `subscriptions/listen` stream). The client closing
//! the connection cancels the request.

use super::streams::send_within;
use super::wire::{write_response, ChunkedWriter, Framing, Request, Response};
use super::ResponseMode;
use crate::jsonrpc::{self, ErrorObject, Message, Parsed, Reply};
use crate::model::{self, base64_decode, Answer};
use crate::protocol::stateless::{announces, name_field, Envelope, META_PROTOCOL_VERSION};
use crate::protocol::{Engine, Outgoing, Session, Sink};
use crossbeam_channel::{select, Receiver, Sender, TrySendError};
use serde_json::Value;
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often a request waiting for its handler checks that the client is
/// still connected (closing the connection cancels the request).
pub const DISCONNECT_POLL: Duration = Duration::from_millis(100);
/// Notifications queued for one response stream; past it the client reads
/// too slowly and further notifications are dropped (never the response).
pub const STREAM_QUEUE: usize = 1024;

/// Whether an HTTP request without a session speaks the stateless
/// revision: anything but a session revision's `initialize`, or a request
/// of a session revision that forgot its session (that one gets the
/// session revisions' error).
pub(crate) fn is_stateless(req: &Request, parsed: &Parsed) -> bool {
    let header = req
        .header("mcp-protocol-version")
        .and_then(crate::protocol::ProtocolVersion::parse);
    let single = match parsed {
        Parsed::Single(Message::Request(r)) => Some(r),
        _ => None,
    };
    let announces = single.is_some_and(announces);
    match header {
        Some(v) if v.is_stateless() => true,
        // A session revision named in the header (or none: 2025-03-26).
        Some(_) | None if single.is_some_and(|r| r.method() == "initialize") => false,
        Some(_) => announces,
        // A revision this server does not know: a request gets the
        // stateless answer naming those it does; anything else is refused
        // as a malformed header (400) on the session path.
        None => announces || (single.is_some() && req.header("mcp-protocol-version").is_some()),
    }
}

/// The HTTP status of a stateless error response.
pub(crate) fn status_of(code: i64) -> u16 {
    match code {
        jsonrpc::METHOD_NOT_FOUND => 404,
        jsonrpc::INTERNAL_ERROR => 500,
        _ => 400,
    }
}

/// `MCP-Protocol-Version` must equal `_meta`'s version.
fn version_header(req: &Request, envelope: &Envelope) -> Result<(), ErrorObject> {
    match req.header("mcp-protocol-version") {
        Some(v) if v == envelope.requested => Ok(()),
        Some(v) => Err(ErrorObject::header_mismatch(format!(
            "MCP-Protocol-Version {:?} does not match params._meta[{META_PROTOCOL_VERSION:?}] {:?}",
            jsonrpc::excerpt(v),
            jsonrpc::excerpt(&envelope.requested)
        ))),
        None => Err(ErrorObject::header_mismatch(
            "the MCP-Protocol-Version header is required",
        )),
    }
}

/// `Mcp-Method` must equal the body's method (exactly).
fn method_header(req: &Request, r: &jsonrpc::Request) -> Result<(), ErrorObject> {
    match req.header("mcp-method") {
        Some(m) if m == r.method() => Ok(()),
        Some(m) => Err(ErrorObject::header_mismatch(format!(
            "Mcp-Method {:?} does not match the method {:?}",
            jsonrpc::excerpt(m),
            jsonrpc::excerpt(r.method())
        ))),
        None => Err(ErrorObject::header_mismatch(
            "the Mcp-Method header is required",
        )),
    }
}

/// The body field `Mcp-Name` repeats, for the methods that have one.
fn name_of(r: &jsonrpc::Request) -> Option<(&'static str, Option<&str>)> {
    let field = name_field(r.method())?;
    Some((
        field,
        r.params()
            .and_then(|p| p.get(field))
            .and_then(Value::as_str),
    ))
}

/// `Mcp-Name` must equal the tool or prompt name, resource URI or task id.
fn name_header(req: &Request, r: &jsonrpc::Request) -> Result<(), ErrorObject> {
    let Some((field, body)) = name_of(r) else {
        return Ok(());
    };
    let sent = req.header("mcp-name").map(decode_value).transpose()?;
    match (sent, body) {
        (Some(h), Some(b)) if h == b => Ok(()),
        (None, _) => Err(ErrorObject::header_mismatch(format!(
            "the Mcp-Name header is required for {} (params.{field})",
            r.method()
        ))),
        (Some(h), b) => Err(ErrorObject::header_mismatch(format!(
            "Mcp-Name {:?} does not match params.{field} {:?}",
            jsonrpc::excerpt(&h),
            b.map(jsonrpc::excerpt)
        ))),
    }
}

/// A header value as sent: `=?base64?…?=` decoded (strictly), anything
/// else literally. Characters outside visible ASCII, space and tab are
/// refused.
fn decode_value(v: &str) -> Result<String, ErrorObject> {
    if v.bytes()
        .any(|b| !(b == b'\t' || (0x20..0x7f).contains(&b)))
    {
        return Err(ErrorObject::header_mismatch(
            "a header value holds characters outside visible ASCII (send it as =?base64?…?=)",
        ));
    }
    match v
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => base64_decode(encoded)
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                ErrorObject::header_mismatch(format!(
                    "the header value {:?} is not valid base64 of UTF-8 text",
                    jsonrpc::excerpt(v)
                ))
            }),
        None => Ok(v.to_owned()),
    }
}

/// Whether a header's text stands for the argument `arg`.
fn same_value(text: &str, arg: &Value) -> bool {
    match arg {
        Value::String(s) => s == text,
        Value::Bool(b) => text == if *b { "true" } else { "false" },
        Value::Number(n) => text
            .parse::<f64>()
            .ok()
            .zip(n.as_f64())
            .is_some_and(|(a, b)| a == b),
        _ => false,
    }
}

/// For `tools/call`: each argument whose schema property carries
/// `x-mcp-header: X` and that is present (not null) must come with an
/// `Mcp-Param-X` header of the same value. A tool whose declarations are
/// invalid has none enforced.
fn param_headers(req: &Request, r: &jsonrpc::Request, engine: &Engine) -> Result<(), ErrorObject> {
    if r.method() != "tools/call" {
        return Ok(());
    }
    let Some(name) = r
        .params()
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let Some(declared) = engine
        .tool_input_schema(name)
        .and_then(|s| model::param_headers(&s).ok())
    else {
        return Ok(());
    };
    let Some(args) = r.params().and_then(|p| p.get("arguments")) else {
        return Ok(());
    };
    for h in declared {
        let Some(arg) = h.argument(args) else {
            continue;
        };
        let sent = req
            .header(&h.header_name().to_ascii_lowercase())
            .ok_or_else(|| {
                ErrorObject::header_mismatch(format!("the {} header is required", h.header_name()))
            })?;
        if !same_value(&decode_value(sent)?, arg) {
            return Err(ErrorObject::header_mismatch(format!(
                "{} does not match arguments.{}",
                h.header_name(),
                h.path.join(".")
            )));
        }
    }
    Ok(())
}

/// Every rule a stateless request must pass before it runs.
pub(crate) fn check(
    req: &Request,
    r: &jsonrpc::Request,
    engine: &Engine,
) -> Result<(), ErrorObject> {
    let envelope = Envelope::parse(r)?;
    version_header(req, &envelope)?;
    envelope.version()?;
    method_header(req, r)?;
    name_header(req, r)?;
    param_headers(req, r, engine)
}

/// A stateless error response: JSON with the code's status.
pub(crate) fn error_response(id: Option<&jsonrpc::RequestId>, e: &ErrorObject) -> Response {
    Response::json(status_of(e.code), &Reply::error(id.cloned(), e.clone()))
}

/// The sink of one stateless request: notifications queue (dropped when
/// the client reads too slowly), the response has a place of its own.
struct StreamSink {
    notes: Sender<Value>,
    end: Sender<Reply<Answer>>,
}

impl Sink for StreamSink {
    fn send(&self, out: Outgoing) {
        match out {
            Outgoing::Notification(n) => {
                if let Err(TrySendError::Full(_)) = send_within(&self.notes, STREAM_QUEUE, n) {
                    log::warn!("a response stream's client reads too slowly: notification dropped");
                }
            }
            // The response happens once.
            Outgoing::Response(reply) => {
                let _ = self.end.try_send(reply);
            }
            // Cancelled by the server (its client cannot cancel but by
            // leaving): a request is never left without an answer.
            Outgoing::Suppressed { id } => {
                let e = ErrorObject::internal("the request was cancelled before it was answered");
                let _ = self.end.try_send(Reply::Error(Some(id), e));
            }
            // No requests to a stateless client; SSE polling does not apply.
            Outgoing::Request(_) | Outgoing::Reconnect { .. } => {}
        }
    }
}

/// Whether the client closed its side of `stream` (a pipelined next
/// request is not a close).
pub(crate) fn peer_gone(stream: &TcpStream) -> bool {
    // Linux reports a peer's shutdown as POLLRDHUP; elsewhere the peek
    // below finds the end.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const RDHUP: libc::c_short = libc::POLLRDHUP;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const RDHUP: libc::c_short = 0;
    let mut pfd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN | RDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    let ready = unsafe { libc::poll(&mut pfd, 1, 0) };
    if ready <= 0 {
        return false;
    }
    if pfd.revents & (RDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
        return true;
    }
    let mut b = [0u8; 1];
    // SAFETY: a one-byte buffer we own; MSG_PEEK leaves the data in place.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    n == 0
}

/// What the request produced next.
enum Next {
    Note(Value),
    End(Reply<Answer>),
    /// Nothing for a keep-alive interval.
    Idle,
    /// The client went away (or the producer vanished).
    Gone,
}

/// Serves one stateless request on a session of its own (`open` opens it,
/// bound to the request's credential) and writes its answer. Returns
/// whether the connection may serve another request.
pub(crate) fn serve(
    open: impl FnOnce(Arc<dyn Sink>) -> Arc<Session>,
    req: &Request,
    parsed: Parsed,
    stream: &TcpStream,
    headers: Vec<(String, String)>,
    mode: ResponseMode,
    keepalive: Duration,
) -> bool {
    let framing = Framing::of(req);
    let (notes_tx, notes) = crossbeam_channel::unbounded();
    let (end_tx, end) = crossbeam_channel::bounded(1);
    let sink: Arc<dyn Sink> = Arc::new(StreamSink {
        notes: notes_tx,
        end: end_tx,
    });
    // JSON only: the notifications on the way are dropped (a listen
    // stream is nothing but notifications: SSE whatever the mode).
    let drop_notes = mode == ResponseMode::JsonOnly && !crate::protocol::is_listen(&parsed);
    let session = open(sink.clone());
    session.receive_parsed(parsed, &sink);
    let polled = std::cell::Cell::new(false);
    let next = |deadline: Option<Instant>| -> Next {
        loop {
            // Notifications first: those sent before the response go before it.
            if let Ok(n) = notes.try_recv() {
                if drop_notes {
                    continue;
                }
                return Next::Note(n);
            }
            if !polled.replace(true) {
                // A fast handler answers within microseconds, sooner than
                // a parked thread wakes: look for the first message a
                // moment before parking (then start over, notes first).
                let start = Instant::now();
                while notes.is_empty()
                    && end.is_empty()
                    && start.elapsed() < crate::wait::SPIN_BEFORE_PARK
                {
                    std::thread::yield_now();
                }
                continue;
            }
            select! {
                recv(end) -> m => return m.map(Next::End).unwrap_or(Next::Gone),
                recv(notes) -> m => if let (Ok(n), false) = (m, drop_notes) { return Next::Note(n) },
                default(DISCONNECT_POLL) => {
                    if peer_gone(stream) {
                        return Next::Gone;
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Next::Idle;
                    }
                }
            }
        }
    };
    let keep = match next(None) {
        Next::End(end) => answer_whole(stream, end, headers, framing, mode, &notes),
        Next::Gone | Next::Idle => false,
        Next::Note(first) => {
            stream_answer(stream, first, headers, framing, keepalive, &next, &notes)
                .unwrap_or(false)
        }
    };
    // Whatever is still running for this request is cancelled.
    session.close();
    keep
}

/// The answer came first: JSON (errors always; results unless SSE only).
fn answer_whole(
    stream: &TcpStream,
    reply: Reply<Answer>,
    headers: Vec<(String, String)>,
    framing: Framing,
    mode: ResponseMode,
    notes: &Receiver<Value>,
) -> bool {
    let status = match &reply {
        Reply::Error(_, e) => status_of(e.code),
        _ => 200,
    };
    if status == 200 && mode == ResponseMode::SseOnly {
        return write_sse(stream, headers, framing, notes, &reply).unwrap_or(false);
    }
    let mut resp = Response {
        status,
        headers,
        body: jsonrpc::to_text(&reply).into_bytes(),
    };
    resp.headers
        .push(("Content-Type".into(), "application/json".into()));
    write_response(stream, &resp, framing.keep_alive).is_ok() && framing.keep_alive
}

fn sse_headers(mut headers: Vec<(String, String)>) -> Vec<(String, String)> {
    headers.push(("Content-Type".into(), "text/event-stream".into()));
    headers.push(("Cache-Control".into(), "no-cache".into()));
    headers.push(("X-Accel-Buffering".into(), "no".into()));
    headers
}

fn event(out: &mut Vec<u8>, message: &impl serde::Serialize) {
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(jsonrpc::to_text(message).as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// The notifications waiting in `notes`, then `reply`, as one SSE stream.
fn write_sse(
    stream: &TcpStream,
    headers: Vec<(String, String)>,
    framing: Framing,
    notes: &Receiver<Value>,
    reply: &Reply<Answer>,
) -> io::Result<bool> {
    let mut w = ChunkedWriter::start(stream, 200, &sse_headers(headers), framing)?;
    let mut out = Vec::new();
    for n in notes.try_iter() {
        event(&mut out, &n);
    }
    event(&mut out, reply);
    w.chunk(&out)?;
    Ok(w.finish()? && framing.keep_alive)
}

/// Notifications came first: an SSE stream until the response (or, for a
/// listen stream, until the client leaves).
fn stream_answer(
    stream: &TcpStream,
    first: Value,
    headers: Vec<(String, String)>,
    framing: Framing,
    keepalive: Duration,
    next: &dyn Fn(Option<Instant>) -> Next,
    notes: &Receiver<Value>,
) -> io::Result<bool> {
    let mut w = ChunkedWriter::start(stream, 200, &sse_headers(headers), framing)?;
    let mut out = Vec::new();
    event(&mut out, &first);
    loop {
        out.extend(notes.try_iter().flat_map(|n| {
            let mut b = Vec::new();
            event(&mut b, &n);
            b
        }));
        if !out.is_empty() {
            w.chunk(&out)?;
            out.clear();
        }
        match next(Some(Instant::now() + keepalive)) {
            Next::Idle => w.chunk(b": keep-alive\n\n")?,
            Next::Note(n) => event(&mut out, &n),
            Next::End(reply) => {
                // Notifications sent before the response go before it.
                for n in notes.try_iter() {
                    event(&mut out, &n);
                }
                event(&mut out, &reply);
                w.chunk(&out)?;
                return Ok(w.finish()? && framing.keep_alive);
            }
            Next::Gone => return Ok(false),
        }
    }
}

/// A body that is not one request: notifications and responses are
/// accepted and ignored (a stateless server sends no requests); a batch
/// is refused.
pub(crate) fn not_a_request(parsed: &Parsed) -> Option<Response> {
    match parsed {
        Parsed::Single(Message::Request(_)) => None,
        Parsed::Single(_) => Some(Response::status(202)),
        Parsed::Batch(_) => Some(super::checks::reject(
            400,
            jsonrpc::INVALID_REQUEST,
            "JSON-RPC batches are not part of protocol 2026-07-28",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn header_values_decode_strictly() {
        assert_eq!(decode_value("=?base64?SGVsbG8=?=").unwrap(), "Hello");
        assert!(decode_value("=?base64?SGVsbG8?=").is_err());
        assert!(decode_value("=?base64?SGVs!!!bG8=?=").is_err());
        assert_eq!(decode_value("SGVsbG8=").unwrap(), "SGVsbG8=");
        assert_eq!(
            decode_value("=?base64?SGVsbG8=").unwrap(),
            "=?base64?SGVsbG8="
        );
        assert!(decode_value("caf\u{e9}").is_err());
    }

    #[test]
    fn a_request_the_server_cancels_is_answered_with_an_error() {
        let (notes, _) = crossbeam_channel::unbounded();
        let (end_tx, end) = crossbeam_channel::bounded(1);
        let sink = StreamSink { notes, end: end_tx };
        sink.send(Outgoing::Suppressed {
            id: crate::jsonrpc::RequestId::Number(7),
        });
        let Ok(Reply::Error(Some(id), e)) = end.try_recv() else {
            panic!("an error response");
        };
        assert_eq!(id, crate::jsonrpc::RequestId::Number(7));
        assert_eq!(e.code, jsonrpc::INTERNAL_ERROR);
    }

    #[test]
    fn values_compare_by_type() {
        assert!(same_value("42", &json!(42)));
        assert!(same_value("42.0", &json!(42)));
        assert!(!same_value("43", &json!(42)));
        assert!(same_value("true", &json!(true)));
        assert!(!same_value("True", &json!(true)));
        assert!(same_value("x", &json!("x")));
    }
}
