//! Server-sent event streams: the parser, and the threads that follow a
//! call's stream (resuming it when it drops) and the session's standalone
//! stream.

use super::response::{read_line, Body};
use super::target::{unreachable, InFlight, Target};
use super::{DEFAULT_READ_TIMEOUT, DEFAULT_RECONNECT_DELAY, MAX_RESUME_ATTEMPTS};
use crate::jsonrpc::RequestId;
use crate::transport::connection::DEFAULT_MAX_MESSAGE_BYTES;
use crate::transport::http::socket::Socket;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

impl Target {
    /// Reads the SSE stream of `request` (none for a notification's); if it
    /// ends before the response, resumes it with GET + Last-Event-ID after
    /// the server's retry delay.
    pub(super) fn follow(
        self: &Arc<Self>,
        body: Body<BufReader<Socket>>,
        request: Option<RequestId>,
        call: Option<InFlight>,
    ) {
        let target = self.clone();
        let _ = std::thread::Builder::new().name("mcpvisor-client-sse".into()).spawn(move || {
            let mut body = body;
            let mut attempts = 0;
            loop {
                let (last_id, retry, answered) =
                    target.read_events(BufReader::new(body), request.as_ref());
                let Some(request) = request.as_ref().filter(|_| !answered) else {
                    return;
                };
                // Closed, or given up (its connection closed by that):
                // nothing to resume, and no failure to tell.
                let given_up = || {
                    target.closed.load(Ordering::SeqCst) || call.as_ref().is_some_and(InFlight::given_up)
                };
                if given_up() {
                    return;
                }
                // The call fails at once when its stream cannot be resumed.
                let Some(last) = last_id else {
                    return target.fail(request, "its stream ended without a response or an event id to resume from");
                };
                attempts += 1;
                if attempts > MAX_RESUME_ATTEMPTS {
                    return target.fail(request, &format!("its stream was resumed {MAX_RESUME_ATTEMPTS} times without a response"));
                }
                if !target.pause(call.as_ref(), retry.unwrap_or(DEFAULT_RECONNECT_DELAY)) {
                    return;
                }
                let resume = [("Accept", "text/event-stream".into()), ("Last-Event-ID", last)];
                match target.request("GET", None, &resume, None, call.as_ref()) {
                    Ok((head, b)) if head.status == 200 => body = b,
                    Ok((head, _)) => {
                        return target.fail(request, &format!("resuming its stream failed with HTTP {}", head.status));
                    }
                    Err(_) if given_up() => return,
                    Err(e) => return target.fail(request, &format!("resuming its stream failed: {e}")),
                }
            }
        });
    }

    /// Keeps the session's standalone GET stream open (if the server has
    /// one), resuming it after drops, until the session ends.
    pub(super) fn listen(self: Arc<Self>) {
        let _ = std::thread::Builder::new()
            .name("mcpvisor-client-get".into())
            .spawn(move || {
                let mut last: Option<String> = None;
                let mut failures = 0;
                while failures <= MAX_RESUME_ATTEMPTS && !self.closed.load(Ordering::SeqCst) {
                    let mut extra = vec![("Accept", "text/event-stream".to_owned())];
                    if let Some(l) = &last {
                        extra.push(("Last-Event-ID", l.clone()));
                    }
                    let retry = match self.request("GET", None, &extra, Some(DEFAULT_READ_TIMEOUT), None) {
                        Ok((head, body)) if head.status == 200 => {
                            failures = 0;
                            let (id, retry, _) = self.read_events(BufReader::new(body), None);
                            last = id.or(last);
                            retry
                        }
                        // The server still holds our previous stream (it has
                        // not noticed it died): try again after a while.
                        Ok((head, _)) if head.status == 409 => {
                            failures += 1;
                            None
                        }
                        // 405: no standalone stream; 404: the session ended.
                        Ok(_) => return,
                        Err(e) if unreachable(&e) => {
                            if !self.closed.load(Ordering::SeqCst) {
                                log::warn!("client: the server cannot be reached ({e}); the connection ends");
                                self.end();
                            }
                            return;
                        }
                        Err(_) => {
                            failures += 1;
                            None
                        }
                    };
                    if self.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    if !self.pause(None, retry.unwrap_or(DEFAULT_RECONNECT_DELAY)) {
                        return;
                    }
                }
            });
    }

    /// Delivers every event's message, as related to `request`; returns
    /// (last event id, retry, whether a response came).
    fn read_events(
        &self,
        r: impl BufRead,
        request: Option<&RequestId>,
    ) -> (Option<String>, Option<Duration>, bool) {
        let mut events = SseReader::new(r);
        let mut answered = false;
        while let Some(msg) = events.next_data() {
            if let Ok(v) = serde_json::from_str::<Value>(&msg) {
                if v.get("method").is_none() && v.get("id").is_some() {
                    answered = true;
                    self.learn(&v);
                }
            }
            self.deliver(msg.into_bytes(), request.cloned());
        }
        (events.last_id, events.retry, answered)
    }
}

/// The events of a `text/event-stream` as the client reads them: each
/// event's data (its `data:` lines joined), remembering the last `id:` and
/// `retry:`. Lines and events are bounded by
/// [`DEFAULT_MAX_MESSAGE_BYTES`]; past that the stream ends.
pub(crate) struct SseReader<R> {
    r: R,
    line: String,
    /// The last event id seen (to resume from).
    pub(crate) last_id: Option<String>,
    /// The last reconnection delay the server asked for.
    pub(crate) retry: Option<Duration>,
}

impl<R: BufRead> SseReader<R> {
    pub(crate) fn new(r: R) -> Self {
        SseReader {
            r,
            line: String::new(),
            last_id: None,
            retry: None,
        }
    }

    /// The next event's data; `None` at the end of the stream (or on a
    /// read error, or an event over the limit).
    pub(crate) fn next_data(&mut self) -> Option<String> {
        let mut data = String::new();
        loop {
            self.line.clear();
            match read_line(&mut self.r, &mut self.line) {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            }
            let l = self.line.trim_end_matches(['\r', '\n']);
            if l.is_empty() {
                if !data.is_empty() {
                    return Some(data);
                }
                continue;
            }
            if let Some(v) = l.strip_prefix("id:") {
                self.last_id = Some(v.trim().to_owned());
            } else if let Some(v) = l.strip_prefix("retry:") {
                self.retry = v.trim().parse().ok().map(Duration::from_millis);
            } else if let Some(v) = l.strip_prefix("data:") {
                if data.len() + v.len() > DEFAULT_MAX_MESSAGE_BYTES {
                    log::warn!("client: an event over {DEFAULT_MAX_MESSAGE_BYTES} bytes; the stream is dropped");
                    return None;
                }
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
    }
}
