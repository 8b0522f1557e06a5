//! A small HTTP/1.1 server layer on `httparse`: request heads with size
//! limits and deadlines, bodies (Content-Length or chunked, bounded,
//! `Expect: 100-continue`), fixed responses, and chunked streams that are
//! flushed frame by frame (for SSE).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Most headers a request may carry.
pub const MAX_HEADERS: usize = 64;

/// Size and time limits of one connection.
#[derive(Clone, Debug)]
pub struct WireLimits {
    /// Longest request line (status 414 beyond).
    pub max_request_line: usize,
    /// Largest request head: request line plus headers (status 431 beyond).
    pub max_head: usize,
    /// Largest body (status 413 beyond).
    pub max_body: usize,
    /// Time allowed to receive a whole request head once it started.
    pub head_timeout: Duration,
    /// Time a keep-alive connection may sit idle between requests.
    pub idle_timeout: Duration,
}

/// A parsed request.
#[derive(Debug, Default)]
pub struct Request {
    /// Method, as sent.
    pub method: String,
    /// Path without the query string.
    pub path: String,
    /// Headers with lowercase names, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Whether the connection may serve another request afterwards.
    pub keep_alive: bool,
}

impl Request {
    /// The first value of a header (name in lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why no request could be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection (or idled out) between requests.
    Closed,
    /// A request started but did not complete in time.
    Timeout,
    /// The request is refused with this status and reason; the connection closes.
    Reject(u16, &'static str),
    /// The connection broke.
    Io(io::Error),
}

/// A connection's reading side with its buffer.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    len: usize,
    limits: WireLimits,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream, limits: WireLimits) -> Conn {
        Conn {
            stream,
            buf: vec![0; 4096],
            len: 0,
            limits,
        }
    }

    /// Reads more bytes before `deadline`; Ok(0) at EOF.
    fn fill(&mut self, deadline: Instant) -> Result<usize, ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Timeout);
        }
        self.stream
            .set_read_timeout(Some(left))
            .map_err(ReadError::Io)?;
        if self.len == self.buf.len() {
            let grown =
                (self.buf.len() * 2).min(self.limits.max_head.max(self.limits.max_body) + 4096);
            if grown <= self.len {
                return Err(ReadError::Reject(431, "request too large"));
            }
            self.buf.resize(grown, 0);
        }
        match self.stream.read(&mut self.buf[self.len..]) {
            Ok(n) => {
                self.len += n;
                Ok(n)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Err(ReadError::Timeout)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(1),
            Err(e) => Err(ReadError::Io(e)),
        }
    }

    fn consume(&mut self, n: usize) {
        self.buf.copy_within(n..self.len, 0);
        self.len -= n;
        // Give memory back after a large request.
        if self.buf.len() > 64 * 1024 && self.len < 4096 {
            self.buf.truncate(4096.max(self.len));
            self.buf.shrink_to_fit();
        }
    }

    /// Reads the next request. Waits up to the idle timeout for it to
    /// start, then up to the head timeout for the head to complete.
    pub fn read_request(&mut self) -> Result<Request, ReadError> {
        let mut deadline = Instant::now() + self.limits.idle_timeout;
        let mut started = self.len > 0;
        if started {
            deadline = Instant::now() + self.limits.head_timeout;
        }
        let head_end = loop {
            if let Some(p) = find(&self.buf[..self.len], b"\r\n\r\n") {
                break p + 4;
            }
            let line_end = find(&self.buf[..self.len], b"\r\n").unwrap_or(self.len);
            if line_end > self.limits.max_request_line {
                return Err(ReadError::Reject(414, "request line too long"));
            }
            if self.len > self.limits.max_head {
                return Err(ReadError::Reject(431, "request header fields too large"));
            }
            match self.fill(deadline) {
                Ok(0) if !started => return Err(ReadError::Closed),
                Ok(0) => return Err(ReadError::Reject(400, "connection closed mid-request")),
                Ok(_) if !started => {
                    started = true;
                    deadline = Instant::now() + self.limits.head_timeout;
                }
                Ok(_) => {}
                Err(ReadError::Timeout) if !started => return Err(ReadError::Closed),
                Err(e) => return Err(e),
            }
        };
        if head_end > self.limits.max_head {
            return Err(ReadError::Reject(431, "request header fields too large"));
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(&self.buf[..head_end]) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => {
                return Err(ReadError::Reject(400, "incomplete request head"))
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ReadError::Reject(431, "too many headers"))
            }
            Err(_) => return Err(ReadError::Reject(400, "malformed request")),
        }
        let target = parsed.path.unwrap_or("/");
        let mut req = Request {
            method: parsed.method.unwrap_or("").to_owned(),
            path: target.split('?').next().unwrap_or("/").to_owned(),
            headers: Vec::with_capacity(parsed.headers.len()),
            body: Vec::new(),
            keep_alive: parsed.version == Some(1),
        };
        for h in parsed.headers.iter() {
            let value = std::str::from_utf8(h.value)
                .map_err(|_| ReadError::Reject(400, "non-UTF-8 header value"))?;
            req.headers
                .push((h.name.to_ascii_lowercase(), value.trim().to_owned()));
        }
        if let Some(c) = req.header("connection") {
            let c = c.to_ascii_lowercase();
            if c.contains("close") {
                req.keep_alive = false;
            } else if c.contains("keep-alive") {
                req.keep_alive = true;
            }
        }
        self.consume(head_end);
        self.read_body(&mut req)?;
        Ok(req)
    }

    fn read_body(&mut self, req: &mut Request) -> Result<(), ReadError> {
        let chunked = req
            .header("transfer-encoding")
            .is_some_and(|t| t.to_ascii_lowercase().contains("chunked"));
        let length = match req.header("content-length") {
            Some(v) if !chunked => Some(
                v.parse::<usize>()
                    .map_err(|_| ReadError::Reject(400, "invalid Content-Length"))?,
            ),
            _ => None,
        };
        if length.unwrap_or(0) > self.limits.max_body {
            return Err(ReadError::Reject(413, "request body too large"));
        }
        if (chunked || length.unwrap_or(0) > 0)
            && req
                .header("expect")
                .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        {
            let mut s = &self.stream;
            s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .map_err(ReadError::Io)?;
        }
        let deadline = Instant::now() + self.limits.head_timeout.max(Duration::from_secs(30));
        if let Some(n) = length {
            // What is buffered already, then straight from the socket into
            // the body: a large body is held once, not twice.
            let have = self.len.min(n);
            req.body = Vec::with_capacity(n);
            req.body.extend_from_slice(&self.buf[..have]);
            self.consume(have);
            while req.body.len() < n {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(ReadError::Timeout);
                }
                self.stream
                    .set_read_timeout(Some(left))
                    .map_err(ReadError::Io)?;
                let start = req.body.len();
                req.body.resize(n, 0);
                match self.stream.read(&mut req.body[start..]) {
                    Ok(0) => {
                        return Err(ReadError::Reject(400, "body shorter than Content-Length"))
                    }
                    Ok(got) => req.body.truncate(start + got),
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Err(ReadError::Timeout)
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => req.body.truncate(start),
                    Err(e) => return Err(ReadError::Io(e)),
                }
            }
        } else if chunked {
            loop {
                let line = loop {
                    if let Some(p) = find(&self.buf[..self.len], b"\r\n") {
                        break p;
                    }
                    if self.len > 1024 || self.fill(deadline)? == 0 {
                        return Err(ReadError::Reject(400, "bad chunk header"));
                    }
                };
                let size_text = std::str::from_utf8(&self.buf[..line])
                    .unwrap_or("")
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                let size = usize::from_str_radix(&size_text, 16)
                    .map_err(|_| ReadError::Reject(400, "bad chunk size"))?;
                self.consume(line + 2);
                // Checked: a size such as ffffffffffffffff must not wrap.
                if req
                    .body
                    .len()
                    .checked_add(size)
                    .is_none_or(|total| total > self.limits.max_body)
                {
                    return Err(ReadError::Reject(413, "request body too large"));
                }
                while self.len < size + 2 {
                    if self.fill(deadline)? == 0 {
                        return Err(ReadError::Reject(400, "truncated chunk"));
                    }
                }
                if size == 0 {
                    // Trailers are not supported beyond the empty line.
                    self.consume(2);
                    break;
                }
                req.body.extend_from_slice(&self.buf[..size]);
                self.consume(size + 2);
            }
        }
        Ok(())
    }
}

/// The reason phrase of a status.
pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

/// A complete response.
#[derive(Debug, Default)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers (name, value).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Response {
    /// A response with a status and no body.
    pub fn status(status: u16) -> Response {
        Response {
            status,
            ..Default::default()
        }
    }
    /// Adds a header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.to_owned(), value.into()));
        self
    }
    /// A JSON body.
    pub fn json(status: u16, body: &serde_json::Value) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
        }
    }
}

fn head(status: u16, headers: &[(String, String)], keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(format!("HTTP/1.1 {status} {}\r\n", reason(status)).as_bytes());
    for (n, v) in headers {
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out
}

/// Writes a complete response.
pub fn write_response(w: impl Write, resp: &Response, keep_alive: bool) -> io::Result<()> {
    write_full(w, resp, keep_alive, true)
}

/// Writes the answer to a HEAD request: the head the same request with GET
/// would get, `Content-Length` included, and no body (RFC 9110 §9.3.2).
pub fn write_head_response(w: impl Write, resp: &Response, keep_alive: bool) -> io::Result<()> {
    write_full(w, resp, keep_alive, false)
}

fn write_full(mut w: impl Write, resp: &Response, keep_alive: bool, body: bool) -> io::Result<()> {
    let mut out = head(resp.status, &resp.headers, keep_alive);
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", resp.body.len()).as_bytes());
    if body {
        out.extend_from_slice(&resp.body);
    }
    w.write_all(&out)?;
    w.flush()
}

/// A chunked response body written and flushed piece by piece.
pub struct ChunkedWriter<W: Write> {
    w: W,
}

impl<W: Write> ChunkedWriter<W> {
    /// Writes the head of a chunked response.
    pub fn start(
        mut w: W,
        status: u16,
        headers: &[(String, String)],
        keep_alive: bool,
    ) -> io::Result<Self> {
        let mut out = head(status, headers, keep_alive);
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        w.write_all(&out)?;
        w.flush()?;
        Ok(ChunkedWriter { w })
    }
    /// Writes one chunk and flushes it to the socket.
    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let mut out = Vec::with_capacity(data.len() + 16);
        out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.w.write_all(&out)?;
        self.w.flush()
    }
    /// Ends the body.
    pub fn finish(mut self) -> io::Result<()> {
        self.w.write_all(b"0\r\n\r\n")?;
        self.w.flush()
    }
}
