//! Streamable HTTP client connection, on the same small HTTP/1.1 footing as
//! the server (std sockets + `httparse`; no async runtime, no extra crate).
//!
//! Every POST runs on a thread of its own, so a long call never blocks the
//! next message (a thread done with its message takes the next one, see
//! [`POST_THREAD_IDLE`](posters::POST_THREAD_IDLE)); `notifications/initialized` runs
//! inline because the session's start comes with it.
//! Connections are kept alive and reused (at most [`MAX_IDLE_CONNECTIONS`](pool::MAX_IDLE_CONNECTIONS)
//! idle, none reused after [`IDLE_CONNECTION_MAX`](pool::IDLE_CONNECTION_MAX)); a stateless call,
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
//! a call waits as long as the call's own timeout allows: a call that
//! times out or is cancelled has its connection closed, and closing the
//! client closes them all), and no body, line or event is held beyond
//! [`DEFAULT_MAX_MESSAGE_BYTES`](crate::transport::connection::DEFAULT_MAX_MESSAGE_BYTES),
//! nor a response head beyond [`MAX_RESPONSE_HEAD`](response::MAX_RESPONSE_HEAD) (64 KiB).

mod pool;
mod posters;
mod response;
mod stateless;
mod streams;
mod target;

#[cfg(feature = "fuzzing")]
pub(crate) use streams::SseReader;

use super::socket::Security;
use crate::jsonrpc::RequestId;
use crate::sync::{lock, FastMap};
use crate::transport::connection::{Connection, MessageReader, MessageWriter, ParsedMessage};
use crate::transport::listen::redact;
use crossbeam_channel::Receiver;
use posters::Posters;
use serde_json::Value;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use target::{Call, SessionState, Target};

/// Default wait before resuming a stream when the server gave no `retry:`.
pub const DEFAULT_RECONNECT_DELAY: Duration = Duration::from_millis(1000);
/// Longest wait before resuming a stream, whatever the server's `retry:`
/// asks: 60 s. Closing the client, or giving up the call whose stream it
/// is, ends the wait at once.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(60);
/// How often in a row a call's dropped stream is resumed before its call
/// fails; the standalone stream logs it then, and goes on trying.
pub const MAX_RESUME_ATTEMPTS: u32 = 5;
pub use crate::transport::connection::DEFAULT_CONNECT_TIMEOUT;
/// Longest a response that answers no call may stay silent (the answer to
/// a notification or to `initialize`, the standalone stream, a DELETE): 5
/// minutes. A silent standalone stream is simply opened again. The answer
/// to a call may take as long as the call's own timeout allows: a call
/// that times out or is cancelled has its connection closed, and closing
/// the client closes them all.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Longest the `DELETE` that ends the session at close may take, to
/// connect and to be answered, in all: 5 s (closing holds the client's
/// writer, and a server that does not answer keeps the session until its
/// expiry).
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest the POST of `notifications/initialized` is waited for: 60 s.
/// It holds the client's writer (no request may overtake it), so a server
/// that takes it and never answers fails the connection after this, as
/// `initialize` fails at its request timeout.
pub const INITIALIZED_TIMEOUT: Duration = Duration::from_secs(60);
/// Redirects (307, 308, to the same origin) one request follows at most: 3.
pub const MAX_REDIRECTS: usize = 3;

/// Parses `http://host[:port]/path` (or `https://…`): the addresses the
/// host resolves to (each tried in turn when connecting), the `Host`
/// header, the path and how to reach it.
fn parse_url(url: &str) -> io::Result<(Vec<SocketAddr>, String, String, Security)> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not an http:// or https:// URL: {}", redact(url)),
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
    let addrs: Vec<SocketAddr> = with_port.to_socket_addrs()?.collect();
    if addrs.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot resolve {}", redact(authority)),
        ));
    }
    Ok((addrs, authority.to_owned(), path, security))
}

struct HttpWriter {
    target: Arc<Target>,
    posters: Posters,
    closed: bool,
    /// Dropped at close (see [`Target::closing`]).
    closing: Option<crossbeam_channel::Sender<()>>,
}

impl MessageWriter for HttpWriter {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        if self.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        match message.get("method").and_then(Value::as_str) {
            // A call given up on has its connection closed; a stateless
            // one is cancelled that way, a session call is also told.
            Some("notifications/cancelled") => {
                let id = message
                    .pointer("/params/requestId")
                    .and_then(RequestId::from_value);
                if id.is_some_and(|id| self.target.cancel(&id)) {
                    return Ok(());
                }
            }
            // Inline: the session has begun once it is sent (`initialize`,
            // whose answer carries the session id, is a call like any other:
            // nothing is sent before its answer, and it waits no longer
            // than the client's request timeout).
            Some("notifications/initialized") => {
                post_within(&self.target, message, INITIALIZED_TIMEOUT)?;
                // The session is up: open the standalone stream for messages
                // the server sends outside any request.
                self.target.clone().listen();
                return Ok(());
            }
            _ => {}
        }
        // A call is known (and can be given up) from now on, before its
        // POST is under way.
        let call = Call::of(message).map(|(id, call)| {
            lock(&self.target.calls).insert(id.clone(), call);
            id
        });
        let posted = self.posters.post(message.clone());
        if let (Err(_), Some(id)) = (&posted, call) {
            lock(&self.target.calls).remove(&id);
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
            // Tell the server the session is over (405 means it keeps it;
            // fine). Briefly, CLOSE_TIMEOUT in all, however slowly the
            // answer comes: closing holds the client's writer. Its socket
            // is shut down with the others below when it takes longer.
            let (done_tx, done) = crossbeam_channel::bounded::<()>(1);
            let deleting = t.clone();
            let spawned = std::thread::Builder::new()
                .name("mcpvisor-client-delete".into())
                .spawn(move || {
                    let _ = deleting.request("DELETE", None, &[], Some(CLOSE_TIMEOUT), None);
                    let _ = done_tx.send(());
                });
            if spawned.is_ok() {
                let _ = done.recv_timeout(CLOSE_TIMEOUT);
            }
        }
        // End every thread reading a response or waiting to resume a
        // stream, then the reader.
        t.closed.store(true, Ordering::SeqCst);
        self.closing = None;
        lock(&t.calls).clear();
        self.posters.close();
        for (_, s) in lock(&t.sockets).drain() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        t.idle.clear();
        t.end();
    }
}

/// Posts `message` on a thread of its own, waiting for it at most `limit`:
/// the writer, and with it the client's close, is never held longer. A
/// POST still under way then ends with the close that follows (its socket
/// is among those the close shuts down).
fn post_within(target: &Arc<Target>, message: &Value, limit: Duration) -> io::Result<()> {
    let (done_tx, done) = crossbeam_channel::bounded(1);
    let (posting, posted) = (target.clone(), message.clone());
    std::thread::Builder::new()
        .name("mcpvisor-client-post".into())
        .spawn(move || {
            let _ = done_tx.send(posting.post(&posted));
        })?;
    done.recv_timeout(limit).unwrap_or_else(|_| {
        let method = message["method"].as_str().unwrap_or("a message");
        Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the server took no {method} within {limit:?}"),
        ))
    })
}

/// Messages from the server waiting for the client's reader at most; past
/// it, the threads reading the server's responses and streams wait.
pub const INCOMING_QUEUE: usize = 256;

/// The messages the POST and stream threads deliver; an answer that
/// follows its call closely is taken without a wake-up.
struct HttpReader {
    incoming: Receiver<target::Incoming>,
    spin: crate::wait::Spin,
    /// [`Target::ended`].
    ended: Arc<AtomicBool>,
}

impl HttpReader {
    fn next(&mut self) -> Option<target::Incoming> {
        // Ended, and all that came before is read: `ended` first, as all
        // that came before the end is queued by then. (An end told while
        // the queue is not full also leaves its mark there, so a wait
        // that begins now is woken.)
        if self.ended.load(Ordering::SeqCst) && self.incoming.is_empty() {
            return None;
        }
        // An empty message marks the end of the session (404, close).
        let next = self.spin.recv_timeout(&self.incoming, Duration::MAX);
        next.ok().filter(|(m, _, _)| !m.is_empty())
    }
}

impl MessageReader for HttpReader {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.next().map(|(m, _, _)| m))
    }
    fn read_related(&mut self) -> io::Result<Option<(Vec<u8>, Option<RequestId>)>> {
        Ok(self.next().map(|(m, related, _)| (m, related)))
    }
    /// A JSON body was parsed already, to see that it answers its POST.
    fn read_parsed(&mut self) -> io::Result<Option<(ParsedMessage, Option<RequestId>)>> {
        Ok(self.next().map(|(bytes, related, parsed)| {
            (
                parsed.unwrap_or_else(|| crate::jsonrpc::parse(&bytes)),
                related,
            )
        }))
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
    /// sets itself (`Accept`, `Last-Event-ID`, `Mcp-Method`, …, or a
    /// `Transfer-Encoding` or `Content-Encoding`, which would misdescribe
    /// its bodies) is refused, whatever the case of its name.
    pub fn http_with_headers(url: &str, headers: Vec<(String, String)>) -> io::Result<Connection> {
        check_headers(&headers)?;
        let (addrs, host, path, security) = parse_url(url)?;
        let (tx, rx) = crossbeam_channel::bounded(INCOMING_QUEUE);
        let ended = Arc::new(AtomicBool::new(false));
        let (closing, closing_rx) = crossbeam_channel::bounded(0);
        let target: Arc<Target> = Arc::new(Target {
            addrs,
            security,
            host,
            path: Mutex::new(path.into()),
            session: Mutex::new(SessionState::default()),
            incoming: tx,
            ended: ended.clone(),
            closed: AtomicBool::new(false),
            sockets: Mutex::new(FastMap::default()),
            idle: pool::Pool::default(),
            next_socket: AtomicU64::new(0),
            headers,
            params: Mutex::default(),
            calls: Mutex::default(),
            closing: closing_rx,
            side_streams: (AtomicUsize::new(0), posters::MAX_UNANSWERED_POSTS),
        });
        Ok(Connection::new(
            Box::new(HttpWriter {
                posters: Posters::of(&target),
                target,
                closed: false,
                closing: Some(closing),
            }),
            Box::new(HttpReader {
                incoming: rx,
                spin: crate::wait::Spin::default(),
                ended,
            }),
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
/// values without control characters, none the transport sets itself
/// (its framing, what it accepts, its session and stream headers, the
/// stateless request's), nor a `Transfer-Encoding` or `Content-Encoding`
/// that would say its bodies are other than it sends them. Names are
/// compared without regard to case.
pub(crate) fn check_headers(headers: &[(String, String)]) -> io::Result<()> {
    const OWN: [&str; 12] = [
        "host",
        "connection",
        "content-length",
        "content-type",
        "transfer-encoding",
        "content-encoding",
        "accept",
        "last-event-id",
        "mcp-session-id",
        "mcp-protocol-version",
        "mcp-method",
        "mcp-name",
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
        let lower = n.to_ascii_lowercase();
        // `Mcp-Param-*` too: a stateless call's headers (SEP-2243).
        let param = lower.starts_with(&crate::model::PARAM_HEADER_PREFIX.to_ascii_lowercase());
        if OWN.contains(&lower.as_str()) || param {
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

    #[test]
    fn a_post_that_is_never_answered_is_given_up_at_its_limit() {
        // A server that takes the request and never answers.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, held) = crossbeam_channel::bounded::<()>(0);
        let server = std::thread::spawn(move || {
            let taken = listener.accept();
            let _ = held.recv_timeout(Duration::from_secs(30));
            drop(taken);
        });
        let (target, _closing, _queue) = target::tests::target_at(addr);
        let initialized =
            serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let e = post_within(&target, &initialized, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        drop(release);
        server.join().unwrap();
    }

    #[test]
    fn urls_give_their_address_host_path_and_security() {
        let (addrs, host, path, s) = parse_url("http://127.0.0.1:8808/mcp").unwrap();
        assert_eq!(
            (addrs[0].port(), host.as_str(), path.as_str()),
            (8808, "127.0.0.1:8808", "/mcp")
        );
        assert!(matches!(s, Security::Plain));
        let (addrs, host, path, _) = parse_url("http://[::1]").unwrap();
        assert_eq!(
            (addrs[0].port(), host.as_str(), path.as_str()),
            (80, "[::1]", "/")
        );
        // Every address a name resolves to is kept, to be tried in turn.
        let (addrs, ..) = parse_url("http://localhost:1/").unwrap();
        let want: Vec<SocketAddr> = "localhost:1".to_socket_addrs().unwrap().collect();
        assert_eq!(addrs, want);
        #[cfg(feature = "https")]
        {
            let (addrs, _, _, s) = parse_url("https://127.0.0.1/mcp").unwrap();
            assert_eq!(addrs[0].port(), 443);
            assert!(matches!(s, Security::Tls { .. }));
        }
        for bad in ["ftp://h/", "127.0.0.1:80/mcp"] {
            let e = parse_url(bad).err().expect(bad);
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad}: {e}");
        }
    }

    #[test]
    fn a_url_that_is_refused_hides_its_password() {
        let e = parse_url("u:s3cret@127.0.0.1/mcp")
            .err()
            .expect("no scheme")
            .to_string();
        assert!(e.contains("not an http://") && !e.contains("s3cret"), "{e}");
    }

    #[test]
    fn headers_the_transport_sets_itself_are_refused_whatever_their_case() {
        for name in [
            "Accept",
            "last-event-id",
            "Transfer-Encoding",
            "CONTENT-ENCODING",
            "Mcp-Method",
            "mcp-name",
            "Host",
            "Mcp-Session-Id",
            "MCP-PARAM-Region",
        ] {
            let e = check_headers(&[(name.to_owned(), "x".to_owned())])
                .err()
                .unwrap_or_else(|| panic!("{name} was taken"));
            assert!(
                e.to_string().contains("set by the transport"),
                "{name}: {e}"
            );
        }
        let mine = [
            ("Authorization".to_owned(), "Bearer t".to_owned()),
            ("X-Accept-Anything".to_owned(), "1".to_owned()),
        ];
        check_headers(&mine).unwrap();
    }
}
