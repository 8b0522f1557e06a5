//! A small HTTP/1.1 server layer on `httparse`: request heads with size
//! limits and deadlines, bodies (Content-Length or chunked, bounded,
//! `Expect: 100-continue`), fixed responses, and chunked streams that are
//! flushed frame by frame (for SSE).

use super::headers::{list_items, split_ascii, trim_ows, Headers};
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
    pub headers: Headers,
    /// The body (empty until [`Conn::read_body`]).
    pub body: Vec<u8>,
    /// Whether the connection may serve another request afterwards.
    pub keep_alive: bool,
    /// Whether the client speaks HTTP/1.1 (false: HTTP/1.0, which gets no
    /// chunked responses and no `100 Continue`).
    pub http11: bool,
    pub(crate) framing: BodyFraming,
}

/// How a request's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    #[default]
    None,
    Length(usize),
    Chunked,
}

impl Request {
    /// Whether a body follows the head (announced by its framing).
    pub fn has_body(&self) -> bool {
        self.framing != BodyFraming::None
    }

    /// The first value of a header (name in lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name)
    }

    /// The items of the list header `name` (in lowercase), from all its
    /// lines: repeated lines are one comma-separated list (RFC 9110 §5.3).
    pub fn header_items<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        list_items(self.headers.all(name))
    }

    /// The body's framing from `Content-Length` and `Transfer-Encoding`,
    /// refusing anything ambiguous: differing lengths, anything but digits,
    /// both headers together, a coding other than exactly one `chunked`,
    /// and `Transfer-Encoding` from an HTTP/1.0 client.
    fn framing(&self, max_body: usize) -> Result<BodyFraming, ReadError> {
        let codings: Vec<&str> = list_items(self.headers.all("transfer-encoding")).collect();
        let mut length: Option<usize> = None;
        for value in self
            .headers
            .all("content-length")
            .flat_map(|v| split_ascii(v, b','))
        {
            let n = parse_decimal(trim_ows(value))
                .ok_or(ReadError::Reject(400, "invalid Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(ReadError::Reject(400, "conflicting Content-Length"));
            }
            length = Some(n);
        }
        if codings.is_empty() {
            return match length {
                Some(n) if n > max_body => Err(ReadError::Reject(413, "request body too large")),
                Some(0) | None => Ok(BodyFraming::None),
                Some(n) => Ok(BodyFraming::Length(n)),
            };
        }
        if length.is_some() {
            return Err(ReadError::Reject(
                400,
                "both Content-Length and Transfer-Encoding",
            ));
        }
        if !self.http11 {
            return Err(ReadError::Reject(400, "Transfer-Encoding in HTTP/1.0"));
        }
        match codings.as_slice() {
            [only] if only.eq_ignore_ascii_case("chunked") => Ok(BodyFraming::Chunked),
            _ if codings.iter().all(|c| c.eq_ignore_ascii_case("chunked")) => {
                Err(ReadError::Reject(400, "chunked applied more than once"))
            }
            _ => Err(ReadError::Reject(501, "unsupported transfer coding")),
        }
    }
}

/// Digits only (no sign, no spaces), without overflow.
fn parse_decimal(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A chunk-size line: hex digits, optional whitespace, then nothing or
/// `;` and extensions (ignored, but made of visible characters, spaces
/// and tabs only: a bare CR or LF in them is where a proxy ending lines
/// differently would see another request). `None` for anything else or
/// an overflow.
fn parse_chunk_size(line: &[u8]) -> Option<usize> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t'))
        .count()..];
    if !rest.is_empty() && rest[0] != b';' {
        return None;
    }
    if !rest.iter().all(|b| matches!(b, b'\t' | b' '..=b'~')) {
        return None;
    }
    line[..digits].iter().try_fold(0usize, |acc, b| {
        let d = (*b as char).to_digit(16)? as usize;
        acc.checked_mul(16)?.checked_add(d)
    })
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

/// Longest chunk-size or trailer line.
const MAX_CHUNK_LINE: usize = 1024;
/// Granularity of body reads straight from the socket.
const READ_PIECE: usize = 16 * 1024;
/// Buffer a connection keeps between requests.
const BASE_BUFFER: usize = 4096;

/// A connection's reading side with its buffer: the unread bytes are
/// `buf[start..end]`, so consuming is O(1) and memory follows the bytes
/// that arrived.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    limits: WireLimits,
    // Polls the socket for a moment before a read that would block, while
    // requests have been arriving within one (`wait::Spin`).
    spin: crate::wait::Spin,
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Where a request head ends, scanning only bytes not scanned before.
#[derive(Default)]
struct HeadScan {
    /// Bytes (from the head's start) known not to start the end of the head.
    scanned: usize,
    /// End of the request line, once seen.
    line_end: Option<usize>,
}

impl HeadScan {
    /// The head's length if `data` holds all of it. Accepts CRLF and bare
    /// LF line ends (RFC 9112 §2.2).
    fn advance(&mut self, data: &[u8]) -> Option<usize> {
        let mut i = self.scanned;
        while let Some(off) = data[i..].iter().position(|&b| b == b'\n') {
            let lf = i + off;
            self.line_end.get_or_insert(lf);
            match (data.get(lf + 1), data.get(lf + 2)) {
                (Some(b'\n'), _) => return Some(lf + 2),
                (Some(b'\r'), Some(b'\n')) => return Some(lf + 3),
                (Some(b'\r'), None) | (None, _) => {
                    self.scanned = lf;
                    return None;
                }
                _ => i = lf + 1,
            }
        }
        self.scanned = data.len();
        None
    }
}

impl Conn {
    /// Wraps an accepted stream.
    pub fn new(stream: TcpStream, limits: WireLimits) -> Conn {
        Conn {
            stream,
            buf: vec![0; BASE_BUFFER],
            start: 0,
            end: 0,
            limits,
            spin: crate::wait::Spin::default(),
        }
    }

    fn data(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    fn available(&self) -> usize {
        self.end - self.start
    }

    /// Reads more bytes before `deadline`, keeping at most `cap` unread
    /// bytes buffered; Ok(0) at EOF.
    fn fill(&mut self, deadline: Instant, cap: usize) -> Result<usize, ReadError> {
        let now = Instant::now();
        if deadline <= now {
            return Err(ReadError::Timeout);
        }
        // Readable within the spin: the read cannot block, so its timeout
        // need not be set.
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.stream);
        let ready = self.spin.worthwhile() && self.spin.poll_fd(fd);
        if !ready {
            self.read_until(deadline)?;
        }
        if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            } else {
                // Full of unread bytes: grow by doubling, so the buffer
                // follows what arrived and copying stays linear.
                let grown = (self.buf.len() * 2).min(cap);
                if grown <= self.end {
                    return Err(ReadError::Reject(431, "request too large"));
                }
                self.buf.resize(grown, 0);
            }
        }
        let read = self.stream.read(&mut self.buf[self.end..]);
        if !ready {
            self.spin.parked(now);
        }
        match read {
            Ok(n) => {
                self.end += n;
                Ok(n)
            }
            Err(e) if timed_out(&e) => Err(ReadError::Timeout),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(1),
            Err(e) => Err(ReadError::Io(e)),
        }
    }

    /// The next read gives up at `deadline` (already past: a timeout now).
    fn read_until(&self, deadline: Instant) -> Result<(), ReadError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Timeout);
        }
        self.stream
            .set_read_timeout(Some(left))
            .map_err(ReadError::Io)
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            // Give memory back after a large request.
            if self.buf.len() > 64 * 1024 {
                self.buf = vec![0; BASE_BUFFER];
            }
        }
    }

    /// Reads the next request head. Waits up to the idle timeout for it to
    /// start, then up to the head timeout for the head to complete. The
    /// body is left unread: the caller checks the head first, then calls
    /// [`Conn::read_body`].
    pub fn read_head(&mut self) -> Result<Request, ReadError> {
        let mut started = self.available() > 0;
        let mut deadline = Instant::now()
            + if started {
                self.limits.head_timeout
            } else {
                self.limits.idle_timeout
            };
        let mut scan = HeadScan::default();
        let head_end = loop {
            // Empty lines before a request line are ignored (RFC 9112 §2.2).
            while scan.scanned == 0 && matches!(self.data(), [b'\n', ..] | [b'\r', b'\n', ..]) {
                self.consume(if self.data()[0] == b'\n' { 1 } else { 2 });
            }
            if let Some(end) = scan.advance(self.data()) {
                break end;
            }
            if scan.line_end.unwrap_or(self.available()) > self.limits.max_request_line {
                return Err(ReadError::Reject(414, "request line too long"));
            }
            if self.available() > self.limits.max_head {
                return Err(ReadError::Reject(431, "request header fields too large"));
            }
            match self.fill(deadline, self.limits.max_head + BASE_BUFFER) {
                Ok(0) if self.available() == 0 => return Err(ReadError::Closed),
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
        // A head that arrived whole is held to the request line's limit too.
        if scan
            .line_end
            .is_some_and(|e| e > self.limits.max_request_line)
        {
            return Err(ReadError::Reject(414, "request line too long"));
        }
        // (A head past 4 GiB could not be indexed by `Headers` either.)
        if head_end > self.limits.max_head || u32::try_from(head_end).is_err() {
            return Err(ReadError::Reject(431, "request header fields too large"));
        }
        let bytes = &self.data()[..head_end];
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(bytes) {
            Ok(httparse::Status::Complete(_)) => {}
            Ok(httparse::Status::Partial) => {
                return Err(ReadError::Reject(400, "incomplete request head"))
            }
            Err(httparse::Error::TooManyHeaders) => {
                return Err(ReadError::Reject(431, "too many headers"))
            }
            Err(_) => return Err(ReadError::Reject(400, "malformed request")),
        }
        // Checked once, after the head's shape: a head that is not UTF-8
        // is refused, and each field's value is then a slice of it
        // (delimited by ASCII bytes).
        let head = std::str::from_utf8(bytes)
            .map_err(|_| ReadError::Reject(400, "non-UTF-8 request head"))?;
        let target = parsed.path.unwrap_or("/");
        let http11 = parsed.version == Some(1);
        let mut req = Request {
            method: parsed.method.unwrap_or("").to_owned(),
            path: target.split('?').next().unwrap_or("/").to_owned(),
            headers: Headers::with_capacity(parsed.headers.len(), head_end),
            body: Vec::new(),
            keep_alive: http11,
            http11,
            framing: BodyFraming::None,
        };
        for h in parsed.headers.iter() {
            // Where httparse found the value in `head`.
            let at = (h.value.as_ptr() as usize).wrapping_sub(head.as_ptr() as usize);
            let value = at
                .checked_add(h.value.len())
                .and_then(|end| head.get(at..end))
                .ok_or(ReadError::Reject(400, "malformed request"))?;
            req.headers.push(h.name, value);
        }
        // HTTP/1.0 connections are not kept alive: our responses do not
        // say `Connection: keep-alive`, which a 1.0 client would need.
        if req
            .header_items("connection")
            .any(|option| option.eq_ignore_ascii_case("close"))
        {
            req.keep_alive = false;
        }
        self.consume(head_end);
        // RFC 9112 §3.2: exactly one `Host` in HTTP/1.1, at most one in 1.0
        // (two could name different servers to us and to a proxy).
        match req.headers.all("host").count() {
            0 if req.http11 => return Err(ReadError::Reject(400, "no Host header")),
            0 | 1 => {}
            _ => return Err(ReadError::Reject(400, "more than one Host header")),
        }
        req.framing = req.framing(self.limits.max_body)?;
        Ok(req)
    }

    /// Reads the body of a request whose head [`Conn::read_head`] returned.
    /// Memory grows with the bytes that arrive, not with what the head
    /// announces, and time is linear in the body's size.
    pub fn read_body(&mut self, req: &mut Request) -> Result<(), ReadError> {
        if req.framing != BodyFraming::None
            && req.http11
            && req
                .header("expect")
                .is_some_and(|e| e.eq_ignore_ascii_case("100-continue"))
        {
            let mut s = &self.stream;
            s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .map_err(ReadError::Io)?;
        }
        let deadline = Instant::now() + self.limits.head_timeout.max(Duration::from_secs(30));
        match req.framing {
            BodyFraming::None => {}
            BodyFraming::Length(n) => self.read_exact_into(&mut req.body, n, deadline)?,
            BodyFraming::Chunked => self.read_chunked(&mut req.body, deadline)?,
        }
        Ok(())
    }

    /// Appends exactly `n` more bytes to `body`: what is buffered first,
    /// then straight from the socket in pieces.
    fn read_exact_into(
        &mut self,
        body: &mut Vec<u8>,
        n: usize,
        deadline: Instant,
    ) -> Result<(), ReadError> {
        let have = self.available().min(n);
        body.extend_from_slice(&self.data()[..have]);
        self.consume(have);
        let mut left = n - have;
        if left == 0 {
            return Ok(());
        }
        while left > 0 {
            self.read_until(deadline)?;
            // Straight into the body, zeroing only the bytes wanted (a
            // 16 KiB piece zeroed for every body that came apart from its
            // head cost more than the copy it saved).
            let want = left.min(READ_PIECE);
            let len = body.len();
            body.resize(len + want, 0);
            let read = self.stream.read(&mut body[len..]);
            body.truncate(len + read.as_ref().ok().copied().unwrap_or(0));
            match read {
                Ok(0) => return Err(ReadError::Reject(400, "body shorter than announced")),
                Ok(got) => left -= got,
                Err(e) if timed_out(&e) => return Err(ReadError::Timeout),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
        Ok(())
    }

    /// One line (without its CRLF) of at most [`MAX_CHUNK_LINE`] bytes.
    fn read_line(&mut self, deadline: Instant) -> Result<Vec<u8>, ReadError> {
        let mut scanned = 0;
        loop {
            if let Some(p) = self.data()[scanned..].windows(2).position(|w| w == b"\r\n") {
                let line = self.data()[..scanned + p].to_vec();
                self.consume(scanned + p + 2);
                return Ok(line);
            }
            scanned = self.available().saturating_sub(1);
            if self.available() > MAX_CHUNK_LINE {
                return Err(ReadError::Reject(400, "chunk line too long"));
            }
            if self.fill(deadline, MAX_CHUNK_LINE + BASE_BUFFER)? == 0 {
                return Err(ReadError::Reject(400, "truncated chunked body"));
            }
        }
    }

    fn read_chunked(&mut self, body: &mut Vec<u8>, deadline: Instant) -> Result<(), ReadError> {
        loop {
            let line = self.read_line(deadline)?;
            let size = parse_chunk_size(&line).ok_or(ReadError::Reject(400, "bad chunk size"))?;
            // Checked: a size such as ffffffffffffffff must not wrap.
            if body
                .len()
                .checked_add(size)
                .is_none_or(|total| total > self.limits.max_body)
            {
                return Err(ReadError::Reject(413, "request body too large"));
            }
            if size == 0 {
                break;
            }
            self.read_exact_into(body, size, deadline)?;
            if !self.read_line(deadline)?.is_empty() {
                return Err(ReadError::Reject(400, "chunk data not followed by CRLF"));
            }
        }
        // The trailer section: fields up to an empty line, read and
        // discarded so none of it is taken for the next request.
        let mut trailer = 0;
        loop {
            let line = self.read_line(deadline)?;
            if line.is_empty() {
                return Ok(());
            }
            // A field or nothing: a bare LF or a line with no colon could
            // end the body early for a proxy reading it more leniently,
            // which would then take what follows for another request.
            if !is_trailer_field(&line) {
                return Err(ReadError::Reject(400, "malformed trailer field"));
            }
            trailer += line.len() + 2;
            if trailer > self.limits.max_head {
                return Err(ReadError::Reject(431, "trailer section too large"));
            }
        }
    }
}

/// A trailer line is `token ":" value` with no CR or LF in it (RFC 9112
/// §7.1.2, §5).
fn is_trailer_field(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return false;
    };
    let is_tchar = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    colon > 0
        && line[..colon].iter().all(is_tchar)
        && !line.iter().any(|&b| b == b'\r' || b == b'\n')
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
        501 => "Not Implemented",
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
    pub fn json(status: u16, body: &impl serde::Serialize) -> Response {
        Response {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: crate::jsonrpc::to_text(body).into_bytes(),
        }
    }
}

/// Room for a response head: the status line and a few headers.
const HEAD_ROOM: usize = 256;

/// The status line and `headers`, in a buffer with room for `body` more bytes.
fn head(status: u16, headers: &[(String, String)], keep_alive: bool, body: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEAD_ROOM + body);
    out.extend_from_slice(b"HTTP/1.1 ");
    push_decimal(&mut out, usize::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
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

/// `n` in decimal (a response is written without `fmt`).
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
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
    let length = resp.body.len();
    let room = if body { length } else { 0 };
    let mut out = head(resp.status, &resp.headers, keep_alive, room);
    // RFC 9110 §8.6: never on a 1xx or 204 response.
    if !(resp.status < 200 || resp.status == 204) {
        out.extend_from_slice(b"Content-Length: ");
        push_decimal(&mut out, length);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if body {
        out.extend_from_slice(&resp.body);
    }
    w.write_all(&out)?;
    w.flush()
}

/// How a response may be framed for the request it answers.
#[derive(Clone, Copy, Debug)]
pub struct Framing {
    /// Whether the connection may serve another request afterwards.
    pub keep_alive: bool,
    /// Whether the client reads chunked bodies (HTTP/1.1).
    pub chunked: bool,
}

impl Framing {
    /// The framing `req` allows.
    pub fn of(req: &Request) -> Framing {
        Framing {
            keep_alive: req.keep_alive,
            chunked: req.http11,
        }
    }
}

/// Largest chunk whose data is copied beside its size line to go out in
/// one write: 16 KiB.
const CHUNK_COPY_AT_MOST: usize = 16 * 1024;

/// A streamed response body written and flushed piece by piece: chunked
/// for HTTP/1.1, delimited by closing the connection for HTTP/1.0 (which
/// has no chunked coding, RFC 9112 §6.1).
pub struct ChunkedWriter<W: Write> {
    w: W,
    chunked: bool,
}

impl<W: Write> ChunkedWriter<W> {
    /// Writes the head of a streamed response. Without chunking the
    /// connection closes after the body, whatever `framing.keep_alive` says.
    pub fn start(
        mut w: W,
        status: u16,
        headers: &[(String, String)],
        framing: Framing,
    ) -> io::Result<Self> {
        let mut out = head(status, headers, framing.keep_alive && framing.chunked, 0);
        if framing.chunked {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
        }
        out.extend_from_slice(b"\r\n");
        w.write_all(&out)?;
        w.flush()?;
        Ok(ChunkedWriter {
            w,
            chunked: framing.chunked,
        })
    }
    /// Writes one chunk and flushes it to the socket.
    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        if !self.chunked {
            self.w.write_all(data)?;
            return self.w.flush();
        }
        let size = format!("{:x}\r\n", data.len());
        if data.len() > CHUNK_COPY_AT_MOST {
            // Large: written as it is rather than copied beside its size
            // (three writes cost less than the copy).
            self.w.write_all(size.as_bytes())?;
            self.w.write_all(data)?;
            self.w.write_all(b"\r\n")?;
            return self.w.flush();
        }
        // Small: one write, one segment on the wire.
        let mut out = Vec::with_capacity(data.len() + 16);
        out.extend_from_slice(size.as_bytes());
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        self.w.write_all(&out)?;
        self.w.flush()
    }
    /// Ends the body. Returns whether the connection may be reused.
    pub fn finish(mut self) -> io::Result<bool> {
        if !self.chunked {
            return Ok(false);
        }
        self.w.write_all(b"0\r\n\r\n")?;
        self.w.flush()?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn limits() -> WireLimits {
        WireLimits {
            max_request_line: 8 * 1024,
            max_head: 32 * 1024,
            max_body: 4 * 1024 * 1024,
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
        }
    }

    /// A connected pair: our `Conn` and the peer's socket.
    fn pair() -> (Conn, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (ours, _) = l.accept().unwrap();
        (Conn::new(ours, limits()), peer)
    }

    #[test]
    fn decimals_are_written_as_fmt_writes_them() {
        for n in [0, 7, 10, 99, 100, 65_535, 1_234_567_890, usize::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }

    #[test]
    fn a_head_in_small_pieces_is_scanned_once() {
        // #11 item 29 (repro t18): each read scans only the new bytes.
        let mut head = b"POST /mcp HTTP/1.1\r\n".to_vec();
        while head.len() < 31 * 1024 {
            head.extend_from_slice(b"X-Filler: abcdefghijklmnopqrstuvwxyz\r\n");
        }
        head.extend_from_slice(b"\r\n");
        let mut scan = HeadScan::default();
        let mut examined = 0;
        for end in (16..head.len()).step_by(16) {
            let before = scan.scanned;
            assert_eq!(scan.advance(&head[..end]), None);
            assert!(scan.scanned + 3 >= end, "left behind at {end}");
            examined += end - before;
        }
        assert!(
            examined < 2 * head.len(),
            "rescanned: {examined} bytes examined"
        );
        assert_eq!(scan.advance(&head), Some(head.len()));
        assert_eq!(scan.line_end, Some(19), "the request line's LF");
        // Bare LF line ends end a head too.
        assert_eq!(
            HeadScan::default().advance(b"GET / HTTP/1.1\nA: b\n\n"),
            Some(21)
        );
    }

    #[test]
    fn framing_values_lose_spaces_and_tabs_only() {
        let head = |length: &str| {
            let (mut conn, mut peer) = pair();
            let text = format!("POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length:{length}\r\n\r\n");
            peer.write_all(text.as_bytes()).unwrap();
            conn.read_head().map(|r| r.framing)
        };
        assert_eq!(head(" \t5\t ").unwrap(), BodyFraming::Length(5));
        // What only Unicode calls a space is part of the value: not a length.
        let err = head(" 5\u{a0}").unwrap_err();
        assert!(matches!(err, ReadError::Reject(400, _)), "{err:?}");
    }

    #[test]
    fn a_head_is_read_whole_or_refused_if_it_is_not_utf8() {
        let read = |head: &[u8]| {
            let (mut conn, mut peer) = pair();
            peer.write_all(head).unwrap();
            conn.read_head()
        };
        let req = read(
            "POST /mcp HTTP/1.1\r\nHost: h\r\nX-Name: Zoë \t\r\nACCEPT:a, b\r\n\r\n".as_bytes(),
        )
        .unwrap();
        assert_eq!(req.header("host"), Some("h"));
        assert_eq!(req.header("x-name"), Some("Zoë"));
        assert_eq!(req.header("accept"), Some("a, b"));
        assert!(req.keep_alive);
        // `close` in any line of `Connection` (one list) closes, and only
        // the option itself does.
        for (connection, kept) in [
            ("Connection: keep-alive\r\nConnection: close", false),
            ("Connection: Keep-Alive, CLOSE", false),
            ("Connection: closed", true),
        ] {
            let text = format!("GET /mcp HTTP/1.1\r\nHost: h\r\n{connection}\r\n\r\n");
            assert_eq!(
                read(text.as_bytes()).unwrap().keep_alive,
                kept,
                "{connection}"
            );
        }
        let err = read(b"POST /mcp HTTP/1.1\r\nHost: h\r\nX-Bad: \xff\xfe\r\n\r\n").unwrap_err();
        assert!(matches!(err, ReadError::Reject(400, _)), "{err:?}");
        // Too many fields is 431 whatever the bytes of their values.
        let mut many = b"POST /mcp HTTP/1.1\r\nX-Bad: \xff\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        let err = read(&many).unwrap_err();
        assert!(matches!(err, ReadError::Reject(431, _)), "{err:?}");
    }

    #[test]
    fn memory_follows_the_bytes_that_arrived_not_the_announced_length() {
        // #11 items 4 and 25 (repro t19): Content-Length 4 MiB and one byte.
        let (mut conn, mut peer) = pair();
        peer.write_all(b"POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 4194304\r\n\r\nx")
            .unwrap();
        let mut req = conn.read_head().unwrap();
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        let err = conn.read_body(&mut req).unwrap_err();
        assert!(matches!(err, ReadError::Reject(400, _)), "{err:?}");
        assert_eq!(req.body, b"x");
        assert!(req.body.capacity() < 64 * 1024, "{}", req.body.capacity());
        assert!(conn.buf.len() <= 64 * 1024, "{}", conn.buf.len());
    }

    #[test]
    fn many_tiny_chunks_are_read_in_linear_time_and_memory() {
        // #11 item 4: 1-byte chunks used to copy the whole buffer each.
        let (mut conn, mut peer) = pair();
        let n = 200_000;
        let mut body = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..n {
            body.extend_from_slice(b"1;ext=1\r\nx\r\n");
        }
        body.extend_from_slice(b"0\r\n\r\n");
        let writer = std::thread::spawn(move || peer.write_all(&body).map(|()| peer));
        let mut req = conn.read_head().unwrap();
        conn.read_body(&mut req).unwrap();
        assert_eq!(req.body.len(), n);
        assert!(conn.buf.len() <= 64 * 1024, "{}", conn.buf.len());
        writer.join().unwrap().unwrap();
    }

    #[test]
    fn bodies_longer_than_a_read_arrive_whole_and_in_order() {
        // Past the connection's buffer, a body is read in pieces straight
        // into it: by length, and as one large chunk.
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut sent = format!(
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: {}\r\n\r\n",
            data.len()
        )
        .into_bytes();
        sent.extend_from_slice(&data);
        sent.extend_from_slice(
            format!(
                "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n",
                data.len()
            )
            .as_bytes(),
        );
        sent.extend_from_slice(&data);
        sent.extend_from_slice(b"\r\n0\r\n\r\n");
        let (mut conn, mut peer) = pair();
        let writer = std::thread::spawn(move || peer.write_all(&sent).map(|()| peer));
        for framing in ["length", "chunked"] {
            let mut req = conn.read_head().unwrap();
            conn.read_body(&mut req).unwrap();
            assert!(
                req.body == data,
                "{framing}: {} bytes differ",
                req.body.len()
            );
        }
        writer.join().unwrap().unwrap();
    }

    #[test]
    fn chunk_sizes_and_lengths_are_exact_tokens() {
        assert_eq!(parse_chunk_size(b"1a"), Some(26));
        assert_eq!(parse_chunk_size(b"1A ; name=value"), Some(26));
        assert_eq!(parse_chunk_size(b"0"), Some(0));
        for bad in [
            &b""[..],
            b"+1a",
            b" 1a",
            b"1a x",
            b"0x1a",
            b"-1",
            b"10000000000000000",
            b"5;\nGET /mcp HTTP/1.1",
            b"5;a\rb",
            b"5;\x00",
        ] {
            assert_eq!(
                parse_chunk_size(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(parse_decimal("42"), Some(42));
        for bad in ["", "+42", "-1", "4 2", "0x10", "99999999999999999999999"] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }
}
