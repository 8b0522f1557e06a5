//! Reading an HTTP/1.1 response: its head (interim answers skipped) and
//! its body, de-chunked and bounded, framed as RFC 9112 says, so that a
//! connection whose body was read whole is at its next response.

use super::target::Registered;
use crate::transport::connection::DEFAULT_MAX_MESSAGE_BYTES;
use crate::transport::http::headers::{is_media_type, list_items};
use std::io::{self, BufRead, Read};

/// Reads one line of at most [`DEFAULT_MAX_MESSAGE_BYTES`] (a server that
/// never ends a line cannot fill memory).
pub(super) fn read_line(r: &mut impl BufRead, line: &mut String) -> io::Result<usize> {
    line_within(r, line, DEFAULT_MAX_MESSAGE_BYTES, || {
        format!("a line longer than {DEFAULT_MAX_MESSAGE_BYTES} bytes")
    })
}

/// Reads a line of at most `limit` bytes into `line`; a longer one is an
/// error that says `over`.
fn line_within(
    r: &mut impl BufRead,
    line: &mut String,
    limit: usize,
    over: impl FnOnce() -> String,
) -> io::Result<usize> {
    let n = r.take(limit as u64 + 1).read_line(line)?;
    if n > limit {
        return Err(io::Error::new(io::ErrorKind::InvalidData, over()));
    }
    Ok(n)
}

pub(super) struct Head {
    pub(super) status: u16,
    /// HTTP/1.1, and no `Connection: close`: the server keeps the
    /// connection open after this response.
    pub(super) keep_alive: bool,
    pub(super) headers: Vec<(String, String)>,
}

impl Head {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the body is chunked: `chunked` is the last transfer coding
    /// of all `Transfer-Encoding` lines (RFC 9112, 6.1), compared without
    /// regard to case, as coding names are (RFC 9112, 7).
    pub(super) fn chunked(&self) -> bool {
        let values = self
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
            .map(|(_, v)| v.as_str());
        // Empty items are ignored, as a recipient must (RFC 9110, 5.6.1).
        list_items(values)
            .filter(|t| !t.is_empty())
            .last()
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    }

    /// Whether the body's media type is `want`: the `Content-Type` before
    /// any parameter (`; charset=…`), compared without regard to case, as
    /// media types are (RFC 9110, 8.3.1).
    pub(super) fn media_type_is(&self, want: &str) -> bool {
        self.header("content-type")
            .is_some_and(|ct| is_media_type(ct, want))
    }
}

/// Reads a response's head; interim (1xx) responses before it are
/// skipped, except `101 Switching Protocols`, which is final. All of them
/// together take at most [`MAX_RESPONSE_HEAD`].
pub(super) fn read_head(r: &mut impl BufRead) -> io::Result<Head> {
    let mut left = MAX_RESPONSE_HEAD;
    loop {
        let head = read_one_head(r, &mut left)?;
        if !(100..200).contains(&head.status) || head.status == 101 {
            return Ok(head);
        }
    }
}

/// The most a response's head (status line and headers, with the interim
/// responses before it) may take: 64 KiB.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Reads one line of a head into `line` out of what is `left` of the
/// head's [`MAX_RESPONSE_HEAD`].
fn head_line(r: &mut impl BufRead, line: &mut String, left: &mut usize) -> io::Result<usize> {
    let n = line_within(r, line, *left, || {
        format!("a response head over {MAX_RESPONSE_HEAD} bytes")
    })?;
    *left -= n;
    Ok(n)
}

fn read_one_head(r: &mut impl BufRead, left: &mut usize) -> io::Result<Head> {
    let mut line = String::new();
    head_line(r, &mut line, left)?;
    let http_1_1 = line.starts_with("HTTP/1.1 ");
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
        if head_line(r, &mut line, left)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if headers.len() > crate::transport::http::wire::MAX_HEADERS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "too many headers",
            ));
        }
        let l = line.trim_end();
        if l.is_empty() {
            let mut head = Head {
                status,
                keep_alive: false,
                headers,
            };
            head.keep_alive = http_1_1
                && !head
                    .header("connection")
                    .is_some_and(|c| c.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")));
            return Ok(head);
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_owned(), v.trim().to_owned()));
        }
    }
}

/// A response body, de-chunked as it is read.
pub(super) struct Body<R> {
    pub(super) r: R,
    pub(super) chunked: bool,
    pub(super) left: usize,
    pub(super) done: bool,
    /// Neither length nor chunks: the body ends when the server closes
    /// the connection (RFC 9112, 6.3).
    pub(super) until_close: bool,
    /// The connection may serve another request once this body is read
    /// whole: the server keeps it open and the body's end is framed.
    pub(super) reusable: bool,
    pub(super) socket: Option<Registered>,
}

impl<R: BufRead> Body<R> {
    /// The whole body, refused beyond [`DEFAULT_MAX_MESSAGE_BYTES`].
    pub(super) fn bounded(&mut self) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        self.take(DEFAULT_MAX_MESSAGE_BYTES as u64 + 1)
            .read_to_end(&mut out)?;
        if out.len() > DEFAULT_MAX_MESSAGE_BYTES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a response body over {DEFAULT_MAX_MESSAGE_BYTES} bytes"),
            ));
        }
        Ok(out)
    }
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done {
            return Ok(0);
        }
        if self.until_close {
            let n = self.r.read(buf)?;
            self.done = n == 0 && !buf.is_empty();
            return Ok(n);
        }
        if self.left == 0 {
            if !self.chunked {
                self.done = true;
                return Ok(0);
            }
            let mut line = String::new();
            if read_line(&mut self.r, &mut line)? == 0 {
                // Closed before the last chunk: cut off, not whole.
                self.done = true;
                return Err(cut_off());
            }
            let mut line = if line.trim().is_empty() {
                // The CRLF after a chunk's data.
                line.clear();
                read_line(&mut self.r, &mut line)?;
                line
            } else {
                line
            };
            // The size, without any chunk extensions (`;name=value`).
            let size = line.split(';').next().unwrap_or_default().trim();
            self.left = usize::from_str_radix(size, 16)
                .map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
            if self.left == 0 {
                // The trailer section, to its empty line: the connection
                // is then at the next response.
                loop {
                    line.clear();
                    if read_line(&mut self.r, &mut line)? == 0 {
                        self.done = true;
                        return Err(cut_off());
                    }
                    if line.trim().is_empty() {
                        break;
                    }
                }
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.r.read(&mut buf[..want])?;
        if n == 0 && want > 0 {
            // Closed before its length or its chunk was complete.
            self.done = true;
            return Err(cut_off());
        }
        self.left -= n;
        Ok(n)
    }
}

/// A body that ended before its framing said it would.
pub(super) fn cut_off() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "the server closed the connection in the middle of a response",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    /// A body over `bytes` framed as the flags say, and what it reads as
    /// (or the error's kind), with the bytes left after it.
    fn read_body(
        bytes: &[u8],
        chunked: bool,
        length: Option<usize>,
    ) -> (Result<Vec<u8>, io::ErrorKind>, bool, Vec<u8>) {
        let mut body = Body {
            r: BufReader::new(io::Cursor::new(bytes.to_vec())),
            chunked,
            left: length.unwrap_or(0),
            done: false,
            until_close: !chunked && length.is_none(),
            reusable: true,
            socket: None,
        };
        let read = body.bounded().map_err(|e| e.kind());
        let mut rest = Vec::new();
        body.r.read_to_end(&mut rest).unwrap();
        (read, body.done, rest)
    }

    #[test]
    fn a_head_is_bounded_as_a_whole() {
        let head = |filler: usize| {
            let mut h = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n".to_owned();
            // Lines with no colon are no headers, but they are head.
            for _ in 0..filler {
                h.push_str(&"x".repeat(1023));
                h.push_str("\r\n");
            }
            h.push_str("\r\n");
            read_head(&mut BufReader::new(io::Cursor::new(h.into_bytes())))
        };
        let small = head(10).expect("a head of 10 KiB");
        assert_eq!(
            (small.status, small.header("content-length")),
            (200, Some("0"))
        );
        let e = head(MAX_RESPONSE_HEAD / 1024)
            .err()
            .expect("over the bound");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        // Interim responses count towards it too.
        let endless = "HTTP/1.1 100 Continue\r\n\r\n".repeat(MAX_RESPONSE_HEAD / 20);
        let read = read_head(&mut BufReader::new(io::Cursor::new(endless.into_bytes())));
        let e = read.err().expect("interim heads without end");
        assert!(e.to_string().contains("response head over"), "{e}");
    }

    #[test]
    fn bodies_end_where_their_framing_says() {
        let next = b"HTTP/1.1 200 OK";
        // Chunks, an extension, trailers: read to the trailers' end, so the
        // connection is at the next response.
        let chunked = [
            &b"5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n"[..],
            next,
        ]
        .concat();
        let (read, done, rest) = read_body(&chunked, true, None);
        assert_eq!(read.unwrap(), b"hello world");
        assert!(done);
        assert_eq!(rest, next);
        // A length.
        let sized = [&b"hello"[..], next].concat();
        let (read, _, rest) = read_body(&sized, false, Some(5));
        assert_eq!((read.unwrap(), rest), (b"hello".to_vec(), next.to_vec()));
        // Neither: to the end of the connection.
        let (read, done, _) = read_body(b"all of it", false, None);
        assert_eq!(read.unwrap(), b"all of it");
        assert!(done);
        // Cut short: an error, never a body that passes for whole.
        let (read, ..) = read_body(b"5\r\nhel", true, None);
        assert_eq!(read.unwrap_err(), io::ErrorKind::UnexpectedEof);
        let (read, ..) = read_body(b"5\r\nhello\r\n0\r\n", true, None);
        assert_eq!(read.unwrap_err(), io::ErrorKind::UnexpectedEof);
        let (read, ..) = read_body(b"hel", false, Some(5));
        assert_eq!(read.unwrap_err(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn heads_skip_interim_answers_and_tell_whether_the_connection_stays() {
        let head = |text: &str| read_head(&mut io::Cursor::new(text.as_bytes().to_vec())).unwrap();
        let h = head("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
        assert_eq!((h.status, h.keep_alive), (200, true));
        assert_eq!(head("HTTP/1.1 101 Switching Protocols\r\n\r\n").status, 101);
        assert!(!head("HTTP/1.0 200 OK\r\n\r\n").keep_alive);
        assert!(!head("HTTP/1.1 200 OK\r\nConnection: Close\r\n\r\n").keep_alive);
        assert!(!head("HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\n\r\n").keep_alive);
        assert!(head("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n\r\n").keep_alive);
    }

    /// A head read from `fields` (header lines, each ended by CRLF).
    fn head_with(fields: &str) -> Head {
        let text = format!("HTTP/1.1 200 OK\r\n{fields}\r\n");
        read_head(&mut io::Cursor::new(text.into_bytes())).unwrap()
    }

    #[test]
    fn transfer_codings_are_read_without_regard_to_case_and_chunked_must_be_last() {
        for chunked in [
            "Transfer-Encoding: chunked\r\n",
            "Transfer-Encoding: Chunked\r\n",
            "transfer-encoding: CHUNKED\r\n",
            "Transfer-Encoding: gzip, Chunked \r\n",
            "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n",
        ] {
            assert!(head_with(chunked).chunked(), "{chunked:?}");
        }
        for not in [
            "",
            "Content-Length: 2\r\n",
            "Transfer-Encoding: chunked, gzip\r\n",
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n",
            "Transfer-Encoding: notchunked\r\n",
        ] {
            assert!(!head_with(not).chunked(), "{not:?}");
        }
    }

    #[test]
    fn media_types_are_compared_without_regard_to_case_or_parameters() {
        for sse in [
            "Content-Type: text/event-stream\r\n",
            "Content-Type: Text/Event-Stream\r\n",
            "content-type: TEXT/EVENT-STREAM; charset=utf-8\r\n",
            "Content-Type: text/event-stream ;charset=utf-8\r\n",
        ] {
            assert!(head_with(sse).media_type_is("text/event-stream"), "{sse:?}");
        }
        for not in [
            "",
            "Content-Type: application/json\r\n",
            "Content-Type: text/event-streams\r\n",
        ] {
            assert!(
                !head_with(not).media_type_is("text/event-stream"),
                "{not:?}"
            );
        }
        let json = head_with("Content-Type: Application/JSON; charset=UTF-8\r\n");
        assert!(json.media_type_is("application/json"));
    }
}
