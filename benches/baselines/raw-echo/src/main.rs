//! The machine's ceiling for the comparison bench: answers every JSON-RPC
//! request with a canned `echo` result carrying the request's id, and
//! parses nothing else. `raw-echo stdio` or `raw-echo http ADDR`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

const INIT_RESULT: &str = r#"{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw-echo","version":"0"}}"#;
const ECHO_RESULT: &str = r#"{"content":[{"type":"text","text":"hello world"}]}"#;

/// The request's id as it is written (a number or a string), if any.
fn id_of(msg: &[u8]) -> Option<&[u8]> {
    let at = msg.windows(5).position(|w| w == b"\"id\":")? + 5;
    let rest = &msg[at..];
    let end = rest.iter().position(|&b| b == b',' || b == b'}')?;
    Some(&rest[..end])
}

/// The response to `msg`, appended to `out`; false for a notification.
fn answer(msg: &[u8], out: &mut Vec<u8>) -> bool {
    let Some(id) = id_of(msg) else { return false };
    let init = msg.windows(12).any(|w| w == b"\"initialize\"");
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    out.extend_from_slice(id);
    out.extend_from_slice(b",\"result\":");
    out.extend_from_slice(if init { INIT_RESULT } else { ECHO_RESULT }.as_bytes());
    out.push(b'}');
    true
}

/// Lines in, lines out; flushes when no more input is already buffered.
fn stdio() -> io::Result<()> {
    let mut input = BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut output = io::BufWriter::with_capacity(64 * 1024, io::stdout().lock());
    let mut line = Vec::new();
    let mut out = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return output.flush();
        }
        out.clear();
        if answer(&line, &mut out) {
            out.push(b'\n');
            output.write_all(&out)?;
        }
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
}

/// One keep-alive HTTP/1.1 connection: a JSON answer per POST.
fn connection(stream: TcpStream) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut w = stream.try_clone()?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    let mut body = Vec::new();
    let mut out = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let mut length = 0;
        loop {
            line.clear();
            if r.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        body.resize(length, 0);
        r.read_exact(&mut body)?;
        out.clear();
        if answer(&body, &mut out) {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: raw\r\nContent-Length: {}\r\n\r\n",
                out.len()
            );
            w.write_all(&[head.as_bytes(), &out].concat())?;
        } else {
            w.write_all(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")?;
        }
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("stdio") => stdio(),
        Some("http") => {
            let listener = TcpListener::bind(args.get(1).map(String::as_str).unwrap_or("127.0.0.1:0"))?;
            println!("listening on http://{}/mcp", listener.local_addr()?);
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || connection(stream));
            }
            Ok(())
        }
        _ => {
            eprintln!("usage: raw-echo stdio | raw-echo http ADDR");
            std::process::exit(2);
        }
    }
}
