//! The server side: one instance of a logical server. It consumes the
//! logical server's shared request queue (competing with the other
//! instances, so new sessions spread across them) and its own instance
//! queue, where the clients of the sessions it owns send everything after
//! `initialize`.
//!
//! One thread owns the broker connection and channel; it receives
//! deliveries, hands them to the protocol engine, and publishes what the
//! engine's handler threads produce (they queue it through a per-delivery
//! [`Sink`]). A request is acknowledged only once the broker confirmed its
//! response (at-least-once); a lost connection leaves it unacknowledged, so
//! the broker delivers it again — handlers must tolerate that; a response
//! the broker refuses sends its request round once more, not for ever
//! (`AfterConfirm`), and one larger than the broker takes is replaced by
//! an error (`Bounded`). The shared
//! queue's consumer takes `prefetch` deliveries at most; the instance
//! queue's takes as many as the engine lets its sessions run
//! (`instance_prefetch`), so calls that run long never hold back the
//! messages of its sessions that they wait for (a ping, a cancellation, an
//! answer to the server's request). Confirms do
//! not wake the link thread: it takes them between other events, or after
//! [`ACK_DELAY`] when there are none (and past that, as they arrive). An
//! intentional stop publishes what is queued and waits up to
//! [`STOP_CONFIRM_WAIT`] for the outstanding confirms, so what was answered
//! is acknowledged rather than delivered again.

use super::config::AmqpConfig;
use super::envelope::{
    accept, accept_status, Envelope, Rejection, SessionStatus, SESSION_NOT_FOUND_CODE,
};
use super::link::{self, Outcome};
use super::topology;
use crate::jsonrpc::{self, ErrorObject, Message, Parsed, RequestId};
use crate::protocol::{Engine, Outgoing, Session, Sink};
use crate::sync::lock;
use crate::transport::session_table::{Expirable, Refused, SessionTable};
use amiquip::{Channel, Confirm, ConsumerMessage, ConsumerOptions, Delivery, Publish};
use crossbeam_channel::{Receiver, Select, Sender};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervisor::{ChildSpec, Restart, Strategy, SupervisorSpec};

/// A session owned by this instance.
pub(crate) struct SessionRoute {
    mcp: Arc<Session>,
    /// The client's reply queue: the `reply_to` of its `initialize`, pinned
    /// for the session's life (a message that names the session cannot
    /// redirect its traffic elsewhere).
    reply_to: Mutex<String>,
    /// When the broker first returned a message to the client's queue
    /// since the client last spoke.
    gone_since: Mutex<Option<std::time::Instant>>,
    /// The instance's message number when the client last spoke: a
    /// message returned that was published before it says nothing of the
    /// client now.
    heard_at: AtomicU64,
    clock: Arc<dyn supervisor::Clock>,
    grace: Duration,
}

impl SessionRoute {
    /// The client spoke (all the link thread does with a session's
    /// messages comes in order after this).
    fn heard(&self, shared: &Shared) {
        *lock(&self.gone_since) = None;
        self.heard_at
            .store(shared.next_message.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// `request`, one of ours, never reached the client (`why`, logged by
    /// the caller): its handler learns at once, rather than wait out its
    /// timeout for an answer to what was never sent.
    fn unsent(&self, request: &Value, why: &str) {
        let method = request["method"].as_str().unwrap_or("a request");
        let error = ErrorObject::internal(format!("cannot send {method} to the client: {why}"));
        self.mcp.fail_unsent(request, &error);
    }
}

impl Expirable for SessionRoute {
    fn busy(&self) -> bool {
        self.mcp.inflight() > 0
    }
    fn end(&self) {
        self.mcp.close();
    }
    fn operational(&self) -> bool {
        self.mcp.phase() == crate::protocol::Phase::Operating
    }
    fn abandoned(&self) -> bool {
        lock(&self.gone_since)
            .is_some_and(|t| self.clock.now().saturating_duration_since(t) > self.grace)
    }
    fn may_be_abandoned(&self) -> bool {
        lock(&self.gone_since).is_some()
    }
}

/// A delivery waiting for its acknowledgement; `generation` names the
/// connection it came on (tags of an older connection are void).
struct Ticket {
    generation: u64,
    delivery: Delivery,
}

/// Work for the link thread.
enum Work {
    /// Publish to a client's queue, then acknowledge `ticket` once confirmed.
    Publish {
        body: Vec<u8>,
        envelope: Envelope,
        reply_to: String,
        ticket: Option<Ticket>,
    },
    /// Acknowledge without publishing (no response was owed).
    Ack(Ticket),
    /// Look at [`Shared::draining`] (the instance stops taking new work).
    Drain,
}

/// What the engine's threads share with the link thread.
struct Shared {
    engine: Arc<Engine>,
    config: AmqpConfig,
    sessions: Arc<SessionTable<SessionRoute>>,
    instance_queue: String,
    work: Sender<Work>,
    next_message: AtomicU64,
    /// Deliveries in the engine whose answer is still owed.
    answering: AtomicUsize,
    /// Connections made so far (see [`link::run`]).
    generations: AtomicU64,
    /// The instance is stopping: it no longer consumes the shared request
    /// queue (what names no session: `initialize`, stateless requests), so
    /// those go to the other instances of the server, or wait in the queue
    /// for the next start. Its own sessions' messages are still taken.
    draining: AtomicBool,
}

impl Shared {
    /// What every message of this instance carries: answers come back to
    /// its queue, it names itself as the sender.
    fn envelope(&self, correlation_id: Option<String>, session: Option<String>) -> Envelope {
        Envelope {
            correlation_id,
            reply_to: Some(self.instance_queue.clone()),
            session,
            app_id: self.config.server_name.clone(),
            ..Default::default()
        }
    }
    fn message_id(&self) -> String {
        format!(
            "{}-{}",
            self.instance_queue,
            self.next_message.fetch_add(1, Ordering::Relaxed)
        )
    }
}

/// Where the engine's answers to one delivery go: the sender's reply queue,
/// tagged with the request's message id; the delivery is acknowledged after
/// the response (or, if none comes, when the engine lets go of this sink).
struct Reply {
    shared: Arc<Shared>,
    session: Option<Arc<SessionRoute>>,
    session_id: Option<String>,
    reply_to: Option<String>,
    correlation_id: Option<String>,
    ticket: Mutex<Option<Ticket>>,
    /// Set for the delivery that opened the session: a failed initialize
    /// removes it again.
    opened: bool,
}

impl Reply {
    fn take_ticket(&self) -> Option<Ticket> {
        let ticket = lock(&self.ticket).take();
        if ticket.is_some() {
            self.shared.answering.fetch_sub(1, Ordering::Relaxed);
        }
        ticket
    }
    fn envelope(&self) -> Envelope {
        Envelope {
            protocol_version: self
                .session
                .as_ref()
                .and_then(|s| s.mcp.version())
                .map(|v| v.as_str().to_owned()),
            ..self
                .shared
                .envelope(self.correlation_id.clone(), self.session_id.clone())
        }
    }
}

impl Reply {
    /// When `out`, not to be published, is a request of ours: fails it
    /// (see [`SessionRoute::unsent`]). Whether it was a request.
    fn fail_request(&self, out: &Outgoing, why: &str) -> bool {
        let (Outgoing::Request(request), Some(s)) = (out, &self.session) else {
            return false;
        };
        s.unsent(request, why);
        true
    }
}

impl Sink for Reply {
    fn send(&self, out: Outgoing) {
        let response = matches!(out, Outgoing::Response(_) | Outgoing::Suppressed { .. });
        let ticket = if response { self.take_ticket() } else { None };
        let reply_to = self
            .session
            .as_ref()
            .map(|s| lock(&s.reply_to).clone())
            .or_else(|| self.reply_to.clone());
        let (true, Some(reply_to)) = (out.has_message(), reply_to) else {
            if let Some(t) = ticket {
                let _ = self.shared.work.send(Work::Ack(t));
            }
            return;
        };
        if ticket.is_none() && self.shared.work.len() >= self.shared.config.max_backlog {
            let what = match self.fail_request(&out, "the publish backlog is full") {
                true => "a request to the client failed",
                false => "a notification was dropped",
            };
            log::warn!("amqp: publish backlog full; {what}");
            return;
        }
        // Serialized only now: not for a notification the backlog drops.
        let body = out.to_text().unwrap_or_default().into_bytes();
        let (body, replaced) = match bounded(&out, body, self.shared.config.max_publish_bytes) {
            Bounded::Whole(body) => (body, false),
            Bounded::Replaced(body) => (body, true),
            Bounded::Dropped => {
                self.fail_request(&out, "it is over max_publish_bytes");
                if let Some(t) = ticket {
                    let _ = self.shared.work.send(Work::Ack(t));
                }
                return;
            }
        };
        let failed = replaced || matches!(&out, Outgoing::Response(r) if r.is_error());
        if self.opened && failed {
            if let Some(id) = &self.session_id {
                self.shared.sessions.remove(id, &None);
            }
        }
        let _ = self.shared.work.send(Work::Publish {
            body,
            envelope: self.envelope(),
            reply_to,
            ticket,
        });
    }
}

/// What is published for an outgoing message, given the largest body the
/// broker takes ([`AmqpConfig::max_publish_bytes`]): a broker closes the
/// channel on a larger one, which would reset every session's link and,
/// the request being delivered again, do so again.
#[derive(Debug, PartialEq)]
enum Bounded {
    /// Within the limit: the message as it is.
    Whole(Vec<u8>),
    /// A response over the limit, replaced by an error response (-32603)
    /// to the same request (for a batch, to each of its requests).
    Replaced(Vec<u8>),
    /// A notification or request over the limit: nothing is published.
    Dropped,
}

/// Holds `out`, whose JSON text is `body`, to `limit` bytes; what goes
/// over it is logged once, here.
fn bounded(out: &Outgoing, body: Vec<u8>, limit: usize) -> Bounded {
    let size = body.len();
    if size <= limit {
        return Bounded::Whole(body);
    }
    let reply = match out {
        Outgoing::Response(reply) => reply,
        Outgoing::Notification(m) | Outgoing::Request(m) => {
            let kind = if matches!(out, Outgoing::Request(_)) {
                "request"
            } else {
                "notification"
            };
            log::warn!(
                "amqp: a {kind} ({}) of {size} bytes is over max_publish_bytes ({limit}); it was dropped",
                m.get("method").and_then(Value::as_str).unwrap_or("?")
            );
            return Bounded::Dropped;
        }
        Outgoing::Suppressed { .. } | Outgoing::Reconnect { .. } => return Bounded::Dropped,
    };
    let error = ErrorObject::internal(format!(
        "the response was {size} bytes, over the limit of {limit} bytes this server \
         publishes over AMQP (max_publish_bytes)"
    ));
    let replacement: jsonrpc::Reply = match reply {
        jsonrpc::Reply::Batch(items) => jsonrpc::Reply::Batch(
            items
                .iter()
                .map(|item| {
                    let id = item.get("id").and_then(RequestId::from_value);
                    jsonrpc::error_response_value(id.as_ref(), &error)
                })
                .collect(),
        ),
        single => jsonrpc::Reply::error(single.id().cloned(), error),
    };
    log::warn!(
        "amqp: a response of {size} bytes is over max_publish_bytes ({limit}); \
         its request is answered with an error instead"
    );
    let text = jsonrpc::to_text(&replacement);
    if text.len() <= limit {
        return Bounded::Replaced(text.into_bytes());
    }
    // The errors are larger still (many long ids in a batch, or a tiny
    // limit): one short error, else nothing.
    let short = jsonrpc::to_text(&jsonrpc::Reply::error(
        None,
        ErrorObject::internal("the response was over max_publish_bytes"),
    ));
    if short.len() <= limit {
        Bounded::Replaced(short.into_bytes())
    } else {
        Bounded::Dropped
    }
}

impl Drop for Reply {
    fn drop(&mut self) {
        // Nothing (more) was owed: notifications, responses from the client.
        if let Some(t) = self.take_ticket() {
            let _ = self.shared.work.send(Work::Ack(t));
        }
    }
}

/// The session's sink for messages related to no request (list changes,
/// resource updates).
struct SessionSink {
    shared: std::sync::Weak<Shared>,
    session_id: String,
}

impl Sink for SessionSink {
    fn send(&self, out: Outgoing) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        // Sending is no sign of the client: it must not delay expiry.
        let session = shared.sessions.peek(&self.session_id, &None);
        Reply {
            shared: shared.clone(),
            session,
            session_id: Some(self.session_id.clone()),
            reply_to: None,
            correlation_id: None,
            ticket: Mutex::new(None),
            opened: false,
        }
        .send(out);
    }
}

/// The number of a message id of [`Shared::message_id`]'s making.
fn message_number(id: &str) -> Option<u64> {
    id.rsplit('-').next()?.parse().ok()
}

/// What an AMQP instance serves (cheap to clone): its queue and sessions.
#[derive(Clone)]
pub struct AmqpListener {
    shared: Arc<Shared>,
}

impl AmqpListener {
    /// The queue this instance consumes its sessions' messages from.
    pub fn instance_queue(&self) -> &str {
        &self.shared.instance_queue
    }
    /// Number of sessions this instance owns.
    pub fn session_count(&self) -> usize {
        self.shared.sessions.len()
    }
    /// Expires idle sessions now (the sweeper does this periodically).
    pub fn sweep_sessions(&self) -> usize {
        self.shared.sessions.sweep()
    }
    /// Messages waiting for the link: answers, notifications and
    /// acknowledgements the handlers produced that it has not yet passed
    /// to the broker (they pile up while the broker is unreachable, up to
    /// [`AmqpConfig::max_backlog`] for notifications).
    pub fn backlog(&self) -> usize {
        self.shared.work.len()
    }
    /// Stops taking new sessions and stateless requests (a draining stop):
    /// the instance cancels its consumer of the shared request queue, and
    /// what it had taken from there but not started goes back to the
    /// queue, for the server's other instances (or the next start). Its
    /// sessions' messages are still taken. For good: there is no resuming.
    pub fn stop_accepting(&self) {
        self.shared.draining.store(true, Ordering::SeqCst);
        let _ = self.shared.work.send(Work::Drain);
    }
}

/// `amqp://user:***@host:port as NAME (instance queue QUEUE)`: where and
/// as what this instance serves, the password hidden.
impl std::fmt::Display for AmqpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config = &self.shared.config;
        write!(
            f,
            "{} as {} (instance queue {})",
            config.url, config.server_name, self.shared.instance_queue
        )
    }
}

/// An AMQP instance running under a supervision tree of its own.
pub type AmqpServer = crate::transport::tree::Tree<AmqpListener>;

impl crate::transport::tree::Tree<AmqpListener> {
    /// Connects to the broker and returns the instance as a child spec (a
    /// supervisor over the link worker, which declares the topology and
    /// serves, and a session sweeper) for a tree of yours. Fails if the
    /// first connection cannot be made.
    pub fn child_spec(
        engine: Arc<Engine>,
        config: AmqpConfig,
    ) -> io::Result<(ChildSpec, AmqpListener)> {
        let (spec, handle) = Self::tree(engine, config)?;
        Ok((ChildSpec::supervisor(spec), handle))
    }

    /// The transport's supervision tree, and its handle.
    fn tree(engine: Arc<Engine>, config: AmqpConfig) -> io::Result<(SupervisorSpec, AmqpListener)> {
        let first = super::connect::open(&config.url, config.heartbeat_secs)
            .map_err(|e| io::Error::new(io::ErrorKind::ConnectionRefused, e.to_string()))?;
        let (work_tx, work_rx) = crossbeam_channel::unbounded();
        let sessions = Arc::new(SessionTable::new(
            config.max_sessions,
            config.session_idle,
            config.clock.clone(),
        ));
        let instance_queue = format!(
            "mcp.{}.instance.{}",
            config.server_name,
            &topology::unique_suffix()[..16]
        );
        let shared = Arc::new(Shared {
            engine,
            config,
            sessions: sessions.clone(),
            instance_queue,
            work: work_tx,
            next_message: AtomicU64::new(1),
            answering: AtomicUsize::new(0),
            generations: AtomicU64::new(0),
            draining: AtomicBool::new(false),
        });
        let first = Mutex::new(Some(first));
        let link = {
            let shared = shared.clone();
            ChildSpec::worker("amqp-link", move |ctx| {
                // Started before the sweeper (when the tree starts again):
                // the sessions it takes in are taken from the start.
                shared.sessions.reopen();
                let first = lock(&first).take();
                let mut pending = Pending::default();
                link::run(
                    &shared.config,
                    ctx.stop_signal(),
                    &shared.generations,
                    first,
                    |_, channel, generation, up| {
                        let ready = || {
                            up.set(true);
                            ctx.ready();
                        };
                        let io = Io {
                            work: &work_rx,
                            stop: ctx.stop_signal(),
                            ready: &ready,
                        };
                        serve(&shared, channel, generation, io, &mut pending)
                    },
                )
                .map_err(|e| e.into())
            })
            .restart(Restart::Permanent)
            .await_ready(READY_TIMEOUT)
        };
        let spec = SupervisorSpec::new("amqp", Strategy::OneForOne)
            .intensity(3, Duration::from_secs(60))
            // Stopped in reverse order: the sweeper first, so sessions end
            // (their work is cancelled) before the link closes.
            .child(link)
            .child(SessionTable::sweeper(&sessions, "amqp-session-sweeper"));
        let handle = AmqpListener { shared };
        log::info!("amqp: serving MCP on {handle}");
        Ok((spec, handle))
    }

    /// Connects to the broker, declares the topology and starts serving
    /// `engine` under a tree of its own. Fails if the first connection
    /// cannot be made.
    pub fn start(engine: Arc<Engine>, config: AmqpConfig) -> io::Result<AmqpServer> {
        let (spec, handle) = Self::tree(engine, config)?;
        crate::transport::tree::Tree::run(spec, handle)
    }
}
/// Publish sequence numbers awaiting the broker's confirm, with the
/// deliveries to acknowledge then. Bounded by the prefetch: each entry is
/// an unacknowledged delivery.
#[derive(Default)]
struct Pending {
    next_seq: u64,
    confirms: BTreeMap<u64, Option<Ticket>>,
    /// Work taken from the queue but not published when the link failed.
    retry: Option<Work>,
}

/// What the link thread listens to besides the broker.
struct Io<'a> {
    work: &'a Receiver<Work>,
    stop: &'a Receiver<()>,
    /// Called once the topology is declared and consumers run.
    ready: &'a dyn Fn(),
}

/// How long starting may take: connecting, declaring, consuming.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a request whose response the broker confirmed may wait for
/// its acknowledgement while the link thread has nothing else to do.
/// Confirms are taken between other events rather than each waking the
/// link thread: under load, the acknowledgements of many go out together,
/// right after the responses published in the same turn.
pub const ACK_DELAY: Duration = Duration::from_millis(1);

/// How long an intentional stop waits for the broker to confirm the
/// responses already published, so that their requests are acknowledged
/// rather than delivered again: 2 s (within the supervisor's
/// [`DEFAULT_WORKER_SHUTDOWN`](supervisor::DEFAULT_WORKER_SHUTDOWN)).
pub const STOP_CONFIRM_WAIT: Duration = Duration::from_secs(2);

/// The instance queue consumer's prefetch: every request the engine lets
/// the instance's sessions have in flight, and as many more (their
/// notifications and answers, acknowledged as they are taken), up to the
/// most AMQP can say. Unacknowledged running calls do not stall the
/// messages they wait for; the engine's limits bound the work.
fn instance_prefetch(config: &AmqpConfig, engine: &crate::protocol::EngineOptions) -> u16 {
    let inflight = config
        .max_sessions
        .saturating_mul(engine.max_inflight_per_session)
        .saturating_mul(2);
    u16::try_from(inflight.max(usize::from(config.prefetch))).unwrap_or(u16::MAX)
}

/// One connection's message loop.
fn serve(
    shared: &Arc<Shared>,
    channel: &Channel,
    generation: u64,
    io: Io<'_>,
    pending: &mut Pending,
) -> Outcome {
    let Io { work, stop, ready } = io;
    let lost = |what: &str, e: amiquip::Error| Outcome::Lost(format!("{what}: {e}"));
    // A new channel numbers its publishes from 1; old confirms are void and
    // their deliveries were requeued by the broker.
    pending.next_seq = 0;
    pending.confirms.clear();
    if let Err(e) = channel.qos(0, shared.config.prefetch, false) {
        return lost("qos", e);
    }
    if let Err(e) = topology::declare_server(channel, &shared.config, &shared.instance_queue) {
        return lost("declaring the topology", e);
    }
    let confirms = match channel
        .enable_publisher_confirms()
        .and_then(|()| channel.listen_for_publisher_confirms())
    {
        Ok(r) => r,
        Err(e) => return lost("publisher confirms", e),
    };
    let returns = match channel.listen_for_returns() {
        Ok(r) => r,
        Err(e) => return lost("returns", e),
    };
    let consume = |queue: String, exclusive| {
        channel.basic_consume(
            queue,
            ConsumerOptions {
                no_ack: false,
                exclusive,
                ..Default::default()
            },
        )
    };
    let draining = || shared.draining.load(Ordering::SeqCst);
    let requests = if draining() {
        None
    } else {
        match consume(shared.config.request_queue(), false) {
            Ok(c) => Some(c),
            Err(e) => return lost("consuming the request queue", e),
        }
    };
    let no_requests = crossbeam_channel::never();
    let requests_rx = requests.as_ref().map_or(&no_requests, |c| c.receiver());
    // A consumer's limit is the one set when it starts.
    let limit = instance_prefetch(&shared.config, &shared.engine.options);
    if let Err(e) = channel.qos(0, limit, false) {
        return lost("qos", e);
    }
    let own = match consume(shared.instance_queue.clone(), true) {
        Ok(c) => c,
        Err(e) => return lost("consuming the instance queue", e),
    };
    ready();
    let mut link = Link {
        shared,
        channel,
        generation,
        pending,
    };
    if let Some(w) = link.pending.retry.take() {
        if let Err(e) = link.perform(w) {
            return e;
        }
    }
    // The answers the handlers gave while the link was down go out before
    // the clients hear it is back: each client has read them by the time
    // it publishes again what is unanswered, and a request answered then
    // does not run a second time.
    if let Err(e) = link.perform_queued(work) {
        return e;
    }
    if generation > 1 {
        if let Err(e) = link.resume_sessions() {
            return e;
        }
    }
    let mut sel = Select::new();
    let i_requests = sel.recv(requests_rx);
    let i_own = sel.recv(own.receiver());
    let i_work = sel.recv(work);
    let i_returns = sel.recv(&returns);
    let i_stop = sel.recv(stop);
    // The same, and the confirms: for when they are overdue.
    let mut with_confirms = sel.clone();
    let i_confirms = with_confirms.recv(&confirms);
    let mut overdue = false;
    // Whether the shared queue's consumer was cancelled (draining).
    let mut cancelled = requests.is_none();
    let cancel = |cancelled: &mut bool| -> Result<(), Outcome> {
        if *cancelled || !draining() {
            return Ok(());
        }
        *cancelled = true;
        if let Some(Err(e)) = requests.as_ref().map(amiquip::Consumer::cancel) {
            return Err(lost("cancelling the request queue's consumer", e));
        }
        log::info!("amqp: draining: no longer taking new sessions or stateless requests");
        Ok(())
    };
    loop {
        if let Err(outcome) = cancel(&mut cancelled) {
            return outcome;
        }
        // What the handlers produced by now is published first, then the
        // requests confirmed meanwhile are acknowledged: both reach
        // amiquip's I/O thread together.
        if let Err(outcome) = link.perform_queued(work) {
            return outcome;
        }
        if let Err(outcome) = link.confirmed_so_far(&confirms) {
            return outcome;
        }
        // An answer is due within microseconds when a handler is at work:
        // then the short spin catches it without a wake-up; otherwise the
        // next event is a broker round trip away, and spinning would only
        // take CPU from the broker and the handlers.
        let spin = shared.answering.load(Ordering::Relaxed) > 0;
        let op = if link.pending.confirms.is_empty() {
            crate::wait::select_within(&mut sel, spin, None)
        } else if overdue {
            // Still outstanding a whole ACK_DELAY later (a blocked broker
            // holds them back): their arrival wakes this thread, no timer.
            crate::wait::select_within(&mut with_confirms, false, None)
        } else {
            crate::wait::select_within(&mut sel, spin, Some(ACK_DELAY))
        };
        let Some(op) = op else {
            if !overdue {
                log::trace!(
                    "amqp: {} confirms overdue; waiting for them",
                    link.pending.confirms.len()
                );
            }
            overdue = true;
            continue; // the confirms are taken at the top
        };
        overdue = false;
        let result = match op.index() {
            i if i == i_requests => match op.recv(requests_rx) {
                // Taken before the consumer was cancelled (or just as the
                // drain began: cancelled first): back to the queue, for
                // another instance (this one gets no more).
                Ok(ConsumerMessage::Delivery(d)) if draining() => {
                    cancel(&mut cancelled).and_then(|()| {
                        d.nack(channel, true)
                            .map_err(|e| Outcome::Lost(format!("nack: {e}")))
                    })
                }
                // The cancelled consumer's end: nothing more comes from it.
                Ok(_) | Err(_) if cancelled => {
                    sel.remove(i_requests);
                    with_confirms.remove(i_requests);
                    Ok(())
                }
                m => link.consumed(m),
            },
            i if i == i_own => link.consumed(op.recv(own.receiver())),
            i if i == i_work => match op.recv(work) {
                Ok(w) => link.perform(w),
                Err(_) => Err(Outcome::Stop),
            },
            i if i == i_confirms => match op.recv(&confirms) {
                Ok(c) => link.confirmed(c),
                Err(_) => Err(Outcome::Lost("the connection closed".into())),
            },
            i if i == i_returns => {
                if let Ok(r) = op.recv(&returns) {
                    link.returned(&r);
                }
                Ok(())
            }
            i if i == i_stop => {
                let _ = op.recv(stop);
                Err(Outcome::Stop)
            }
            _ => Ok(()),
        };
        if let Err(outcome) = result {
            if matches!(outcome, Outcome::Stop) {
                link.finish(work, &confirms);
            } else {
                // What is confirmed is acknowledged, not delivered again
                // (when the channel still works: a consumer cancelled).
                let _ = link.confirmed_so_far(&confirms);
            }
            return outcome;
        }
    }
}

/// What becomes of a request once the broker confirmed or refused the
/// publish of its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AfterConfirm {
    /// The response is with the broker: acknowledge the request.
    Ack,
    /// The broker refused the response: deliver the request again, to run
    /// once more.
    Requeue,
    /// Refused again for a request delivered before (a reply queue that
    /// takes nothing, say): acknowledge it, so that it does not run for
    /// ever.
    GiveUp,
}

/// See [`AfterConfirm`]: a refused response's request is run again once.
fn after_confirm(confirmed: bool, redelivered: bool) -> AfterConfirm {
    match (confirmed, redelivered) {
        (true, _) => AfterConfirm::Ack,
        (false, false) => AfterConfirm::Requeue,
        (false, true) => AfterConfirm::GiveUp,
    }
}

/// The link thread's view of one connection.
struct Link<'a> {
    shared: &'a Arc<Shared>,
    channel: &'a Channel,
    generation: u64,
    pending: &'a mut Pending,
}

impl Link<'_> {
    /// A message to a client's queue came back: the queue is gone. Unless
    /// the client speaks again within `client_gone_grace` (it only lost its
    /// connection), its session ends at the sweep after that. A request it
    /// sent is still acknowledged when the confirm arrives.
    fn returned(&self, r: &amiquip::Return) {
        log::debug!(
            "amqp: message to {} returned ({} {}); its client is gone",
            r.routing_key,
            r.reply_code,
            r.reply_text
        );
        let Some(id) = Envelope::of(&r.properties).session else {
            return;
        };
        if let Some(s) = self.shared.sessions.peek(&id, &None) {
            // A request of ours that came back.
            if let Ok(request) = serde_json::from_slice::<Value>(&r.content) {
                if request.get("method").is_some() && request.get("id").is_some() {
                    s.unsent(&request, "its queue is gone (the broker returned it)");
                }
            }
            // Published before the client last spoke: not a sign of it now.
            let number = r
                .properties
                .message_id()
                .as_deref()
                .and_then(message_number);
            if number.is_some_and(|n| n < s.heard_at.load(Ordering::SeqCst)) {
                return;
            }
            let now = s.clock.now();
            let newly = {
                let mut gone = lock(&s.gone_since);
                let newly = gone.is_none();
                gone.get_or_insert(now);
                newly
            };
            if newly {
                // The sweeper may sleep until an idle expiry: it now looks
                // at this session every tick, to end it after the grace.
                self.shared.sessions.replan();
            }
        }
    }

    fn consumed(
        &mut self,
        message: Result<ConsumerMessage, crossbeam_channel::RecvError>,
    ) -> Result<(), Outcome> {
        match message {
            Ok(ConsumerMessage::Delivery(d)) => self.delivered(d),
            Ok(other) => Err(Outcome::Lost(format!("consumer ended: {other:?}"))),
            Err(_) => Err(Outcome::Lost("consumer channel closed".into())),
        }
    }

    fn perform(&mut self, work: Work) -> Result<(), Outcome> {
        match work {
            Work::Ack(t) => self.ack(t),
            // Woke the loop, which looks at the flag.
            Work::Drain => Ok(()),
            Work::Publish {
                body,
                envelope,
                reply_to,
                ticket,
            } => {
                let props = envelope.properties(&self.shared.message_id());
                let publish = Publish {
                    body: &body,
                    routing_key: reply_to.clone(),
                    mandatory: true,
                    immediate: false,
                    properties: props,
                };
                if let Err(e) = self.channel.basic_publish("", publish) {
                    self.pending.retry = Some(Work::Publish {
                        body,
                        envelope,
                        reply_to,
                        ticket,
                    });
                    return Err(Outcome::Lost(format!("publish: {e}")));
                }
                self.pending.next_seq += 1;
                self.pending.confirms.insert(self.pending.next_seq, ticket);
                Ok(())
            }
        }
    }

    /// After a reconnection: the instance queue was declared anew, and
    /// what the old one held or was delivering is gone. Each session's
    /// client is told so ([`SessionStatus::Resumed`]) and publishes again
    /// the requests it has had no answer to; a copy of one still running
    /// here is dropped as it arrives (see `delivered`).
    fn resume_sessions(&mut self) -> Result<(), Outcome> {
        let sessions = self.shared.sessions.entries();
        log::info!(
            "amqp: connected again; asking the clients of {} session(s) to publish again what is unanswered",
            sessions.len()
        );
        for (id, route) in sessions {
            let reply_to = lock(&route.reply_to).clone();
            if reply_to.is_empty() {
                continue;
            }
            self.perform(Work::Publish {
                body: Vec::new(),
                envelope: Envelope {
                    status: Some(SessionStatus::Resumed),
                    ..self.shared.envelope(None, Some(id))
                },
                reply_to,
                ticket: None,
            })?;
        }
        Ok(())
    }

    fn ack(&mut self, t: Ticket) -> Result<(), Outcome> {
        if t.generation != self.generation {
            return Ok(()); // the broker already requeued it with its connection
        }
        t.delivery
            .ack(self.channel)
            .map_err(|e| Outcome::Lost(format!("ack: {e}")))
    }

    /// Performs the work queued by now (only that: a handler that keeps
    /// queueing starves nothing).
    fn perform_queued(&mut self, work: &Receiver<Work>) -> Result<(), Outcome> {
        for _ in 0..work.len() {
            let Ok(w) = work.try_recv() else { break };
            self.perform(w)?;
        }
        Ok(())
    }

    /// An intentional stop: the answers the handlers queued by now are
    /// published, and the link waits (at most [`STOP_CONFIRM_WAIT`]) for
    /// the broker to confirm every response it published, acknowledging
    /// their requests. A request whose answer left is then not delivered
    /// again (to run a second time elsewhere) when the channel closes;
    /// whatever is still unconfirmed after the wait is, as after a lost
    /// connection.
    fn finish(&mut self, work: &Receiver<Work>, confirms: &Receiver<Confirm>) {
        if self.perform_queued(work).is_err() {
            return;
        }
        let deadline = std::time::Instant::now() + STOP_CONFIRM_WAIT;
        if self.confirmed_so_far(confirms).is_err() || self.pending.confirms.is_empty() {
            return;
        }
        log::debug!(
            "amqp: stopping: waiting for the broker to confirm {} responses",
            self.pending.confirms.len()
        );
        while !self.pending.confirms.is_empty() {
            let confirmed = match confirms.recv_deadline(deadline) {
                Ok(c) => self.confirmed(c),
                Err(_) => break,
            };
            if confirmed.is_err() {
                return;
            }
        }
        if !self.pending.confirms.is_empty() {
            log::warn!(
                "amqp: stopping: {} responses not confirmed within {STOP_CONFIRM_WAIT:?}; \
                 their requests will be delivered again",
                self.pending.confirms.len()
            );
        }
    }

    /// Acknowledges the requests whose responses the broker confirmed
    /// since the last look.
    fn confirmed_so_far(&mut self, confirms: &Receiver<Confirm>) -> Result<(), Outcome> {
        loop {
            match confirms.try_recv() {
                Ok(c) => self.confirmed(c)?,
                Err(crossbeam_channel::TryRecvError::Empty) => return Ok(()),
                Err(crossbeam_channel::TryRecvError::Disconnected) => {
                    return Err(Outcome::Lost("the connection closed".into()))
                }
            }
        }
    }

    fn confirmed(&mut self, confirm: Confirm) -> Result<(), Outcome> {
        let (payload, ok) = match confirm {
            Confirm::Ack(p) => (p, true),
            Confirm::Nack(p) => (p, false),
        };
        let tags: Vec<u64> = if payload.multiple {
            self.pending
                .confirms
                .range(..=payload.delivery_tag)
                .map(|(k, _)| *k)
                .collect()
        } else {
            vec![payload.delivery_tag]
        };
        for tag in tags {
            let Some(Some(ticket)) = self.pending.confirms.remove(&tag) else {
                continue;
            };
            if ticket.generation != self.generation {
                continue; // the broker already requeued it with its connection
            }
            match after_confirm(ok, ticket.delivery.redelivered) {
                AfterConfirm::Ack => self.ack(ticket)?,
                AfterConfirm::Requeue => {
                    // The broker lost the response: run the request again.
                    log::warn!("amqp: a response was nacked by the broker; requeueing its request");
                    ticket
                        .delivery
                        .nack(self.channel, true)
                        .map_err(|e| Outcome::Lost(format!("nack: {e}")))?;
                }
                AfterConfirm::GiveUp => {
                    log::warn!(
                        "amqp: the broker refused the response to request {:?} (routing key {:?}) \
                         twice; the request is dropped",
                        ticket
                            .delivery
                            .properties
                            .message_id()
                            .as_deref()
                            .unwrap_or("-"),
                        ticket.delivery.routing_key
                    );
                    self.ack(ticket)?;
                }
            }
        }
        Ok(())
    }

    fn delivered(&mut self, mut delivery: Delivery) -> Result<(), Outcome> {
        let envelope = Envelope::of(&delivery.properties);
        let correlation_id = delivery.properties.message_id().clone();
        if let Some(status @ (SessionStatus::Ended | SessionStatus::Resumed)) = envelope.status {
            return self.client_status(status, delivery, &envelope, correlation_id);
        }
        let body = std::mem::take(&mut delivery.body);
        let parsed = match accept(
            &body,
            delivery.properties.content_type().as_deref(),
            self.shared.config.max_message_bytes,
        ) {
            Ok(p) => p,
            Err(rejection) => return self.reject(delivery, &envelope, correlation_id, rejection),
        };
        // Its answer could go nowhere: it is not run (nor a session opened).
        if envelope.session.is_none()
            && reply_address(&envelope).is_none()
            && parsed.answers_owed() > 0
        {
            return self.dead_letter(
                delivery,
                &envelope,
                "a request without reply_to that names no session: nowhere to answer",
            );
        }
        let ticket = Ticket {
            generation: self.generation,
            delivery,
        };
        let shared = self.shared;
        let (session, opened) = match &envelope.session {
            Some(id) => match shared.sessions.get(id, &None) {
                Some(s) => (Some(s), false),
                None => {
                    log::info!(
                        "amqp: a message for unknown session {} answered with {SESSION_NOT_FOUND_CODE}",
                        crate::protocol::session_log_name(id)
                    );
                    let gone = ErrorObject::new(
                        SESSION_NOT_FOUND_CODE,
                        "session not found (it expired or its server instance restarted): initialize again",
                    );
                    return self.answer_error(
                        ticket,
                        &envelope,
                        correlation_id,
                        &parsed,
                        gone,
                        Some(SessionStatus::NotFound),
                    );
                }
            },
            None if is_initialize(&parsed) => match self.open_session() {
                Ok(s) => (Some(s), true),
                // Another instance may have room (or this one, started
                // again): back to the queue, once.
                Err(why) if !ticket.delivery.redelivered => {
                    log::debug!(
                        "amqp: {}; an initialize goes back to the queue for another instance",
                        refusal(why)
                    );
                    return ticket
                        .delivery
                        .nack(self.channel, true)
                        .map_err(|e| Outcome::Lost(format!("nack: {e}")));
                }
                Err(why) => {
                    log::warn!("amqp: {}; initialize refused", refusal(why));
                    let full = ErrorObject::internal(match why {
                        Refused::Full => {
                            "this server instance is at its session limit; retry later"
                        }
                        Refused::Closed => "this server instance is stopping; retry later",
                    });
                    return self.answer_error(
                        ticket,
                        &envelope,
                        correlation_id,
                        &parsed,
                        full,
                        None,
                    );
                }
            },
            // A stateless request stands alone over AMQP: there is no
            // connection a listen stream could stay open on.
            None if crate::protocol::is_listen(&parsed) => {
                let refused = ErrorObject::new(
                    crate::jsonrpc::METHOD_NOT_FOUND,
                    "subscriptions/listen is not served over AMQP: a stateless request \
                     has no connection to stream on (a session gets list changes and \
                     resource updates)",
                );
                return self.answer_error(
                    ticket,
                    &envelope,
                    correlation_id,
                    &parsed,
                    refused,
                    None,
                );
            }
            None => (None, false),
        };
        if let Some(s) = &session {
            s.heard(shared);
            if let (true, Some(r)) = (opened, &envelope.reply_to) {
                r.clone_into(&mut lock(&s.reply_to));
            }
        }
        if let (Some(s), Parsed::Single(Message::Request(r))) = (&session, &parsed) {
            // The broker's copy of a request still in the table is one;
            // a new message may reuse the id of a request whose answer
            // has left (its client read it), else it is a copy too (a
            // request published again after a resume).
            let copy = if ticket.delivery.redelivered {
                s.mcp.is_inflight(r.id())
            } else {
                s.mcp.holds_id(r.id())
            };
            if copy {
                log::debug!(
                    "amqp: session {}: request {} delivered again while in flight; the original answers",
                    s.mcp.log_name(),
                    r.id()
                );
                return self.ack(ticket);
            }
        }
        let mcp = match &session {
            Some(s) => s.mcp.clone(),
            // No session yet: a throwaway one answers as the lifecycle says
            // (ping works, anything else is refused before initialize).
            None => shared
                .engine
                .open_session(Arc::new(|_: Outgoing| {}))
                .for_one_request(),
        };
        shared.answering.fetch_add(1, Ordering::Relaxed);
        let reply: Arc<dyn Sink> = Arc::new(Reply {
            shared: shared.clone(),
            session_id: session.as_ref().map(|s| s.mcp.id().to_owned()),
            session,
            reply_to: envelope.reply_to.clone(),
            correlation_id,
            ticket: Mutex::new(Some(ticket)),
            opened,
        });
        mcp.receive_parsed(parsed, &reply);
        Ok(())
    }

    /// A session's status from its client (a message with no body, checked
    /// by [`accept_status`], that must carry the reply queue pinned at
    /// `initialize`): [`SessionStatus::Ended`], it leaves, and the session
    /// ends now instead of at its idle expiry (its work in flight is
    /// cancelled); or [`SessionStatus::Resumed`], it connected again and
    /// its queue is back, whatever the broker returned meanwhile. For a
    /// session already gone (it expired, or the message came twice) there
    /// is nothing to do.
    fn client_status(
        &mut self,
        status: SessionStatus,
        delivery: Delivery,
        envelope: &Envelope,
        correlation_id: Option<String>,
    ) -> Result<(), Outcome> {
        let (id, reply_to) = match accept_status(envelope, &delivery.body) {
            Ok(named) => named,
            Err(why) => return self.reject(delivery, envelope, correlation_id, why),
        };
        let sessions = &self.shared.sessions;
        let name = crate::protocol::session_log_name(id);
        match sessions.peek(id, &None) {
            Some(s) if *lock(&s.reply_to) != reply_to => {
                let why = Rejection::Status("it does not carry the session's reply queue");
                return self.reject(delivery, envelope, correlation_id, why);
            }
            Some(_) if status == SessionStatus::Ended => {
                log::debug!("amqp: session {name} ended by its client");
                sessions.remove(id, &None);
            }
            Some(s) => {
                log::debug!("amqp: session {name}: its client is back");
                s.heard(self.shared);
            }
            None => log::debug!(
                "amqp: session {name}: its client's {} comes after its end",
                status.as_str()
            ),
        }
        self.ack(Ticket {
            generation: self.generation,
            delivery,
        })
    }

    /// A session for an `initialize`: its id is the engine session's id;
    /// refused when this instance is at its session limit, or stopping.
    fn open_session(&mut self) -> Result<Arc<SessionRoute>, Refused> {
        let shared = self.shared;
        let id_holder = Arc::new(Mutex::new(String::new()));
        let sink = {
            let holder = id_holder.clone();
            let weak = Arc::downgrade(shared);
            Arc::new(move |out: Outgoing| {
                let session_id = lock(&holder).clone();
                SessionSink {
                    shared: weak.clone(),
                    session_id,
                }
                .send(out)
            })
        };
        let mcp = shared.engine.open_session(sink);
        *lock(&id_holder) = mcp.id().to_owned();
        let session = Arc::new(SessionRoute {
            mcp: mcp.clone(),
            reply_to: Mutex::new(String::new()),
            gone_since: Mutex::new(None),
            heard_at: AtomicU64::new(0),
            clock: shared.config.clock.clone(),
            grace: shared.config.client_gone_grace,
        });
        shared
            .sessions
            .insert(mcp.id().to_owned(), session.clone(), None)
            .map(|()| session)
    }

    /// Answers a request, or each request of a batch, with `error`
    /// without involving the engine (the session is unknown or cannot be
    /// opened; see [`error_answer`]); what owes no answer is just
    /// acknowledged.
    fn answer_error(
        &mut self,
        ticket: Ticket,
        envelope: &Envelope,
        correlation_id: Option<String>,
        parsed: &Parsed,
        error: ErrorObject,
        status: Option<SessionStatus>,
    ) -> Result<(), Outcome> {
        let (Some(answer), Some(reply_to)) =
            (error_answer(parsed, &error), reply_address(envelope))
        else {
            return self.ack(ticket);
        };
        let body = jsonrpc::to_text(&answer).into_bytes();
        self.perform(Work::Publish {
            body,
            envelope: Envelope {
                status,
                ..self
                    .shared
                    .envelope(correlation_id, envelope.session.clone())
            },
            reply_to: reply_to.to_owned(),
            ticket: Some(ticket),
        })
    }

    /// Rejects a malformed delivery to the dead-letter exchange, logs the
    /// reason once, and answers the sender when it gave a reply address.
    fn reject(
        &mut self,
        delivery: Delivery,
        envelope: &Envelope,
        correlation_id: Option<String>,
        why: Rejection,
    ) -> Result<(), Outcome> {
        // A broken or too large answer to one of a session's requests
        // still fails it now.
        if let (Some(e), Some(id)) = (why.parse_error(), &envelope.session) {
            if let Some(s) = self.shared.sessions.get(id, &None) {
                s.mcp.fail_answered(e);
            }
        }
        if let (Some(reply), Some(reply_to)) = (why.reply(), &envelope.reply_to) {
            self.perform(Work::Publish {
                body: jsonrpc::to_text(&reply).into_bytes(),
                envelope: self
                    .shared
                    .envelope(correlation_id, envelope.session.clone()),
                reply_to: reply_to.clone(),
                ticket: None,
            })?;
        }
        self.dead_letter(delivery, envelope, why)
    }

    /// Rejects a delivery without requeue (to the dead-letter exchange)
    /// and logs the reason once.
    fn dead_letter(
        &mut self,
        delivery: Delivery,
        envelope: &Envelope,
        why: impl std::fmt::Display,
    ) -> Result<(), Outcome> {
        log::warn!(
            "amqp: rejected a message (routing key {:?}, app {:?}) to the dead-letter exchange: {why}",
            delivery.routing_key,
            envelope.app_id
        );
        delivery
            .reject(self.channel, false)
            .map_err(|e| Outcome::Lost(format!("reject: {e}")))
    }
}

/// The sender's reply queue, when it named one.
fn reply_address(envelope: &Envelope) -> Option<&str> {
    envelope.reply_to.as_deref().filter(|r| !r.is_empty())
}

/// The answer to `parsed` when each of its requests gets `error`: an
/// error response for a request; for a batch, the array of one per
/// request (an unreadable one gets its own error, as the engine would
/// give it); `None` when nothing in it is owed an answer.
fn error_answer(parsed: &Parsed, error: &ErrorObject) -> Option<jsonrpc::Reply> {
    match parsed {
        Parsed::Single(Message::Request(r)) => {
            Some(jsonrpc::Reply::error(Some(r.id().clone()), error.clone()))
        }
        Parsed::Single(_) => None,
        Parsed::Batch(items) => {
            let answers: Vec<Value> = items
                .iter()
                .filter_map(|item| match item {
                    Ok(Message::Request(r)) => {
                        Some(jsonrpc::error_response_value(Some(r.id()), error))
                    }
                    Ok(_) => None,
                    Err(e) => e.response(),
                })
                .collect();
            if answers.is_empty() {
                None
            } else {
                Some(jsonrpc::Reply::Batch(answers))
            }
        }
    }
}

fn is_initialize(parsed: &Parsed) -> bool {
    matches!(parsed, Parsed::Single(Message::Request(r)) if r.method() == "initialize")
}

/// What the log says of a refused session.
fn refusal(why: Refused) -> &'static str {
    match why {
        Refused::Full => "session limit reached",
        Refused::Closed => "stopping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Answer;
    use serde_json::json;

    fn parse(text: &str) -> Parsed {
        jsonrpc::parse(text.as_bytes()).expect("valid JSON-RPC")
    }

    fn json_of(body: &[u8]) -> Value {
        serde_json::from_slice(body).expect("the body is JSON")
    }

    #[test]
    fn a_refused_response_runs_its_request_again_once() {
        assert_eq!(after_confirm(true, false), AfterConfirm::Ack);
        assert_eq!(after_confirm(true, true), AfterConfirm::Ack);
        assert_eq!(after_confirm(false, false), AfterConfirm::Requeue);
        // Refused again (a reply queue that takes nothing): dropped, not
        // run for ever.
        assert_eq!(after_confirm(false, true), AfterConfirm::GiveUp);
    }

    #[test]
    fn a_response_over_the_publish_limit_becomes_an_error_to_the_same_request() {
        let out = Outgoing::Response(jsonrpc::Reply::Result(
            RequestId::String("big".into()),
            Answer::Json(json!({"pad": "x".repeat(2000)})),
        ));
        let body = out.to_text().expect("a message").into_bytes();
        let size = body.len();
        assert_eq!(
            bounded(&out, body.clone(), size),
            Bounded::Whole(body.clone())
        );
        let Bounded::Replaced(replaced) = bounded(&out, body, 1000) else {
            panic!("not replaced");
        };
        let m = json_of(&replaced);
        assert_eq!(m["id"], "big");
        assert_eq!(m["error"]["code"], jsonrpc::INTERNAL_ERROR);
        let message = m["error"]["message"].as_str().unwrap_or_default();
        let named = format!("was {size} bytes, over the limit of 1000 bytes");
        assert!(message.contains(named.as_str()), "{message}");
        assert!(m.get("result").is_none(), "{m}");
    }

    #[test]
    fn a_batch_response_over_the_publish_limit_answers_each_request_with_the_error() {
        let out = Outgoing::Response(jsonrpc::Reply::Batch(vec![
            json!({"jsonrpc":"2.0","id":1,"result":{"pad":"x".repeat(2000)}}),
            json!({"jsonrpc":"2.0","id":"b","result":{}}),
        ]));
        let body = out.to_text().expect("a message").into_bytes();
        let Bounded::Replaced(replaced) = bounded(&out, body, 1000) else {
            panic!("not replaced");
        };
        let m = json_of(&replaced);
        let items = m.as_array().expect("an array");
        assert_eq!(items.len(), 2);
        assert_eq!((&items[0]["id"], &items[1]["id"]), (&json!(1), &json!("b")));
        for item in items {
            assert_eq!(item["error"]["code"], jsonrpc::INTERNAL_ERROR, "{item}");
        }
    }

    #[test]
    fn errors_larger_than_the_response_they_replace_become_one_short_error() {
        // Many small results with long ids: their errors are larger.
        let id = "i".repeat(100);
        let items = (0..20)
            .map(|n| json!({"jsonrpc":"2.0","id":format!("{id}{n}"),"result":{}}))
            .collect();
        let out = Outgoing::Response(jsonrpc::Reply::Batch(items));
        let body = out.to_text().expect("a message").into_bytes();
        let limit = body.len() - 1;
        let Bounded::Replaced(replaced) = bounded(&out, body, limit) else {
            panic!("not replaced");
        };
        assert!(replaced.len() <= limit);
        let m = json_of(&replaced);
        assert_eq!(
            (&m["id"], &m["error"]["code"]),
            (&Value::Null, &json!(jsonrpc::INTERNAL_ERROR))
        );
        // Not even that fits: nothing.
        let body = out.to_text().expect("a message").into_bytes();
        assert_eq!(bounded(&out, body, 20), Bounded::Dropped);
    }

    #[test]
    fn a_notification_or_request_over_the_publish_limit_is_dropped() {
        let pad = "x".repeat(200);
        for out in [
            Outgoing::Notification(json!({"jsonrpc":"2.0","method":"notifications/message",
                "params":{"level":"info","data":pad}})),
            Outgoing::Request(
                json!({"jsonrpc":"2.0","id":3,"method":"sampling/createMessage",
                "params":{"pad":pad}}),
            ),
        ] {
            let body = out.to_text().expect("a message").into_bytes();
            assert_eq!(bounded(&out, body.clone(), 100), Bounded::Dropped);
            assert_eq!(bounded(&out, body.clone(), 1 << 20), Bounded::Whole(body));
        }
    }

    #[test]
    fn every_request_of_a_batch_gets_the_error_of_an_unknown_session() {
        let gone = ErrorObject::new(SESSION_NOT_FOUND_CODE, "session not found");
        let single = error_answer(&parse(r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#), &gone)
            .expect("an answer")
            .to_value();
        assert_eq!(single["id"], 4);
        assert_eq!(single["error"]["code"], SESSION_NOT_FOUND_CODE);
        let batch = parse(
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},
                {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}},
                {"jsonrpc":"2.0","id":"two","method":"tools/list"},
                {"id":3,"method":"ping"}]"#,
        );
        let answer = error_answer(&batch, &gone).expect("an answer").to_value();
        let items = answer.as_array().expect("an array");
        assert_eq!(items.len(), 3, "{answer}");
        // Each request gets the same error, in the single case's shape.
        for (item, id) in items[..2].iter().zip([json!(1), json!("two")]) {
            assert_eq!(item["id"], id, "{item}");
            assert_eq!(item["error"], single["error"], "{item}");
            assert_eq!(item["jsonrpc"], "2.0");
        }
        // The unreadable one gets its own error.
        assert_eq!(
            items[2]["error"]["code"],
            jsonrpc::INVALID_REQUEST,
            "{answer}"
        );
        // Nothing to answer: notifications only.
        let quiet = parse(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#);
        assert!(error_answer(&quiet, &gone).is_none());
        let note = parse(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(error_answer(&note, &gone).is_none());
    }

    #[test]
    fn only_what_owes_an_answer_needs_a_reply_address() {
        let owed = |text: &str| parse(text).answers_owed();
        assert!(owed(r#"{"jsonrpc":"2.0","id":1,"method":"initialize"}"#) > 0);
        assert_eq!(
            owed(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            0
        );
        assert_eq!(owed(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#), 0);
        assert!(
            owed(
                r#"[{"jsonrpc":"2.0","method":"notifications/initialized"},
                {"jsonrpc":"2.0","id":2,"method":"ping"}]"#
            ) > 0
        );
        assert_eq!(
            owed(r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#),
            0
        );
        for (reply_to, address) in [
            (None, None),
            (Some(""), None),
            (Some("amq.gen-reply"), Some("amq.gen-reply")),
        ] {
            let envelope = Envelope {
                reply_to: reply_to.map(str::to_owned),
                ..Default::default()
            };
            assert_eq!(reply_address(&envelope), address, "{reply_to:?}");
        }
    }
}
