//! The server a client talks to: its session, its open sockets, and how
//! one message goes out and its answer comes back.

use super::pool::Pool;
use super::response::{read_head, Body, Head};
use super::stateless::{learn_bindings, stateless_call, stateless_headers, ParamBindings};
use super::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_READ_TIMEOUT, MAX_REDIRECTS, MAX_RETRY_DELAY};
use crate::jsonrpc::{ErrorObject, Message, Parsed, Reply, RequestId, Response};
use crate::model::ProtocolVersion;
use crate::sync::{lock, FastMap};
use crate::transport::connection::{ParsedMessage, DEFAULT_WRITE_TIMEOUT};
use crate::transport::dial;
use crate::transport::http::socket::{Security, Socket};
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub(super) struct SessionState {
    pub(super) id: Option<String>,
    pub(super) version: Option<String>,
}

/// A message from the server for the client's reader, and the id of our
/// request whose stream carried it.
pub(super) type Incoming = (Vec<u8>, Option<RequestId>, Option<ParsedMessage>);

pub(super) struct Target {
    /// Where the host resolved to, tried in turn for each new connection.
    pub(super) addrs: Vec<SocketAddr>,
    pub(super) security: Security,
    pub(super) host: String,
    /// The endpoint's path (a 308 to another path on the same origin
    /// moves it); shared, so that a request takes it without a copy.
    pub(super) path: Mutex<Arc<str>>,
    pub(super) session: Mutex<SessionState>,
    // Each message with the id of our request whose response stream carried
    // it (None: a JSON body, the standalone stream). An empty message marks
    // the end of the session.
    /// What the server sent, for the client's reader; bounded
    /// ([`INCOMING_QUEUE`](super::INCOMING_QUEUE)), so a server that sends faster than the client
    /// reads is held back (its stream is not read meanwhile).
    pub(super) incoming: Sender<Incoming>,
    /// Set when the connection ended (see [`Target::end`]).
    pub(super) ended: Arc<AtomicBool>,
    pub(super) closed: AtomicBool,
    // Every open socket, so closing ends the threads reading them.
    pub(super) sockets: Mutex<FastMap<u64, TcpStream>>,
    // Connections whose last response was read whole and which the server
    // keeps open.
    pub(super) idle: Pool,
    pub(super) next_socket: AtomicU64,
    // Sent with every request (e.g. Authorization).
    pub(super) headers: Vec<(String, String)>,
    pub(super) params: ParamBindings,
    // Our calls in flight (all but `initialize`), by id, from when they are
    // written until their answer is read or their stream ends. Giving one
    // up removes it and closes the connection its answer comes on; one
    // given up before it has a connection never opens one. Closing the
    // client empties it.
    pub(super) calls: Mutex<FastMap<RequestId, Call>>,
    // Disconnected when the client closes: ends every wait before a
    // stream is resumed.
    pub(super) closing: Receiver<()>,
    /// Streams that answered no request being read (a notification's or an
    /// answer's POST got one), and the most at once
    /// ([`MAX_UNANSWERED_POSTS`](super::posters::MAX_UNANSWERED_POSTS)).
    pub(super) side_streams: (AtomicUsize, usize),
}

/// One request as [`Target::request`] sends it: all but its path.
#[derive(Clone, Copy)]
struct Ask<'a> {
    method: &'a str,
    body: Option<&'a [u8]>,
    extra: &'a [(&'a str, String)],
    silence: Option<Duration>,
    call: Option<&'a InFlight>,
}

/// One of our calls in flight (see [`Target::calls`]).
pub(super) struct Call {
    /// The key (in [`Target::sockets`]) of the connection its answer
    /// comes on, once it is open.
    socket: Option<u64>,
    /// A stateless (2026-07-28) call: closing its connection is how it is
    /// cancelled, so it gets a connection of its own.
    stateless: bool,
    /// Dropped with the entry, which tells the call's [`InFlight`] (by
    /// disconnecting `watch`) that the call was given up.
    _given_up: Sender<()>,
    watch: Receiver<()>,
}

/// Whether `message` is a request (a call), not an answer or a
/// notification.
pub(super) fn is_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some()
}

/// The id of `message` if it is a call the client tracks: a request other
/// than `initialize` (which is never cancelled).
fn tracked(message: &Value) -> Option<RequestId> {
    let method = message.get("method")?.as_str()?;
    if method == "initialize" {
        return None;
    }
    RequestId::from_value(message.get("id")?)
}

/// The response to our request `id` that a JSON body parsed as holds
/// (alone, or in a batch); `None` if it holds none.
fn response_to<'a>(parsed: &'a ParsedMessage, id: &RequestId) -> Option<&'a Response> {
    let ours = |m: &'a Message| match m {
        Message::Response(r) if r.id() == Some(id) => Some(r),
        _ => None,
    };
    match parsed.as_ref().ok()? {
        Parsed::Single(m) => ours(m),
        Parsed::Batch(items) => items.iter().filter_map(|i| i.as_ref().ok()).find_map(ours),
    }
}

/// Why a 200 `body` that is not its response fails the call it came for.
fn not_an_answer(body: &[u8]) -> io::Error {
    let why = if body.is_empty() {
        "an empty body".to_owned()
    } else {
        format!(
            "a body that is not its JSON-RPC response: {}",
            crate::jsonrpc::excerpt(String::from_utf8_lossy(body))
        )
    };
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("the server answered the call with {why}"),
    )
}

impl Call {
    /// The call `message` is, with its id, if the client tracks it (see
    /// [`tracked`]).
    pub(super) fn of(message: &Value) -> Option<(RequestId, Call)> {
        let id = tracked(message)?;
        let stateless = stateless_call(message).is_some();
        let (given_up, watch) = crossbeam_channel::bounded(0);
        Some((
            id,
            Call {
                socket: None,
                stateless,
                _given_up: given_up,
                watch,
            },
        ))
    }
}

/// A call whose POST (and the stream its answer comes on, resumed or not)
/// is under way; its entry in [`Target::calls`] goes when this is dropped.
pub(super) struct InFlight {
    target: std::sync::Weak<Target>,
    id: RequestId,
    stateless: bool,
    /// Disconnected once the call is given up (see [`Call`]).
    watch: Receiver<()>,
}

impl InFlight {
    /// `message`'s call, if the client tracks it (see [`tracked`]); one
    /// whose entry is gone already was given up before it was sent.
    fn of(target: &Arc<Target>, message: &Value) -> Option<InFlight> {
        let id = tracked(message)?;
        let (stateless, watch) = match lock(&target.calls).get(&id) {
            Some(call) => (call.stateless, call.watch.clone()),
            // A watch whose sender is gone: it reads as given up.
            None => (
                stateless_call(message).is_some(),
                crossbeam_channel::bounded(0).1,
            ),
        };
        Some(InFlight {
            target: Arc::downgrade(target),
            id,
            stateless,
            watch,
        })
    }

    /// Whether the client gave the call up (or closed): a failure of its
    /// request is then no news.
    pub(super) fn given_up(&self) -> bool {
        matches!(
            self.watch.try_recv(),
            Err(crossbeam_channel::TryRecvError::Disconnected)
        )
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(t) = self.target.upgrade() {
            lock(&t.calls).remove(&self.id);
        }
    }
}

/// Unregisters a socket when its response is done with.
pub(super) struct Registered {
    target: std::sync::Weak<Target>,
    key: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(t) = self.target.upgrade() {
            lock(&t.sockets).remove(&self.key);
        }
    }
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

/// How soon after a POST went out on a kept connection an end or a reset
/// before any byte of its answer is still taken for the server having
/// closed that connection before it read the POST (which is then sent
/// again on a new connection): 1 s, many round trips. Later, the server
/// read it and may have acted on it (run a call, then crashed): the POST
/// fails rather than run twice (RFC 9110, 9.2.2). GET and DELETE are
/// sent again whenever.
pub const STALE_CONNECTION_WINDOW: Duration = Duration::from_secs(1);

/// The error of a 404 to our session (see [`Target::session_gone`]).
#[derive(Debug)]
struct SessionGone;

impl std::fmt::Display for SessionGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the server no longer knows this session (404)")
    }
}

impl std::error::Error for SessionGone {}

/// Whether `e` says the server no longer knows our session.
fn is_session_gone(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<SessionGone>())
}

/// Whether an error means the server cannot be reached at all (a slow
/// answer is not that).
pub(super) fn unreachable(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<Unreachable>())
}

impl Target {
    /// One HTTP request, on an idle connection kept alive or a new one;
    /// `call` names the call whose answer comes on it (cancelling the call
    /// closes it); a stateless call gets a connection of its own, closed
    /// after its answer.
    ///
    /// A server closes a kept connection it finds idle without reading
    /// what arrives on it; when that happens just as a request goes out
    /// (the connection ends or is reset before any byte of an answer), the
    /// request is sent once more on a new connection, as browsers do. A
    /// server that failed while handling it would look the same: only then
    /// can a request arrive twice.
    ///
    /// A 307 or 308 to another path on the same origin is followed, at
    /// most [`MAX_REDIRECTS`] times, with the same method and body (a
    /// server mounted at `/mcp/` that redirects `/mcp` to it); a 308 moves
    /// the endpoint for later requests too. One to another origin is not
    /// (the request's headers, its credentials, are the origin's).
    pub(super) fn request(
        self: &Arc<Self>,
        method: &str,
        body: Option<&[u8]>,
        extra: &[(&str, String)],
        silence: Option<Duration>,
        call: Option<&InFlight>,
    ) -> io::Result<(Head, Body<BufReader<Socket>>)> {
        let ask = Ask {
            method,
            body,
            extra,
            silence,
            call,
        };
        let mut path: Arc<str> = lock(&self.path).clone();
        // Whether every redirect so far was permanent: only then does a 308
        // move the endpoint itself.
        let mut permanent = true;
        for _ in 0..MAX_REDIRECTS {
            let (head, mut answer) = self.request_at(&path, ask)?;
            let Some(to) = self.redirected(&head) else {
                return Ok((head, answer));
            };
            // Read whole, so that its connection serves the next request.
            let _ = answer.bounded();
            self.recycle(answer);
            log::info!("client: {method} {path}: HTTP {} to {to}", head.status);
            permanent &= head.status == 308;
            path = to.into();
            if permanent {
                *lock(&self.path) = path.clone();
            }
        }
        self.request_at(&path, ask)
    }

    /// Where a 307 or 308 sends the request, if it is a path on this
    /// origin (an absolute path, or a URL of this scheme, host and port)
    /// that can go into a request line.
    fn redirected(&self, head: &Head) -> Option<String> {
        if !matches!(head.status, 307 | 308) {
            return None;
        }
        let location = head.header("location")?.trim();
        let path = if location.starts_with('/') && !location.starts_with("//") {
            location
        } else {
            let scheme = match self.security {
                Security::Plain => "http://",
                #[cfg(feature = "https")]
                Security::Tls { .. } => "https://",
            };
            let rest = location
                .get(..scheme.len())
                .filter(|s| s.eq_ignore_ascii_case(scheme))
                .map(|_| &location[scheme.len()..])?;
            let (authority, path) = rest.split_at(rest.find('/')?);
            let port = self.security.default_port();
            if !same_authority(authority, &self.host, port) {
                return None;
            }
            path
        };
        // A fragment is the client's own, never sent (RFC 9112, 3.2).
        let path = path.split('#').next().unwrap_or_default();
        path.bytes()
            .all(|b| b.is_ascii_graphic())
            .then(|| path.to_owned())
    }

    /// [`request`](Self::request) to `path`, redirects not followed.
    fn request_at(
        self: &Arc<Self>,
        path: &str,
        ask: Ask<'_>,
    ) -> io::Result<(Head, Body<BufReader<Socket>>)> {
        let call = ask.call;
        // Given up while queued: not sent (nor an idle connection taken).
        if call.is_some_and(InFlight::given_up) {
            return Err(io::ErrorKind::Interrupted.into());
        }
        // A stateless call's connection is its own, also when its stream
        // is resumed: closing it cancels the call.
        if !call.is_some_and(|c| c.stateless) {
            if let Some(socket) = self.idle_socket() {
                match self.exchange(Some(socket), path, ask) {
                    Err(e) if e.get_ref().is_some_and(|i| i.is::<Unanswered>()) => {
                        log::debug!("client: {e}; sending the request again on a new connection");
                    }
                    done => return done,
                }
            }
        }
        self.exchange(None, path, ask)
    }

    /// [`request`](Self::request) on `kept` (a connection kept alive) or a
    /// new connection.
    fn exchange(
        self: &Arc<Self>,
        kept: Option<Socket>,
        path: &str,
        ask: Ask<'_>,
    ) -> io::Result<(Head, Body<BufReader<Socket>>)> {
        let Ask {
            method,
            body,
            extra,
            silence,
            call,
        } = ask;
        if self.closed.load(Ordering::SeqCst) {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let keep = !call.is_some_and(|c| c.stateless);
        let reused = kept.is_some();
        let line = match kept {
            Some(socket) => Line::Kept(socket),
            None => {
                // A request whose answer is due sooner does not wait
                // longer than that to connect either.
                let limit =
                    silence.map_or(DEFAULT_CONNECT_TIMEOUT, |s| s.min(DEFAULT_CONNECT_TIMEOUT));
                let stream = dial::connect_any(&self.host, self.addrs.iter().copied(), limit)
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
            if let Some(call) = call {
                match lock(&self.calls).get_mut(&call.id) {
                    Some(slot) => slot.socket = Some(key),
                    // Cancelled before it was sent: it never is.
                    None => return Err(io::ErrorKind::Interrupted.into()),
                }
            }
            sockets.insert(key, registry_copy);
        }
        let registered = Registered {
            target: Arc::downgrade(self),
            key,
        };
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host);
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
        let sent_at = Instant::now();
        // Past the window the server read the request and may have acted
        // on it (run a call, then failed): a POST is not sent again.
        let unread =
            |e: io::Error| match method != "POST" || sent_at.elapsed() < STALE_CONNECTION_WINDOW {
                true => unanswered(e),
                false => e,
            };
        let mut r = BufReader::new(socket);
        match r.fill_buf() {
            Ok([]) => return Err(unread(io::ErrorKind::UnexpectedEof.into())),
            Ok(_) => {}
            Err(e) => return Err(unread(e)),
        }
        let head = read_head(&mut r)?;
        let chunked = head.chunked();
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

    /// POSTs one message and delivers whatever comes back. A request that
    /// cannot be sent or answered is answered with an error at once; a
    /// server that cannot be reached ends the connection.
    pub(super) fn post(self: &Arc<Self>, message: &Value) -> io::Result<()> {
        let mut call = InFlight::of(self, message);
        let result = self.try_post(message, &mut call);
        if let Err(e) = &result {
            let gone = is_session_gone(e);
            if call.as_ref().is_some_and(InFlight::given_up) {
                // Our own doing (its connection closed, or never opened):
                // nobody waits for its answer any more.
                if gone {
                    self.end();
                }
                return Err(io::ErrorKind::Interrupted.into());
            }
            let id = message.get("method").and(message.get("id"));
            if let Some(id) = id.and_then(RequestId::from_value) {
                self.fail(&id, &e.to_string());
            }
            if unreachable(e) {
                log::warn!("client: the server cannot be reached ({e}); the connection ends");
                self.end();
            } else if gone {
                self.end();
            }
        }
        result
    }

    /// Answers our request `id` with an error: it can get no other answer.
    pub(super) fn fail(&self, id: &RequestId, why: &str) {
        log::warn!("client: request {id} failed: {why}");
        let error = ErrorObject::transport_failure(format!("the HTTP request failed: {why}"));
        let answer = Reply::error(Some(id.clone()), error);
        self.deliver(crate::jsonrpc::to_text(&answer).into_bytes(), None);
    }

    /// Gives up our call `id`: closes the connection its answer comes on,
    /// if it is open (a call not sent yet never is), so that a server that
    /// never finishes the answer holds nothing of ours. True for a
    /// stateless call, for which that is how it is cancelled (2026-07-28);
    /// a session call is also told with `notifications/cancelled`. False
    /// when the call is not in flight.
    pub(super) fn cancel(&self, id: &RequestId) -> bool {
        let Some(call) = lock(&self.calls).remove(id) else {
            return false;
        };
        // Under the registry's lock: a connection is unregistered under it
        // before it goes back to the idle ones, so this never reaches one
        // that another request has taken since (shutdown(2) does not
        // block).
        let sockets = lock(&self.sockets);
        if let Some(s) = call.socket.and_then(|key| sockets.get(&key)) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        call.stateless
    }

    /// Waits `delay` (at most [`MAX_RETRY_DELAY`]) before a stream is
    /// resumed; false when the client closed, or gave `call` up, meanwhile.
    pub(super) fn pause(&self, call: Option<&InFlight>, delay: Duration) -> bool {
        let never = crossbeam_channel::never();
        let given_up = call.map_or(&never, |c| &c.watch);
        crossbeam_channel::select! {
            recv(given_up) -> _ => false,
            recv(self.closing) -> _ => false,
            default(delay.min(MAX_RETRY_DELAY)) => !self.closed.load(Ordering::SeqCst),
        }
    }

    /// Whether the server gave us a session (so a 404 means it ended).
    pub(super) fn has_session(&self) -> bool {
        lock(&self.session).id.is_some()
    }

    /// The server answered 404 to our session: it is gone (expired,
    /// deleted, the server restarted). Says why; the caller fails what
    /// waited for the answer, then ends this connection ([`end`](Self::end))
    /// so that the client can start a new one: the failure is read first.
    pub(super) fn session_gone(&self) -> io::Error {
        io::Error::new(io::ErrorKind::NotFound, SessionGone)
    }

    /// Ends the connection: its reader sees the end, after what is queued
    /// (told by a mark in the queue, or by `ended` once the queue is
    /// drained when it was full: this may run on the reader's own thread,
    /// which must not wait for room).
    pub(super) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        let _ = self.incoming.try_send((Vec::new(), None, None));
    }

    fn try_post(self: &Arc<Self>, message: &Value, call: &mut Option<InFlight>) -> io::Result<()> {
        let bytes = crate::jsonrpc::to_text(message).into_bytes();
        // A call is answered when its handler is done: as long as the
        // call's own timeout allows (giving it up closes its connection).
        // Anything else (notifications, `initialize`) gets an answer
        // within DEFAULT_READ_TIMEOUT of silence.
        let method = message.get("method").and_then(Value::as_str);
        let is_request = is_request(message);
        let request_id = method
            .and_then(|_| message.get("id"))
            .and_then(RequestId::from_value);
        // Only these answers teach anything (see `learn`); the others are
        // parsed once, by the client.
        let teaches = matches!(method, Some("initialize" | "tools/list"));
        let silence = call.is_none().then_some(DEFAULT_READ_TIMEOUT);
        let stateless = stateless_headers(message, &self.params);
        let mut extra = vec![("Accept", "application/json, text/event-stream".to_owned())];
        extra.extend(stateless.iter().map(|(n, v)| (n.as_str(), v.clone())));
        let (head, body) = self.request("POST", Some(&bytes), &extra, silence, call.as_ref())?;
        if let Some(id) = head.header("mcp-session-id") {
            // It goes back in every request's head.
            if !crate::protocol::is_valid_session_id(id) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "the server gave a session id that is not visible ASCII",
                ));
            }
            lock(&self.session).id = Some(id.to_owned());
        }
        let mut body = body;
        match head.status {
            // 202 is the rule for a notification or a response; some
            // servers say 204 (no content), which means the same here.
            status @ (202 | 204) => {
                self.recycle(body);
                if is_request {
                    // Nothing will ever answer it: it fails now rather
                    // than at its timeout.
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the server accepted the request ({status}) without answering it"),
                    ));
                }
                Ok(())
            }
            200 if head.media_type_is("text/event-stream") => {
                match request_id {
                    // A request's stream carries its answer, and the
                    // server's requests made while serving it.
                    Some(_) => self.follow(body, request_id, call.take(), teaches),
                    // A notification's or an answer's (the rule is 202).
                    None => self.read_through(body),
                }
                Ok(())
            }
            200 => {
                let text = body.bounded()?;
                self.recycle(body);
                // An empty body is fine for a notification (some servers
                // send 200 where 202 is the rule).
                if text.is_empty() && !is_request {
                    return Ok(());
                }
                // A call's body is its response or nothing will answer it
                // (no stream follows): anything else (empty, not JSON-RPC,
                // another id) fails it at once rather than at its timeout.
                // Parsed once, here, for the client's reader too.
                let parsed = crate::jsonrpc::parse(&text);
                let answered = request_id.as_ref().and_then(|id| response_to(&parsed, id));
                if is_request && answered.is_none() {
                    return Err(not_an_answer(&text));
                }
                if teaches {
                    if let Ok(v) = serde_json::from_slice::<Value>(&text) {
                        self.learn(&v);
                    }
                }
                self.deliver_parsed(text, parsed);
                Ok(())
            }
            404 if self.has_session() => Err(self.session_gone()),
            status => {
                let text = body.bounded().unwrap_or_default();
                self.recycle(body);
                // A JSON-RPC error body still answers our request when it
                // names it. Any other body answers nothing: the request
                // fails with the status, and the POST of a notification or
                // a response fails the same way (its poster logs it).
                let parsed = crate::jsonrpc::parse(&text);
                let answers = request_id
                    .as_ref()
                    .and_then(|id| response_to(&parsed, id))
                    .is_some_and(|r| r.object().contains_key("error"));
                if answers {
                    self.deliver_parsed(text, parsed);
                    return Ok(());
                }
                Err(io::Error::other(format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&text)
                )))
            }
        }
    }

    /// Hands a message from the server to the client's reader, with the
    /// id of our request whose stream carried it.
    pub(super) fn deliver(&self, bytes: Vec<u8>, related: Option<RequestId>) {
        let _ = self.incoming.send((bytes, related, None));
    }

    /// [`deliver`](Self::deliver) with what the bytes parsed as (on no
    /// stream), so that the reader need not parse them again.
    fn deliver_parsed(&self, bytes: Vec<u8>, parsed: ParsedMessage) {
        let _ = self.incoming.send((bytes, None, Some(parsed)));
    }

    /// Remembers what a response of the server's teaches: the negotiated
    /// revision (an `initialize` result) for the MCP-Protocol-Version
    /// header, the tools' header declarations (a `tools/list` result).
    pub(super) fn learn(&self, response: &Value) {
        let Some(result) = response.get("result") else {
            return;
        };
        if let Some(pv) = result.get("protocolVersion").and_then(Value::as_str) {
            // Only a revision this crate speaks goes into a header: the
            // server's text is never written there as it came (a line
            // break in it would split every later request).
            match ProtocolVersion::parse(pv) {
                Some(v) if result.get("serverInfo").is_some() => {
                    lock(&self.session).version = Some(v.as_str().to_owned());
                }
                Some(_) => {}
                None => log::warn!(
                    "http client: the server's protocolVersion {pv:?} is none this client speaks"
                ),
            }
        }
        learn_bindings(result, &self.params);
    }
}

/// Whether two authorities (`host[:port]`) name the same origin for a
/// scheme whose default port is `default_port`: hosts compared without
/// regard to case, and a missing or empty port taken as the default one
/// (RFC 9110, 4.2.3), so `host` and `host:80` are one origin over `http`.
fn same_authority(a: &str, b: &str, default_port: u16) -> bool {
    let split = |authority: &str| -> (String, u16) {
        let (host, port) = match authority.rsplit_once(':') {
            // The colon of an IPv6 literal's address is not a port's.
            Some((h, p)) if !p.contains(']') => (h, p),
            _ => (authority, ""),
        };
        let port = if port.is_empty() {
            Some(default_port)
        } else {
            port.parse().ok()
        };
        // An unreadable port matches nothing (not even itself).
        (host.to_ascii_lowercase(), port.unwrap_or(0))
    };
    let ((host_a, port_a), (host_b, port_b)) = (split(a), split(b));
    port_a != 0 && host_a == host_b && port_a == port_b
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::INCOMING_QUEUE;
    use super::*;
    use serde_json::json;
    use std::net::TcpListener;
    use std::time::Instant;

    /// A target no request reaches, and the sender whose drop closes it.
    fn target() -> (Arc<Target>, Sender<()>) {
        let (target, closing, _) = target_and_queue();
        (target, closing)
    }

    /// [`target`], and the queue its reader would read.
    fn target_and_queue() -> (Arc<Target>, Sender<()>, Receiver<Incoming>) {
        target_at(SocketAddr::from(([127, 0, 0, 1], 9)))
    }

    /// A target that reaches the server at `addr`, the sender whose drop
    /// closes it, and the queue its reader would read.
    pub(crate) fn target_at(addr: SocketAddr) -> (Arc<Target>, Sender<()>, Receiver<Incoming>) {
        let (incoming, queue) = crossbeam_channel::bounded(INCOMING_QUEUE);
        let (closing, closing_rx) = crossbeam_channel::bounded(0);
        let target = Target {
            addrs: vec![addr],
            security: Security::Plain,
            host: addr.to_string(),
            path: Mutex::new(Arc::from("/mcp")),
            session: Mutex::default(),
            incoming,
            ended: Arc::default(),
            closed: AtomicBool::new(false),
            sockets: Mutex::default(),
            idle: Pool::default(),
            next_socket: AtomicU64::new(0),
            headers: Vec::new(),
            params: Mutex::default(),
            calls: Mutex::default(),
            closing: closing_rx,
            side_streams: (
                AtomicUsize::new(0),
                super::super::posters::MAX_UNANSWERED_POSTS,
            ),
        };
        (Arc::new(target), closing, queue)
    }

    #[test]
    fn an_end_told_on_a_full_queue_is_seen_once_what_came_before_is_read() {
        use crate::transport::connection::MessageReader;
        let (target, _closing, queue) = target_and_queue();
        let ended = target.ended.clone();
        let mut reader = super::super::HttpReader {
            incoming: queue,
            spin: crate::wait::Spin::default(),
            ended,
        };
        for i in 0..INCOMING_QUEUE {
            target.deliver(i.to_string().into_bytes(), None);
        }
        // No room for its mark, and it does not wait for room (this may be
        // the reader's own thread).
        target.end();
        for i in 0..INCOMING_QUEUE {
            assert_eq!(reader.read().unwrap(), Some(i.to_string().into_bytes()));
        }
        assert_eq!(reader.read().unwrap(), None);
    }

    /// A session call, tracked as the writer tracks it.
    fn tracked(target: &Arc<Target>, id: i64) -> (RequestId, InFlight) {
        let message = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo"}});
        let (id, call) = Call::of(&message).unwrap();
        lock(&target.calls).insert(id.clone(), call);
        (id, InFlight::of(target, &message).unwrap())
    }

    #[test]
    fn a_wait_to_resume_a_stream_ends_when_its_call_is_given_up() {
        let (target, _closing) = target();
        let (id, call) = tracked(&target, 1);
        let waiting = {
            let target = target.clone();
            // An hour asked for: only the giving up can end it in time.
            std::thread::spawn(move || target.pause(Some(&call), Duration::from_secs(3600)))
        };
        assert!(
            !target.cancel(&id),
            "a session call: the server is told too"
        );
        assert!(!waiting.join().unwrap());
    }

    #[test]
    fn a_wait_to_resume_a_stream_ends_when_the_client_closes() {
        let (target, closing) = target();
        let waiting = {
            let target = target.clone();
            std::thread::spawn(move || target.pause(None, Duration::from_secs(3600)))
        };
        drop(closing);
        assert!(!waiting.join().unwrap());
        assert!(!target.pause(None, Duration::ZERO), "closed");
    }

    #[test]
    fn a_protocol_version_this_client_does_not_speak_never_reaches_a_header() {
        let (target, _closing) = target();
        let init = |v: &str| {
            json!({"jsonrpc": "2.0", "id": 1,
            "result": {"protocolVersion": v, "serverInfo": {"name": "s", "version": "1"}}})
        };
        target.learn(&init("2025-11-25\r\nX-Injected: 1"));
        assert_eq!(lock(&target.session).version, None);
        target.learn(&init("2025-06-18"));
        assert_eq!(lock(&target.session).version.as_deref(), Some("2025-06-18"));
    }

    #[test]
    fn a_short_wait_goes_on() {
        let (target, _closing) = target();
        let (_, call) = tracked(&target, 1);
        assert!(target.pause(Some(&call), Duration::from_millis(1)));
    }

    #[test]
    fn a_call_given_up_before_it_is_sent_is_not_sent() {
        let (target, _closing) = target();
        let (id, _) = tracked(&target, 1);
        target.cancel(&id);
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo"}});
        let call = InFlight::of(&target, &message).unwrap();
        assert!(call.given_up());
        let sent = target.request("POST", Some(b"{}"), &[], None, Some(&call));
        assert_eq!(sent.err().unwrap().kind(), io::ErrorKind::Interrupted);
    }

    /// A server that answers one request on each connection with each of
    /// `answers` in turn, then stops; its address, and each request (head
    /// and body) with when it came.
    pub(crate) fn serve(answers: Vec<String>) -> (SocketAddr, Receiver<(String, Instant)>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (seen_tx, seen) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for answer in answers {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
                let Some(request) = read_request(&mut BufReader::new(&stream)) else {
                    return;
                };
                let _ = seen_tx.send((request, Instant::now()));
                let _ = (&stream).write_all(answer.as_bytes());
            }
        });
        (addr, seen)
    }

    /// One request's head and body, as text; `None` if the connection
    /// ends first.
    fn read_request(r: &mut impl BufRead) -> Option<String> {
        let (mut request, mut length) = (String::new(), 0);
        loop {
            let mut line = String::new();
            if r.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().ok()?;
                }
            }
            request.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        r.read_exact(&mut body).ok()?;
        request.push_str(&String::from_utf8_lossy(&body));
        Some(request)
    }

    /// A whole response: `status` (`200 OK`), a body of `content_type`,
    /// and the connection closed after it.
    pub(crate) fn answer(status: &str, content_type: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    /// `message` POSTed (a call tracked as the writer tracks it) to a
    /// server that answers `answer`: what the POST came to, and what
    /// reached the client's reader (as JSON, or as a JSON string when it
    /// is not JSON).
    fn posted(message: &Value, answer: String) -> (io::Result<()>, Vec<Value>) {
        let (addr, _seen) = serve(vec![answer]);
        let (target, _closing, queue) = target_at(addr);
        if let Some((id, call)) = Call::of(message) {
            lock(&target.calls).insert(id, call);
        }
        let result = target.post(message);
        let read: Vec<Value> = queue
            .try_iter()
            .map(|(m, _, _)| {
                serde_json::from_slice(&m)
                    .unwrap_or_else(|_| Value::from(String::from_utf8_lossy(&m).into_owned()))
            })
            .collect();
        (result, read)
    }

    /// A call whose id is 7.
    fn call_7() -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}})
    }

    /// `read` is one message: the failure of call 7, saying `why`.
    fn failed_7(read: &[Value], why: &str) {
        assert_eq!(read.len(), 1, "{read:?}");
        assert_eq!(read[0]["id"], 7, "{read:?}");
        let message = read[0]["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{read:?}");
    }

    /// A 404 to our session fails the call that got it, saying why, before
    /// the connection ends: the reader reads the failure, then the end.
    /// Before, the end came first and the call got a plain "closed".
    #[test]
    fn a_call_that_meets_a_404_to_its_session_is_told_why_before_the_end() {
        let (addr, _seen) = serve(vec![answer("404 Not Found", "text/plain", "gone")]);
        let (target, _closing, queue) = target_at(addr);
        lock(&target.session).id = Some("s".into());
        let (id, call) = Call::of(&call_7()).unwrap();
        lock(&target.calls).insert(id, call);
        assert!(target.post(&call_7()).is_err());
        let read: Vec<Vec<u8>> = queue.try_iter().map(|(m, _, _)| m).collect();
        assert_eq!(read.len(), 2, "the failure, then the end: {read:?}");
        let failure: Value = serde_json::from_slice(&read[0]).unwrap();
        failed_7(&[failure], "no longer knows this session (404)");
        assert!(read[1].is_empty(), "the end mark comes last");
    }

    /// A call on a kept connection whose server ends the connection, with
    /// no answer, later than [`STALE_CONNECTION_WINDOW`] after it went out
    /// (it read the call and may have run it) fails: it is not sent again
    /// (before, it was, and ran twice).
    #[test]
    fn a_call_whose_kept_connection_ends_late_is_not_sent_again() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (seen_tx, seen) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            let answer = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
            let ok = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}",
                answer.len()
            );
            let (stream, _) = listener.accept().unwrap();
            let mut r = BufReader::new(&stream);
            read_request(&mut r).unwrap();
            (&stream).write_all(ok.as_bytes()).unwrap();
            // The second call on the kept connection: read, run for a
            // while, then the connection ends unanswered.
            read_request(&mut r).unwrap();
            let _ = seen_tx.send("kept");
            std::thread::sleep(STALE_CONNECTION_WINDOW + Duration::from_millis(200));
            drop(r);
            drop(stream);
            // A copy sent again would be answered on a new connection.
            if let Ok((stream, _)) = listener.accept() {
                if read_request(&mut BufReader::new(&stream)).is_some() {
                    let _ = seen_tx.send("again");
                    let _ = (&stream).write_all(
                        ok.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
                            .as_bytes(),
                    );
                }
            }
        });
        let (target, _closing, queue) = target_at(addr);
        for round in 0..2 {
            let (id, call) = Call::of(&call_7()).unwrap();
            lock(&target.calls).insert(id, call);
            let posted = target.post(&call_7());
            let read: Vec<Value> = queue
                .try_iter()
                .map(|(m, _, _)| serde_json::from_slice(&m).unwrap())
                .collect();
            match round {
                0 => assert!(
                    posted.is_ok() && read[0].get("result").is_some(),
                    "{read:?}"
                ),
                _ => {
                    assert!(posted.is_err(), "sent again and answered");
                    failed_7(&read, "");
                }
            }
        }
        assert_eq!(seen.try_iter().collect::<Vec<_>>(), ["kept"]);
    }

    /// The streams that notifications got (the rule is 202) are read on
    /// threads of their own, the POST going on at once, and only so many
    /// at a time: past that, one is closed unread. Before, each had a
    /// thread, uncounted, and a server that never ended them made the
    /// client start threads and open sockets without end (and reading them
    /// on the POST's thread held `notifications/initialized`).
    #[test]
    fn streams_that_notifications_get_are_bounded() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (closed_tx, closed) = crossbeam_channel::unbounded();
        // The first stream stays open until the test ends.
        let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for n in 0..2 {
                let (stream, _) = listener.accept().unwrap();
                let mut r = BufReader::new(stream.try_clone().unwrap());
                read_request(&mut r).unwrap();
                (&stream).write_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n: open\n\n").unwrap();
                if n == 1 {
                    // The second is closed by the client, unread.
                    let mut rest = Vec::new();
                    let _ = std::io::Read::read_to_end(&mut r, &mut rest);
                    let _ = closed_tx.send(());
                }
                held.push(stream);
            }
            let _ = done.recv();
        });
        let (target, _closing, _queue) = target_at(addr);
        let target = {
            let mut t = Arc::try_unwrap(target).ok().unwrap();
            t.side_streams.1 = 1;
            Arc::new(t)
        };
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {}});
        target.post(&note).unwrap();
        target.post(&note).unwrap();
        closed
            .recv_timeout(Duration::from_secs(10))
            .expect("the second stream was closed");
        assert_eq!(target.side_streams.0.load(Ordering::SeqCst), 1);
        drop(done_tx);
    }

    /// A call's stream that cannot be opened again at once (409: its old
    /// one is still open on the server) is tried again after
    /// [`DEFAULT_RECONNECT_DELAY`] at least, whatever the server's short
    /// `retry:` (before: after it, so that every try was spent within
    /// half a second).
    #[test]
    fn a_refused_resume_waits_at_least_the_reconnect_delay() {
        let first = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
            retry: 50\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n";
        let last =
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n\
            id: 2\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n";
        let (addr, seen) = serve(vec![
            first.to_owned(),
            answer("409 Conflict", "text/plain", "in use"),
            last.to_owned(),
        ]);
        let (target, _closing, queue) = target_at(addr);
        let (id, call) = Call::of(&call_7()).unwrap();
        lock(&target.calls).insert(id, call);
        target.post(&call_7()).unwrap();
        let answered = (0..2)
            .map(|_| queue.recv_timeout(Duration::from_secs(30)).unwrap().0)
            .any(|m| {
                serde_json::from_slice::<Value>(&m)
                    .is_ok_and(|v| v["id"] == 7 && v.get("result").is_some())
            });
        assert!(answered, "the call is answered on the third stream");
        let at: Vec<Instant> = seen.try_iter().map(|(_, at)| at).collect();
        assert_eq!(at.len(), 3);
        assert!(
            at[2] - at[1] >= super::super::DEFAULT_RECONNECT_DELAY,
            "tried again after {:?}",
            at[2] - at[1]
        );
    }

    #[test]
    fn a_call_answered_200_with_a_body_that_is_not_its_response_fails_at_once() {
        for body in [
            "not json!",
            r#"{"jsonrpc": "2.0", "id": 8, "result": {}}"#,
            r#"{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "parse"}}"#,
            r#"{"jsonrpc": "2.0", "method": "notifications/message", "params": {}}"#,
            "",
        ] {
            let (result, read) = posted(&call_7(), answer("200 OK", "application/json", body));
            let e = result.expect_err(body);
            assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{body}: {e}");
            // Its failure is all the reader gets: it does not wait for
            // its timeout.
            failed_7(&read, "the server answered the call with");
        }
        // Its own response is delivered as it came (alone or in a batch).
        for ours in [
            r#"{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}"#,
            r#"[{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}]"#,
        ] {
            let json = "Application/JSON; charset=utf-8";
            let (result, read) = posted(&call_7(), answer("200 OK", json, ours));
            result.unwrap();
            assert_eq!(read, [serde_json::from_str::<Value>(ours).unwrap()]);
        }
    }

    #[test]
    fn a_redirect_on_this_origin_is_followed_and_a_permanent_one_remembered() {
        let ours = r#"{"jsonrpc": "2.0", "id": 7, "result": {"content": []}}"#;
        let moved = |status: &str, to: &str| {
            format!("HTTP/1.1 {status}\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        };
        for (status, location, kept) in [
            ("307 Temporary Redirect", "/mcp/".to_owned(), "/mcp"),
            ("308 Permanent Redirect", "/mcp/".to_owned(), "/mcp/"),
        ] {
            let (addr, seen) = serve(vec![
                moved(status, &location),
                answer("200 OK", "application/json", ours),
            ]);
            let (target, _closing, queue) = target_at(addr);
            let (id, call) = Call::of(&call_7()).unwrap();
            lock(&target.calls).insert(id, call);
            target.post(&call_7()).unwrap();
            let lines: Vec<String> = seen
                .try_iter()
                .map(|(r, _)| r.lines().next().unwrap_or_default().to_owned())
                .collect();
            assert_eq!(
                lines,
                ["POST /mcp HTTP/1.1", "POST /mcp/ HTTP/1.1"],
                "{status}"
            );
            assert_eq!(queue.try_iter().count(), 1, "{status}: the answer");
            assert_eq!(&**lock(&target.path), kept, "{status}");
        }
        // A URL of this origin is a path on it; its scheme and host are
        // read without regard to case.
        let (target, _closing, _queue) = target_at(SocketAddr::from(([127, 0, 0, 1], 9)));
        let head = |location: &str| {
            let text = format!("HTTP/1.1 308 Permanent Redirect\r\nLocation: {location}\r\n\r\n");
            read_head(&mut text.as_bytes()).unwrap()
        };
        assert_eq!(
            target
                .redirected(&head("HTTP://127.0.0.1:9/mcp/"))
                .as_deref(),
            Some("/mcp/")
        );
        assert_eq!(
            target.redirected(&head("/mcp/#top")).as_deref(),
            Some("/mcp/")
        );
        assert_eq!(target.redirected(&head("https://127.0.0.1:9/mcp/")), None);
        assert_eq!(target.redirected(&head("http://127.0.0.1:10/mcp/")), None);
        // The scheme's default port may be written or left out, on either side.
        assert!(same_authority("Example.org", "example.org:80", 80));
        assert!(same_authority("example.org:", "example.org", 80));
        assert!(same_authority("[::1]:443", "[::1]", 443));
        assert!(!same_authority("example.org:8080", "example.org", 80));
        assert!(!same_authority("example.org:x", "example.org:x", 80));
        assert!(!same_authority("[::1]", "[::2]", 80));
        // To another origin, or not a path: not followed, the call fails.
        for location in [
            "http://elsewhere.example/mcp/",
            "//elsewhere.example/mcp/",
            "/m cp",
        ] {
            let (addr, seen) = serve(vec![moved("307 Temporary Redirect", location)]);
            let (target, _closing, _queue) = target_at(addr);
            let (id, call) = Call::of(&call_7()).unwrap();
            lock(&target.calls).insert(id, call);
            assert!(target.post(&call_7()).is_err(), "{location}");
            assert_eq!(seen.try_iter().count(), 1, "{location}");
        }
    }

    #[test]
    fn an_error_body_after_a_failed_status_answers_only_the_request_it_names() {
        let error = |id: Value| {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": "refused"}})
                .to_string()
        };
        // It names our call: its answer.
        let (result, read) = posted(
            &call_7(),
            answer("400 Bad Request", "application/json", &error(json!(7))),
        );
        result.unwrap();
        assert_eq!(
            read,
            [serde_json::from_str::<Value>(&error(json!(7))).unwrap()]
        );
        // Another request: our call fails with the status.
        let (result, read) = posted(
            &call_7(),
            answer("400 Bad Request", "application/json", &error(json!(99))),
        );
        assert!(result.unwrap_err().to_string().contains("HTTP 400"));
        failed_7(&read, "HTTP 400");
        // A notification's POST: nothing reaches the reader.
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": 1}});
        let (result, read) = posted(
            &note,
            answer("400 Bad Request", "application/json", &error(json!(1))),
        );
        assert!(result.unwrap_err().to_string().contains("HTTP 400"));
        assert!(read.is_empty(), "{read:?}");
    }
}
