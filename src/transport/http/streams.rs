//! An HTTP session's SSE streams: event ids, the bounded event log that
//! makes streams resumable, and the sinks through which the engine writes.
//!
//! Stream 0 is the session's standalone stream (GET); every POSTed request
//! gets its own stream. An event id is `"<stream>-<seq>"`, unique across the
//! session and naming its stream, so `Last-Event-ID` resumes exactly that
//! stream and nothing else. Every message is logged before it is handed to
//! the connection writing the stream (if any); a client that lost its
//! connection resumes from the log.

use crate::protocol::{Outgoing, Session, Sink};
use crate::sync::FastMap;
use crate::transport::session_table::Expirable;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::collections::VecDeque;
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

/// The standalone (GET) stream of every session.
pub const STANDALONE: u64 = 0;
/// Frames queued for one connection before it counts as too slow and is
/// detached (its client resumes from the log).
pub const LIVE_QUEUE: usize = 1024;

/// What a connection writing a stream receives.
#[derive(Debug, Clone)]
pub enum Frame {
    /// An SSE event; `last` for the response that ends a request stream.
    Event {
        /// Its event id (written only on an SSE stream).
        id: EventId,
        /// The JSON text.
        data: Arc<str>,
        /// Whether the stream ends with it.
        last: bool,
    },
    /// The request ended without a response (cancelled).
    End,
    /// Close the connection now after telling the client to come back in `retry`.
    Reconnect(Duration),
}

/// Sends `item` unless `tx` already holds `max` items (then returns it in
/// `TrySendError::Full`): a bound kept on an unbounded channel, which
/// allocates a block of slots at a time as it fills, where a bounded one
/// allocates and initialises all of them when it is made (for every
/// request). The bound is exact when the senders take turns (a stream's
/// queue is only sent to under its session's lock); senders racing at the
/// bound may each add one item past it.
pub(crate) fn send_within<T>(tx: &Sender<T>, max: usize, item: T) -> Result<(), TrySendError<T>> {
    if tx.len() >= max {
        return Err(TrySendError::Full(item));
    }
    tx.try_send(item)
}

struct Stream {
    log: VecDeque<(u64, Arc<str>, bool)>,
    next_seq: u64,
    /// The connection writing it: its token, its queue, and (the
    /// standalone stream's) its socket, to tell whether its client left.
    live: Option<(u64, Sender<Frame>, Option<TcpStream>)>,
    finished: bool,
    /// The last event handed to a connection: those after it were logged
    /// while none was attached (a request to the client made before it
    /// opened its standalone stream), and go to the next one.
    forwarded: u64,
}

impl Stream {
    fn new() -> Stream {
        Stream {
            log: VecDeque::new(),
            next_seq: 1,
            live: None,
            finished: false,
            forwarded: 0,
        }
    }
    fn forward(&mut self, frame: Frame) {
        if let Some((_, tx, _)) = &self.live {
            match send_within(tx, LIVE_QUEUE, frame) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    log::warn!("http: a stream's reader is too slow; detaching it (it may resume)");
                    self.live = None;
                }
                Err(TrySendError::Disconnected(_)) => self.live = None,
            }
        }
    }
}

/// The bytes of events that all of a listener's sessions keep for
/// resumption together, against its most
/// ([`HttpOptions::event_log_total_bytes`](super::HttpOptions::event_log_total_bytes)):
/// a session that logs an event drops its own oldest while the sessions
/// keep more than the most and it keeps more than its share (the most over
/// the sessions keeping events), or while they keep more than twice the
/// most; its newest always stays. So many sessions cannot each keep their
/// own most, and a few that filled the budget first do not leave the
/// others one event each.
#[derive(Debug)]
pub(crate) struct LogBudget {
    used: AtomicUsize,
    /// Sessions keeping at least one byte of events.
    holders: AtomicUsize,
    max: usize,
}

impl LogBudget {
    /// A budget of `max` bytes.
    pub(crate) fn new(max: usize) -> LogBudget {
        LogBudget {
            used: AtomicUsize::new(0),
            holders: AtomicUsize::new(0),
            max,
        }
    }

    /// Bytes kept now.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// A session's bytes went from `before` to `after`.
    fn changed(&self, before: usize, after: usize) {
        if after >= before {
            self.used.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.used.fetch_sub(before - after, Ordering::Relaxed);
        }
        if before == 0 && after > 0 {
            self.holders.fetch_add(1, Ordering::Relaxed);
        } else if before > 0 && after == 0 {
            self.holders.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether a session keeping `bytes` is to drop its oldest event.
    fn trims(&self, bytes: usize) -> bool {
        let over = self.used().saturating_sub(self.max);
        over > 0
            && (over > self.max || bytes > self.max / self.holders.load(Ordering::Relaxed).max(1))
    }
}

impl Default for LogBudget {
    /// No limit.
    fn default() -> Self {
        LogBudget::new(usize::MAX)
    }
}

#[derive(Default)]
struct Streams {
    next_id: u64,
    // The standalone stream (`None` once the session ended): a field of
    // its own, so that an idle session allocates no map.
    standalone: Option<Stream>,
    // The request streams.
    map: FastMap<u64, Stream>,
    // (stream, seq) in logging order, for evicting the oldest events.
    order: VecDeque<(u64, u64)>,
    // Bytes of the events in the logs (counted in `budget` too).
    bytes: usize,
    budget: Arc<LogBudget>,
    closed: bool,
}

/// Why a stream cannot be resumed.
#[derive(Debug, PartialEq, Eq)]
pub enum ResumeError {
    /// No such stream in this session (never existed, or fully delivered).
    UnknownStream,
    /// Another connection is writing it (standalone stream only).
    InUse,
}

/// What a connection attached to a stream gets.
pub struct Attached {
    /// The stream.
    pub stream: u64,
    /// This attachment (to detach only itself).
    pub token: u64,
    /// Events to write first (resumption).
    pub replay: Vec<Frame>,
    /// Live frames.
    pub rx: Receiver<Frame>,
    /// The sequence number of the priming event, written after the replay:
    /// no event has it (a resumed stream reserves one, a new stream's is 0),
    /// so event ids stay unique in the session, and a client that resumes
    /// from it has missed nothing before the live events.
    pub prime_seq: u64,
}

/// An MCP session reached over HTTP.
pub struct SessionStreams {
    mcp: OnceLock<Arc<Session>>,
    streams: Mutex<Streams>,
    capacity: usize,
    max_bytes: usize,
    /// Request streams are answered with one JSON response: whatever else
    /// a handler sends on them is dropped, so its requests to the client
    /// go to the standalone stream, or fail at once.
    json_only: bool,
}

static TOKENS: AtomicU64 = AtomicU64::new(1);

impl SessionStreams {
    /// A session whose engine side is opened by `open` with the standalone
    /// stream's sink; its log keeps at most `capacity` events and, past
    /// `max_bytes` of them or past the listener's `budget`, only the newest.
    pub fn new(
        capacity: usize,
        max_bytes: usize,
        budget: Arc<LogBudget>,
        json_only: bool,
        open: impl FnOnce(Arc<dyn Sink>) -> Arc<Session>,
    ) -> Arc<SessionStreams> {
        let s = Arc::new(SessionStreams {
            mcp: OnceLock::new(),
            streams: Mutex::new(Streams::default()),
            capacity: capacity.max(1),
            max_bytes,
            json_only,
        });
        {
            let mut st = s.lock();
            st.budget = budget;
            st.standalone = Some(Stream::new());
            st.next_id = STANDALONE + 1;
        }
        let sink: Arc<dyn Sink> = Arc::new(StreamSink {
            session: Arc::downgrade(&s),
            stream: STANDALONE,
        });
        let _ = s.mcp.set(open(sink));
        s
    }

    fn lock(&self) -> MutexGuard<'_, Streams> {
        crate::sync::lock(&self.streams)
    }

    /// The engine session.
    pub fn mcp(&self) -> &Arc<Session> {
        self.mcp.get().expect("set at construction")
    }

    /// Opens a stream for one POSTed request, with this connection attached.
    pub fn open_stream(self: &Arc<Self>) -> (Arc<dyn Sink>, Attached) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock();
        let id = st.next_id;
        st.next_id += 1;
        let mut stream = Stream::new();
        stream.live = Some((token, tx, None));
        if !st.closed {
            st.map.insert(id, stream);
        }
        drop(st);
        let sink: Arc<dyn Sink> = Arc::new(StreamSink {
            session: Arc::downgrade(self),
            stream: id,
        });
        (
            sink,
            Attached {
                stream: id,
                token,
                replay: Vec::new(),
                rx,
                prime_seq: 0,
            },
        )
    }

    /// Attaches the connection `peer` to a stream: the standalone stream
    /// (`after: None`, no replay; one connection at a time, but one whose
    /// client has left makes room) or any stream being resumed after event
    /// `after`.
    pub fn attach(
        &self,
        stream: u64,
        after: Option<u64>,
        peer: &TcpStream,
    ) -> Result<Attached, ResumeError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let token = TOKENS.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock();
        let s = st.get_mut(stream).ok_or(ResumeError::UnknownStream)?;
        let kept = (stream == STANDALONE)
            .then(|| peer.try_clone().ok())
            .flatten();
        if stream == STANDALONE {
            match &s.live {
                // Its client closed the connection, which nothing has
                // written to since: this one takes over (the old one's
                // queue is dropped, which ends it).
                Some((_, _, Some(old))) if super::stateless::peer_gone(old) => {}
                // One connection at a time, resuming or not.
                Some(_) => return Err(ResumeError::InUse),
                None => {}
            }
        }
        // A new standalone connection gets what no connection was given;
        // a resumed stream, what came after the client's last event.
        let from_seq = after.unwrap_or(s.forwarded);
        let replay: Vec<Frame> = s
            .log
            .iter()
            .filter(|(seq, _, _)| *seq > from_seq)
            .map(|(seq, data, last)| Frame::Event {
                id: EventId(stream, *seq),
                data: data.clone(),
                last: *last,
            })
            .collect();
        if s.finished
            && !replay
                .iter()
                .any(|f| matches!(f, Frame::Event { last: true, .. }))
        {
            // Finished without a response (cancelled) or fully seen: end at once.
            let _ = tx.try_send(Frame::End);
        }
        s.live = Some((token, tx, kept));
        // Reserved for the priming event: the events after it are live.
        let prime_seq = s.next_seq;
        s.next_seq += 1;
        s.forwarded = prime_seq;
        Ok(Attached {
            stream,
            token,
            replay,
            rx,
            prime_seq,
        })
    }

    /// The connection of `token` stops writing `stream`. Called before the
    /// last bytes of an answer leave: once a client holds its answer, the
    /// session is no longer busy with it.
    pub fn release(&self, stream: u64, token: u64) {
        self.lock().release(stream, token);
    }

    /// Whether the session ended (its streams' connections were let go);
    /// else a connection whose queue was dropped was detached from its
    /// stream (it fell a whole queue behind, or the client resumed the
    /// stream on another connection).
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// The end of a finished request stream reached its client: forget it
    /// (until then it stays resumable).
    pub fn forget(&self, stream: u64) {
        let mut st = self.lock();
        if st.get(stream).is_some_and(|s| s.finished) {
            st.remove(stream);
        }
    }

    fn push(&self, stream: u64, out: Outgoing) {
        if self.json_only && stream != STANDALONE {
            match &out {
                Outgoing::Request(request) => return self.request_without_stream(request.clone()),
                // A JSON body carries the response alone: nothing else of
                // the request's is logged or queued for it (a burst would
                // fill its connection's queue and detach it).
                Outgoing::Notification(_) | Outgoing::Reconnect { .. } => return,
                _ => {}
            }
        }
        // Serialized before the session's lock is taken.
        let text = out.to_text();
        let mut st = self.lock();
        let (capacity, max_bytes) = (self.capacity, self.max_bytes);
        let Some(s) = st.get_mut(stream) else {
            return;
        };
        let frame = match out {
            Outgoing::Reconnect { retry } => Frame::Reconnect(retry),
            Outgoing::Suppressed { .. } => {
                s.finished = true;
                if s.live.is_none() {
                    // Cancelled while no connection writes it: nobody
                    // resumes a request they cancelled; keep nothing.
                    st.remove(stream);
                    return;
                }
                Frame::End
            }
            other => {
                let last = matches!(other, Outgoing::Response(_));
                let Some(text) = text else {
                    return;
                };
                let data: Arc<str> = Arc::from(text);
                let len = data.len();
                let seq = s.next_seq;
                s.next_seq += 1;
                s.log.push_back((seq, data.clone(), last));
                s.finished |= last;
                s.forward(Frame::Event {
                    id: EventId(stream, seq),
                    data,
                    last,
                });
                if s.live.is_some() {
                    s.forwarded = seq;
                }
                st.order.push_back((stream, seq));
                st.logged(len);
                st.evict(capacity, max_bytes);
                return;
            }
        };
        s.forward(frame);
    }

    /// A request to the client from a handler whose stream is answered in
    /// JSON only: it goes on the standalone stream if a client listens
    /// there; otherwise the client can never see it, and the handler gets
    /// an error at once instead of waiting for its timeout.
    fn request_without_stream(&self, request: serde_json::Value) {
        let listening = self
            .lock()
            .get(STANDALONE)
            .is_some_and(|s| s.live.is_some());
        if listening {
            return self.push(STANDALONE, Outgoing::Request(request));
        }
        let method = request["method"].as_str().unwrap_or("a request");
        let error = crate::jsonrpc::ErrorObject::internal(format!(
            "cannot send {method} to the client: this server answers POSTs with JSON only \
             and the client has no GET stream open to receive requests"
        ));
        self.mcp().fail_unsent(&request, &error);
    }

    /// Whether a request is unanswered or a connection is attached. A
    /// request's stream is finished when its answer is logged, before any
    /// connection writes it, so a client that holds its answer never finds
    /// the session still busy with it.
    fn has_activity(&self) -> bool {
        let st = self.lock();
        st.standalone.as_ref().is_some_and(|s| s.live.is_some())
            || st.map.values().any(|s| s.live.is_some() || !s.finished)
    }
}

impl Streams {
    fn get(&self, stream: u64) -> Option<&Stream> {
        if stream == STANDALONE {
            self.standalone.as_ref()
        } else {
            self.map.get(&stream)
        }
    }

    fn get_mut(&mut self, stream: u64) -> Option<&mut Stream> {
        if stream == STANDALONE {
            self.standalone.as_mut()
        } else {
            self.map.get_mut(&stream)
        }
    }

    /// Detaches the connection of `token` from `stream`. A finished
    /// request stream whose log was all evicted while that connection
    /// wrote it goes (eviction left it for the writer, which may yet fail
    /// and never forget it): nothing is left to resume.
    fn release(&mut self, stream: u64, token: u64) {
        let Some(s) = self.get_mut(stream) else {
            return;
        };
        if s.live.as_ref().is_some_and(|(t, _, _)| *t == token) {
            s.live = None;
            if stream != STANDALONE && s.finished && s.log.is_empty() {
                self.map.remove(&stream);
            }
        }
    }

    /// Forgets a request stream and its logged events.
    fn remove(&mut self, stream: u64) {
        if stream == STANDALONE {
            return;
        }
        if let Some(s) = self.map.remove(&stream) {
            self.freed(s.log.iter().map(|(_, d, _)| d.len()).sum::<usize>());
            self.order.retain(|(sid, _)| *sid != stream);
            self.shrink();
        }
    }

    /// Idle sessions are the many: give back what finished requests used.
    fn shrink(&mut self) {
        if self.order.is_empty() {
            self.order = VecDeque::new();
        }
        self.map.shrink_to_fit();
        for s in self.map.values_mut().chain(self.standalone.as_mut()) {
            if s.log.is_empty() {
                s.log = VecDeque::new();
            }
        }
    }

    /// `len` bytes of events were logged.
    fn logged(&mut self, len: usize) {
        let before = self.bytes;
        self.bytes += len;
        self.budget.changed(before, self.bytes);
    }

    /// `len` bytes of events were dropped.
    fn freed(&mut self, len: usize) {
        let before = self.bytes;
        self.bytes -= len;
        self.budget.changed(before, self.bytes);
    }

    /// Drops the oldest events while more than `capacity` are kept, or more
    /// than `max_bytes` of them, or more than the listener's budget lets
    /// this session keep ([`LogBudget`]), but the newest.
    fn evict(&mut self, capacity: usize, max_bytes: usize) {
        while self.order.len() > capacity
            || (self.order.len() > 1 && (self.bytes > max_bytes || self.budget.trims(self.bytes)))
        {
            let Some((sid, seq)) = self.order.pop_front() else {
                break;
            };
            let mut freed = 0;
            let remove = match self.get_mut(sid) {
                Some(s) => {
                    if s.log.front().is_some_and(|(q, _, _)| *q == seq) {
                        freed = s.log.pop_front().map_or(0, |(_, d, _)| d.len());
                    }
                    sid != STANDALONE && s.finished && s.log.is_empty() && s.live.is_none()
                }
                None => false,
            };
            self.freed(freed);
            if remove {
                self.map.remove(&sid);
            }
        }
    }
}

impl Drop for Streams {
    /// What a session that is gone still kept leaves the listener's budget.
    fn drop(&mut self) {
        let kept = self.bytes;
        self.freed(kept);
    }
}

impl Expirable for SessionStreams {
    fn busy(&self) -> bool {
        self.has_activity()
    }
    fn operational(&self) -> bool {
        self.mcp().phase() == crate::protocol::Phase::Operating
    }
    fn end(&self) {
        {
            let mut st = self.lock();
            st.closed = true;
            // Dropping the senders ends every attached connection's stream.
            st.map.clear();
            st.standalone = None;
            st.order.clear();
            let kept = st.bytes;
            st.freed(kept);
        }
        self.mcp().close();
    }
}

/// An event's id: its stream and its place in it, written
/// `"<stream>-<seq>"` (formatted only when an SSE event carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventId(pub u64, pub u64);

impl std::fmt::Display for EventId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

impl std::str::FromStr for EventId {
    type Err = ();
    /// An id as [`Display`](std::fmt::Display) writes it: two decimal
    /// numbers (digits only) joined by `-`.
    fn from_str(id: &str) -> Result<EventId, ()> {
        let number = |n: &str| match n.bytes().all(|b| b.is_ascii_digit()) {
            true => n.parse().map_err(drop),
            false => Err(()),
        };
        let (stream, seq) = id.split_once('-').ok_or(())?;
        Ok(EventId(number(stream)?, number(seq)?))
    }
}

/// The sink of one stream.
struct StreamSink {
    session: Weak<SessionStreams>,
    stream: u64,
}

impl Sink for StreamSink {
    fn send(&self, out: Outgoing) {
        if let Some(s) = self.session.upgrade() {
            s.push(self.stream, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Streams {
        /// A session's streams as `SessionStreams::new` makes them.
        fn open(budget: Arc<LogBudget>) -> Streams {
            let mut st = Streams::default();
            st.budget = budget;
            st.standalone = Some(Stream::new());
            st
        }
    }

    /// Where only JSON is sent, a request's stream takes its response
    /// alone: what else comes before it is neither logged nor queued for
    /// the connection that waits (a burst would fill its queue and detach
    /// it, which was answered 404, as if the session had ended).
    #[test]
    fn a_json_only_request_stream_takes_the_response_alone() {
        let engine = crate::protocol::Engine::new(
            Default::default(),
            Default::default(),
            Default::default(),
        )
        .unwrap();
        let budget = Arc::new(LogBudget::new(usize::MAX));
        let session = SessionStreams::new(16, usize::MAX, budget.clone(), true, |sink| {
            engine.open_session(sink)
        });
        let (sink, attached) = session.open_stream();
        let note = || crate::jsonrpc::notification("notifications/message", serde_json::json!({}));
        for _ in 0..LIVE_QUEUE + 10 {
            sink.send(Outgoing::Notification(note()));
        }
        assert_eq!(attached.rx.len(), 0, "queued for the connection");
        assert_eq!(budget.used(), 0, "logged");
        let id = crate::jsonrpc::RequestId::Number(1);
        sink.send(Outgoing::Response(crate::jsonrpc::Reply::Result(
            id,
            serde_json::json!({}).into(),
        )));
        assert!(matches!(
            attached.rx.try_recv(),
            Ok(Frame::Event { last: true, .. })
        ));
    }

    #[test]
    fn a_reader_that_falls_a_whole_queue_behind_is_detached() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut stream = Stream::new();
        stream.live = Some((1, tx, None));
        let frame = || Frame::Reconnect(Duration::from_millis(1));
        for _ in 0..LIVE_QUEUE {
            stream.forward(frame());
        }
        assert!(stream.live.is_some(), "a full queue, not more");
        stream.forward(frame());
        assert!(stream.live.is_none(), "one more: detached");
        assert_eq!(
            rx.len(),
            LIVE_QUEUE,
            "the frame past the bound was not queued"
        );
    }

    #[test]
    fn the_log_keeps_its_bytes_under_the_budget_but_always_the_newest() {
        let mut st = Streams::open(Arc::default());
        st.map.insert(1, Stream::new());
        // Events of 100 bytes, alternating between two streams, logged as
        // `push` logs them.
        let log = |st: &mut Streams, stream: u64, seq: u64, len: usize| {
            let data: Arc<str> = Arc::from("x".repeat(len));
            st.get_mut(stream)
                .unwrap()
                .log
                .push_back((seq, data, false));
            st.order.push_back((stream, seq));
            st.logged(len);
            st.evict(1024, 1000);
        };
        for seq in 1..=50 {
            log(&mut st, seq % 2, seq, 100);
        }
        assert_eq!(st.bytes, 1000);
        assert_eq!(st.order.len(), 10, "the newest ten");
        assert_eq!(st.order.front(), Some(&(1, 41)));
        // One event past the budget on its own is kept, alone.
        log(&mut st, 0, 51, 5000);
        assert_eq!((st.bytes, st.order.len()), (5000, 1));
        // Removing a stream gives back what its log held.
        log(&mut st, 1, 52, 10);
        assert_eq!(st.bytes, 10, "the big one went for the newest");
        st.remove(1);
        assert_eq!((st.bytes, st.order.len()), (0, 0));
    }

    #[test]
    fn a_finished_stream_evicted_while_written_goes_when_released() {
        let mut st = Streams::open(Arc::default());
        let (tx, _rx) = crossbeam_channel::unbounded();
        let mut answered = Stream::new();
        answered.live = Some((7, tx, None));
        answered.finished = true;
        answered.log.push_back((1, Arc::from("answer"), true));
        st.map.insert(1, answered);
        st.order.push_back((1, 1));
        st.logged(6);
        // Evicted while its connection writes it: kept for the writer.
        st.evict(0, 0);
        assert!(st.map.contains_key(&1));
        st.release(1, 8);
        assert!(st.map.contains_key(&1), "another connection's token");
        st.release(1, 7);
        assert!(st.map.is_empty(), "released with nothing to resume: gone");
        assert_eq!(st.bytes, 0);
    }

    #[test]
    fn sessions_over_the_listener_s_budget_keep_their_share() {
        let budget = Arc::new(LogBudget::new(1000));
        let session = || Streams::open(budget.clone());
        let log = |st: &mut Streams, seq: u64, len: usize| {
            let data: Arc<str> = Arc::from("x".repeat(len));
            st.standalone
                .as_mut()
                .unwrap()
                .log
                .push_back((seq, data, false));
            st.order.push_back((STANDALONE, seq));
            st.logged(len);
            st.evict(1024, 16 * 1024);
        };
        // One session fills the budget within its own most.
        let mut first = session();
        for seq in 1..=10 {
            log(&mut first, seq, 100);
        }
        assert_eq!((first.order.len(), budget.used()), (10, 1000));
        // Another that logs past it keeps its share: half the budget.
        let mut second = session();
        for seq in 1..=6 {
            log(&mut second, seq, 100);
        }
        assert_eq!((second.order.len(), budget.used()), (5, 1500));
        // The first, logging again, gives back down to the budget, and
        // no further than its share.
        log(&mut first, 11, 100);
        assert_eq!((first.order.len(), budget.used()), (5, 1000));
        // Past twice the budget (a third's one large event), a session
        // that logs keeps only its newest.
        let mut third = session();
        log(&mut third, 1, 1500);
        assert_eq!((third.order.len(), budget.used()), (1, 2500));
        log(&mut second, 7, 100);
        assert_eq!((second.order.len(), budget.used()), (1, 2100));
        // Sessions that go give back all they kept.
        drop(first);
        assert_eq!(budget.used(), 1600);
        drop((second, third));
        assert_eq!(budget.used(), 0);
        assert_eq!(budget.holders.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn event_ids_round_trip() {
        assert_eq!(EventId(7, 42).to_string().parse(), Ok(EventId(7, 42)));
        for bad in ["x-1", "17", "+7-42", "7-+42", "7-", "-7", "7-42-1", ""] {
            assert_eq!(bad.parse::<EventId>(), Err(()), "{bad}");
        }
    }
}
