//! A keep-alive HTTP/1.1 client of the Streamable HTTP transport, small
//! enough to cost the server under test little (the load benches' driver).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

/// One keep-alive HTTP/1.1 connection and its MCP session, as a load
/// generator uses it: a request, then its whole answer, back to back.
pub struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    path: String,
    /// The session id, once `initialize` gave one.
    pub session: Option<String>,
}

impl Conn {
    /// Connects to `addr`, to post to `path`.
    pub fn open(addr: SocketAddr, path: &str) -> Conn {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_nodelay(true).unwrap();
        Conn {
            r: BufReader::new(s.try_clone().unwrap()),
            w: s,
            path: path.to_owned(),
            session: None,
        }
    }

    /// POSTs `body`; returns the JSON-RPC messages of the answer (JSON or SSE).
    pub fn post(&mut self, body: &str) -> String {
        self.post_with(body, "MCP-Protocol-Version: 2025-06-18\r\n")
    }

    /// POSTs `body` with `headers` (each ending in CRLF) for the protocol
    /// version and the like.
    pub fn post_with(&mut self, body: &str, headers: &str) -> String {
        let mut req = format!(
            "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\n",
            self.path,
            body.len()
        );
        if let Some(s) = &self.session {
            req.push_str(&format!("Mcp-Session-Id: {s}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        self.w.write_all(req.as_bytes()).unwrap();
        let (mut chunked, mut length) = (false, 0usize);
        let mut line = String::new();
        self.r.read_line(&mut line).unwrap();
        assert!(line.starts_with("HTTP/1.1 2"), "unexpected status: {line}");
        loop {
            line.clear();
            self.r.read_line(&mut line).unwrap();
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let (n, v) = l.split_once(':').unwrap();
            match n.to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse().unwrap(),
                "transfer-encoding" => chunked = v.contains("chunked"),
                "mcp-session-id" => self.session = Some(v.trim().to_owned()),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                self.r.read_line(&mut line).unwrap();
                let size = usize::from_str_radix(line.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.r.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..size]);
            }
        } else {
            body.resize(length, 0);
            self.r.read_exact(&mut body).unwrap();
        }
        String::from_utf8(body).unwrap()
    }

    /// `initialize` and `notifications/initialized`.
    pub fn initialize(&mut self) {
        let answer = self.post(super::INIT);
        assert!(answer.contains("\"result\""), "initialize failed: {answer}");
        self.post(super::INITIALIZED);
    }
}

/// `http://HOST:PORT/PATH` as the address and the path.
pub fn parse_url(url: &str) -> (SocketAddr, String) {
    let rest = url.trim_start_matches("http://");
    let (hostport, path) = rest.split_once('/').unwrap_or((rest, "mcp"));
    (
        hostport.parse().expect("HOST:PORT as an IP address"),
        format!("/{path}"),
    )
}
