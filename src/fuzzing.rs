//! Entry points for the fuzz targets under `fuzz/` (feature `fuzzing`;
//! not part of the API). Each takes arbitrary bytes, runs one parser of
//! outside input over them and checks what must hold whatever they are;
//! a panic, a hang or unbounded memory is a finding.

use std::io::{self, Read};

/// The JSON-RPC parser and validator: bytes parse or are refused with a
/// value; every message that parses, serialized again, validates to the
/// same message; and an object's members read straight from its bytes make
/// what the parsed object makes (the same message or the same error).
pub fn jsonrpc(data: &[u8]) {
    use crate::jsonrpc::{parse, validate, Message, Parsed};
    let again = |m: &Message| {
        let object = match m {
            Message::Request(r) => r.object(),
            Message::Notification(n) => n.object(),
            Message::Response(r) => r.object(),
        };
        let bytes = serde_json::to_vec(object).expect("a message serializes");
        let value = serde_json::from_slice(&bytes).expect("a serialized message is JSON");
        assert_eq!(
            validate(value).as_ref(),
            Ok(m),
            "a message changed on its round trip"
        );
    };
    // An object's members read from its bytes make what the parsed object
    // makes: the same message, or the same error.
    if let Ok(value @ serde_json::Value::Object(_)) = serde_json::from_slice(data) {
        match (parse(data), validate(value)) {
            (Ok(Parsed::Single(short)), Ok(long)) => assert_eq!(short, long),
            (Err(short), Err(long)) => assert_eq!(short, long),
            (short, long) => panic!("the two readings differ: {short:?} against {long:?}"),
        }
    }
    match parse(data) {
        Ok(Parsed::Single(m)) => again(&m),
        Ok(Parsed::Batch(items)) => items.iter().flatten().for_each(again),
        Err(e) => assert!(!e.message.is_empty()),
    }
}

/// Reads in pieces whose sizes the input's first bytes choose, so that
/// every split of a frame across reads is tried.
struct Pieces<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    turn: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = match self.sizes.get(self.turn % self.sizes.len().max(1)) {
            Some(&s) => usize::from(s).max(1),
            None => usize::MAX,
        };
        self.turn += 1;
        let n = size.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Splits off the first `n` bytes (fewer if the input is shorter).
fn split(data: &[u8], n: usize) -> (&[u8], &[u8]) {
    data.split_at(n.min(data.len()))
}

/// The line framer: every line it returns is within the limit and holds no
/// newline, and however the reads fall (pieces the input chooses) the
/// frames are those of reading everything at once.
pub fn lines(data: &[u8]) {
    use crate::transport::lines::{Frame, LineReader};
    let (head, rest) = split(data, 4);
    let max = 1 + usize::from(head.first().copied().unwrap_or(0));
    let frames = |r: &mut dyn Read| {
        let mut reader = LineReader::new(r, max);
        let mut out = Vec::new();
        while let Ok(Some(frame)) = reader.next_frame() {
            out.push(match frame {
                Frame::Line(line) => {
                    assert!(line.len() <= max, "a line over the limit");
                    assert!(!line.contains(&b'\n'), "a line with a newline in it");
                    Ok(line.to_vec())
                }
                Frame::TooLong { len, .. } | Frame::Refused { len, .. } => Err(len),
            });
        }
        out
    };
    let whole = frames(&mut &rest[..]);
    let pieces = frames(&mut Pieces {
        data: rest,
        sizes: &head[head.len().min(1)..],
        turn: 0,
    });
    assert_eq!(
        whole, pieces,
        "framing depends on how the reads fall (max {max})"
    );
}

/// The HTTP request reader (head, then a body by length or chunked), over
/// a real loopback connection as the listener reads it.
#[cfg(feature = "http")]
pub fn http_request(data: &[u8]) {
    use crate::transport::http::wire::{Conn, WireLimits};
    use std::io::Write;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::time::Duration;
    thread_local! {
        static LISTENER: TcpListener = TcpListener::bind("127.0.0.1:0").expect("a loopback listener");
    }
    LISTENER.with(|listener| {
        let mut client =
            TcpStream::connect(listener.local_addr().expect("its address")).expect("connect");
        // Closed with a reset, not left in TIME_WAIT: millions of inputs
        // would use up the ephemeral ports.
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: setsockopt(2) on a socket we own, with a valid linger.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::setsockopt(
                client.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            );
        }
        let (server, _) = listener.accept().expect("accept");
        // The whole input fits the socket buffers (libFuzzer's -max_len).
        client.write_all(data).expect("write");
        client.shutdown(Shutdown::Write).expect("shutdown");
        let limits = WireLimits {
            max_request_line: 1024,
            max_head: 4096,
            max_body: 8192,
            head_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(5),
        };
        let max_body = limits.max_body;
        let mut conn = Conn::new(server, limits);
        while let Ok(mut request) = conn.read_head() {
            if conn.read_body(&mut request).is_err() {
                break;
            }
            assert!(request.body.len() <= max_body, "a body over the limit");
            if !request.keep_alive {
                break;
            }
        }
    });
}

/// The HTTP client's `text/event-stream` reader.
#[cfg(all(feature = "http", feature = "client"))]
pub fn sse(data: &[u8]) {
    let mut events = crate::transport::http::client::SseReader::new(io::BufReader::new(data));
    while let Some(event) = events.next_data() {
        assert!(event.len() <= data.len(), "an event larger than the stream");
    }
}

/// The AMQP server's intake of one delivery: a size limit, a content type
/// and JSON-RPC validity.
#[cfg(feature = "amqp")]
pub fn amqp_delivery(data: &[u8]) {
    let (head, body) = split(data, 1);
    let content_type = match head.first().map(|b| b % 4) {
        Some(0) => None,
        Some(1) => Some("application/json"),
        Some(2) => Some("application/json; charset=utf-8"),
        _ => Some("text/plain"),
    };
    let _ = crate::transport::amqp::envelope::accept(body, content_type, 4096);
}

/// The daemon's configuration parser (variables expand to fixed values).
pub fn config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let env = |name: &str| name.len().is_multiple_of(2).then(|| "value".to_owned());
        let _ =
            crate::service::config::Config::parse(std::path::Path::new("fuzz.json"), text, &env);
    }
}

/// The URI template matcher: a template and a URI, separated by the first
/// newline; a match binds only the template's variables.
pub fn uri_template(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (template, uri) = text.split_once('\n').unwrap_or((text, ""));
    if let Ok(t) = crate::server::UriTemplate::parse(template) {
        if let Some(vars) = t.matches(uri) {
            let names = t.variables();
            assert!(
                vars.keys().all(|k| names.contains(&k.as_str())),
                "a variable the template lacks"
            );
        }
    }
}
