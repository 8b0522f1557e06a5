//! HTTP load bench: `tools/call echo` against `examples/echo --http`
//! (release) with 1 and 32 concurrent sessions, each on its own keep-alive
//! connection calling back to back; calls/s, p50, p99. Then resident memory
//! per idle session with `--idle-sessions N` sessions open.
//!
//! ```text
//! cargo bench --bench http_load -- [--calls N] [--idle-sessions N] [--baseline-url http://HOST:PORT/mcp]
//! ```
//! `--baseline-url` runs the same load against another, already running
//! server in the same run (e.g. an rmcp Streamable HTTP echo server).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Child;
mod common;

use common::Stats;
use std::time::Duration;

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
    path: String,
    session: Option<String>,
}

impl Conn {
    fn open(addr: SocketAddr, path: &str) -> Conn {
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
    fn post(&mut self, body: &str) -> String {
        let mut req = format!(
            "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n",
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

    fn initialize(&mut self) {
        let answer = self.post(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#);
        assert!(answer.contains("\"result\""), "initialize failed: {answer}");
        self.post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    }
}

const ECHO_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello world"}}}"#;

fn load(addr: SocketAddr, path: &str, sessions: usize, calls_per_session: usize) -> Stats {
    common::concurrent(
        sessions,
        calls_per_session,
        || {
            let mut c = Conn::open(addr, path);
            c.initialize();
            for _ in 0..200 {
                c.post(ECHO_CALL); // warm-up
            }
            c
        },
        |c| {
            let answer = c.post(ECHO_CALL);
            debug_assert!(answer.contains("hello world"));
        },
    )
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

fn idle_sessions(addr: SocketAddr, n: usize) {
    let threads = 8;
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let mut c = Conn::open(addr, "/mcp");
                for _ in (t..n).step_by(threads) {
                    c.session = None;
                    c.initialize();
                }
            });
        }
    });
}

fn spawn_ours(max_sessions: usize) -> (Child, SocketAddr) {
    let (child, what) = common::spawn_echo(&[
        "--listen",
        "http://127.0.0.1:0/mcp",
        "--max-sessions",
        &max_sessions.to_string(),
    ]);
    let addr = what
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    (child, addr)
}

fn parse_url(url: &str) -> (SocketAddr, String) {
    let rest = url.trim_start_matches("http://");
    let (hostport, path) = rest.split_once('/').unwrap_or((rest, "mcp"));
    (
        hostport.parse().expect("HOST:PORT as an IP address"),
        format!("/{path}"),
    )
}

fn main() {
    let mut calls = 20_000;
    let mut idle = 100_000;
    let mut baseline: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--idle-sessions" => {
                idle = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--idle-sessions N")
            }
            "--baseline-url" => baseline = args.next(),
            _ => {}
        }
    }
    let (mut child, addr) = spawn_ours(idle + 100);
    common::header("sessions");
    for sessions in [1, 32] {
        let per = (calls / sessions).max(100);
        let us = load(addr, "/mcp", sessions, per);
        common::row("mcpvisor", sessions, &us);
        if let Some(url) = &baseline {
            let (baddr, bpath) = parse_url(url);
            let them = load(baddr, &bpath, sessions, per);
            common::compare(sessions, &us, &them);
        }
    }
    if idle > 0 {
        std::thread::sleep(Duration::from_millis(200)); // let the load's connections close
        let before = rss_kib(child.id());
        idle_sessions(addr, idle);
        let after = rss_kib(child.id());
        println!(
            "idle sessions: {idle}, RSS {before} KiB -> {after} KiB, {:.0} bytes per session",
            (after.saturating_sub(before) * 1024) as f64 / idle as f64
        );
    }
    let _ = child.kill();
    let _ = child.wait();
}
