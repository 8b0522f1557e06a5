//! A deliberately small HTTP/1.1 client for tests: exact control over
//! headers, incremental SSE reading, no dependencies.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub const ACCEPT_BOTH: (&str, &str) = ("Accept", "application/json, text/event-stream");
pub const JSON: (&str, &str) = ("Content-Type", "application/json");

/// A response head plus a reader positioned at the body.
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    reader: BufReader<TcpStream>,
    chunked: bool,
    length: Option<usize>,
    pending: Vec<u8>,
    /// The chunked body's last chunk came (an end, not a cut).
    pub terminated: bool,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn read_chunk(&mut self) -> Option<Vec<u8>> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let size = usize::from_str_radix(line.trim(), 16).ok()?;
        if size == 0 {
            let mut end = String::new();
            let _ = self.reader.read_line(&mut end);
            self.terminated = true;
            return None;
        }
        let mut buf = vec![0; size + 2];
        self.reader.read_exact(&mut buf).ok()?;
        buf.truncate(size);
        Some(buf)
    }

    /// The whole body.
    pub fn body(mut self) -> Vec<u8> {
        if self.chunked {
            let mut out = Vec::new();
            while let Some(c) = self.read_chunk() {
                out.extend(c);
            }
            out
        } else {
            let mut out = vec![0; self.length.unwrap_or(0)];
            self.reader.read_exact(&mut out).expect("body");
            out
        }
    }

    /// The body as JSON.
    pub fn json(self) -> Value {
        let b = self.body();
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&b)))
    }

    /// The next SSE event (`None` when the stream ended).
    pub fn event(&mut self) -> Option<Event> {
        loop {
            if let Some(p) = self.pending.windows(2).position(|w| w == b"\n\n") {
                let raw: Vec<u8> = self.pending.drain(..p + 2).collect();
                let text = String::from_utf8(raw).expect("utf-8 event");
                let mut e = Event::default();
                for line in text.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        e.id = Some(v.to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        e.data.push_str(v.trim_start());
                    } else if let Some(v) = line.strip_prefix("retry: ") {
                        e.retry = v.parse().ok();
                    } else if line.starts_with(':') {
                        e.comment = true;
                    }
                }
                return Some(e);
            }
            let chunk = self.read_chunk()?;
            self.pending.extend(chunk);
        }
    }

    /// The next event that carries a JSON message.
    pub fn message(&mut self) -> Option<(String, Value)> {
        loop {
            let e = self.event()?;
            if !e.data.is_empty() {
                let v = serde_json::from_str(&e.data).expect("event data is JSON");
                return Some((e.id.unwrap_or_default(), v));
            }
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct Event {
    pub id: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
    pub comment: bool,
}

/// Sends one request on a fresh connection and reads the response head.
pub fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    let stream = TcpStream::connect(addr).expect("connect");
    send_on(stream, method, path, headers, body)
}

/// Sends one request on `stream`.
pub fn send_on(
    mut stream: TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Resp {
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    // A server may refuse early (413) and stop reading: the answer still counts.
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body));
    read_head(BufReader::new(stream))
}

pub fn read_head(mut reader: BufReader<TcpStream>) -> Resp {
    let mut line = String::new();
    reader.read_line(&mut line).expect("status line");
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        reader.read_line(&mut l).expect("header");
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').expect("header line");
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let find = |name: &str| {
        headers
            .iter()
            .find(|(n, _): &&(String, String)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let chunked = find("transfer-encoding").is_some_and(|t| t.contains("chunked"));
    let length = find("content-length").and_then(|l| l.parse().ok());
    Resp {
        status,
        headers,
        reader,
        chunked,
        length,
        pending: Vec::new(),
        terminated: false,
    }
}

/// The address of an `http://ADDR/PATH` URL.
pub fn addr_of(url: &str) -> SocketAddr {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let authority = rest.split('/').next().unwrap_or(rest);
    authority.parse().expect("an address")
}

/// A POST of a JSON-RPC message with the usual headers plus `extra`.
pub fn post(addr: SocketAddr, session: Option<&str>, body: &Value, extra: &[(&str, &str)]) -> Resp {
    let mut h: Vec<(&str, &str)> = vec![ACCEPT_BOTH, JSON, ("MCP-Protocol-Version", "2025-11-25")];
    if let Some(s) = session {
        h.push(("Mcp-Session-Id", s));
    }
    h.extend_from_slice(extra);
    send(addr, "POST", "/mcp", &h, body.to_string().as_bytes())
}

/// GET for `session`'s SSE stream: the standalone one, or the one
/// `last_event_id` names to resume it.
pub fn get_stream(addr: SocketAddr, session: &str, last_event_id: Option<&str>) -> Resp {
    let mut h = vec![
        ("Accept", "text/event-stream"),
        ("Mcp-Session-Id", session),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    h.extend(last_event_id.map(|l| ("Last-Event-ID", l)));
    send(addr, "GET", "/mcp", &h, b"")
}

/// An `initialize` request (2025-11-25) declaring `capabilities`.
pub fn initialize_request(capabilities: Value) -> Value {
    serde_json::json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":capabilities,"clientInfo":{"name":"t","version":"0"}}})
}

/// Initializes a session; returns its id.
pub fn initialize(addr: SocketAddr, extra: &[(&str, &str)]) -> String {
    let caps = serde_json::json!({"sampling": {}, "elicitation": {}});
    let r = post(addr, None, &initialize_request(caps), extra);
    assert_eq!(r.status, 200);
    let sid = r.header("mcp-session-id").expect("session id").to_owned();
    // Drain the answer (JSON or SSE).
    if r.header("content-type")
        .is_some_and(|c| c.contains("event-stream"))
    {
        let mut r = r;
        while r.message().is_some() {}
    } else {
        r.body();
    }
    let n = post(
        addr,
        Some(&sid),
        &serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        extra,
    );
    assert_eq!(n.status, 202);
    sid
}

/// The answer to a POSTed request, whether JSON or SSE: (content type, messages).
pub fn answer(mut r: Resp) -> (String, Vec<Value>) {
    let ct = r.header("content-type").unwrap_or("").to_owned();
    if ct.contains("event-stream") {
        let mut out = Vec::new();
        while let Some((_, m)) = r.message() {
            out.push(m);
        }
        (ct, out)
    } else {
        (ct, vec![r.json()])
    }
}
