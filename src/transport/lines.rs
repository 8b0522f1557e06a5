//! Newline-delimited framing with a size limit, shared by stdio and TCP.

use std::io::{self, Read};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Bytes read from the underlying reader per call.
const READ_CHUNK: usize = 64 * 1024;

/// Memory shared by the line buffers of many connections (TCP): a reader
/// whose partial line would need more than what is left has that line
/// refused as too large, so many connections each holding an almost
/// maximal partial line cannot add up to more than the budget.
#[derive(Debug)]
pub struct LineBudget {
    left: AtomicUsize,
}

impl LineBudget {
    /// A budget of `bytes` beyond each reader's first read chunk (64 KiB).
    pub fn new(bytes: usize) -> Arc<LineBudget> {
        Arc::new(LineBudget {
            left: AtomicUsize::new(bytes),
        })
    }
    fn take(&self, n: usize) -> bool {
        self.left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }
    fn give(&self, n: usize) {
        self.left.fetch_add(n, Ordering::AcqRel);
    }
    /// Bytes left.
    pub fn left(&self) -> usize {
        self.left.load(Ordering::Acquire)
    }
}

/// How many first bytes of a discarded line are kept ([`Frame::TooLong`],
/// [`Frame::Refused`]).
pub const KEPT_HEAD: usize = 1024;

/// One frame of input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A line without its terminator (`\n` or `\r\n`).
    Line(&'a [u8]),
    /// A line over the limit, discarded up to its newline; `len` bytes were dropped.
    TooLong {
        /// How many bytes the discarded line had.
        len: usize,
        /// Its first bytes (at most [`KEPT_HEAD`]): enough to tell, say,
        /// which request an answer too large to take answered.
        head: &'a [u8],
    },
    /// A line within the limit that the memory shared by all connections
    /// for partial lines could not hold (others hold it): discarded up to
    /// its newline like one too long, but not the sender's fault.
    Refused {
        /// How many bytes the discarded line had.
        len: usize,
        /// Its first bytes (at most [`KEPT_HEAD`]), as for a line too long.
        head: &'a [u8],
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
    // The newline ending the next line, when a look ahead found it.
    newline: Option<usize>,
    max: usize,
    // Bytes of an over-long line dropped so far; Some while discarding.
    discarding: Option<usize>,
    // The line being discarded is within the limit, but the shared budget
    // could not hold it.
    starved: bool,
    // The first bytes of the line being discarded.
    head: Vec<u8>,
    // Growth beyond the first chunk is taken from here.
    budget: Option<Arc<LineBudget>>,
    reserved: usize,
    // The descriptor `inner` reads, polled for a moment before a read that
    // would block (see `with_spin`).
    spin: Option<(std::os::fd::RawFd, crate::wait::Spin)>,
    // The last read asked for less than `BUFFERED_BELOW` bytes.
    asked_little: bool,
    // A read returned the end of input: none is asked for again (a
    // terminal would wait for a second end).
    ended: bool,
}

/// A reader with a buffer of its own (std's stdin: 8 KiB) reads ahead into
/// it when asked for less than that, and answers the next read from it: a
/// poll of the descriptor cannot see those bytes, so neither such a read
/// nor the next one spins.
const BUFFERED_BELOW: usize = 8 * 1024;

enum Found {
    Line(usize, usize),
    TooLong(usize),
    Refused(usize),
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
            newline: None,
            max: max_line_bytes,
            discarding: None,
            starved: false,
            head: Vec::new(),
            budget: None,
            reserved: 0,
            spin: None,
            asked_little: false,
            ended: false,
        }
    }

    /// Before a read, polls `fd` (the descriptor `inner` reads) for a
    /// moment while requests have been arriving within one
    /// (`wait::Spin`): under steady traffic the next request comes
    /// within the spin and the thread's wake-up is saved; an idle
    /// connection blocks in read(2) at once.
    pub fn with_spin(mut self, fd: Option<std::os::fd::RawFd>) -> Self {
        self.spin = fd.map(|fd| (fd, crate::wait::Spin::default()));
        self
    }

    /// Takes the buffer's growth beyond one read chunk from `budget`.
    pub fn with_budget(mut self, budget: Option<Arc<LineBudget>>) -> Self {
        self.budget = budget;
        self
    }

    /// Grows the buffer to `size` if the budget allows.
    fn grow(&mut self, size: usize) -> bool {
        let extra = size.saturating_sub(self.buf.len());
        if let Some(b) = &self.budget {
            if !b.take(extra) {
                return false;
            }
            self.reserved += extra;
        }
        // Exactly: the budget counts what the buffer really holds.
        self.buf.reserve_exact(extra);
        self.buf.resize(size, 0);
        true
    }

    /// Gives back a grown buffer once it holds little.
    fn shrink(&mut self) {
        if self.buf.len() > READ_CHUNK && self.end <= READ_CHUNK {
            self.buf.truncate(READ_CHUNK);
            self.buf.shrink_to_fit();
            if let Some(b) = &self.budget {
                b.give(self.reserved);
            }
            self.reserved = 0;
        }
    }

    /// The next frame, or `None` at end of input. A final line without a
    /// newline is returned as a line.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame<'_>>> {
        Ok(self.next_frame_and_more()?.map(|(frame, _)| frame))
    }

    /// [`LineReader::next_frame`], and whether the next line is already
    /// read whole (its newline too): another request is at hand, and
    /// reading it will not wait for the peer.
    pub fn next_frame_and_more(&mut self) -> io::Result<Option<(Frame<'_>, bool)>> {
        let found = self.find()?;
        let more = found.is_some() && self.line_at_hand();
        Ok(found.map(|f| match f {
            Found::Line(a, b) => (Frame::Line(&self.buf[a..b]), more),
            Found::TooLong(len) => (
                Frame::TooLong {
                    len,
                    head: &self.head,
                },
                more,
            ),
            Found::Refused(len) => (
                Frame::Refused {
                    len,
                    head: &self.head,
                },
                more,
            ),
        }))
    }

    /// Whether the bytes read hold another newline; one found here is kept
    /// for the next `find`, which then searches nothing.
    fn line_at_hand(&mut self) -> bool {
        match self.search() {
            Some(nl) => {
                self.newline = Some(nl);
                true
            }
            None => {
                self.scanned = self.end;
                false
            }
        }
    }

    /// The next newline in the bytes read and not yet searched.
    fn search(&self) -> Option<usize> {
        memchr::memchr(b'\n', &self.buf[self.scanned..self.end]).map(|p| self.scanned + p)
    }

    /// Keeps the first bytes of `buf[a..b]`, a line being discarded.
    fn keep_head(&mut self, a: usize, b: usize) {
        self.head.clear();
        self.head
            .extend_from_slice(&self.buf[a..b.min(a + KEPT_HEAD)]);
    }

    /// A discarded line of `len` bytes: too long, or refused for want of
    /// the shared budget.
    fn discarded(&mut self, len: usize) -> Found {
        // Starved, but over the limit in the end: too long all the same.
        if std::mem::take(&mut self.starved) && len <= self.max {
            Found::Refused(len)
        } else {
            Found::TooLong(len)
        }
    }

    fn find(&mut self) -> io::Result<Option<Found>> {
        loop {
            let newline = self.newline.take().or_else(|| self.search());
            if let Some(nl) = newline {
                let (a, mut b) = (self.start, nl);
                self.start = nl + 1;
                self.scanned = self.start;
                if let Some(dropped) = self.discarding.take() {
                    return Ok(Some(self.discarded(dropped + (b - a))));
                }
                // Too long counts every byte before the newline, as when
                // the line is dropped piecemeal.
                let raw = b - a;
                if b > a && self.buf[b - 1] == b'\r' {
                    b -= 1;
                }
                if b - a > self.max {
                    self.keep_head(a, b);
                    return Ok(Some(Found::TooLong(raw)));
                }
                return Ok(Some(Found::Line(a, b)));
            }
            self.scanned = self.end;
            let pending = self.end - self.start;
            // A `\r` at the end may be the first half of a `\r\n`: not
            // part of the line, so not counted against the limit.
            let cr = usize::from(pending > 0 && self.buf[self.end - 1] == b'\r');
            if pending > self.max + cr || self.discarding.is_some() {
                // Over the limit with no newline yet: drop what we hold.
                if self.discarding.is_none() {
                    self.keep_head(self.start, self.end);
                }
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
            self.shrink();
            if self.end == self.buf.len() {
                let grown = (self.buf.len() * 2)
                    .min(self.max + READ_CHUNK + 1)
                    .max(self.end + READ_CHUNK);
                if !self.grow(grown) {
                    // Out of shared budget: this line is refused; what it
                    // holds is dropped.
                    self.starved = true;
                    if self.discarding.is_none() {
                        self.keep_head(self.start, self.end);
                    }
                    *self.discarding.get_or_insert(0) += self.end - self.start;
                    self.start = 0;
                    self.end = 0;
                    self.scanned = 0;
                }
            }
            if self.ended {
                return Ok(None);
            }
            let waited = self.spin_before_read(self.buf.len() - self.end);
            let n = match self.inner.read(&mut self.buf[self.end..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if let (Some(since), Some((_, spin))) = (waited, &self.spin) {
                spin.parked(since);
            }
            if n == 0 {
                self.ended = true;
                let rest = self.end - self.start;
                if let Some(dropped) = self.discarding.take() {
                    return Ok(Some(self.discarded(dropped + rest)));
                }
                if rest == 0 {
                    return Ok(None);
                }
                let (a, mut b) = (self.start, self.end);
                self.start = self.end;
                self.scanned = self.end;
                // The last line's `\r` is its line end, as before a `\n`.
                if self.buf[b - 1] == b'\r' {
                    b -= 1;
                }
                if b - a > self.max {
                    self.keep_head(a, b);
                    return Ok(Some(Found::TooLong(rest)));
                }
                return Ok(Some(Found::Line(a, b)));
            }
            self.end += n;
        }
    }
}

impl<R> LineReader<R> {
    /// Spins before a read of up to `want` bytes if worthwhile; `Some(since)`
    /// when the read may block (it began to wait then), `None` when it
    /// will not (or may be answered from the inner reader's own buffer).
    fn spin_before_read(&mut self, want: usize) -> Option<std::time::Instant> {
        let (fd, spin) = self.spin.as_ref()?;
        let little = want < BUFFERED_BELOW;
        let buffered = std::mem::replace(&mut self.asked_little, little) || little;
        if buffered {
            return None;
        }
        let since = std::time::Instant::now();
        if spin.worthwhile() && spin.poll_fd(*fd) {
            return None;
        }
        Some(since)
    }
}

impl<R> Drop for LineReader<R> {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.give(self.reserved);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads one byte at a time.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(buf.len()).min(1);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    /// Hands out its chunks one read each, counting the reads.
    struct Chunks<'a> {
        chunks: std::collections::VecDeque<&'a [u8]>,
        reads: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.reads.set(self.reads.get() + 1);
            let Some(chunk) = self.chunks.pop_front() else {
                return Ok(0);
            };
            buf[..chunk.len()].copy_from_slice(chunk);
            Ok(chunk.len())
        }
    }

    #[test]
    fn a_frame_says_whether_the_next_line_is_already_read_whole() {
        let reads = std::rc::Rc::new(std::cell::Cell::new(0));
        let chunks = Chunks {
            chunks: [&b"a\nb"[..], b"\nc\nd\n", b"e"].into(),
            reads: reads.clone(),
        };
        let mut r = LineReader::new(chunks, 8);
        let mut next = || {
            let (frame, more) = r.next_frame_and_more().unwrap()?;
            let Frame::Line(line) = frame else {
                panic!("{frame:?}")
            };
            Some((String::from_utf8(line.to_vec()).unwrap(), more, reads.get()))
        };
        // Only the start of b is read: not at hand (reading it may wait).
        assert_eq!(next(), Some(("a".into(), false, 1)));
        assert_eq!(next(), Some(("b".into(), true, 2)));
        // When more is at hand, the next line comes without a read.
        assert_eq!(next(), Some(("c".into(), true, 2)));
        assert_eq!(next(), Some(("d".into(), false, 2)));
        // A last line without a newline is never at hand before the end.
        assert_eq!(next(), Some(("e".into(), false, 4)));
        assert_eq!(next(), None);
    }

    #[test]
    fn no_spin_before_a_read_that_an_inner_buffer_may_answer() {
        // A pipe with nothing in it: a spin would poll it in vain.
        let (r, _w) = std::io::pipe().unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&r);
        let mut lines = LineReader::new(&b""[..], 8).with_spin(Some(fd));
        assert!(
            lines.spin_before_read(READ_CHUNK).is_some(),
            "spun, then blocks"
        );
        // Asked for little: std's stdin reads ahead into its own buffer,
        // which answers this read and the next without the descriptor.
        assert!(lines.spin_before_read(100).is_none());
        assert!(lines.spin_before_read(READ_CHUNK).is_none());
        assert!(lines.spin_before_read(READ_CHUNK).is_some());
    }

    #[test]
    fn a_line_at_the_limit_ending_in_crlf_is_a_line_however_the_reads_fall() {
        // A read ending between the \r and the \n once made it too long.
        let input = b"12345678\r\nabc\n";
        for reader in [
            Box::new(&input[..]) as Box<dyn Read>,
            Box::new(Trickle(input)),
        ] {
            let mut r = LineReader::new(reader, 8);
            assert!(matches!(r.next_frame().unwrap(), Some(Frame::Line(l)) if l == b"12345678"));
            assert!(matches!(r.next_frame().unwrap(), Some(Frame::Line(l)) if l == b"abc"));
        }
    }

    #[test]
    fn partial_lines_of_many_readers_share_one_budget() {
        // #11 item 31 (repro t16): 40 connections each holding a 16 MiB - 1
        // partial line took 669 MB; the per-line limit had no total.
        let budget = LineBudget::new(4 * READ_CHUNK);
        let max = 16 * READ_CHUNK;
        let mut long = vec![b'x'; 3 * READ_CHUNK];
        long.extend_from_slice(b"\nnext\n");
        let mut a = LineReader::new(&long[..], max).with_budget(Some(budget.clone()));
        assert!(
            matches!(a.next_frame().unwrap(), Some(Frame::Line(l)) if l.len() == 3 * READ_CHUNK)
        );
        // a holds its grown buffer until it reads a short line again.
        let held = 4 * READ_CHUNK - budget.left();
        assert!(held >= 2 * READ_CHUNK, "{held}");
        let mut b = LineReader::new(&long[..], max).with_budget(Some(budget.clone()));
        // Refused, not too long: the line is within the limit; its first
        // bytes are kept (to answer it by its id).
        assert!(
            matches!(
                b.next_frame().unwrap(),
                Some(Frame::Refused { len, head }) if len == 3 * READ_CHUNK && head == &long[..KEPT_HEAD]
            ),
            "b's line did not fit in what a left"
        );
        assert!(matches!(
            b.next_frame().unwrap(),
            Some(Frame::Line(b"next"))
        ));
        assert!(matches!(
            a.next_frame().unwrap(),
            Some(Frame::Line(b"next"))
        ));
        assert!(a.next_frame().unwrap().is_none());
        // Starved, and over the limit too: too long (sending it again
        // would not help).
        let mut huge = vec![b'x'; 20 * READ_CHUNK];
        huge.push(b'\n');
        let mut c = LineReader::new(&huge[..], max).with_budget(Some(budget.clone()));
        assert!(matches!(
            c.next_frame().unwrap(),
            Some(Frame::TooLong { len, .. }) if len == 20 * READ_CHUNK
        ));
        drop((a, b, c));
        assert_eq!(budget.left(), 4 * READ_CHUNK, "everything given back");
    }

    fn frames(input: &[u8], max: usize) -> Vec<String> {
        let mut r = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            out.push(match f {
                Frame::Line(l) => String::from_utf8_lossy(l).into_owned(),
                Frame::TooLong { len, .. } => format!("<{len}>"),
                Frame::Refused { len, .. } => format!("<refused {len}>"),
            });
        }
        out
    }

    /// The last line, without a newline, ends at its `\r` as a line ended
    /// by `\r\n` does (at the limit, it is not too long), and once the
    /// input has ended nothing is read again (a terminal would wait for a
    /// second end).
    #[test]
    fn the_last_line_strips_its_cr_and_the_end_is_read_once() {
        let reads = std::rc::Rc::new(std::cell::Cell::new(0));
        let chunks = Chunks {
            chunks: [&b"a\n"[..], b"12345678\r"].into_iter().collect(),
            reads: reads.clone(),
        };
        let mut r = LineReader::new(chunks, 8);
        assert!(matches!(r.next_frame().unwrap(), Some(Frame::Line(l)) if l == b"a"));
        assert!(matches!(r.next_frame().unwrap(), Some(Frame::Line(l)) if l == b"12345678"));
        let at_end = reads.get();
        assert!(r.next_frame().unwrap().is_none());
        assert!(r.next_frame().unwrap().is_none());
        assert_eq!(reads.get(), at_end, "read again after the end");
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
            Some(Frame::TooLong { len: 5_000_000, head }) if head.len() == KEPT_HEAD
        ));
        assert!(r.buf.len() <= 1000 + READ_CHUNK + 1);
    }

    #[test]
    fn a_line_too_long_keeps_its_first_bytes() {
        let mut input = b"{\"id\":1,".to_vec();
        input.extend(vec![b'x'; 3000]);
        input.extend_from_slice(b"\nshort\n");
        // Dropped piecemeal (no newline within the limit), and whole.
        for max in [100, 2000] {
            let mut r = LineReader::new(&input[..], max);
            match r.next_frame().unwrap() {
                Some(Frame::TooLong { len, head }) => {
                    assert_eq!(len, 3008, "{max}");
                    assert!(head.starts_with(b"{\"id\":1,x"), "{max}");
                    assert!(head.len() <= KEPT_HEAD);
                }
                other => panic!("{max}: {other:?}"),
            }
            assert!(matches!(
                r.next_frame().unwrap(),
                Some(Frame::Line(b"short"))
            ));
        }
    }
}
