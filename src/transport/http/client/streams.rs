//! Server-sent event streams: the parser, and the threads that follow a
//! call's stream (resuming it when it drops) and the session's standalone
//! stream.

use super::response::Body;
use super::target::{unreachable, InFlight, Target};
use super::{DEFAULT_READ_TIMEOUT, DEFAULT_RECONNECT_DELAY, MAX_RESUME_ATTEMPTS, MAX_RETRY_DELAY};
use crate::jsonrpc::RequestId;
use crate::transport::connection::DEFAULT_MAX_MESSAGE_BYTES;
use crate::transport::http::socket::Socket;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What one pass over an SSE stream saw.
struct Pass {
    /// The last event id (to resume from; `Some("")`: reset, see
    /// [`Resume::carry`]).
    last_id: Option<String>,
    /// The last reconnection delay the server asked for.
    retry: Option<Duration>,
    /// Whether the response to the stream's request came.
    answered: bool,
    /// Whether any event carried a message.
    delivered: bool,
}

impl Pass {
    /// A pass that read nothing (the stream could not be opened).
    fn empty() -> Pass {
        Pass {
            last_id: None,
            retry: None,
            answered: false,
            delivered: false,
        }
    }
}

/// Where a stream is resumed from, carried over from pass to pass: the
/// last event id and the server's last `retry:` (a pass that saw neither
/// keeps the ones before).
#[derive(Default)]
struct Resume {
    last: Option<String>,
    retry: Option<Duration>,
}

impl Resume {
    /// Takes in what `pass` saw; whether it moved on: it brought a
    /// message or a new event id.
    ///
    /// An empty id resets the last one (SSE): the stream is then resumed
    /// from none, never from an older id (whose events would come again).
    fn carry(&mut self, pass: &Pass) -> bool {
        let moved_on = pass.delivered
            || matches!(pass.last_id.as_deref(), Some(id) if !id.is_empty() && self.last.as_deref() != Some(id));
        match pass.last_id.as_deref() {
            Some("") => self.last = None,
            Some(_) => self.last.clone_from(&pass.last_id),
            None => {}
        }
        self.retry = pass.retry.or(self.retry);
        moved_on
    }

    /// How long to wait before the stream is opened again after a pass
    /// that `delivered` a message or not (see [`wait_after`]); a stream
    /// that could not be opened delivered nothing.
    fn wait(&self, delivered: bool) -> Duration {
        wait_after(delivered, self.retry)
    }

    /// How long to wait after the stream could not be opened: as the
    /// server asked, but never less than [`DEFAULT_RECONNECT_DELAY`] (a
    /// short `retry:` must not spend every attempt within a restart).
    fn after_failure(&self) -> Duration {
        self.wait(false).max(DEFAULT_RECONNECT_DELAY)
    }
}

/// The shortest wait before a stream that brought no message is opened
/// again, whatever its `retry:` says: 100 ms (a server, or a proxy, that
/// ends every stream at once with `retry: 0` does not get a GET loop).
pub const MIN_EMPTY_RECONNECT_DELAY: Duration = Duration::from_millis(100);

/// How long to wait before opening a stream again after a pass that
/// `delivered` a message or not: the
/// server's `retry` (or [`DEFAULT_RECONNECT_DELAY`]), and at least
/// [`MIN_EMPTY_RECONNECT_DELAY`] after a pass that brought no message.
fn wait_after(delivered: bool, retry: Option<Duration>) -> Duration {
    let asked = retry.unwrap_or(DEFAULT_RECONNECT_DELAY);
    if delivered {
        asked
    } else {
        asked.max(MIN_EMPTY_RECONNECT_DELAY)
    }
}

/// How long the standalone stream waits after `failures` in a row (from
/// 1): [`Resume::after_failure`], doubled for each failure before this
/// one, at most [`MAX_RETRY_DELAY`].
fn failure_wait(resume: &Resume, failures: u32) -> Duration {
    let doubled = 2u32.saturating_pow(failures.saturating_sub(1).min(16));
    resume
        .after_failure()
        .saturating_mul(doubled)
        .min(MAX_RETRY_DELAY)
}

/// The response to our request `id` that `message` holds, alone or in a
/// batch (a 2025-03-26 server may send one as an event).
fn answer_in<'a>(message: &'a Value, id: &RequestId) -> Option<&'a Value> {
    let ours = |m: &&Value| {
        m.get("method").is_none()
            && m.get("id").and_then(RequestId::from_value).as_ref() == Some(id)
    };
    match message {
        Value::Array(items) => items.iter().find(ours),
        single => Some(single).filter(ours),
    }
}

/// What the answer to a GET for an SSE stream means.
enum Opened {
    /// The stream: read it.
    Stream(Body<BufReader<Socket>>),
    /// 404 while we have a session: the server no longer knows it.
    Gone,
    /// 405: the server has no such stream.
    None,
    /// Worth trying again after a while: 409 (the server still holds the
    /// stream that died), 429, a server error, or a 200 that is no stream.
    Later,
    /// Any other refusal.
    Refused(u16),
}

impl Target {
    /// Opens an SSE stream with GET and `extra` headers.
    fn open_stream(
        self: &Arc<Self>,
        extra: &[(&str, String)],
        silence: Option<Duration>,
        call: Option<&InFlight>,
    ) -> std::io::Result<Opened> {
        let (head, body) = self.request("GET", None, extra, silence, call)?;
        let sse = head.media_type_is("text/event-stream");
        Ok(match head.status {
            200 if sse => Opened::Stream(body),
            404 if self.has_session() => Opened::Gone,
            405 => Opened::None,
            200 | 409 | 429 | 500.. => Opened::Later,
            s => Opened::Refused(s),
        })
    }

    /// Reads the SSE stream of `request` (none for a notification's); if it
    /// ends before the response, resumes it with GET + Last-Event-ID after
    /// the server's retry delay. The last event id and retry delay carry
    /// over from pass to pass, and only passes that bring nothing (no
    /// message, no new event id) count towards [`MAX_RESUME_ATTEMPTS`] in a
    /// row (a server may close a long call's stream again and again, for
    /// the client to poll). `teaches`: the response is one
    /// [`learn`](Target::learn) takes the session's terms from
    /// (`initialize`, `tools/list`).
    pub(super) fn follow(
        self: &Arc<Self>,
        body: Body<BufReader<Socket>>,
        request: Option<RequestId>,
        call: Option<InFlight>,
        teaches: bool,
    ) {
        let target = self.clone();
        let failed = request.clone();
        let spawned = std::thread::Builder::new().name("mcpvisor-client-sse".into()).spawn(move || {
            let mut body = Some(body);
            let mut attempts = 0;
            // Whether the last try to open the stream again failed.
            let mut refused = false;
            let mut resume = Resume::default();
            loop {
                let pass = match body.take() {
                    Some(b) => target.read_events(BufReader::new(b), request.as_ref(), teaches),
                    None => Pass::empty(),
                };
                let Some(request) = request.as_ref().filter(|_| !pass.answered) else {
                    return;
                };
                let moved_on = resume.carry(&pass);
                // Closed, or given up (its connection closed by that):
                // nothing to resume, and no failure to tell.
                let given_up = || {
                    target.closed.load(Ordering::SeqCst) || call.as_ref().is_some_and(InFlight::given_up)
                };
                if given_up() {
                    return;
                }
                // The call fails at once when its stream cannot be resumed.
                let Some(from) = resume.last.clone() else {
                    return target.fail(request, "its stream ended without a response or an event id to resume from");
                };
                attempts = if moved_on { 1 } else { attempts + 1 };
                if attempts > MAX_RESUME_ATTEMPTS {
                    return target.fail(request, &format!("its stream was resumed {MAX_RESUME_ATTEMPTS} times in a row without an event"));
                }
                let pause = match refused {
                    true => resume.after_failure(),
                    false => resume.wait(pass.delivered),
                };
                if !target.pause(call.as_ref(), pause) {
                    return;
                }
                let headers = [("Accept", "text/event-stream".into()), ("Last-Event-ID", from)];
                // A call's stream waits as long as the call allows (giving
                // it up closes it); an untracked one (`initialize`'s) no
                // longer than any answer to no call.
                let silence = call.is_none().then_some(DEFAULT_READ_TIMEOUT);
                refused = true;
                match target.open_stream(&headers, silence, call.as_ref()) {
                    Ok(Opened::Stream(b)) => (body, refused) = (Some(b), false),
                    // Tried again, as a pass that brought nothing.
                    Ok(Opened::Later) => {}
                    Err(e) if !given_up() && !unreachable(&e) => {}
                    Ok(Opened::Gone) => {
                        target.fail(request, &target.session_gone().to_string());
                        return target.end();
                    }
                    Ok(Opened::None | Opened::Refused(_)) | Err(_) if given_up() => return,
                    Ok(Opened::None) => return target.fail(request, "resuming its stream failed with HTTP 405"),
                    Ok(Opened::Refused(status)) => {
                        return target.fail(request, &format!("resuming its stream failed with HTTP {status}"));
                    }
                    Err(e) => return target.fail(request, &format!("resuming its stream failed: {e}")),
                }
            }
        });
        if let (Err(e), Some(request)) = (spawned, failed) {
            self.fail(&request, &format!("no thread to read its stream: {e}"));
        }
    }

    /// Keeps the session's standalone GET stream open (if the server has
    /// one), resuming it after drops, until the session ends: a 404 once
    /// the stream was open ends the connection (the client starts a new
    /// session; a 404 on the first GET is taken for a server without one,
    /// like a 405). A stream that could not be opened (a 409, 429 or
    /// server error) is tried again after a wait that doubles each time in
    /// a row, up to
    /// [`MAX_RETRY_DELAY`] (see [`failure_wait`]); past
    /// [`MAX_RESUME_ATTEMPTS`] in a row this is logged, once, and the
    /// tries go on. The last event id and retry delay carry over from pass
    /// to pass, as in [`follow`](Self::follow).
    pub(super) fn listen(self: Arc<Self>) {
        let _ = std::thread::Builder::new()
            .name("mcpvisor-client-get".into())
            .spawn(move || {
                let mut resume = Resume::default();
                let (mut failures, mut opened) = (0, false);
                while !self.closed.load(Ordering::SeqCst) {
                    if failures == MAX_RESUME_ATTEMPTS + 1 {
                        log::warn!("client: the session's stream could not be opened {failures} times in a row; notifications outside calls wait until it opens");
                    }
                    let mut extra = vec![("Accept", "text/event-stream".to_owned())];
                    if let Some(l) = &resume.last {
                        extra.push(("Last-Event-ID", l.clone()));
                    }
                    let pause = match self.open_stream(&extra, Some(DEFAULT_READ_TIMEOUT), None) {
                        // A stream that opens is no failure, however little
                        // it brings (a quiet server, a proxy ending idle
                        // connections: the server's `retry:` paces it).
                        Ok(Opened::Stream(body)) => {
                            (failures, opened) = (0, true);
                            let pass = self.read_events(BufReader::new(body), None, false);
                            resume.carry(&pass);
                            resume.wait(pass.delivered)
                        }
                        Ok(Opened::Gone) if opened => {
                            if !self.closed.load(Ordering::SeqCst) {
                                let why = self.session_gone();
                                log::warn!("client: {why} on its stream; the connection ends");
                                self.end();
                            }
                            return;
                        }
                        Ok(Opened::Gone | Opened::None) => return,
                        Ok(Opened::Refused(status)) => {
                            log::warn!("client: the server refused the session's stream (HTTP {status}); notifications outside calls will not arrive");
                            return;
                        }
                        Err(e) if unreachable(&e) => {
                            if !self.closed.load(Ordering::SeqCst) {
                                log::warn!("client: the server cannot be reached ({e}); the connection ends");
                                self.end();
                            }
                            return;
                        }
                        Ok(Opened::Later) | Err(_) => {
                            failures += 1;
                            failure_wait(&resume, failures)
                        }
                    };
                    if self.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    if !self.pause(None, pause) {
                        return;
                    }
                }
            });
    }

    /// Delivers every event's message of a stream that answers no request
    /// (a notification's or an answer's POST), to its end, on a thread of
    /// its own; at most `side_streams.1` such streams at once: past it,
    /// one is closed unread, and logged.
    pub(super) fn read_through(self: &Arc<Self>, body: Body<BufReader<Socket>>) {
        struct Counted<'a>(&'a AtomicUsize);
        impl Drop for Counted<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let (open, most) = &self.side_streams;
        if open.fetch_add(1, Ordering::SeqCst) >= *most {
            open.fetch_sub(1, Ordering::SeqCst);
            log::warn!(
                "client: the server keeps {most} streams open for notifications and answers (the rule is 202); one more is closed unread"
            );
            return;
        }
        let target = self.clone();
        let spawned = std::thread::Builder::new()
            .name("mcpvisor-client-sse".into())
            .spawn(move || {
                let _counted = Counted(&target.side_streams.0);
                target.read_events(BufReader::new(body), None, false);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Delivers every event's message, as related to `request`, until the
    /// stream ends or brings the response to `request` (what follows it
    /// is not waited for: the server should end the stream there).
    fn read_events(&self, r: impl BufRead, request: Option<&RequestId>, teaches: bool) -> Pass {
        let mut events = SseReader::new(r);
        let (mut answered, mut delivered) = (false, false);
        while let Some(msg) = events.next_data() {
            let mut answers = false;
            if let (Some(request), Ok(v)) = (request, serde_json::from_str::<Value>(&msg)) {
                if let Some(answer) = answer_in(&v, request) {
                    answers = true;
                    if teaches {
                        self.learn(answer);
                    }
                }
            }
            self.deliver(msg.into_bytes(), request.cloned());
            delivered = true;
            if answers {
                answered = true;
                break;
            }
        }
        Pass {
            last_id: events.last_id,
            retry: events.retry,
            answered,
            delivered,
        }
    }
}

/// The events of a `text/event-stream` as the client reads them: each
/// event's data (its `data:` lines joined), remembering the last `id:` and
/// `retry:`. Lines and events are bounded by
/// [`DEFAULT_MAX_MESSAGE_BYTES`]; past that the stream ends.
pub(crate) struct SseReader<R> {
    r: R,
    line: String,
    /// The last line ended with a CR: an LF right after it belongs to it.
    skip_lf: bool,
    /// No line read yet: a byte order mark may open the stream.
    at_start: bool,
    /// The `id:` of the event being read: the last event id once the
    /// event is complete (its blank line), not before.
    pending_id: Option<String>,
    /// The last event id seen (to resume from); `None` before any, and
    /// `Some("")` after an empty `id:`, which resets it (a stream's
    /// [`Resume`] then has none).
    pub(crate) last_id: Option<String>,
    /// The last reconnection delay the server asked for.
    pub(crate) retry: Option<Duration>,
}

impl<R: BufRead> SseReader<R> {
    pub(crate) fn new(r: R) -> Self {
        SseReader {
            r,
            line: String::new(),
            skip_lf: false,
            at_start: true,
            pending_id: None,
            last_id: None,
            retry: None,
        }
    }

    /// Reads the next line, ended by CRLF, LF or CR (the SSE rule), into
    /// `line` without its end; false at the end of the stream (a last line
    /// with no end is dropped, as is an event with no blank line after it).
    /// A CR is taken as an end at once: an LF that follows it is skipped
    /// when it comes, so no event waits for the next bytes.
    fn next_line(&mut self) -> std::io::Result<bool> {
        let mut bytes = Vec::new();
        loop {
            let buf = match self.r.fill_buf() {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => other?,
            };
            if buf.is_empty() {
                return Ok(false);
            }
            let start = usize::from(std::mem::take(&mut self.skip_lf) && buf[0] == b'\n');
            let end = buf[start..].iter().position(|&b| b == b'\n' || b == b'\r');
            let taken = match end {
                Some(i) => {
                    bytes.extend_from_slice(&buf[start..start + i]);
                    self.skip_lf = buf[start + i] == b'\r';
                    start + i + 1
                }
                None => {
                    bytes.extend_from_slice(&buf[start..]);
                    buf.len()
                }
            };
            self.r.consume(taken);
            // Room for a field's name beside the largest message.
            if bytes.len() > DEFAULT_MAX_MESSAGE_BYTES + 64 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("a line longer than {DEFAULT_MAX_MESSAGE_BYTES} bytes"),
                ));
            }
            if end.is_some() {
                break;
            }
        }
        self.line = String::from_utf8(bytes)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if std::mem::take(&mut self.at_start) {
            if let Some(rest) = self.line.strip_prefix('\u{feff}') {
                self.line = rest.to_owned();
            }
        }
        Ok(true)
    }

    /// The next event's data; `None` at the end of the stream (or on a
    /// read error, or an event over the limit).
    pub(crate) fn next_data(&mut self) -> Option<String> {
        let mut data = String::new();
        // An event of a type other than the default (`message`) is not a
        // message for this client (as an EventSource's `onmessage` would
        // not see it).
        let mut other_type = false;
        loop {
            match self.next_line() {
                Ok(true) => {}
                Ok(false) | Err(_) => return None,
            }
            let l = self.line.as_str();
            if l.is_empty() {
                // The event is complete: its id (a priming event's too,
                // which has no data) is now the one to resume from; an
                // empty one resets it (the SSE rule), kept as `Some("")`
                // so that the pass's end knows (see `Resume::carry`).
                if let Some(id) = self.pending_id.take() {
                    self.last_id = Some(id);
                }
                // Each data line added its value and a line end; the last
                // end is not the data's. Empty data (a priming event's)
                // is no message.
                data.pop();
                if !data.is_empty() && !std::mem::take(&mut other_type) {
                    return Some(data);
                }
                data.clear();
                other_type = false;
                continue;
            }
            if l.starts_with(':') {
                continue;
            }
            // A field is its name, a colon and a value that loses one
            // leading space; a line with no colon names a field with an
            // empty value.
            let (field, value) = match l.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (l, ""),
            };
            match field {
                // An id with a NUL in it is ignored.
                "id" if !value.contains('\0') => self.pending_id = Some(value.to_owned()),
                // A retry that is not all digits is ignored.
                "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                    if let Ok(ms) = value.parse() {
                        self.retry = Some(Duration::from_millis(ms));
                    }
                }
                "event" => other_type = !value.is_empty() && value != "message",
                "data" => {
                    if data.len() + value.len() > DEFAULT_MAX_MESSAGE_BYTES {
                        log::warn!("client: an event over {DEFAULT_MAX_MESSAGE_BYTES} bytes; the stream is dropped");
                        return None;
                    }
                    data.push_str(value);
                    data.push('\n');
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Every event's data and the last id, read from `bytes` fed in
    /// `chunk`-byte pieces (a line end may fall between two reads).
    fn events(bytes: &[u8], chunk: usize) -> (Vec<String>, Option<String>) {
        let r = std::io::BufReader::with_capacity(chunk, bytes);
        let mut sse = SseReader::new(r);
        let mut out = Vec::new();
        while let Some(d) = sse.next_data() {
            out.push(d);
        }
        (out, sse.last_id)
    }

    /// The answer to our call in a batch on its stream (a 2025-03-26
    /// server may send one) answers it: the stream is not read on, and
    /// the call does not fail as unanswered.
    #[test]
    fn an_answer_in_a_batch_event_answers_the_call() {
        let (target, _closing, queue) =
            super::super::target::tests::target_at(std::net::SocketAddr::from(([127, 0, 0, 1], 9)));
        let stream = "data: [{\"jsonrpc\":\"2.0\",\"id\":6,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}]\n\n\
            data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
        let pass = target.read_events(stream.as_bytes(), Some(&RequestId::Number(7)), false);
        assert!(pass.answered);
        assert_eq!(queue.try_iter().count(), 1, "read up to the answer");
        let other = target.read_events(stream.as_bytes(), Some(&RequestId::Number(8)), false);
        assert!(!other.answered);
    }

    /// The standalone stream's wait after failures in a row doubles from
    /// the reconnect delay up to the longest one.
    #[test]
    fn the_standalone_stream_backs_off_after_failures() {
        let resume = Resume::default();
        let waits: Vec<Duration> = (1..=9).map(|n| failure_wait(&resume, n)).collect();
        let s = Duration::from_secs;
        assert_eq!(
            waits,
            [s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60), s(60)]
        );
        assert_eq!(failure_wait(&resume, u32::MAX), MAX_RETRY_DELAY);
        let asked = Resume {
            last: None,
            retry: Some(Duration::from_secs(5)),
        };
        assert_eq!(failure_wait(&asked, 2), s(10));
    }

    #[test]
    fn lines_end_with_crlf_lf_or_cr() {
        let text = b"id: 1\r\ndata: a\r\n\r\nid: 2\ndata: b\ndata: c\n\nid: 3\rdata: d\r\r: comment\n\ndata: e\r\n\r\n";
        for chunk in [1, 2, 3, 7, 64] {
            let (data, last) = events(text, chunk);
            assert_eq!(data, ["a", "b\nc", "d", "e"], "{chunk}-byte reads");
            assert_eq!(last.as_deref(), Some("3"), "{chunk}-byte reads");
        }
    }

    #[test]
    fn an_event_s_id_counts_once_the_event_is_complete() {
        // Cut after the id of event 2: resume after event 1.
        assert_eq!(
            events(b"id: 1\ndata: a\n\nid: 2\ndata: b\n", 4),
            (vec!["a".to_owned()], Some("1".to_owned()))
        );
        // A priming event (an id, no data) counts once complete.
        assert_eq!(
            events(b"id: 0\ndata:\n\n", 4),
            (vec![], Some("0".to_owned()))
        );
        // A byte order mark may open the stream.
        assert_eq!(events(b"\xef\xbb\xbfdata: a\n\n", 2).0, ["a"]);
    }

    #[test]
    fn fields_follow_the_event_stream_rules() {
        // An event of another type is no message; the next one is.
        assert_eq!(
            events(
                b"event: ping\ndata: p\n\nevent: message\ndata: a\n\ndata: b\n\n",
                3
            )
            .0,
            ["a", "b"]
        );
        // An id with a NUL is ignored; one space is the separator's, the
        // rest is the id's.
        assert_eq!(
            events(b"id: 1\ndata: a\n\nid: x\0y\ndata: b\n\n", 5)
                .1
                .as_deref(),
            Some("1")
        );
        assert_eq!(events(b"id:  2 \ndata: a\n\n", 5).1.as_deref(), Some(" 2 "));
        // A line with no colon is a field with an empty value.
        assert_eq!(events(b"data\ndata: a\n\n", 4).0, ["\na"]);
    }

    #[test]
    fn a_retry_that_is_not_all_digits_leaves_the_one_before() {
        let mut sse = SseReader::new(std::io::BufReader::new(
            &b"retry: 1500\n\nretry: abc\n\nretry: -5\n\nretry: 1.5\n\n"[..],
        ));
        assert_eq!(sse.next_data(), None);
        assert_eq!(sse.retry, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn an_unfinished_event_is_dropped_and_bad_bytes_end_the_stream() {
        assert_eq!(events(b"data: a\n\ndata: b", 4).0, ["a"]);
        assert_eq!(events(b"data: a\n\ndata: b\n", 4).0, ["a"]);
        assert!(events(b"data: \xff\n\n", 4).0.is_empty());
    }

    #[test]
    fn an_empty_id_resets_the_last_event_id() {
        // `id:`, `id: ` (the space is the separator's) and `id` alone.
        for text in [
            &b"id: 1\ndata: a\n\nid:\ndata: b\n\n"[..],
            &b"id: 1\ndata: a\n\nid: \n\n"[..],
            &b"id: 1\n\nid\n\n"[..],
        ] {
            let (_, last) = events(text, 3);
            assert_eq!(
                last.as_deref(),
                Some(""),
                "{:?}",
                String::from_utf8_lossy(text)
            );
            // At the pass's end the id to resume from is gone, not the
            // one before it.
            let mut resume = Resume {
                last: Some("0".into()),
                retry: None,
            };
            let pass = Pass {
                last_id: last,
                ..Pass::empty()
            };
            assert!(!resume.carry(&pass));
            assert_eq!(resume.last, None);
        }
        // An id after it counts again.
        assert_eq!(
            events(b"id: 1\n\nid:\n\nid: 2\n\n", 3).1.as_deref(),
            Some("2")
        );
    }

    #[test]
    fn what_a_pass_did_not_see_is_kept_from_the_passes_before() {
        let pass = |last_id: Option<&str>, retry: Option<u64>| Pass {
            last_id: last_id.map(str::to_owned),
            retry: retry.map(Duration::from_millis),
            answered: false,
            delivered: false,
        };
        let mut resume = Resume::default();
        assert!(resume.carry(&pass(Some("1"), Some(1500))), "a new id");
        // No id (none, or one reset), no retry: both kept, and no news.
        assert!(!resume.carry(&pass(None, None)));
        assert_eq!(resume.last.as_deref(), Some("1"));
        assert_eq!(resume.wait(false), Duration::from_millis(1500));
        assert_eq!(resume.after_failure(), Duration::from_millis(1500));
        // A short retry: a stream that could not be opened waits longer.
        let quick = Resume {
            last: None,
            retry: Some(Duration::from_millis(100)),
        };
        assert_eq!(quick.after_failure(), DEFAULT_RECONNECT_DELAY);
        // The same id again is no news either.
        assert!(!resume.carry(&pass(Some("1"), None)));
    }

    #[test]
    fn the_standalone_stream_keeps_the_server_s_retry_across_passes() {
        use super::super::target::tests::{answer, serve, target_at};
        // Longer than DEFAULT_RECONNECT_DELAY, which a forgotten retry
        // would fall back to.
        let retry = Duration::from_millis(1500);
        assert!(retry > DEFAULT_RECONNECT_DELAY);
        let (addr, seen) = serve(vec![
            answer(
                "200 OK",
                "text/event-stream",
                &format!("retry: {}\n\n", retry.as_millis()),
            ),
            // No stream for now (a pass that is not a stream): tried
            // again after the retry an earlier pass gave.
            answer("503 Service Unavailable", "text/plain", ""),
            // No such stream: the thread ends.
            answer("405 Method Not Allowed", "text/plain", ""),
        ]);
        let (target, _closing, _queue) = target_at(addr);
        target.clone().listen();
        let came: Vec<Instant> = (0..3)
            .map(|_| seen.recv_timeout(Duration::from_secs(30)).expect("a GET").1)
            .collect();
        assert!(came[1] - came[0] >= retry, "{:?}", came[1] - came[0]);
        assert!(
            came[2] - came[1] >= retry,
            "after the 503: {:?}",
            came[2] - came[1]
        );
    }
}
