//! Streamable HTTP client connection, on the same small HTTP/1.1 footing as
//! the server (std sockets + `httparse`; no async runtime, no extra crate).
//!
//! Every POST runs on its own short thread, so a long call never blocks the
//! next message; `initialize` runs inline because its answer carries the
//! session id every later request needs. JSON answers and SSE streams both
//! feed one queue that the client's reader drains. A stream that ends
//! before its response is resumed with `GET` + `Last-Event-ID` after the
//! server's `retry:` delay. Closing sends `DELETE`.

use crate::jsonrpc::RequestId;
use crate::sync::lock;
use crate::transport::connection::{Connection, MessageReader, MessageWriter};
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Default wait before resuming a stream when the server gave no `retry:`.
pub const DEFAULT_RECONNECT_DELAY: Duration = Duration::from_millis(1000);
/// How often a dropped stream is resumed before giving up.
pub const MAX_RESUME_ATTEMPTS: u32 = 5;

#[derive(Default)]
struct SessionState {
    id: Option<String>,
    version: Option<String>,
}

struct Target {
    addr: SocketAddr,
    host: String,
    path: String,
    session: Mutex<SessionState>,
    // Each message with the id of our request whose response stream carried
    // it (None: a JSON body, the standalone stream). An empty message marks
    // the end of the session.
    incoming: Sender<(Vec<u8>, Option<RequestId>)>,
}

/// Parses `http://host:port/path`.
fn parse_url(url: &str) -> io::Result<(SocketAddr, String, String)> {
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("only http:// URLs are supported: {url}"),
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_owned()),
        None => (rest, "/".to_owned()),
    };
    let with_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    let addr = with_port.to_socket_addrs()?.next().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("cannot resolve {authority}"),
        )
    })?;
    Ok((addr, authority.to_owned(), path))
}

struct Head {
    status: u16,
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

fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let mut line = String::new();
    r.read_line(&mut line)?;
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
        if r.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            return Ok(Head { status, headers });
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
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            if !self.chunked {
                self.done = true;
                return Ok(0);
            }
            let mut line = String::new();
            if self.r.read_line(&mut line)? == 0 {
                self.done = true;
                return Ok(0);
            }
            let line = if line.trim().is_empty() {
                // The CRLF after a chunk's data.
                line.clear();
                self.r.read_line(&mut line)?;
                line
            } else {
                line
            };
            self.left = usize::from_str_radix(line.trim(), 16)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 {
            self.done = true;
        }
        self.left -= n;
        Ok(n)
    }
}

impl Target {
    fn request(
        &self,
        method: &str,
        body: Option<&[u8]>,
        extra: &[(&str, String)],
    ) -> io::Result<(Head, Body<BufReader<TcpStream>>)> {
        let stream = TcpStream::connect(self.addr)?;
        stream.set_nodelay(true)?;
        let mut head = format!(
            "{method} {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.path, self.host
        );
        {
            let s = lock(&self.session);
            if let Some(id) = &s.id {
                head.push_str(&format!("Mcp-Session-Id: {id}\r\n"));
            }
            if let Some(v) = &s.version {
                head.push_str(&format!("MCP-Protocol-Version: {v}\r\n"));
            }
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
        let mut w = stream.try_clone()?;
        w.write_all(head.as_bytes())?;
        if let Some(b) = body {
            w.write_all(b)?;
        }
        let mut r = BufReader::new(stream);
        let head = read_head(&mut r)?;
        let chunked = head
            .header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked"));
        let left = head
            .header("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        Ok((
            head,
            Body {
                r,
                chunked,
                left,
                done: false,
            },
        ))
    }

    /// POSTs one message and delivers whatever comes back.
    fn post(self: &Arc<Self>, message: &Value) -> io::Result<()> {
        let bytes = message.to_string().into_bytes();
        let (head, mut body) = self.request(
            "POST",
            Some(&bytes),
            &[("Accept", "application/json, text/event-stream".into())],
        )?;
        if let Some(id) = head.header("mcp-session-id") {
            lock(&self.session).id = Some(id.to_owned());
        }
        let ct = head.header("content-type").unwrap_or("").to_owned();
        match head.status {
            202 => Ok(()),
            200 if ct.starts_with("text/event-stream") => {
                // A request's stream carries its answer, and the server's
                // requests made while serving it.
                let request = message.get("method").and_then(|_| message.get("id"));
                self.follow(body, request.and_then(RequestId::from_value));
                Ok(())
            }
            200 => {
                let mut text = Vec::new();
                body.read_to_end(&mut text)?;
                self.deliver(text, None);
                Ok(())
            }
            404 if lock(&self.session).id.is_some() => {
                // The session is gone (expired, deleted, server restarted):
                // end this connection so the client can start a new one.
                let _ = self.incoming.send((Vec::new(), None));
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "the server no longer knows this session (404)",
                ))
            }
            status => {
                let mut text = Vec::new();
                let _ = body.read_to_end(&mut text);
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
        }
        let _ = self.incoming.send((bytes, related));
    }

    /// Reads the SSE stream of `request` (none for a notification's); if it
    /// ends before the response, resumes it with GET + Last-Event-ID after
    /// the server's retry delay.
    fn follow(self: &Arc<Self>, body: Body<BufReader<TcpStream>>, request: Option<RequestId>) {
        let target = self.clone();
        let _ = std::thread::Builder::new().name("mcpvisor-client-sse".into()).spawn(move || {
            let mut body = body;
            let mut attempts = 0;
            loop {
                let (last_id, retry, answered) =
                    target.read_events(BufReader::new(body), request.as_ref());
                if answered || request.is_none() {
                    return;
                }
                let Some(last) = last_id else {
                    log::warn!("client: stream ended without a response and without an event id; cannot resume");
                    return;
                };
                attempts += 1;
                if attempts > MAX_RESUME_ATTEMPTS {
                    log::warn!("client: giving up resuming a stream after {MAX_RESUME_ATTEMPTS} attempts");
                    return;
                }
                std::thread::sleep(retry.unwrap_or(DEFAULT_RECONNECT_DELAY));
                match target.request("GET", None, &[("Accept", "text/event-stream".into()), ("Last-Event-ID", last)]) {
                    Ok((head, b)) if head.status == 200 => body = b,
                    Ok((head, _)) => {
                        log::warn!("client: resuming a stream failed with HTTP {}", head.status);
                        return;
                    }
                    Err(e) => {
                        log::warn!("client: resuming a stream failed: {e}");
                        return;
                    }
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
                for _ in 0..=MAX_RESUME_ATTEMPTS {
                    let mut extra = vec![("Accept", "text/event-stream".to_owned())];
                    if let Some(l) = &last {
                        extra.push(("Last-Event-ID", l.clone()));
                    }
                    match self.request("GET", None, &extra) {
                        Ok((head, body)) if head.status == 200 => {
                            let (id, retry, _) = self.read_events(BufReader::new(body), None);
                            last = id.or(last);
                            std::thread::sleep(retry.unwrap_or(DEFAULT_RECONNECT_DELAY));
                        }
                        // 405: no standalone stream; 404: the session ended.
                        Ok(_) | Err(_) => return,
                    }
                }
            });
    }

    /// Delivers every event's message, as related to `request`; returns
    /// (last event id, retry, whether a response came).
    fn read_events(
        &self,
        mut r: impl BufRead,
        request: Option<&RequestId>,
    ) -> (Option<String>, Option<Duration>, bool) {
        let (mut last_id, mut retry, mut answered) = (None, None, false);
        let mut data = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return (last_id, retry, answered),
                Ok(_) => {}
            }
            let l = line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                if !data.is_empty() {
                    let msg = std::mem::take(&mut data);
                    answered |= serde_json::from_str::<Value>(&msg)
                        .is_ok_and(|v| v.get("method").is_none() && v.get("id").is_some());
                    self.deliver(msg.into_bytes(), request.cloned());
                }
                continue;
            }
            if let Some(v) = l.strip_prefix("id:") {
                last_id = Some(v.trim().to_owned());
            } else if let Some(v) = l.strip_prefix("retry:") {
                retry = v.trim().parse().ok().map(Duration::from_millis);
            } else if let Some(v) = l.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
    }
}

struct HttpWriter {
    target: Arc<Target>,
    closed: bool,
}

impl MessageWriter for HttpWriter {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        if self.closed {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        match message.get("method").and_then(Value::as_str) {
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
        let target = self.target.clone();
        let message = message.clone();
        std::thread::Builder::new()
            .name("mcpvisor-client-post".into())
            .spawn(move || {
                if let Err(e) = target.post(&message) {
                    log::warn!("client: POST failed: {e}");
                }
            })?;
        Ok(())
    }

    fn close(&mut self) {
        if std::mem::replace(&mut self.closed, true) {
            return;
        }
        let has_session = lock(&self.target.session).id.is_some();
        if has_session {
            // Tell the server the session is over (405 means it keeps it; fine).
            let _ = self.target.request("DELETE", None, &[]);
        }
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
    /// A Streamable HTTP connection to `url` (`http://host:port/path`).
    pub fn http(url: &str) -> io::Result<Connection> {
        let (addr, host, path) = parse_url(url)?;
        // Bounded by the number of answers in flight; the reader drains it.
        let (tx, rx) = crossbeam_channel::unbounded();
        let target = Arc::new(Target {
            addr,
            host,
            path,
            session: Mutex::new(SessionState::default()),
            incoming: tx,
        });
        Ok(Connection::new(
            Box::new(HttpWriter {
                target,
                closed: false,
            }),
            Box::new(HttpReader(rx)),
        ))
    }
}
