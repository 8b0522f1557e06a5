//! Streamable HTTP client connection, on the same small HTTP/1.1 footing as
//! the server (std sockets + `httparse`; no async runtime, no extra crate).
//!
//! Every POST runs on a thread of its own, so a long call never blocks the
//! next message (a thread done with its message takes the next one, see
//! [`POST_THREAD_IDLE`]); `initialize` and `notifications/initialized` run
//! inline because the session id and the session's start come with them.
//! Connections are kept alive and reused (at most [`MAX_IDLE_CONNECTIONS`]
//! idle, none reused after [`IDLE_CONNECTION_MAX`]); a stateless call,
//! which is cancelled by closing its connection, gets one of its own. JSON
//! answers and SSE streams both feed one queue that the client's reader
//! drains. A stream that ends
//! before its response is resumed with `GET` + `Last-Event-ID` after the
//! server's `retry:` delay. Closing sends `DELETE`, ends every stream and
//! the reader.
//!
//! Failures reach the caller at once: a POST that fails answers its request
//! with an error; a server that cannot be reached any more ends the
//! connection (the client then reconnects or reports it closed). Every
//! socket has connect and write timeouts and every read one (the answer to
//! a call waits as long as the call's own timeout allows; closing the
//! client ends it), and no body, line or event is held beyond
//! [`DEFAULT_MAX_MESSAGE_BYTES`].

use super::socket::{Security, Socket};
use crate::jsonrpc::{ErrorObject, Reply, RequestId};
use crate::model::{self, ParamHeader};
use crate::sync::{lock, FastMap};
use crate::transport::connection::{
    Connection, MessageReader, MessageWriter, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_WRITE_TIMEOUT,
};
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default wait before resuming a stream when the server gave no `retry:`.
pub const DEFAULT_RECONNECT_DELAY: Duration = Duration::from_millis(1000);
/// How often in a row a dropped stream is resumed before giving up.
pub const MAX_RESUME_ATTEMPTS: u32 = 5;
/// Longest a TCP connect to the server may take: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest a response that answers no call may stay silent (the answer to
/// a notification, the standalone stream, a DELETE): 5 minutes. A silent
/// standalone stream is simply opened again. The answer to a call may take
/// as long as the call's own timeout allows; closing the client ends it.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Most idle connections kept open for the next requests; one more
/// finished with is closed.
pub const MAX_IDLE_CONNECTIONS: usize = 32;
/// Longest an idle connection is reused after its last answer: 4 s, under
/// the 5 s after which common servers (Node.js, uvicorn) close idle
/// keep-alive connections, so that a request seldom meets one the server
/// is closing. An older one is closed when the next request or answer
/// finds it, or at close.
pub const IDLE_CONNECTION_MAX: Duration = Duration::from_secs(4);

#[derive(Default)]
struct SessionState {
    id: Option<String>,
    version: Option<String>,
}

struct Target {
    addr: SocketAddr,
    security: Security,
    host: String,
    path: String,
    session: Mutex<SessionState>,
    // Each message with the id of our request whose response stream carried
    // it (None: a JSON body, the standalone stream). An empty message marks
    // the end of the session.
    incoming: Sender<(Vec<u8>, Option<RequestId>)>,
    closed: AtomicBool,
    // Every open socket, so closing ends the threads reading them.
    sockets: Mutex<FastMap<u64, TcpStream>>,
    // Connections whose last response was read whole and which the server
    // keeps open, with when they fell idle; the last one in is used first.
    idle: Mutex<Vec<(Instant, Socket)>>,
    next_socket: AtomicU64,
    // Sent with every request (e.g. Authorization).
    headers: Vec<(String, String)>,
    params: ParamBindings,
    // Our stateless calls in flight, by id: the socket their answer comes
    // on, once it is open (None before). Closing it is how such a call is
    // cancelled; one cancelled before it has a socket never opens one.
    calls: Mutex<FastMap<RequestId, Option<u64>>>,
    // Stateless calls cancelled here, whose failing is no news (hashed as
    // `calls` is: `FastMap`'s hasher).
    cancelled: Mutex<HashSet<RequestId, foldhash::fast::RandomState>>,
}

/// Unregisters a socket (and the stateless call it answers) when its
/// response is done with.
struct Registered {
    target: std::sync::Weak<Target>,
    key: u64,
    call: Option<RequestId>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(t) = self.target.upgrade() {
            lock(&t.sockets).remove(&self.key);
            if let Some(id) = &self.call {
                lock(&t.calls).remove(id);
            }
        }
    }
}

/// Most cancelled calls remembered until their failure is seen.
const MAX_CANCELLED: usize = 1024;

/// Reads one line of at most [`DEFAULT_MAX_MESSAGE_BYTES`] (a server that
/// never ends a line cannot fill memory).
fn read_line(r: &mut impl BufRead, line: &mut String) -> io::Result<usize> {
    let n = r
        .take(DEFAULT_MAX_MESSAGE_BYTES as u64 + 1)
        .read_line(line)?;
    if n > DEFAULT_MAX_MESSAGE_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a line longer than {DEFAULT_MAX_MESSAGE_BYTES} bytes"),
        ));
    }
    Ok(n)
}

/// The server could not be connected to (refused, unreachable, timed out).
#[derive(Debug)]
struct Unreachable(io::Error);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot connect to the server: {}", self.0)
    }
}

impl std::error::Error for Unreachable {}

/// The connection a request goes out on.
enum Line {
    /// Kept alive from an earlier request.
    Kept(Socket),
    /// Just connected (TLS, if any, not begun yet).
    New(TcpStream),
}

/// A kept connection the server closed as a request went out on it.
#[derive(Debug)]
struct Unanswered(io::Error);

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server closed a kept connection unanswered: {}",
            self.0
        )
    }
}

impl std::error::Error for Unanswered {}

/// Whether an error means the server cannot be reached at all (a slow
/// answer is not that).
fn unreachable(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Unreachable>())
}

/// Parses `http://host[:port]/path` (or `https://…`): the address, the
/// `Host` header, the path and how to reach it.
fn parse_url(url: &str) -> io::Result<(SocketAddr, String, String, Security)> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an http:// or https:// URL: {url}"),
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_owned()),
        None => (rest, "/".to_owned()),
    };
    // The host without the port (an IPv6 literal keeps its brackets).
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if !port.contains(']') => h,
        _ => authority,
    };
    let security = Security::of(scheme, host)?;
    let with_port = if host.len() < authority.len() {
        authority.to_owned()
    } else {
        format!("{authority}:{}", security.default_port())
    };
    let addr = with_port.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot resolve {authority}"),
        )
    })?;
    Ok((addr, authority.to_owned(), path, security))
}

struct Head {
    status: u16,
    /// HTTP/1.1, and no `Connection: close`: the server keeps the
    /// connection open after this response.
    keep_alive: bool,
    headers: Vec<(String, String)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a response's head; interim (1xx) responses before it are
/// skipped, except `101 Switching Protocols`, which is final.
fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    loop {
        let head = read_one_head(r)?;
        if !(100..200).contains(&head.status) || head.status == 101 {
            return Ok(head);
        }
    }
}

fn read_one_head(r: &mut impl BufRead) -> io::Result<Head> {
    let mut line = String::new();
    read_line(r, &mut line)?;
    let http_1_1 = line.starts_with("HTTP/1.1 ");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("bad status line {line:?}"),
            )
        })?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if read_line(r, &mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if headers.len() > super::wire::MAX_HEADERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "too many headers",
            ));
        }
        let l = line.trim_end();
        if l.is_empty() {
            let mut head = Head {
                status,
                keep_alive: false,
                headers,
            };
            head.keep_alive = http_1_1
                && !head
                    .header("connection")
                    .is_some_and(|c| c.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
            return Ok(head);
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }
}

/// A response body, de-chunked as it is read.
struct Body<R> {
    r: R,
    chunked: bool,
    left: usize,
    done: bool,
    /// Neither length nor chunks: the body ends when the server closes
    /// the connection (RFC 9112, 6.3).
    until_close: bool,
    /// The connection may serve another request once this body is read
    /// whole: the server keeps it open and the body's end is framed.
    reusable: bool,
    socket: Option<Registered>,
}

impl<R: BufRead> Body<R> {
    /// The whole body, refused beyond [`DEFAULT_MAX_MESSAGE_BYTES`].
    fn bounded(&mut self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.take(DEFAULT_MAX_MESSAGE_BYTES as u64 + 1)
            .read_to_end(&mut out)?;
        if out.len() > DEFAULT_MAX_MESSAGE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a response body over {DEFAULT_MAX_MESSAGE_BYTES} bytes"),
            ));
        }
        Ok(out)
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.until_close {
            let n = self.r.read(buf)?;
            self.done = n == 0 && !buf.is_empty();
            return Ok(n);
        }
        if self.left == 0 {
            if !self.chunked {
                self.done = true;
                return Ok(0);
            }
            let mut line = String::new();
            if read_line(&mut self.r, &mut line)? == 0 {
                // Closed before the last chunk: cut off, not whole.
                self.done = true;
                return Err(cut_off());
            }
            let mut line = if line.trim().is_empty() {
                // The CRLF after a chunk's data.
                line.clear();
                read_line(&mut self.r, &mut line)?;
                line
            } else {
                line
            };
            // The size, without any chunk extensions (`;name=value`).
            let size = line.split(';').next().unwrap_or_default().trim();
            self.left = usize::from_str_radix(size, 16)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
            if self.left == 0 {
                // The trailer section, to its empty line: the connection
                // is then at the next response.
                loop {
                    line.clear();
                    if read_line(&mut self.r, &mut line)? == 0 {
                        self.done = true;
                        return Err(cut_off());
                    }
                    if line.trim().is_empty() {
                        break;
                    }
                }
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 && want > 0 {
            // Closed before its length or its chunk was complete.
            self.done = true;
            return Err(cut_off());
        }
        self.left -= n;
        Ok(n)
    }
}

/// A body that ended before its framing said it would.
fn cut_off() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the connection in the middle of a response",
    )
}

/// The SEP-2243 headers of a stateless (2026-07-28) request, taken from
/// its body: its version, method and name, and for `tools/call` the
/// arguments the tool's schema mirrors (`params`, from its listing). None
/// for a session message.
fn stateless_headers(message: &Value, params: &ParamBindings) -> Vec<(String, String)> {
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
type ParamBindings = Mutex<HashMap<String, Vec<ParamHeader>>>;

/// Most tools whose declarations are remembered; past it the memory
/// starts over (a later listing fills it again).
const MAX_BOUND_TOOLS: usize = 4096;

/// Remembers the declarations of the tools in a `tools/list` result.
/// A tool whose declarations are invalid is not remembered (the client
/// drops it from its listing).
fn learn_bindings(result: &Value, params: &ParamBindings) {
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
fn stateless_call(message: &Value) -> Option<RequestId> {
    message.get("method")?;
    message
        .get("params")?
        .get("_meta")?
        .get(crate::protocol::stateless::META_PROTOCOL_VERSION)?;
    message.get("id").and_then(RequestId::from_value)
}

/// A header value as SEP-2243 sends it: plain when it is visible ASCII
/// (and spaces) without whitespace at either end, else `=?base64?…?=`.
pub(crate) fn header_value(v: &str) -> String {
    let plain = v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && v.trim() == v
        && !(v.starts_with("=?base64?") && v.ends_with("?="));
    if plain {
        v.to_owned()
    } else {
        format!("=?base64?{}?=", crate::model::base64(v.as_bytes()))
    }
}

impl Target {
    /// One HTTP request, on an idle connection kept alive or a new one;
    /// `call` names the stateless call it carries, which gets a connection
    /// of its own (cancelled by closing it, closed after its answer).
    ///
    /// A server closes a kept connection it finds idle without reading
    /// what arrives on it; when that happens just as a request goes out
    /// (the connection ends or is reset before any byte of an answer), the
    /// request is sent once more on a new connection, as browsers do. A
    /// server that failed while handling it would look the same: only then
    /// can a request arrive twice.
    fn request(
        self: &Arc<Self>,
        method: &str,
        body: Option<&[u8]>,
        extra: &[(&str, String)],
        silence: Option<Duration>,
        call: Option<&RequestId>,
    ) -> io::Result<(Head, Body<BufReader<Socket>>)> {
        if call.is_none() {
            if let Some(socket) = self.idle_socket() {
                match self.exchange(Some(socket), method, body, extra, silence, call) {
                    Err(e) if e.get_ref().is_some_and(|i| i.is::<Unanswered>()) => {
                        log::debug!("client: {e}; sending the request again on a new connection");
                    }
                    done => return done,
                }
            }
        }
        self.exchange(None, method, body, extra, silence, call)
    }

    /// [`request`](Self::request) on `kept` (a connection kept alive) or a
    /// new connection.
    fn exchange(
        self: &Arc<Self>,
        kept: Option<Socket>,
        method: &str,
        body: Option<&[u8]>,
        extra: &[(&str, String)],
        silence: Option<Duration>,
        call: Option<&RequestId>,
    ) -> io::Result<(Head, Body<BufReader<Socket>>)> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let keep = call.is_none();
        let reused = kept.is_some();
        let line = match kept {
            Some(socket) => Line::Kept(socket),
            None => {
                let stream = TcpStream::connect_timeout(&self.addr, DEFAULT_CONNECT_TIMEOUT)
                    .map_err(|e| io::Error::new(e.kind(), Unreachable(e)))?;
                stream.set_nodelay(true)?;
                stream.set_write_timeout(Some(DEFAULT_WRITE_TIMEOUT))?;
                Line::New(stream)
            }
        };
        let tcp = match &line {
            Line::Kept(socket) => socket.tcp(),
            Line::New(stream) => stream,
        };
        tcp.set_read_timeout(silence)?;
        let registry_copy = tcp.try_clone()?;
        let key = self.next_socket.fetch_add(1, Ordering::Relaxed);
        {
            // Checked under the registry's lock: close() drains it after
            // setting `closed`, so no socket opened now escapes it.
            let mut sockets = lock(&self.sockets);
            if self.closed.load(Ordering::SeqCst) {
                return Err(io::ErrorKind::BrokenPipe.into());
            }
            if let Some(id) = call {
                match lock(&self.calls).get_mut(id) {
                    Some(slot) => *slot = Some(key),
                    // Cancelled before it was sent: it never is.
                    None => return Err(io::ErrorKind::Interrupted.into()),
                }
            }
            sockets.insert(key, registry_copy);
        }
        let registered = Registered {
            target: Arc::downgrade(self),
            key,
            call: call.cloned(),
        };
        let mut head = format!("{method} {} HTTP/1.1\r\nHost: {}\r\n", self.path, self.host);
        if !keep {
            head.push_str("Connection: close\r\n");
        }
        // A stateless request names its own version (in `extra`) and no session.
        let stateless = extra
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("mcp-protocol-version"));
        if !stateless {
            let s = lock(&self.session);
            if let Some(id) = &s.id {
                head.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
            }
            if let Some(v) = &s.version {
                head.push_str(&format!("MCP-Protocol-Version: {v}\r\n"));
            }
        }
        for (n, v) in self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())) {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        for (n, v) in extra {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        }
        head.push_str("\r\n");
        let mut socket = match line {
            Line::Kept(socket) => socket,
            Line::New(stream) => self.security.open(stream)?,
        };
        // On a kept connection, an end or a reset before any byte of the
        // answer is the server having closed it (see `request`).
        let unanswered = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
                if reused =>
            {
                io::Error::new(e.kind(), Unanswered(e))
            }
            _ => e,
        };
        let sent = socket.write_all(head.as_bytes()).and_then(|()| match body {
            Some(b) => socket.write_all(b),
            None => Ok(()),
        });
        sent.and_then(|()| socket.flush()).map_err(unanswered)?;
        let mut r = BufReader::new(socket);
        match r.fill_buf() {
            Ok([]) => return Err(unanswered(io::ErrorKind::UnexpectedEof.into())),
            Ok(_) => {}
            Err(e) => return Err(unanswered(e)),
        }
        let head = read_head(&mut r)?;
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"));
        let length = head.header("content-length").and_then(|l| l.parse().ok());
        // 1xx, 204 and 304 have no body (RFC 9112, 6.3).
        let bodiless = head.status < 200 || head.status == 204 || head.status == 304;
        let until_close = !bodiless && !chunked && length.is_none();
        let reusable = keep && head.keep_alive && !until_close;
        Ok((
            head,
            Body {
                r,
                chunked,
                left: length.unwrap_or(0),
                done: false,
                until_close,
                reusable,
                socket: Some(registered),
            },
        ))
    }

    /// An idle connection to send the next request on: the one that fell
    /// idle last, if it did within [`IDLE_CONNECTION_MAX`] and the server
    /// has not closed it meanwhile (the others are closed).
    fn idle_socket(&self) -> Option<Socket> {
        loop {
            let (since, mut socket) = lock(&self.idle).pop()?;
            if since.elapsed() < IDLE_CONNECTION_MAX && socket.quiet() {
                return Some(socket);
            }
        }
    }

    /// Keeps `body`'s connection for the next request when the response
    /// was read whole and the server keeps the connection open; else it is
    /// closed. Done before the response is delivered, so that the request
    /// its reader sends next finds it.
    fn recycle(&self, mut body: Body<BufReader<Socket>>) {
        // Unregistered first: nothing closes or cancels it once it is idle.
        drop(body.socket.take());
        let whole = body.done || (!body.chunked && !body.until_close && body.left == 0);
        if !(body.reusable && whole && body.r.buffer().is_empty()) {
            return;
        }
        let mut idle = lock(&self.idle);
        // close() drains the idle connections after setting `closed`.
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        idle.retain(|(since, _)| since.elapsed() < IDLE_CONNECTION_MAX);
        if idle.len() < MAX_IDLE_CONNECTIONS {
            idle.push((Instant::now(), body.r.into_inner()));
        }
    }

    /// POSTs one message and delivers whatever comes back. A request that
    /// cannot be sent or answered is answered with an error at once; a
    /// server that cannot be reached ends the connection.
    fn post(self: &Arc<Self>, message: &Value) -> io::Result<()> {
        let result = self.try_post(message);
        if let Err(e) = &result {
            let id = message.get("method").and(message.get("id"));
            if let Some(id) = id.and_then(RequestId::from_value) {
                lock(&self.calls).remove(&id);
                self.fail(&id, &e.to_string());
            }
            if unreachable(e) {
                log::warn!("client: the server cannot be reached ({e}); the connection ends");
                self.end();
            }
        }
        result
    }

    /// Answers our request `id` with an error (it can get no other answer),
    /// unless we cancelled it ourselves (the client has given up on it).
    fn fail(&self, id: &RequestId, why: &str) {
        if lock(&self.cancelled).remove(id) {
            return;
        }
        log::warn!("client: request {id} failed: {why}");
        let error = ErrorObject::internal(format!("the HTTP request failed: {why}"));
        let answer = Reply::error(Some(id.clone()), error);
        self.deliver(crate::jsonrpc::to_text(&answer).into_bytes(), None);
    }

    /// Cancels our stateless call `id` the way 2026-07-28 does: by closing
    /// the connection its answer was to come on. False when it has none
    /// (a session call: the notification is sent instead).
    fn cancel(&self, id: &RequestId) -> bool {
        let Some(socket) = lock(&self.calls).remove(id) else {
            return false;
        };
        {
            let mut cancelled = lock(&self.cancelled);
            if cancelled.len() >= MAX_CANCELLED {
                cancelled.clear();
            }
            cancelled.insert(id.clone());
        }
        // Shut down outside the registry's lock.
        let open = socket.and_then(|key| lock(&self.sockets).get(&key).map(TcpStream::try_clone));
        if let Some(Ok(s)) = open {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        true
    }

    /// Ends the connection: its reader sees the end.
    fn end(&self) {
        let _ = self.incoming.send((Vec::new(), None));
    }

    fn try_post(self: &Arc<Self>, message: &Value) -> io::Result<()> {
        let bytes = crate::jsonrpc::to_text(message).into_bytes();
        // A call is answered when its handler is done: as long as the
        // call's own timeout allows.
        let call = message.get("method").is_some() && message.get("id").is_some();
        let stateless = stateless_headers(message, &self.params);
        let mut extra = vec![("Accept", "application/json, text/event-stream".to_owned())];
        extra.extend(stateless.iter().map(|(n, v)| (n.as_str(), v.clone())));
        let stateless_call = stateless_call(message);
        let (head, body) = self.request(
            "POST",
            Some(&bytes),
            &extra,
            (!call).then_some(DEFAULT_READ_TIMEOUT),
            stateless_call.as_ref(),
        )?;
        if let Some(id) = head.header("mcp-session-id") {
            lock(&self.session).id = Some(id.to_owned());
        }
        let ct = head.header("content-type").unwrap_or("").to_owned();
        let mut body = body;
        match head.status {
            202 => {
                self.recycle(body);
                Ok(())
            }
            200 if ct.starts_with("text/event-stream") => {
                // A request's stream carries its answer, and the server's
                // requests made while serving it.
                let request = message.get("method").and_then(|_| message.get("id"));
                self.follow(body, request.and_then(RequestId::from_value));
                Ok(())
            }
            200 => {
                let text = body.bounded()?;
                self.recycle(body);
                // An empty body answers nothing: fine for a notification
                // (some servers send 200 where 202 is the rule), not for a
                // call, which then fails at once.
                if text.is_empty() && call {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "the server answered the call with an empty body",
                    ));
                }
                if text.is_empty() {
                    return Ok(());
                }
                self.deliver(text, None);
                Ok(())
            }
            404 if lock(&self.session).id.is_some() => {
                // The session is gone (expired, deleted, server restarted):
                // end this connection so the client can start a new one.
                self.end();
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "the server no longer knows this session (404)",
                ))
            }
            status => {
                let text = body.bounded().unwrap_or_default();
                self.recycle(body);
                // A JSON-RPC error body still answers the request.
                if serde_json::from_slice::<Value>(&text).is_ok_and(|v| {
                    v.get("error").is_some() && v.get("id").is_some_and(|i| !i.is_null())
                }) {
                    self.deliver(text, None);
                    return Ok(());
                }
                Err(io::Error::other(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&text)
                )))
            }
        }
    }

    fn deliver(&self, bytes: Vec<u8>, related: Option<RequestId>) {
        if let Ok(v) = serde_json::from_slice::<Value>(&bytes) {
            // Remember the negotiated revision for the MCP-Protocol-Version header.
            if let Some(pv) = v.pointer("/result/protocolVersion").and_then(Value::as_str) {
                if v.pointer("/result/serverInfo").is_some() {
                    lock(&self.session).version = Some(pv.to_owned());
                }
            }
            if let Some(result) = v.get("result") {
                learn_bindings(result, &self.params);
            }
        }
        let _ = self.incoming.send((bytes, related));
    }

    /// Reads the SSE stream of `request` (none for a notification's); if it
    /// ends before the response, resumes it with GET + Last-Event-ID after
    /// the server's retry delay.
    fn follow(self: &Arc<Self>, body: Body<BufReader<Socket>>, request: Option<RequestId>) {
        let target = self.clone();
        let _ = std::thread::Builder::new().name("mcpvisor-client-sse".into()).spawn(move || {
            let mut body = body;
            let mut attempts = 0;
            loop {
                let (last_id, retry, answered) =
                    target.read_events(BufReader::new(body), request.as_ref());
                let Some(request) = request.as_ref().filter(|_| !answered) else {
                    return;
                };
                // Cancelled by closing it: nothing to resume.
                if target.closed.load(Ordering::SeqCst) || lock(&target.cancelled).remove(request) {
                    return;
                }
                // The call fails at once when its stream cannot be resumed.
                let Some(last) = last_id else {
                    return target.fail(request, "its stream ended without a response or an event id to resume from");
                };
                attempts += 1;
                if attempts > MAX_RESUME_ATTEMPTS {
                    return target.fail(request, &format!("its stream was resumed {MAX_RESUME_ATTEMPTS} times without a response"));
                }
                std::thread::sleep(retry.unwrap_or(DEFAULT_RECONNECT_DELAY));
                let resume = [("Accept", "text/event-stream".into()), ("Last-Event-ID", last)];
                match target.request("GET", None, &resume, None, None) {
                    Ok((head, b)) if head.status == 200 => body = b,
                    Ok((head, _)) => {
                        return target.fail(request, &format!("resuming its stream failed with HTTP {}", head.status));
                    }
                    Err(e) => return target.fail(request, &format!("resuming its stream failed: {e}")),
                }
            }
        });
    }

    /// Keeps the session's standalone GET stream open (if the server has
    /// one), resuming it after drops, until the session ends.
    fn listen(self: Arc<Self>) {
        let _ = std::thread::Builder::new()
            .name("mcpvisor-client-get".into())
            .spawn(move || {
                let mut last: Option<String> = None;
                let mut failures = 0;
                while failures <= MAX_RESUME_ATTEMPTS && !self.closed.load(Ordering::SeqCst) {
                    let mut extra = vec![("Accept", "text/event-stream".to_owned())];
                    if let Some(l) = &last {
                        extra.push(("Last-Event-ID", l.clone()));
                    }
                    let retry = match self.request("GET", None, &extra, Some(DEFAULT_READ_TIMEOUT), None) {
                        Ok((head, body)) if head.status == 200 => {
                            failures = 0;
                            let (id, retry, _) = self.read_events(BufReader::new(body), None);
                            last = id.or(last);
                            retry
                        }
                        // The server still holds our previous stream (it has
                        // not noticed it died): try again after a while.
                        Ok((head, _)) if head.status == 409 => {
                            failures += 1;
                            None
                        }
                        // 405: no standalone stream; 404: the session ended.
                        Ok(_) => return,
                        Err(e) if unreachable(&e) => {
                            if !self.closed.load(Ordering::SeqCst) {
                                log::warn!("client: the server cannot be reached ({e}); the connection ends");
                                self.end();
                            }
                            return;
                        }
                        Err(_) => {
                            failures += 1;
                            None
                        }
                    };
                    if self.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    std::thread::sleep(retry.unwrap_or(DEFAULT_RECONNECT_DELAY));
                }
            });
    }

    /// Delivers every event's message, as related to `request`; returns
    /// (last event id, retry, whether a response came).
    fn read_events(
        &self,
        r: impl BufRead,
        request: Option<&RequestId>,
    ) -> (Option<String>, Option<Duration>, bool) {
        let mut events = SseReader::new(r);
        let mut answered = false;
        while let Some(msg) = events.next_data() {
            answered |= serde_json::from_str::<Value>(&msg)
                .is_ok_and(|v| v.get("method").is_none() && v.get("id").is_some());
            self.deliver(msg.into_bytes(), request.cloned());
        }
        (events.last_id, events.retry, answered)
    }
}

/// The events of a `text/event-stream` as the client reads them: each
/// event's data (its `data:` lines joined), remembering the last `id:` and
/// `retry:`. Lines and events are bounded by
/// [`DEFAULT_MAX_MESSAGE_BYTES`]; past that the stream ends.
pub(crate) struct SseReader<R> {
    r: R,
    line: String,
    /// The last event id seen (to resume from).
    pub(crate) last_id: Option<String>,
    /// The last reconnection delay the server asked for.
    pub(crate) retry: Option<Duration>,
}

impl<R: BufRead> SseReader<R> {
    pub(crate) fn new(r: R) -> Self {
        SseReader {
            r,
            line: String::new(),
            last_id: None,
            retry: None,
        }
    }

    /// The next event's data; `None` at the end of the stream (or on a
    /// read error, or an event over the limit).
    pub(crate) fn next_data(&mut self) -> Option<String> {
        let mut data = String::new();
        loop {
            self.line.clear();
            match read_line(&mut self.r, &mut self.line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let l = self.line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                if !data.is_empty() {
                    return Some(data);
                }
                continue;
            }
            if let Some(v) = l.strip_prefix("id:") {
                self.last_id = Some(v.trim().to_owned());
            } else if let Some(v) = l.strip_prefix("retry:") {
                self.retry = v.trim().parse().ok().map(Duration::from_millis);
            } else if let Some(v) = l.strip_prefix("data:") {
                if data.len() + v.len() > DEFAULT_MAX_MESSAGE_BYTES {
                    log::warn!("client: an event over {DEFAULT_MAX_MESSAGE_BYTES} bytes; the stream is dropped");
                    return None;
                }
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
    }
}

/// How long a thread that POSTs messages waits for the next one before it
/// ends: 10 s.
pub const POST_THREAD_IDLE: Duration = Duration::from_secs(10);

/// The threads that POST messages: one for each message in flight, so a
/// long call never holds up the next message; a thread done with its
/// message takes the next one instead of a new thread starting for it.
struct Posters {
    /// `None` once closed: idle threads then end.
    jobs: Option<Sender<Value>>,
    rx: Receiver<Value>,
    /// Idle threads not yet promised a message.
    idle: Arc<AtomicUsize>,
    /// What a thread does with a message.
    run: Arc<dyn Fn(&Value) + Send + Sync>,
    /// How long an idle thread waits for a message ([`POST_THREAD_IDLE`]).
    wait: Duration,
}

impl Posters {
    fn new(run: Arc<dyn Fn(&Value) + Send + Sync>) -> Posters {
        let (jobs, rx) = crossbeam_channel::unbounded();
        Posters {
            jobs: Some(jobs),
            rx,
            idle: Arc::default(),
            run,
            wait: POST_THREAD_IDLE,
        }
    }

    /// The threads of `target`'s writer: each POSTs its message.
    fn of(target: &Arc<Target>) -> Posters {
        let target = target.clone();
        Posters::new(Arc::new(move |message: &Value| {
            if let Err(e) = target.post(message) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::warn!("client: POST failed: {e}");
                }
            }
        }))
    }

    /// Runs `message` on an idle thread, or a new one.
    fn post(&self, message: Value) -> io::Result<()> {
        let Some(jobs) = &self.jobs else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        if take_one(&self.idle) {
            // An idle thread waits for it (it was counted before it began
            // to wait, and only leaves uncounted).
            return jobs
                .send(message)
                .map_err(|_| io::ErrorKind::BrokenPipe.into());
        }
        let (run, rx, idle) = (self.run.clone(), self.rx.clone(), self.idle.clone());
        let wait = self.wait;
        std::thread::Builder::new()
            .name("mcpvisor-client-post".into())
            .spawn(move || {
                let mut next = Some(message);
                while let Some(message) = next.take() {
                    run(&message);
                    idle.fetch_add(1, Ordering::SeqCst);
                    next = loop {
                        match rx.recv_timeout(wait) {
                            Ok(m) => break Some(m),
                            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break None,
                            // Leaves, unless a message was promised to the
                            // idle threads meanwhile: it is on its way.
                            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                                if take_one(&idle) {
                                    break None;
                                }
                            }
                        }
                    };
                }
            })?;
        Ok(())
    }

    /// No more messages: idle threads end (busy ones after their message).
    fn close(&mut self) {
        self.jobs = None;
    }
}

/// Takes one from `n` unless it is 0.
fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
        .is_ok()
}

struct HttpWriter {
    target: Arc<Target>,
    posters: Posters,
    closed: bool,
}

impl MessageWriter for HttpWriter {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        if self.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        match message.get("method").and_then(Value::as_str) {
            // A stateless call is cancelled by closing its connection.
            Some("notifications/cancelled") => {
                let id = message
                    .pointer("/params/requestId")
                    .and_then(RequestId::from_value);
                if id.is_some_and(|id| self.target.cancel(&id)) {
                    return Ok(());
                }
            }
            // Inline: its answer carries the session id later requests need.
            Some("initialize") => return self.target.post(message),
            Some("notifications/initialized") => {
                self.target.post(message)?;
                // The session is up: open the standalone stream for messages
                // the server sends outside any request.
                self.target.clone().listen();
                return Ok(());
            }
            _ => {}
        }
        // A stateless call is known (and cancellable) from now on, before
        // its POST is under way.
        if let Some(id) = stateless_call(message) {
            lock(&self.target.calls).insert(id, None);
        }
        let posted = self.posters.post(message.clone());
        if posted.is_err() {
            if let Some(id) = stateless_call(message) {
                lock(&self.target.calls).remove(&id);
            }
        }
        posted
    }

    fn close(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        let t = &self.target;
        let has_session = lock(&t.session).id.is_some();
        if has_session {
            // Tell the server the session is over (405 means it keeps it; fine).
            let _ = t.request("DELETE", None, &[], Some(DEFAULT_READ_TIMEOUT), None);
        }
        // End every thread reading a response, then the reader.
        t.closed.store(true, Ordering::SeqCst);
        self.posters.close();
        for (_, s) in lock(&t.sockets).drain() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        lock(&t.idle).clear();
        t.end();
    }
}

struct HttpReader(Receiver<(Vec<u8>, Option<RequestId>)>);

impl MessageReader for HttpReader {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.read_related()?.map(|(m, _)| m))
    }
    fn read_related(&mut self) -> io::Result<Option<(Vec<u8>, Option<RequestId>)>> {
        // An empty message marks the end of the session (404).
        Ok(self.0.recv().ok().filter(|(m, _)| !m.is_empty()))
    }
}

impl Connection {
    /// A Streamable HTTP connection to `url` (`http://host:port/path`, or
    /// `https://…` trusting the system's certificate authorities, or those
    /// of `SSL_CERT_FILE` / `SSL_CERT_DIR` when set).
    pub fn http(url: &str) -> io::Result<Connection> {
        Connection::http_with_headers(url, Vec::new())
    }

    /// [`Connection::http`], sending `headers` with every request (an
    /// `Authorization` a server asks for, say). A name that is not an HTTP
    /// token, a value with a control character, or a header the transport
    /// sets itself is refused.
    pub fn http_with_headers(url: &str, headers: Vec<(String, String)>) -> io::Result<Connection> {
        check_headers(&headers)?;
        let (addr, host, path, security) = parse_url(url)?;
        // Bounded by the number of answers in flight; the reader drains it.
        let (tx, rx) = crossbeam_channel::unbounded();
        let target: Arc<Target> = Arc::new(Target {
            addr,
            security,
            host,
            path,
            session: Mutex::new(SessionState::default()),
            incoming: tx,
            closed: AtomicBool::new(false),
            sockets: Mutex::new(FastMap::default()),
            idle: Mutex::default(),
            next_socket: AtomicU64::new(0),
            headers,
            params: Mutex::default(),
            calls: Mutex::default(),
            cancelled: Mutex::default(),
        });
        Ok(Connection::new(
            Box::new(HttpWriter {
                posters: Posters::of(&target),
                target,
                closed: false,
            }),
            Box::new(HttpReader(rx)),
        ))
    }
}

impl Connection {
    /// [`Connection::http`] sending `Authorization: Bearer <token>` with
    /// every request: what an mcpvisor server with `bearerTokenFile` (or
    /// any server behind OAuth with a token already in hand) asks for. A
    /// token that is empty or not visible ASCII is refused.
    pub fn http_bearer(url: &str, token: &str) -> io::Result<Connection> {
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a bearer token must be non-empty visible ASCII",
            ));
        }
        Connection::http_with_headers(
            url,
            vec![("Authorization".into(), format!("Bearer {token}"))],
        )
    }

    /// [`Connection::http_bearer`] with the token read from `path`: its
    /// first line that is neither blank nor a `#` comment, trimmed (the
    /// format of the server's `bearerTokenFile`). Read once, here.
    pub fn http_bearer_file(url: &str, path: &std::path::Path) -> io::Result<Connection> {
        let tokens = super::read_token_file(path)?;
        Connection::http_bearer(url, &tokens[0])
    }
}

/// Headers a caller may add to every request: HTTP tokens as names,
/// values without control characters, none the transport sets itself.
pub(crate) fn check_headers(headers: &[(String, String)]) -> io::Result<()> {
    const OWN: [&str; 6] = [
        "host",
        "connection",
        "content-length",
        "content-type",
        "mcp-session-id",
        "mcp-protocol-version",
    ];
    for (n, v) in headers {
        let token = !n.is_empty()
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token || v.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("header {n:?}: not a valid HTTP header"),
            ));
        }
        if OWN.contains(&n.to_ascii_lowercase().as_str()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("header {n:?}: set by the transport itself"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::flow::tests::until;
    use std::thread::ThreadId;

    /// Posters whose threads report (their id, the message) when done; a
    /// message `"wait"` is reported (with `None`) when it starts, then
    /// waits for `go`.
    #[allow(clippy::type_complexity)]
    fn recording() -> (Posters, Receiver<(Option<ThreadId>, Value)>, Sender<()>) {
        let (done_tx, done) = crossbeam_channel::unbounded();
        let (go, go_rx) = crossbeam_channel::unbounded::<()>();
        let posters = Posters::new(Arc::new(move |m: &Value| {
            if m == "wait" {
                let _ = done_tx.send((None, m.clone()));
                let _ = go_rx.recv();
            }
            let _ = done_tx.send((Some(std::thread::current().id()), m.clone()));
        }));
        (posters, done, go)
    }

    /// A body over `bytes` framed as the flags say, and what it reads as
    /// (or the error's kind), with the bytes left after it.
    fn read_body(
        bytes: &[u8],
        chunked: bool,
        length: Option<usize>,
    ) -> (Result<Vec<u8>, io::ErrorKind>, bool, Vec<u8>) {
        let mut body = Body {
            r: BufReader::new(io::Cursor::new(bytes.to_vec())),
            chunked,
            left: length.unwrap_or(0),
            done: false,
            until_close: !chunked && length.is_none(),
            reusable: true,
            socket: None,
        };
        let read = body.bounded().map_err(|e| e.kind());
        let mut rest = Vec::new();
        body.r.read_to_end(&mut rest).unwrap();
        (read, body.done, rest)
    }

    #[test]
    fn bodies_end_where_their_framing_says() {
        let next = b"HTTP/1.1 200 OK";
        // Chunks, an extension, trailers: read to the trailers' end, so the
        // connection is at the next response.
        let chunked = [
            &b"5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"[..],
            next,
        ]
        .concat();
        let (read, done, rest) = read_body(&chunked, true, None);
        assert_eq!(read.unwrap(), b"hello world");
        assert!(done);
        assert_eq!(rest, next);
        // A length.
        let sized = [&b"hello"[..], next].concat();
        let (read, _, rest) = read_body(&sized, false, Some(5));
        assert_eq!((read.unwrap(), rest), (b"hello".to_vec(), next.to_vec()));
        // Neither: to the end of the connection.
        let (read, done, _) = read_body(b"all of it", false, None);
        assert_eq!(read.unwrap(), b"all of it");
        assert!(done);
        // Cut short: an error, never a body that passes for whole.
        let (read, ..) = read_body(b"5\r\nhel", true, None);
        assert_eq!(read.unwrap_err(), io::ErrorKind::UnexpectedEof);
        let (read, ..) = read_body(b"5\r\nhello\r\n0\r\n", true, None);
        assert_eq!(read.unwrap_err(), io::ErrorKind::UnexpectedEof);
        let (read, ..) = read_body(b"hel", false, Some(5));
        assert_eq!(read.unwrap_err(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_thread_done_with_its_message_takes_the_next() {
        let (posters, done, _go) = recording();
        let mut threads = HashSet::new();
        for i in 0..20 {
            posters.post(Value::from(i)).unwrap();
            let (thread, m) = done.recv().unwrap();
            assert_eq!(m, i);
            threads.insert(thread);
            // Until it counts as idle, the next message would start another.
            until("never idle", || posters.idle.load(Ordering::SeqCst) > 0);
        }
        assert_eq!(threads.len(), 1, "one thread served them one after another");
    }

    #[test]
    fn a_message_never_waits_behind_a_busy_thread() {
        let (posters, done, go) = recording();
        posters.post("wait".into()).unwrap();
        assert_eq!(done.recv().unwrap(), (None, "wait".into()));
        // The first thread is busy: the next messages go to others.
        for i in 0..3 {
            posters.post(Value::from(i)).unwrap();
            let (_, m) = done
                .recv_timeout(Duration::from_secs(20))
                .expect("a message waited behind the busy thread");
            assert_eq!(m, i);
        }
        go.send(()).unwrap();
        assert_eq!(done.recv().unwrap().1, "wait");
    }

    /// Waits until no thread holds what the posters run: every one ended.
    fn all_ended(posters: &Posters) {
        until("a thread lives on", || Arc::strong_count(&posters.run) == 1);
    }

    #[test]
    fn a_thread_idle_for_its_wait_ends_and_a_later_message_starts_one() {
        let (mut posters, done, _go) = recording();
        posters.wait = Duration::from_millis(1);
        for i in 0..3 {
            posters.post(Value::from(i)).unwrap();
            assert_eq!(done.recv().unwrap().1, i);
            all_ended(&posters);
            assert_eq!(posters.idle.load(Ordering::SeqCst), 0, "none counted idle");
        }
    }

    #[test]
    fn a_message_promised_to_a_thread_that_stops_waiting_still_runs() {
        let (mut posters, done, _go) = recording();
        // Every idle thread gives up at once, racing every promise.
        posters.wait = Duration::ZERO;
        for i in 0..200 {
            posters.post(Value::from(i)).unwrap();
        }
        let mut got: Vec<i64> = (0..200)
            .map(|_| {
                done.recv_timeout(Duration::from_secs(20))
                    .expect("a message was lost")
                    .1
            })
            .map(|v| v.as_i64().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..200).collect::<Vec<i64>>());
    }

    #[test]
    fn heads_skip_interim_answers_and_tell_whether_the_connection_stays() {
        let head = |text: &str| read_head(&mut io::Cursor::new(text.as_bytes().to_vec())).unwrap();
        let h = head("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!((h.status, h.keep_alive), (200, true));
        assert_eq!(head("HTTP/1.1 101 Switching Protocols\r\n\r\n").status, 101);
        assert!(!head("HTTP/1.0 200 OK\r\n\r\n").keep_alive);
        assert!(!head("HTTP/1.1 200 OK\r\nConnection: Close\r\n\r\n").keep_alive);
        assert!(!head("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
        assert!(head("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n").keep_alive);
    }

    #[test]
    fn closing_ends_the_idle_threads() {
        let (mut posters, done, _go) = recording();
        // Only the close can end them within the test.
        posters.wait = Duration::from_secs(3600);
        for i in 0..3 {
            posters.post(Value::from(i)).unwrap();
        }
        for _ in 0..3 {
            done.recv().unwrap();
        }
        posters.close();
        assert!(posters.post(Value::from(4)).is_err(), "closed");
        all_ended(&posters);
    }

    #[test]
    fn urls_give_their_address_host_path_and_security() {
        let (addr, host, path, s) = parse_url("http://127.0.0.1:8808/mcp").unwrap();
        assert_eq!(
            (addr.port(), host.as_str(), path.as_str()),
            (8808, "127.0.0.1:8808", "/mcp")
        );
        assert!(matches!(s, Security::Plain));
        let (addr, host, path, _) = parse_url("http://[::1]").unwrap();
        assert_eq!(
            (addr.port(), host.as_str(), path.as_str()),
            (80, "[::1]", "/")
        );
        #[cfg(feature = "https")]
        {
            let (addr, _, _, s) = parse_url("https://127.0.0.1/mcp").unwrap();
            assert_eq!(addr.port(), 443);
            assert!(matches!(s, Security::Tls { .. }));
        }
        for bad in ["ftp://h/", "127.0.0.1:80/mcp"] {
            let e = parse_url(bad).err().expect(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
    }
}
