//! Newline-delimited framing with a size limit, shared by stdio and TCP.

use std::io::{self, Read};

/// Bytes read from the underlying reader per call.
const READ_CHUNK: usize = 64 * 1024;

/// One frame of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A line without its terminator (`\n` or `\r\n`).
    Line(&'a [u8]),
    /// A line over the limit, discarded up to its newline; `len` bytes were dropped.
    TooLong {
        /// How many bytes the discarded line had.
        len: usize,
    },
}

/// Reads newline-delimited frames; memory stays bounded by the limit plus one
/// read chunk, however long a line is.
pub struct LineReader<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    // Where the newline search resumes (everything before it has none).
    scanned: usize,
    max: usize,
    // Bytes of an over-long line dropped so far; Some while discarding.
    discarding: Option<usize>,
}

enum Found {
    Line(usize, usize),
    TooLong(usize),
}

impl<R: Read> LineReader<R> {
    /// A reader whose lines may be at most `max_line_bytes` long.
    pub fn new(inner: R, max_line_bytes: usize) -> Self {
        LineReader {
            inner,
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            scanned: 0,
            max: max_line_bytes,
            discarding: None,
        }
    }

    /// The next frame, or `None` at end of input. A final line without a
    /// newline is returned as a line.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame<'_>>> {
        Ok(self.find()?.map(|f| match f {
            Found::Line(a, b) => Frame::Line(&self.buf[a..b]),
            Found::TooLong(len) => Frame::TooLong { len },
        }))
    }

    fn find(&mut self) -> io::Result<Option<Found>> {
        loop {
            if let Some(pos) = self.buf[self.scanned..self.end]
                .iter()
                .position(|&b| b == b'\n')
            {
                let nl = self.scanned + pos;
                let (a, mut b) = (self.start, nl);
                self.start = nl + 1;
                self.scanned = self.start;
                if let Some(dropped) = self.discarding.take() {
                    return Ok(Some(Found::TooLong(dropped + (b - a))));
                }
                if b > a && self.buf[b - 1] == b'\r' {
                    b -= 1;
                }
                if b - a > self.max {
                    return Ok(Some(Found::TooLong(b - a)));
                }
                return Ok(Some(Found::Line(a, b)));
            }
            self.scanned = self.end;
            let pending = self.end - self.start;
            if pending > self.max || self.discarding.is_some() {
                // Over the limit with no newline yet: drop what we hold.
                *self.discarding.get_or_insert(0) += pending;
                self.start = 0;
                self.end = 0;
                self.scanned = 0;
            } else if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end = pending;
                self.scanned = pending;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                let grown = (self.buf.len() * 2)
                    .min(self.max + READ_CHUNK + 1)
                    .max(self.end + READ_CHUNK);
                self.buf.resize(grown, 0);
            }
            let n = match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                let rest = self.end - self.start;
                if let Some(dropped) = self.discarding.take() {
                    return Ok(Some(Found::TooLong(dropped + rest)));
                }
                if rest == 0 {
                    return Ok(None);
                }
                let (a, b) = (self.start, self.end);
                self.start = self.end;
                self.scanned = self.end;
                if rest > self.max {
                    return Ok(Some(Found::TooLong(rest)));
                }
                return Ok(Some(Found::Line(a, b)));
            }
            self.end += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            out.push(match f {
                Frame::Line(l) => String::from_utf8_lossy(l).into_owned(),
                Frame::TooLong { len } => format!("<{len}>"),
            });
        }
        out
    }

    #[test]
    fn splits_lines_and_strips_cr() {
        assert_eq!(frames(b"a\nbb\r\n\nccc", 10), vec!["a", "bb", "", "ccc"]);
    }

    #[test]
    fn overlong_lines_are_discarded_and_reading_goes_on() {
        assert_eq!(frames(b"12345678\nok\n", 4), vec!["<8>", "ok"]);
        let mut big = vec![b'x'; 300_000];
        big.extend_from_slice(b"\nafter\n");
        assert_eq!(frames(&big, 1000), vec!["<300000>", "after"]);
        assert_eq!(frames(&vec![b'y'; 200_000], 10), vec!["<200000>"]);
    }

    #[test]
    fn memory_stays_bounded() {
        let big = vec![b'x'; 5_000_000];
        let mut r = LineReader::new(&big[..], 1000);
        assert!(matches!(
            r.next_frame().unwrap(),
            Some(Frame::TooLong { len: 5_000_000 })
        ));
        assert!(r.buf.len() <= 1000 + READ_CHUNK + 1);
    }
}
