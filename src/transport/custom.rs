//! The seam for a transport of your own: hand in complete messages, get
//! back what to send. Session handling, the size limit, JSON-RPC parsing
//! and validation, and every error answer are applied for you; stdio, TCP
//! and the in-process pair are built on the same type.
//!
//! ```no_run
//! use mcpvisor::transport::custom::{ConnectionOptions, ServerConnection};
//! # fn frames() -> Vec<Vec<u8>> { vec![] }
//! # let server = mcpvisor::Server::builder("s", "1").build().unwrap();
//! let (connection, outbox) = ServerConnection::open(server.engine(), ConnectionOptions::default());
//! let writer = std::thread::spawn(move || {
//!     while let Some(message) = outbox.recv() {
//!         // write `message` (one JSON-RPC message, no framing) to your peer
//!     }
//!     // (or, for newline-delimited JSON: outbox.write_lines(socket))
//! });
//! for frame in frames() {
//!     connection.receive(&frame); // one whole message per call
//! }
//! connection.close(); // input ended: in-flight work gets its grace, then the outbox ends
//! writer.join().unwrap();
//! ```

use super::direct::Direct;
use super::flow::{Drained, Room};
use super::lines::{Frame, LineBudget, LineReader};
use super::spare::Spare;
use crate::jsonrpc::ParseError;
use crate::protocol::{Engine, Outgoing, Session, Sink};
use crossbeam_channel::{Receiver, Sender, TrySendError};
use std::io::{self, BufWriter, Read, Write};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::sync::OnceLock;
use std::time::Duration;

/// Default largest message: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// What a writer gathers before it writes.
const WRITE_BATCH: usize = 64 * 1024;
/// Default capacity of the outbox (messages).
pub const DEFAULT_OUTBOX_CAPACITY: usize = 1024;
/// Default time in-flight work may take to finish after the input ended,
/// before it is cancelled.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Options of a [`ServerConnection`].
#[derive(Clone, Debug)]
pub struct ConnectionOptions {
    /// Largest accepted message; a larger one is answered -32600 and
    /// dropped (default [`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
    /// Messages the outbox holds for your writer (default
    /// [`DEFAULT_OUTBOX_CAPACITY`]). While half of them are queued, the
    /// reader takes no more requests in ([`ServerConnection::wait_for_room`],
    /// which [`ServerConnection::read_lines`] calls): a peer that reads
    /// slower than it sends is slowed down, not cut off. When the outbox is
    /// full all the same (handlers sending to a peer that stopped reading),
    /// the connection overflows and ends.
    pub outbox_capacity: usize,
    /// Grace after [`ServerConnection::close`] (default [`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
}

impl Default for ConnectionOptions {
    fn default() -> Self {
        ConnectionOptions {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            outbox_capacity: DEFAULT_OUTBOX_CAPACITY,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

impl ConnectionOptions {
    /// Sets the message size limit.
    pub fn with_max_message_bytes(mut self, bytes: usize) -> Self {
        self.max_message_bytes = bytes;
        self
    }
    /// Sets the grace period.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }
}

/// One peer of a transport of your own: one MCP session.
pub struct ServerConnection {
    session: Arc<Session>,
    sink: Arc<dyn Sink>,
    max: usize,
    grace: Duration,
    // Dropped by `close`: the outbox then ends once it is drained.
    _stop: Sender<()>,
    // Shared with the sink and the outbox of `open`.
    overflow: Option<Arc<Overflow>>,
    // Room in the outbox of `open` for what the peer sends next.
    room: Option<Room>,
}

/// The messages to send to the peer, in order, each one serialized
/// JSON-RPC message without framing.
pub struct Outbox {
    rx: Receiver<Vec<u8>>,
    stop: Receiver<()>,
    overflow: Arc<Overflow>,
    // Shared with the sink: producers write to the pipe themselves when
    // they can (stdio on a pipe).
    direct: Option<Arc<Direct>>,
    // Whether to poll before parking (the writer's traffic so far).
    spin: crate::wait::Spin,
    // Wakes a reader waiting for room.
    drained: Drained,
    // Where written messages' buffers go back to the producers.
    spare: Spare,
}

/// Serializes each outgoing message into the outbox.
///
/// It never blocks: handlers and list-change announcements run on threads
/// every session shares. When the outbox is full the peer is not reading:
/// the connection has overflowed, everything for it is dropped from then
/// on, and whoever set [`ServerConnection::on_overflow`] ends it.
struct OutboxSink {
    tx: Sender<Vec<u8>>,
    overflow: Arc<Overflow>,
    direct: Option<Arc<Direct>>,
    // Buffers to serialize into, given back once written.
    spare: Spare,
}

/// Whether a connection's outbox overflowed, and what to do then.
#[derive(Default)]
struct Overflow {
    happened: AtomicBool,
    then: OnceLock<Box<dyn Fn() + Send + Sync>>,
    // What to do was done: by the thread that found the outbox full, or
    // by the one that said what to do after that.
    done: AtomicBool,
}

impl Overflow {
    fn trip(&self, capacity: usize) {
        if !self.happened.swap(true, Ordering::SeqCst) {
            log::warn!(
                "a peer left {capacity} messages unread: its connection ends and nothing more is queued for it"
            );
            // Against `on_overflow`'s set-then-look: either it sees the
            // overflow or this sees what to do (or both: `then_once`).
            fence(Ordering::SeqCst);
            self.then_once();
        }
    }

    /// Does what to do, if it is said yet, unless it was done.
    fn then_once(&self) {
        if let Some(end) = self.then.get() {
            if !self.done.swap(true, Ordering::SeqCst) {
                end();
            }
        }
    }
}

impl Sink for OutboxSink {
    fn send(&self, out: Outgoing) {
        if self.overflow.happened.load(Ordering::SeqCst) {
            return;
        }
        let mut bytes = self.spare.take();
        if !out.write_json(&mut bytes) {
            return self.spare.give(bytes);
        }
        if let Some(direct) = &self.direct {
            bytes.push(b'\n');
            if direct.try_write(&bytes) {
                return self.spare.give(bytes);
            }
            bytes.pop();
            direct.queue();
        }
        let refused = match self.tx.try_send(bytes) {
            Ok(()) => false,
            Err(TrySendError::Full(_)) => {
                self.overflow.trip(self.tx.capacity().unwrap_or_default());
                true
            }
            // The outbox is gone: the peer is, too.
            Err(TrySendError::Disconnected(_)) => true,
        };
        if let (true, Some(direct)) = (refused, &self.direct) {
            direct.done(1);
        }
    }
}

impl ServerConnection {
    /// Opens a session on `engine`; its messages arrive in the [`Outbox`].
    pub fn open(engine: &Arc<Engine>, options: ConnectionOptions) -> (ServerConnection, Outbox) {
        Self::open_with(engine, options, None)
    }

    /// [`ServerConnection::open`], the producers writing to `direct`
    /// themselves when they can (see [`Outbox::write_direct`]).
    pub(crate) fn open_with(
        engine: &Arc<Engine>,
        options: ConnectionOptions,
        direct: Option<Arc<Direct>>,
    ) -> (ServerConnection, Outbox) {
        // Producers: the session's sink (handlers, the reader); consumer: your writer.
        let capacity = options.outbox_capacity.max(1);
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        let (room, drained) = super::flow::pair(&tx, capacity);
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        let overflow = Arc::new(Overflow::default());
        let spare = Spare::default();
        let sink = Arc::new(OutboxSink {
            tx,
            overflow: overflow.clone(),
            direct: direct.clone(),
            spare: spare.clone(),
        });
        let mut conn = Self::with_sink(engine, sink, &options, stop_tx);
        conn.overflow = Some(overflow.clone());
        conn.room = Some(room);
        if let Some(d) = &direct {
            d.serve(&conn.session);
        }
        (
            conn,
            Outbox {
                rx,
                stop: stop_rx,
                overflow,
                direct,
                spin: crate::wait::Spin::default(),
                drained,
                spare,
            },
        )
    }

    /// What to do when the peer stops reading and the outbox fills up
    /// (from then on nothing more is queued): typically shut the socket
    /// down, so that the reader sees the end and the writer stops waiting.
    /// Runs once, on the thread that found the outbox full (or on this
    /// one, if it overflowed already). Only the first call sets it.
    pub fn on_overflow(&self, end: impl Fn() + Send + Sync + 'static) {
        if let Some(o) = &self.overflow {
            let _ = o.then.set(Box::new(end));
            fence(Ordering::SeqCst);
            if o.happened.load(Ordering::SeqCst) {
                // It overflowed before anyone was told what to do (or
                // while this was said: whoever comes second does nothing).
                o.then_once();
            }
        }
    }

    /// A connection whose messages go to `sink` (for in-crate transports
    /// that deliver without a queue).
    pub(crate) fn with_sink(
        engine: &Arc<Engine>,
        sink: Arc<dyn Sink>,
        options: &ConnectionOptions,
        stop: Sender<()>,
    ) -> ServerConnection {
        ServerConnection {
            session: engine.open_session(sink.clone()),
            sink,
            max: options.max_message_bytes,
            grace: options.shutdown_grace,
            _stop: stop,
            overflow: None,
            room: None,
        }
    }

    /// Handles one whole message from the peer: too large, unreadable or
    /// invalid input is answered with the right error and logged once;
    /// the connection keeps serving.
    pub fn receive(&self, message: &[u8]) {
        if message.len() > self.max {
            return self.too_large(message.len(), message);
        }
        self.session.receive(message, &self.sink);
    }

    /// Before [`receive`](Self::receive)`(message)`: if `message` may be a
    /// request and half the outbox is queued for the peer (it reads slower
    /// than it is answered), waits until the writer has taken the queue
    /// down to a quarter, so that a framer of your own slows its peer down
    /// instead of letting the outbox overflow. Nothing but the caller
    /// waits. Returns false, waiting or not, once the outbox's writer is
    /// gone (nothing more will be sent: stop reading, and run no more
    /// requests); true at once for a connection without an outbox.
    pub fn wait_for_room(&self, message: &[u8]) -> bool {
        self.room_for(|| crate::jsonrpc::may_be_request(message))
    }

    /// [`wait_for_room`](Self::wait_for_room) for a message that `asks`
    /// says may be a request.
    fn room_for(&self, asks: impl FnOnce() -> bool) -> bool {
        self.room.as_ref().is_none_or(|room| room.wait(asks))
    }

    /// Tells the peer that a message of `len` bytes was too large (for a
    /// framer that discarded it without holding it whole). `head` is as
    /// much of its beginning as the framer kept (it may be empty): a
    /// request it shows is answered with its id; a response it shows (the
    /// peer's answer to a request of the server's) is not answered, and
    /// that request fails at once instead of at its timeout.
    pub fn too_large(&self, len: usize, head: &[u8]) {
        log::warn!(
            "session {}: discarded a message of {len} bytes (limit {})",
            self.session.log_name(),
            self.max
        );
        self.discarded(ParseError::too_large(self.max), head);
    }

    /// Answers a message discarded unread, whose first bytes are `head`,
    /// with `error` ([`ParseError::about`]).
    fn discarded(&self, error: ParseError, head: &[u8]) {
        self.session.reject(error.about(head), &self.sink);
    }

    /// Hands every line of `input` to the connection until EOF
    /// (newline-delimited JSON-RPC): blank lines are skipped, a line over
    /// the size limit is discarded up to its newline and refused, and the
    /// buffer never holds more than the limit. Flow control
    /// ([`wait_for_room`](Self::wait_for_room)) is applied to each line, so
    /// a writer must drain the outbox meanwhile (from another thread); it
    /// returns at the next line once the outbox's writer is gone.
    pub fn read_lines(&self, input: impl Read) -> io::Result<()> {
        self.read_lines_within(input, None, None)
    }

    /// [`read_lines`](Self::read_lines), with partial lines held within a
    /// budget shared with other connections, polling `spin_fd` (the
    /// descriptor `input` reads) for a moment before a read that would
    /// block ([`LineReader::with_spin`]).
    pub(crate) fn read_lines_within(
        &self,
        input: impl Read,
        budget: Option<Arc<LineBudget>>,
        spin_fd: Option<std::os::fd::RawFd>,
    ) -> io::Result<()> {
        let mut lines = LineReader::new(input, self.max)
            .with_budget(budget)
            .with_spin(spin_fd);
        loop {
            let (frame, more) = match lines.next_frame_and_more() {
                Ok(Some(next)) => next,
                Ok(None) => break,
                // A socket's idle timeout (TCP): a session with requests in
                // flight is not idle, its client waiting quietly for them.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) && self.session.inflight() > 0 =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            // A line too long to keep is answered: room for it as for a request.
            let room = match frame {
                Frame::Line(line) => self.wait_for_room(line),
                Frame::TooLong { .. } | Frame::Refused { .. } => self.room_for(|| true),
            };
            if !room {
                break;
            }
            // Answers made on this thread (quick tools, lists, ping) while
            // more requests are at hand go to the writer, which batches them.
            let _ahead = super::direct::ReadingAhead::set(more);
            match frame {
                Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
                Frame::Line(line) => self.receive(line),
                Frame::TooLong { len, head } => self.too_large(len, head),
                // Logged (once) by the rejection.
                Frame::Refused { head, .. } => self.discarded(ParseError::busy(), head),
            }
        }
        Ok(())
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        self.session.id()
    }

    /// The input ended: in-flight work gets the grace period, then is
    /// cancelled; the session closes and the outbox ends once drained.
    /// (Dropping the connection instead closes it without the grace.)
    pub fn close(self) {
        let session = &self.session;
        if !session.wait_idle(self.grace) {
            log::warn!(
                "session {}: {} request(s) still running after the grace period; cancelling",
                session.log_name(),
                session.inflight()
            );
        }
    }
}

impl Drop for ServerConnection {
    /// Cancels what is still in flight and ends the session; the outbox
    /// ends once drained.
    fn drop(&mut self) {
        self.session.close();
    }
}

impl Outbox {
    /// The next message, waiting for it; `None` once the connection is
    /// closed and everything queued before was taken.
    /// After an overflow it ends at once: what is queued is never written.
    pub fn recv(&self) -> Option<Vec<u8>> {
        if self.overflowed() {
            return None;
        }
        let since = std::time::Instant::now();
        if let Ok(m) = self.spin.poll_if_worthwhile(&self.rx) {
            self.drained.took(&self.rx);
            return Some(m);
        }
        let m = crossbeam_channel::select! {
            recv(self.rx) -> m => m.ok().inspect(|_| self.drained.took(&self.rx)),
            recv(self.stop) -> _ => self.try_recv(),
        };
        self.spin.parked(since);
        m
    }

    /// The next message if one is queued now.
    pub fn try_recv(&self) -> Option<Vec<u8>> {
        if self.overflowed() {
            return None;
        }
        let m = self.rx.try_recv().ok()?;
        self.drained.took(&self.rx);
        Some(m)
    }

    /// Whether the peer left the outbox full (the connection is ending).
    pub fn overflowed(&self) -> bool {
        self.overflow.happened.load(Ordering::SeqCst)
    }

    /// Writes every message to `output` as one line (newline-delimited
    /// JSON-RPC) until the outbox ends, flushing whenever it runs dry.
    pub fn write_lines(self, output: impl Write) -> io::Result<()> {
        let mut out = BufWriter::with_capacity(WRITE_BATCH, output);
        while let Some(first) = self.recv() {
            self.drain(first, |m| {
                out.write_all(m)?;
                out.write_all(b"\n")?;
                Ok(true)
            })?;
            out.flush()?;
        }
        self.ended()?;
        out.flush()
    }

    /// [`write_lines`](Self::write_lines) to the pipe the producers share
    /// (an outbox of [`ServerConnection::open_with`] with a pipe): what they
    /// could not write themselves, in batches.
    pub(crate) fn write_direct(self) -> io::Result<()> {
        let Some(direct) = self.direct.clone() else {
            return Err(io::Error::other("no pipe to write to"));
        };
        let mut batch = Vec::with_capacity(WRITE_BATCH);
        while let Some(first) = self.recv() {
            empty_batch(&mut batch);
            let mut n = 0;
            self.drain(first, |m| {
                batch.extend_from_slice(m);
                batch.push(b'\n');
                n += 1;
                Ok(batch.len() < WRITE_BATCH)
            })?;
            if let Err(e) = super::direct::write_batch(&direct, &batch, n) {
                direct.stop();
                return Err(e);
            }
        }
        direct.stop();
        self.ended()
    }

    /// Hands `first`, then each message queued behind it, to `take` while
    /// it asks for more (true); each message's buffer goes back to the
    /// producers once taken.
    fn drain(
        &self,
        first: Vec<u8>,
        mut take: impl FnMut(&[u8]) -> io::Result<bool>,
    ) -> io::Result<()> {
        let mut next = Some(first);
        while let Some(m) = next {
            let more = take(&m)?;
            self.spare.give(m);
            next = if more { self.try_recv() } else { None };
        }
        Ok(())
    }

    /// How the outbox ended: an overflow is an error.
    fn ended(&self) -> io::Result<()> {
        if self.overflowed() {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the peer stopped reading: outbox full",
            ));
        }
        Ok(())
    }
}

/// Empties `batch` for the next one; memory a large message made it take
/// beyond [`WRITE_BATCH`] is given back, not kept for the connection's life.
fn empty_batch(batch: &mut Vec<u8>) {
    batch.clear();
    batch.shrink_to(WRITE_BATCH);
}

#[cfg(test)]
#[path = "custom_tests.rs"]
mod tests;
