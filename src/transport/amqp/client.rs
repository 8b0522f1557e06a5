//! AMQP client connection. `initialize` is published to the logical
//! server's exchange with the routing strategy's key, so any instance may
//! take it; the answer names the owning instance's queue (`reply_to`) and
//! the session (header), and every later message goes straight to that
//! queue with the `mandatory` flag. Everything for the client arrives on
//! its own exclusive queue.
//!
//! Two kinds of failure are told apart:
//! - the broker or network fails: the link reconnects with backoff, declares
//!   its queue again and publishes again every request still unanswered
//!   (the server drops a copy of a request it is still running); so it
//!   does when the session's instance says it connected again (what its
//!   queue held is gone);
//! - the session is gone (its instance died, so the broker returns what is
//!   sent to its queue, or the instance says it does not know the session):
//!   the connection ends, and a client (`mcpvisor::client::Client`) with reconnection
//!   initializes again through the exchange, reaching another instance.
//!
//! A call crosses no thread of ours on its way: the calling thread
//! publishes its request (on a channel of the connection shared by the
//! writers), and the client's reading thread consumes the answer straight
//! from the queue's consumer. A link thread per connection connects and
//! reconnects, publishes again what is owed, and watches for returned
//! messages; what is written between connections waits for the next one.

use crate::jsonrpc::{self, ErrorObject, Message, Parsed, RequestId};
use crate::sync::{lock, FastMap};
use crate::transport::amqp::envelope::{accept, Envelope, Rejection, SessionStatus};
use crate::transport::amqp::link::{self, Outcome};
use crate::transport::amqp::{connect, topology, AmqpConfig};
use crate::transport::connection::{Connection, MessageReader, MessageWriter, ParsedMessage};
use amiquip::{Channel, ConsumerMessage, ConsumerOptions, Publish, Return};
use crossbeam_channel::{Receiver, RecvError, Select, Sender};
use serde_json::Value;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// After a reconnection, how long a message the broker returns from the
/// owning instance's queue is retried (that instance may still be
/// reconnecting itself) before the session counts as lost.
pub const RESUME_GRACE: Duration = Duration::from_secs(10);
/// Pause between retries of returned messages during [`RESUME_GRACE`].
const RESUME_RETRY: Duration = Duration::from_millis(50);
/// Without a reconnection of our own, how long the owning instance's queue
/// may be missing (the instance lost its broker connection and is
/// declaring it again) before the session counts as lost.
pub const OWNER_GONE_GRACE: Duration = Duration::from_secs(2);
/// While requests wait for answers, how often the owning instance's queue
/// is checked: a request published just before that instance died is lost
/// with its queue, and waiting for its timeout would be needlessly long.
pub const OWNER_PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// The `app_id` of what a client publishes.
const CLIENT_APP_ID: &str = "mcpvisor-client";

/// A message for the client: its bytes, what they parsed as, and the
/// request of ours it belongs to (see [`Received::Message`]); `None` at the
/// end of the session.
type Delivered = io::Result<Option<(Vec<u8>, Parsed, Option<RequestId>)>>;

/// What the link thread tells the reader.
enum Control {
    /// A new connection's consumer (with the connection's number): what
    /// arrives on the client's queue from now on.
    Consumer(u64, Receiver<ConsumerMessage>),
    /// The end: `Ok` when the session is over, or why the link gave up.
    End(io::Result<()>),
}

/// What the reader and the writers tell the link thread.
enum Signal {
    /// Connection `generation` failed under them (a publish, the consumer).
    Lost(u64, String),
    /// The server said the session is over: close, do not reconnect.
    Over,
    /// A request now waits for an answer: time the owner's probe.
    Awaiting,
    /// The owning instance connected again ([`SessionStatus::Resumed`]):
    /// what its old queue held is gone.
    Resumed,
}

/// The session this connection talks to.
struct Target {
    session: String,
    queue: String,
    version: Option<String>,
}

/// A request not answered yet: published again after a reconnection (or
/// for the first time, if it was written between connections).
struct Unanswered {
    order: u64,
    message: Value,
    message_id: String,
}

/// Anything else written between connections, published once one is up.
struct Deferred {
    order: u64,
    message: Value,
    message_id: String,
    correlation_id: Option<String>,
}

/// The conversation's state, shared by the writers (they publish on the
/// calling thread), the reader (it consumes on the client's reading
/// thread) and the link thread (it connects, publishes again what is owed
/// and watches for returned messages): no hand-off between threads on the
/// way of a call and its answer. Held only for bookkeeping, never across
/// a publish.
struct State {
    target: Option<Arc<Target>>,
    unanswered: FastMap<RequestId, Unanswered>,
    /// Message ids of the server's requests, for the answers' correlation ids.
    server_requests: FastMap<RequestId, String>,
    next: u64,
    // Since when the owning instance's queue has been found missing, with
    // no answer from it since.
    owner_missing_since: Option<Instant>,
    /// When the last message from the server arrived.
    last_heard: Option<Instant>,
    /// The link thread waits with no timeout: a request that starts
    /// waiting for an answer must wake it ([`Signal::Awaiting`]).
    link_untimed: bool,
    /// The server said it no longer knows the session: there is nothing
    /// to end on leaving.
    forgotten: bool,
}

impl State {
    /// The request of ours published as `message_id`, if it waits for its
    /// answer (a scan: the server's requests and unusable answers, which
    /// ask this, are rare, and the hot path keeps no second map).
    fn request_sent_as(&self, message_id: &str) -> Option<RequestId> {
        self.unanswered
            .iter()
            .find(|(_, u)| u.message_id == message_id)
            .map(|(id, _)| id.clone())
    }

    /// What response `r`, published with `correlation_id`, is to this
    /// client. Answers are correlated by message (mcpvisor-amqp(7)): one
    /// whose id names a request of ours but whose correlation id is not
    /// that request's message id was not sent in answer to it (another
    /// publisher's, or forged) and is not taken. One that is ours leaves
    /// the table of unanswered requests.
    fn answering(&mut self, r: &jsonrpc::Response, correlation_id: Option<&str>) -> Answering {
        match r.id() {
            Some(id) => match self.unanswered.get(id) {
                Some(u) if Some(u.message_id.as_str()) == correlation_id => self
                    .unanswered
                    .remove(id)
                    .map_or(Answering::Unknown, Answering::Ours),
                Some(_) => Answering::Foreign,
                None => Answering::Unknown,
            },
            None => match correlation_id.and_then(|c| self.request_sent_as(c)) {
                Some(id) => {
                    self.unanswered.remove(&id);
                    Answering::Refused(id)
                }
                None => Answering::Unknown,
            },
        }
    }

    /// A request waits for an answer from a known owner: the link thread
    /// must time its probe.
    fn wake_link(&mut self, to_link: &Sender<Signal>) {
        if self.link_untimed && self.target.is_some() && !self.unanswered.is_empty() {
            self.link_untimed = false;
            let _ = to_link.send(Signal::Awaiting);
        }
    }
}

/// What a response is to this client ([`State::answering`]).
enum Answering {
    /// The answer to this request of ours.
    Ours(Unanswered),
    /// An error with id null whose correlation id names this request of
    /// ours: the server could not read it.
    Refused(RequestId),
    /// It names a request of ours, but was not sent in answer to it.
    Foreign,
    /// It names no request waiting here (a late answer, say): the client
    /// decides.
    Unknown,
}

/// Request `id` of ours fails with `error`, as a message for the client:
/// its bytes and the message.
fn failed(id: &RequestId, error: &ErrorObject) -> Received {
    let m = jsonrpc::Response::error(id.clone(), error);
    let body = serde_json::to_vec(m.object()).unwrap_or_default();
    Received::Message(body, Parsed::Single(Message::Response(m)), None)
}

/// What is published and on what: the writers and the link thread take it
/// in turn (a channel is for one thread at a time), which keeps messages
/// in the order they were written. Taken before [`State`], never by the
/// reader, so a publish that blocks (the broker stopped reading) holds up
/// other writers but never the answers.
struct Outbox {
    /// The current connection's publishing channel and its number; `None`
    /// between connections.
    publisher: Option<(u64, Channel)>,
    deferred: Vec<Deferred>,
    /// The link ended for good: writes fail.
    closed: bool,
}

struct Shared {
    config: AmqpConfig,
    reply_queue: String,
    outbox: Mutex<Outbox>,
    state: Mutex<State>,
    to_link: Sender<Signal>,
}

fn request_id(message: &Value) -> Option<RequestId> {
    message.get("id").and_then(RequestId::from_value)
}

/// Whether `body` is a JSON-RPC response (no `method`; a `result` or an
/// `error`), read without building it: it may be far over the size limit.
fn looks_like_a_response(body: &[u8]) -> bool {
    use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
    struct Shape;
    impl<'de> Visitor<'de> for Shape {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let (mut method, mut answer) = (false, false);
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "method" => method = true,
                    "result" | "error" => answer = true,
                    _ => {}
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(answer && !method)
        }
    }
    serde_json::Deserializer::from_slice(body)
        .deserialize_map(Shape)
        .unwrap_or(false)
}

/// What one delivery to the client's queue is for the reader.
enum Received {
    /// The message, what it parsed as, and for a request of the server's
    /// the request of ours it was sent for: the one whose message id its
    /// correlation id names (the server sends a call's own requests with
    /// that call's sink), so the call's association answers it.
    Message(Vec<u8>, Parsed, Option<RequestId>),
    Skip,
    /// The server no longer knows the session.
    Over,
}

impl Shared {
    /// Writes `message`: published at once on a live connection, else kept
    /// for the next one (at most `max_backlog` messages besides requests:
    /// past that, the write fails).
    fn write(&self, message: &Value) -> io::Result<()> {
        let replaced;
        let (message, body) = match self.within_limit(message)? {
            Ok(body) => (message, body),
            Err(error) => {
                replaced = error;
                let body = self.within_limit(&replaced)?.map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "over max_publish_bytes")
                })?;
                (&replaced, body)
            }
        };
        let mut out = lock(&self.outbox);
        if out.closed {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the AMQP link is closed",
            ));
        }
        let method = message.get("method").and_then(Value::as_str);
        let id = request_id(message);
        let mut correlation_id = None;
        let mut recorded = false;
        let (order, message_id, target) = {
            let mut st = lock(&self.state);
            let (order, message_id) = self.next_message(&mut st);
            match (method, &id) {
                (Some("notifications/cancelled"), _) => {
                    if let Some(id) = message
                        .pointer("/params/requestId")
                        .and_then(RequestId::from_value)
                    {
                        st.unanswered.remove(&id);
                    }
                }
                (Some(_), Some(id)) if st.unanswered.len() < self.config.max_backlog => {
                    let u = Unanswered {
                        order,
                        message: message.clone(),
                        message_id: message_id.clone(),
                    };
                    st.unanswered.insert(id.clone(), u);
                    recorded = true;
                    st.wake_link(&self.to_link);
                }
                (None, Some(id)) => correlation_id = st.server_requests.remove(id),
                _ => {}
            }
            (order, message_id, st.target.clone())
        };
        let failed = match &out.publisher {
            Some((generation, channel)) => {
                let target = target.as_deref();
                match self.publish(
                    target,
                    channel,
                    message,
                    &body,
                    &message_id,
                    correlation_id.clone(),
                ) {
                    Ok(()) => return Ok(()),
                    Err(why) => Some((*generation, why)),
                }
            }
            None => None,
        };
        // Between connections (or this one just failed): kept for the next.
        let dead = failed.as_ref().and_then(|_| out.publisher.take());
        let kept = if recorded {
            Ok(())
        } else if out.deferred.len() >= self.config.max_backlog {
            Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the AMQP link is reconnecting and its backlog is full",
            ))
        } else {
            out.deferred.push(Deferred {
                order,
                message: message.clone(),
                message_id,
                correlation_id,
            });
            Ok(())
        };
        drop(out);
        // Closing a channel waits for the broker: not under the lock.
        drop(dead);
        if let Some((generation, why)) = failed {
            let _ = self.to_link.send(Signal::Lost(generation, why));
        }
        kept
    }

    /// `message` serialized, if the broker takes it
    /// ([`AmqpConfig::max_publish_bytes`]: over it, the broker closes the
    /// channel). Over it, an answer to the server's request becomes an
    /// error saying why (`Ok(Err)`: that error, to write in its place);
    /// anything else fails.
    fn within_limit(&self, message: &Value) -> io::Result<Result<Vec<u8>, Value>> {
        let body = serde_json::to_vec(message)?;
        let limit = self.config.max_publish_bytes;
        if body.len() <= limit {
            return Ok(Ok(body));
        }
        let method = message.get("method").and_then(Value::as_str);
        let what = method.map_or_else(|| "an answer".to_owned(), crate::jsonrpc::excerpt);
        let why = format!(
            "{what} of {} bytes is over max_publish_bytes ({limit}): the broker would close the channel",
            body.len()
        );
        match (method, request_id(message)) {
            (None, Some(id)) => {
                log::warn!("amqp client: {why}; an error is sent in its place");
                let error = ErrorObject::internal(why);
                Ok(Err(jsonrpc::error_response_value(Some(&id), &error)))
            }
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, why)),
        }
    }

    fn publish(
        &self,
        target: Option<&Target>,
        channel: &Channel,
        message: &Value,
        body: &[u8],
        message_id: &str,
        correlation_id: Option<String>,
    ) -> Result<(), String> {
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        let target = target.filter(|_| !initialize);
        let (exchange, routing_key) = match target {
            Some(t) => (String::new(), t.queue.clone()),
            None => (
                self.config.exchange.clone(),
                self.config.routing.routing_key(message),
            ),
        };
        let envelope = Envelope {
            correlation_id,
            server: target.is_none().then(|| self.config.server_name.clone()),
            ..self.envelope(target)
        };
        channel
            .basic_publish(
                exchange,
                Publish {
                    body,
                    routing_key,
                    mandatory: true,
                    immediate: false,
                    properties: envelope.properties(message_id),
                },
            )
            .map_err(|e| format!("publish: {e}"))
    }

    /// The order and message id of the next message written. The id is
    /// random past the queue's name: answers are taken by it, and anyone
    /// who can publish to the queue knows the name (a counter would let
    /// them guess the ids of requests waiting for answers).
    fn next_message(&self, st: &mut State) -> (u64, String) {
        st.next += 1;
        let random = crate::protocol::new_session_id();
        (st.next, format!("{}-{}", self.reply_queue, &random[..24]))
    }

    /// What every message of this client carries: answers come back to its
    /// queue; one for the owner of `target` names the session.
    fn envelope(&self, target: Option<&Target>) -> Envelope {
        Envelope {
            reply_to: Some(self.reply_queue.clone()),
            session: target.map(|t| t.session.clone()),
            protocol_version: target.and_then(|t| t.version.clone()),
            app_id: CLIENT_APP_ID.into(),
            ..Default::default()
        }
    }

    /// The client is leaving: tells the instance that owns its session to
    /// end it now ([`SessionStatus::Ended`], a message with no body), so
    /// that it does not wait for its idle expiry holding a place of the
    /// instance's `max_sessions`. Published after everything written
    /// before (writers publish under the same lock). Best effort: nothing
    /// to tell without a session (or once the server said it has none),
    /// nothing can be told between connections, and a program that exits
    /// as it closes may end before this is sent; then the session expires
    /// as before.
    fn goodbye(&self) {
        let out = lock(&self.outbox);
        let Some((_, channel)) = &out.publisher else {
            return;
        };
        if let Err(e) = self.tell_status(channel, SessionStatus::Ended) {
            log::debug!("amqp client: could not end the session on leaving: {e}");
        }
    }

    /// Publishes `status` (a message with no body) to the instance that
    /// owns the session, if there is one the server has not forgotten.
    /// Nobody reads a return of it: it is a sign, not a request.
    fn tell_status(&self, channel: &Channel, status: SessionStatus) -> Result<(), amiquip::Error> {
        let (target, message_id) = {
            let mut st = lock(&self.state);
            let Some(target) = st.target.clone().filter(|_| !st.forgotten) else {
                return Ok(());
            };
            (target, self.next_message(&mut st).1)
        };
        let envelope = Envelope {
            status: Some(status),
            ..self.envelope(Some(&target))
        };
        channel.basic_publish(
            "",
            Publish {
                body: &[],
                routing_key: target.queue.clone(),
                mandatory: false,
                immediate: false,
                properties: envelope.properties(&message_id),
            },
        )
    }

    /// Connection `generation` is up: publishes, in the order they were
    /// written, the requests still unanswered (`again` after a
    /// reconnection of either side) and what was written meanwhile; then
    /// writers publish on `channel` themselves.
    fn connected(&self, generation: u64, channel: Channel, again: bool) -> Result<(), Outcome> {
        let mut out = lock(&self.outbox);
        let (mut owed, target) = {
            let st = lock(&self.state);
            if again && !st.unanswered.is_empty() {
                log::info!(
                    "amqp client: publishing {} unanswered request(s) again",
                    st.unanswered.len()
                );
            }
            // (what, whether it is an unanswered request)
            let owed: Vec<(Deferred, bool)> = st
                .unanswered
                .values()
                .map(|u| {
                    let d = Deferred {
                        order: u.order,
                        message: u.message.clone(),
                        message_id: u.message_id.clone(),
                        correlation_id: None,
                    };
                    (d, true)
                })
                .collect();
            (owed, st.target.clone())
        };
        // Back after a connection of ours was lost: the session's instance
        // may have found our queue gone meanwhile (a message to it came
        // back) and would end the session after `client_gone_grace` if we
        // had nothing to publish; this tells it we are back.
        if again {
            if let Err(e) = self.tell_status(&channel, SessionStatus::Resumed) {
                drop(out);
                drop(channel);
                return Err(Outcome::Lost(format!(
                    "telling the session's instance we are back: {e}"
                )));
            }
        }
        owed.extend(out.deferred.drain(..).map(|d| (d, false)));
        owed.sort_by_key(|(o, _)| o.order);
        for (i, (o, _)) in owed.iter().enumerate() {
            let sent = serde_json::to_vec(&o.message)
                .map_err(|e| e.to_string())
                .and_then(|body| {
                    self.publish(
                        target.as_deref(),
                        &channel,
                        &o.message,
                        &body,
                        &o.message_id,
                        o.correlation_id.clone(),
                    )
                });
            if let Err(why) = sent {
                // What is not out yet waits for the next connection (the
                // requests are still unanswered, and are published then).
                let rest = owed.split_off(i).into_iter();
                out.deferred = rest
                    .filter(|(_, request)| !request)
                    .map(|(d, _)| d)
                    .collect();
                drop(out);
                drop(channel);
                return Err(Outcome::Lost(why));
            }
        }
        out.publisher = Some((generation, channel));
        Ok(())
    }

    /// The owning instance connected again and lost what its queue held:
    /// the requests still unanswered are published again on connection
    /// `generation`, in the order they were written.
    fn publish_unanswered_again(&self, generation: u64) -> Result<(), Outcome> {
        let channel = {
            let mut out = lock(&self.outbox);
            match out.publisher.take() {
                Some((g, channel)) if g == generation => channel,
                other => {
                    out.publisher = other;
                    return Ok(());
                }
            }
        };
        self.connected(generation, channel, true)
    }

    /// The connection is gone: writers keep what they write for the next.
    fn disconnected(&self) {
        let channel = lock(&self.outbox).publisher.take();
        // Closing a channel waits for the broker: not under the lock.
        drop(channel);
    }

    /// A message that could not be taken (too large, not JSON-RPC) but
    /// names one of our requests as its correlation id is that request's
    /// answer: the request fails at once with why, rather than waiting for
    /// its timeout.
    fn unusable_answer(&self, correlation_id: &str, why: &Rejection) -> Received {
        let answered = {
            let mut st = lock(&self.state);
            let id = st.request_sent_as(correlation_id);
            id.inspect(|id| {
                st.unanswered.remove(id);
            })
        };
        match answered {
            Some(id) => failed(
                &id,
                &ErrorObject::internal(format!("the server's answer was refused: {why}")),
            ),
            None => Received::Skip,
        }
    }

    /// One message from the client's queue (on the reading thread).
    fn received(&self, body: Vec<u8>, props: &amiquip::AmqpProperties) -> Received {
        let envelope = Envelope::of(props);
        match envelope.status {
            Some(SessionStatus::NotFound) => {
                let mut st = lock(&self.state);
                // Only about our session: anyone who can publish to our
                // queue could otherwise end it.
                let ours = st
                    .target
                    .as_ref()
                    .is_some_and(|t| envelope.session.as_ref() == Some(&t.session));
                if !ours {
                    log::warn!(
                        "amqp client: dropped a not-found status naming another session ({:?})",
                        envelope.session.as_deref().map(crate::jsonrpc::excerpt)
                    );
                    return Received::Skip;
                }
                log::warn!("amqp client: the server no longer knows the session; it is over");
                st.forgotten = true;
                return Received::Over;
            }
            Some(SessionStatus::Resumed) => {
                let mut st = lock(&self.state);
                let ours = st.target.as_ref().is_some_and(|t| {
                    envelope.session.as_ref() == Some(&t.session)
                        && envelope.reply_to.as_ref() == Some(&t.queue)
                });
                if ours {
                    // The owning instance's queue is back.
                    st.owner_missing_since = None;
                    let _ = self.to_link.send(Signal::Resumed);
                }
                return Received::Skip;
            }
            _ => {}
        }
        let mut parsed = match accept(
            &body,
            props.content_type().as_deref(),
            self.config.max_message_bytes,
        ) {
            Ok(p) => p,
            Err(why) => {
                log::warn!("amqp client: dropped a message from the server: {why}");
                // Only a response answers: the server sends a call's
                // progress, logs and questions with its correlation id too.
                return match envelope.correlation_id.as_deref() {
                    Some(cid) if looks_like_a_response(&body) => self.unusable_answer(cid, &why),
                    _ => Received::Skip,
                };
            }
        };
        let mut st = lock(&self.state);
        // The owning instance answers: its queue is there.
        st.owner_missing_since = None;
        st.last_heard = Some(Instant::now());
        let mut related = None;
        let correlation_id = envelope.correlation_id.as_deref();
        if let Parsed::Batch(items) = &mut parsed {
            // Each answer in it is taken as it would be alone: what is not
            // ours leaves the batch, a refusal fails the request it names.
            let mut kept = Vec::with_capacity(items.len());
            let mut foreign = 0usize;
            for item in std::mem::take(items) {
                let Ok(Message::Response(r)) = &item else {
                    kept.push(item);
                    continue;
                };
                match st.answering(r, correlation_id) {
                    Answering::Foreign => foreign += 1,
                    Answering::Refused(id) => {
                        let error = r.outcome().err().unwrap_or_else(|| {
                            ErrorObject::internal("the server answered with id null")
                        });
                        kept.push(Ok(Message::Response(jsonrpc::Response::error(id, &error))));
                    }
                    Answering::Ours(_) | Answering::Unknown => kept.push(item),
                }
            }
            *items = kept;
            if foreign > 0 {
                log::warn!(
                    "amqp client: dropped {foreign} answer(s) in a batch whose correlation id is not their request's"
                );
            }
        }
        if let Parsed::Single(m) = &parsed {
            match m {
                Message::Response(r) => {
                    let answered = match st.answering(r, correlation_id) {
                        Answering::Ours(u) => Some(u),
                        Answering::Unknown => None,
                        Answering::Foreign => {
                            log::warn!(
                                "amqp client: dropped an answer whose correlation id is not its request's (id {:?}, correlation id {:?})",
                                r.id(),
                                correlation_id.map(crate::jsonrpc::excerpt)
                            );
                            return Received::Skip;
                        }
                        // The server could not read the request (too large,
                        // say) and said so with id null: that request fails
                        // with the server's error now, not at its timeout.
                        Answering::Refused(id) => {
                            drop(st);
                            let error = r.outcome().err().unwrap_or_else(|| {
                                ErrorObject::internal("the server answered with id null")
                            });
                            return failed(&id, &error);
                        }
                    };
                    let was_initialize = answered.is_some_and(|u| {
                        u.message.get("method").and_then(Value::as_str) == Some("initialize")
                    });
                    if was_initialize {
                        if let (Some(session), Some(queue)) = (envelope.session, envelope.reply_to)
                        {
                            let version = r
                                .outcome()
                                .ok()
                                .and_then(|v| v.get("protocolVersion"))
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                                .or(envelope.protocol_version);
                            st.target = Some(Arc::new(Target {
                                session,
                                queue,
                                version,
                            }));
                            // Requests sent meanwhile now have an owner to probe.
                            st.wake_link(&self.to_link);
                        }
                    }
                }
                Message::Request(r) => {
                    if let Some(mid) = props.message_id() {
                        if st.server_requests.len() < self.config.max_backlog {
                            st.server_requests.insert(r.id().clone(), mid.clone());
                        }
                    }
                    related = envelope
                        .correlation_id
                        .and_then(|cid| st.request_sent_as(&cid));
                }
                // A request of the server's it cancelled gets no answer
                // (the spec's rule): its correlation is not needed.
                Message::Notification(n) if n.method() == "notifications/cancelled" => {
                    if let Some(id) = n
                        .params()
                        .and_then(|p| p.get("requestId"))
                        .and_then(RequestId::from_value)
                    {
                        st.server_requests.remove(&id);
                    }
                }
                Message::Notification(_) => {}
            }
        }
        Received::Message(body, parsed, related)
    }
}

/// The link thread's own state; it outlives reconnections.
struct ClientLink {
    shared: Arc<Shared>,
    to_reader: Sender<Control>,
    signals: Receiver<Signal>,
    reconnected_at: Option<Instant>,
    held: Vec<Return>,
}

impl ClientLink {
    /// A message the broker could not route. While the owning instance's
    /// queue may come back ([`RESUME_GRACE`] after our reconnection,
    /// [`OWNER_GONE_GRACE`] after it went missing) it is held and retried;
    /// otherwise the session is over (directed message) or no server is
    /// bound (exchange message).
    fn returned(&mut self, r: Return) -> Result<(), Outcome> {
        let in_grace = r.exchange.is_empty() && self.owner_may_come_back();
        if r.exchange.is_empty() && in_grace {
            self.held.push(r);
            return Ok(());
        }
        if r.exchange.is_empty() {
            log::warn!(
                "amqp client: the queue of the session's server instance is gone ({}); the session is over",
                r.reply_text
            );
            let _ = self.to_reader.send(Control::End(Ok(())));
        } else {
            let config = &self.shared.config;
            let _ = self.to_reader.send(Control::End(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!(
                    "no MCP server {:?} is bound to exchange {:?} for routing key {:?}",
                    config.server_name, r.exchange, r.routing_key
                ),
            ))));
        }
        Err(Outcome::Stop)
    }

    fn retry_held(&mut self) -> Result<(), Outcome> {
        let out = lock(&self.shared.outbox);
        let Some((_, channel)) = &out.publisher else {
            return Ok(());
        };
        let mut held = std::mem::take(&mut self.held).into_iter();
        while let Some(r) = held.next() {
            let sent = channel.basic_publish(
                r.exchange.clone(),
                Publish {
                    body: &r.content,
                    routing_key: r.routing_key.clone(),
                    mandatory: true,
                    immediate: false,
                    properties: r.properties.clone(),
                },
            );
            if let Err(e) = sent {
                // This one and the rest wait for the next connection.
                self.held = std::iter::once(r).chain(held).collect();
                return Err(Outcome::Lost(format!("publish: {e}")));
            }
        }
        Ok(())
    }

    /// What was held for the owner's queue when the connection ended goes
    /// out on the next one: requests are published again anyway (they are
    /// unanswered), and the rest (answers to the server's requests,
    /// notifications, each independent of the requests) first, in the
    /// order they were held.
    fn carry_held_over(&mut self) {
        let held = std::mem::take(&mut self.held);
        let mut out = lock(&self.shared.outbox);
        for r in held {
            if out.deferred.len() >= self.shared.config.max_backlog {
                log::warn!(
                    "amqp client: the backlog is full; a message held for the server's instance is dropped"
                );
                break;
            }
            let Ok(message) = serde_json::from_slice::<Value>(&r.content) else {
                continue;
            };
            // A request: recorded as unanswered when written (as `write`
            // tells them), published again from there.
            if message.get("method").is_some() && request_id(&message).is_some() {
                continue;
            }
            out.deferred.push(Deferred {
                order: 0,
                message,
                message_id: r.properties.message_id().clone().unwrap_or_default(),
                correlation_id: r.properties.correlation_id().clone(),
            });
        }
    }

    /// The owning instance's queue is missing: whether it may still come
    /// back (we reconnected lately, or it went missing only just now, as
    /// when the instance itself is reconnecting).
    fn owner_may_come_back(&mut self) -> bool {
        let missing = *lock(&self.shared.state)
            .owner_missing_since
            .get_or_insert_with(Instant::now);
        self.reconnected_at
            .is_some_and(|t| t.elapsed() < RESUME_GRACE)
            || missing.elapsed() < OWNER_GONE_GRACE
    }

    /// Whether requests wait and the server said nothing for
    /// [`OWNER_PROBE_INTERVAL`].
    fn owner_silent(&self) -> bool {
        let st = lock(&self.shared.state);
        !st.unanswered.is_empty()
            && st
                .last_heard
                .is_none_or(|t| t.elapsed() >= OWNER_PROBE_INTERVAL)
    }

    /// Checks, on a channel of its own (a failed passive declare closes
    /// its channel), that the owning instance's queue still exists.
    fn probe_owner(&mut self, connection: &mut amiquip::Connection) -> Result<(), Outcome> {
        let Some(queue) = lock(&self.shared.state)
            .target
            .as_ref()
            .map(|t| t.queue.clone())
        else {
            return Ok(());
        };
        let probe = connection
            .open_channel(None)
            .map_err(|e| Outcome::Lost(format!("probe channel: {e}")))?;
        match probe.queue_declare_passive(queue) {
            // The queue is exclusive to the instance's connection: the
            // broker refuses another connection's declare with
            // RESOURCE_LOCKED while it exists (and closes the channel).
            Ok(_) | Err(amiquip::Error::ServerClosedChannel { code: 405, .. }) => {
                let _ = probe.close();
                lock(&self.shared.state).owner_missing_since = None;
                Ok(())
            }
            Err(amiquip::Error::ServerClosedChannel { code: 404, .. }) => {
                if self.owner_may_come_back() {
                    return Ok(());
                }
                log::warn!(
                    "amqp client: the queue of the session's server instance is gone; the session is over"
                );
                let _ = self.to_reader.send(Control::End(Ok(())));
                Err(Outcome::Stop)
            }
            Err(e) => Err(Outcome::Lost(format!("probe: {e}"))),
        }
    }

    /// One connection: declares the client's queue, hands its consumer to
    /// the reader and a publishing channel to the writers, then watches.
    /// The caller takes the publishing channel back when it returns
    /// ([`Shared::disconnected`]).
    fn serve(
        &mut self,
        connection: &mut amiquip::Connection,
        channel: &Channel,
        generation: u64,
        stop: &Receiver<()>,
        up: &std::cell::Cell<bool>,
    ) -> Outcome {
        let config = &self.shared.config;
        let lost = |what: &str, e: amiquip::Error| Outcome::Lost(format!("{what}: {e}"));
        if let Err(e) = channel.qos(0, config.prefetch, false) {
            return lost("qos", e);
        }
        if let Err(e) = topology::declare_exchange(channel, config)
            .and_then(|()| topology::declare_private(channel, config, &self.shared.reply_queue))
        {
            return lost("declaring the reply queue", e);
        }
        let consumer = match channel.basic_consume(
            self.shared.reply_queue.clone(),
            // No acknowledgements: losing what the queue held with a
            // connection is covered by publishing unanswered requests again.
            ConsumerOptions {
                exclusive: true,
                no_ack: true,
                ..Default::default()
            },
        ) {
            Ok(c) => c,
            Err(e) => return lost("consuming the reply queue", e),
        };
        // Messages are published on a channel of their own, shared with
        // the writers (a channel is not for two threads at once).
        let publisher = match connection.open_channel(None) {
            Ok(p) => p,
            Err(e) => return lost("opening the publishing channel", e),
        };
        let returns = match publisher.listen_for_returns() {
            Ok(r) => r,
            Err(e) => return lost("returns", e),
        };
        self.carry_held_over();
        if generation > 1 {
            self.reconnected_at = Some(Instant::now());
        }
        // Closed while this connection was being set up: what is owed
        // is not published (the calls waiting for it have failed).
        if link::stopped(stop) {
            return Outcome::Stop;
        }
        let consumed = Control::Consumer(generation, consumer.receiver().clone());
        if self.to_reader.send(consumed).is_err() {
            return Outcome::Stop; // nobody reads any more
        }
        if let Err(o) = self.shared.connected(generation, publisher, generation > 1) {
            return o;
        }
        up.set(true);
        let signals = self.signals.clone();
        let mut sel = Select::new();
        let i_ret = sel.recv(&returns);
        let i_signal = sel.recv(&signals);
        let i_stop = sel.recv(stop);
        loop {
            let wait = {
                let mut st = lock(&self.shared.state);
                let wait = if !self.held.is_empty() {
                    Some(RESUME_RETRY)
                } else if !st.unanswered.is_empty() && st.target.is_some() {
                    Some(OWNER_PROBE_INTERVAL)
                } else {
                    None
                };
                st.link_untimed = wait.is_none();
                wait
            };
            let selected = match wait {
                None => Some(sel.select()),
                Some(t) => sel.select_timeout(t).ok(),
            };
            let op = match selected {
                Some(op) => op,
                None => {
                    let checked = if !self.held.is_empty() {
                        self.retry_held()
                    } else if self.owner_silent() {
                        self.probe_owner(connection)
                    } else {
                        Ok(())
                    };
                    if let Err(o) = checked {
                        return o;
                    }
                    continue;
                }
            };
            let result = match op.index() {
                i if i == i_ret => match op.recv(&returns) {
                    Ok(r) => self.returned(r),
                    Err(_) => Err(Outcome::Lost("the connection closed".into())),
                },
                i if i == i_signal => match op.recv(&signals) {
                    Ok(Signal::Lost(g, why)) if g == generation => Err(Outcome::Lost(why)),
                    Ok(Signal::Lost(..)) => Ok(()), // an earlier connection's
                    Ok(Signal::Awaiting) => Ok(()),
                    Ok(Signal::Resumed) => self.shared.publish_unanswered_again(generation),
                    Ok(Signal::Over) | Err(_) => Err(Outcome::Stop),
                },
                i if i == i_stop => {
                    let _ = op.recv(stop);
                    // The client closed: its session is over.
                    self.shared.goodbye();
                    Err(Outcome::Stop)
                }
                _ => Ok(()),
            };
            if let Err(o) = result {
                return o;
            }
        }
    }
}

/// Marks the outbox closed when the link thread ends.
struct CloseOnExit(Arc<Shared>);

impl Drop for CloseOnExit {
    fn drop(&mut self) {
        lock(&self.0.outbox).closed = true;
    }
}

struct AmqpWriter {
    shared: Arc<Shared>,
    stop: Option<Sender<()>>,
}

impl MessageWriter for AmqpWriter {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        if self.stop.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the AMQP link is closed",
            ));
        }
        self.shared.write(message)
    }
    fn close(&mut self) {
        // Dropping the stop sender stops the link thread: an intentional
        // close, after which it never reconnects.
        self.stop = None;
    }
}

/// Reads the client's queue on the calling (the client's reading) thread.
struct AmqpReader {
    shared: Arc<Shared>,
    control: Receiver<Control>,
    consumer: Option<(u64, Receiver<ConsumerMessage>)>,
    /// A newer connection's consumer, read once `consumer` is drained.
    next: Option<(u64, Receiver<ConsumerMessage>)>,
}

/// What the reader waited for (on the stack for one turn of its loop: the
/// size of a delivery is no cost here).
#[allow(clippy::large_enum_variant)]
enum Event {
    Consumed(Result<ConsumerMessage, RecvError>),
    Control(Result<Control, RecvError>),
}

impl AmqpReader {
    /// A delivery; `Some` when it is the reader's answer.
    fn delivered(&self, d: amiquip::Delivery) -> Option<Delivered> {
        match self.shared.received(d.body, &d.properties) {
            Received::Message(body, parsed, related) => Some(Ok(Some((body, parsed, related)))),
            Received::Skip => None,
            Received::Over => {
                let _ = self.shared.to_link.send(Signal::Over);
                Some(Ok(None))
            }
        }
    }
}

impl MessageReader for AmqpReader {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.next_delivery()?.map(|(body, ..)| body))
    }
    fn read_related(&mut self) -> io::Result<Option<(Vec<u8>, Option<RequestId>)>> {
        Ok(self
            .next_delivery()?
            .map(|(body, _, related)| (body, related)))
    }
    /// Each message is parsed once, when it arrives (its id is needed
    /// then): that parse is what the client gets, with the request of ours
    /// a request of the server's belongs to.
    fn read_parsed(&mut self) -> io::Result<Option<(ParsedMessage, Option<RequestId>)>> {
        Ok(self
            .next_delivery()?
            .map(|(_, parsed, related)| (Ok(parsed), related)))
    }
}

impl AmqpReader {
    /// The next message for the client, from whichever consumer is current.
    fn next_delivery(&mut self) -> Delivered {
        loop {
            // What the previous connection delivered before it ended is
            // read first, then the newer consumer.
            if let (Some(_), Some((_, old))) = (&self.next, &self.consumer) {
                match old.try_recv() {
                    Ok(ConsumerMessage::Delivery(d)) => match self.delivered(d) {
                        Some(outcome) => return outcome,
                        None => continue,
                    },
                    _ => self.consumer = self.next.take(),
                }
                continue;
            }
            let event = match &self.consumer {
                Some((_, rx)) => crossbeam_channel::select! {
                    recv(rx) -> m => Event::Consumed(m),
                    recv(self.control) -> c => Event::Control(c),
                },
                None => Event::Control(self.control.recv()),
            };
            match event {
                Event::Consumed(Ok(ConsumerMessage::Delivery(d))) => {
                    if let Some(outcome) = self.delivered(d) {
                        return outcome;
                    }
                }
                Event::Consumed(other) => {
                    // The consumer ended with its channel: the link reconnects.
                    if let Some((generation, _)) = self.consumer.take() {
                        let why = match other {
                            Ok(m) => format!("consumer ended: {m:?}"),
                            Err(_) => "consumer channel closed".to_owned(),
                        };
                        let _ = self.shared.to_link.send(Signal::Lost(generation, why));
                    }
                }
                Event::Control(Ok(Control::Consumer(generation, rx))) => {
                    if self.consumer.is_some() {
                        self.next = Some((generation, rx));
                    } else {
                        self.consumer = Some((generation, rx));
                    }
                }
                Event::Control(Ok(Control::End(outcome))) => return outcome.map(|()| None),
                // The link thread ended (the connection was closed).
                Event::Control(Err(_)) => return Ok(None),
            }
        }
    }
}

impl Shared {
    /// The state of a new client connection. The writers and the reader
    /// live as long as the client; the event callback (and what it holds)
    /// only as long as the link thread, so it is not kept here.
    fn new(config: &AmqpConfig, to_link: Sender<Signal>) -> Arc<Shared> {
        let mut quiet = config.clone();
        quiet.on_event = None;
        Arc::new(Shared {
            config: quiet,
            reply_queue: format!("mcp.client.{}", &topology::unique_suffix()[..16]),
            state: Mutex::new(State {
                target: None,
                unanswered: FastMap::default(),
                server_requests: FastMap::default(),
                next: 0,
                owner_missing_since: None,
                last_heard: None,
                link_untimed: false,
                forgotten: false,
            }),
            outbox: Mutex::new(Outbox {
                publisher: None,
                deferred: Vec::new(),
                closed: false,
            }),
            to_link,
        })
    }
}

impl Connection {
    /// An AMQP connection to the logical server `config.server_name`. The
    /// first broker connection is made here (its failure is this call's
    /// error); later failures are ridden out by reconnecting as
    /// `config.reconnect` says, and when that gives up the reader fails.
    pub fn amqp(config: &AmqpConfig) -> io::Result<Connection> {
        let first = connect::open(&config.url, config.heartbeat_secs)
            .map_err(|e| io::Error::new(io::ErrorKind::ConnectionRefused, e.to_string()))?;
        let (to_reader, control) = crossbeam_channel::unbounded();
        let (to_link, signals) = crossbeam_channel::unbounded();
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let shared = Shared::new(config, to_link);
        let mut link = ClientLink {
            shared: shared.clone(),
            to_reader,
            signals,
            reconnected_at: None,
            held: Vec::new(),
        };
        let config = config.clone();
        std::thread::Builder::new()
            .name("mcpvisor-amqp-client".into())
            .spawn(move || {
                // However the thread ends, writes fail from then on.
                let _closed = CloseOnExit(link.shared.clone());
                // One link per client connection, never restarted: its own count.
                let result = link::run(
                    &config,
                    &stop_rx,
                    &std::sync::atomic::AtomicU64::new(0),
                    Some(first),
                    |conn, channel, generation, up| {
                        let outcome = link.serve(conn, channel, generation, &stop_rx, up);
                        link.shared.disconnected();
                        outcome
                    },
                );
                if let Err(why) = result {
                    let gave_up = Err(io::Error::new(io::ErrorKind::NotConnected, why));
                    let _ = link.to_reader.send(Control::End(gave_up));
                }
            })?;
        Ok(Connection::new(
            Box::new(AmqpWriter {
                shared: shared.clone(),
                stop: Some(stop_tx),
            }),
            Box::new(AmqpReader {
                shared,
                control,
                consumer: None,
                next: None,
            }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn returned(body: Value, message_id: &str) -> Return {
        Return {
            reply_code: 312,
            reply_text: "NO_ROUTE".into(),
            exchange: String::new(),
            routing_key: "mcp.instance.gone".into(),
            content: body.to_string().into_bytes(),
            properties: amiquip::AmqpProperties::default()
                .with_message_id(message_id.into())
                .with_correlation_id("c".into()),
        }
    }

    #[test]
    fn what_was_held_for_the_owner_goes_out_on_the_next_connection_but_requests_once() {
        let config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "held").unwrap();
        let (to_link, signals) = crossbeam_channel::unbounded();
        let (to_reader, _control) = crossbeam_channel::unbounded();
        let mut link = ClientLink {
            shared: Shared::new(&config, to_link),
            to_reader,
            signals,
            reconnected_at: None,
            held: vec![
                returned(
                    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
                    "m1",
                ),
                returned(
                    json!({"jsonrpc": "2.0", "id": 7, "result": {"roots": []}}),
                    "m2",
                ),
                returned(
                    json!({"jsonrpc": "2.0", "method": "notifications/cancelled"}),
                    "m3",
                ),
            ],
        };
        link.carry_held_over();
        assert!(link.held.is_empty());
        let out = lock(&link.shared.outbox);
        let carried: Vec<_> = out
            .deferred
            .iter()
            .map(|d| (d.message_id.as_str(), d.order, d.correlation_id.as_deref()))
            .collect();
        // The request is published again as an unanswered one, not here.
        assert_eq!(carried, [("m2", 0, Some("c")), ("m3", 0, Some("c"))]);
    }

    #[test]
    fn a_request_of_the_servers_it_cancelled_leaves_no_correlation_behind() {
        let config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "cancel").unwrap();
        let (to_link, _signals) = crossbeam_channel::unbounded();
        let shared = Shared::new(&config, to_link);
        let props = |mid: &str| {
            amiquip::AmqpProperties::default()
                .with_content_type("application/json".into())
                .with_message_id(mid.into())
        };
        let ask = json!({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"});
        shared.received(ask.to_string().into_bytes(), &props("m1"));
        let id = RequestId::String("s1".into());
        assert_eq!(
            lock(&shared.state)
                .server_requests
                .get(&id)
                .map(String::as_str),
            Some("m1")
        );
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "s1"}});
        shared.received(cancel.to_string().into_bytes(), &props("m2"));
        assert!(lock(&shared.state).server_requests.is_empty());
    }

    #[test]
    fn an_answer_that_cannot_be_taken_fails_its_request_at_once() {
        let mut config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "big").unwrap();
        config.max_message_bytes = 64;
        let (to_link, _signals) = crossbeam_channel::unbounded();
        let shared = Shared::new(&config, to_link);
        let (_, message_id) = shared.next_message(&mut lock(&shared.state));
        lock(&shared.state).unanswered.insert(
            RequestId::Number(4),
            Unanswered {
                order: 1,
                message: json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call"}),
                message_id: message_id.clone(),
            },
        );
        let big = json!({"jsonrpc": "2.0", "id": 4, "result": {"text": "x".repeat(100)}});
        let props = |cid: &str| {
            amiquip::AmqpProperties::default()
                .with_content_type("application/json".into())
                .with_correlation_id(cid.into())
        };
        // Naming no request of ours: dropped, as before.
        let other = shared.received(big.to_string().into_bytes(), &props("elsewhere"));
        assert!(matches!(other, Received::Skip));
        // A progress or log message of the call's, too big: dropped; the
        // call goes on.
        let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "x".repeat(100)}});
        let skipped = shared.received(log.to_string().into_bytes(), &props(&message_id));
        assert!(matches!(skipped, Received::Skip));
        assert_eq!(lock(&shared.state).unanswered.len(), 1);
        // Naming ours: its answer is an error saying why, at once.
        let Received::Message(_, Parsed::Single(Message::Response(r)), None) =
            shared.received(big.to_string().into_bytes(), &props(&message_id))
        else {
            panic!("not an answer");
        };
        assert_eq!(r.id(), Some(&RequestId::Number(4)));
        let e = r.outcome().unwrap_err();
        assert!(
            e.message.contains("exceeds the limit of 64"),
            "{}",
            e.message
        );
        assert!(lock(&shared.state).unanswered.is_empty());
    }

    /// A client with request 4 waiting (published as the returned message
    /// id) and a session with an owner.
    fn waiting_for_4(config: &AmqpConfig) -> (Arc<Shared>, String) {
        let (to_link, _signals) = crossbeam_channel::unbounded();
        let shared = Shared::new(config, to_link);
        let (_, message_id) = shared.next_message(&mut lock(&shared.state));
        let mut st = lock(&shared.state);
        st.unanswered.insert(
            RequestId::Number(4),
            Unanswered {
                order: 1,
                message: json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call"}),
                message_id: message_id.clone(),
            },
        );
        st.target = Some(Arc::new(Target {
            session: "s1".into(),
            queue: "mcp.instance.a".into(),
            version: None,
        }));
        drop(st);
        (shared.clone(), message_id)
    }

    fn props(correlation_id: Option<&str>) -> amiquip::AmqpProperties {
        let p = amiquip::AmqpProperties::default().with_content_type("application/json".into());
        match correlation_id {
            Some(c) => p.with_correlation_id(c.into()),
            None => p,
        }
    }

    /// The single answer `shared` takes from `body` published with
    /// `correlation_id`.
    fn answer_taken(shared: &Shared, body: Vec<u8>, correlation_id: &str) -> jsonrpc::Response {
        match shared.received(body, &props(Some(correlation_id))) {
            Received::Message(_, Parsed::Single(Message::Response(r)), _) => r,
            _ => panic!("not an answer"),
        }
    }

    #[test]
    fn only_the_answer_correlated_with_a_request_answers_it() {
        let config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "forged").unwrap();
        let (shared, message_id) = waiting_for_4(&config);
        let answer = json!({"jsonrpc": "2.0", "id": 4, "result": {"forged": true}})
            .to_string()
            .into_bytes();
        // Its id names our request, but it answers another message (or
        // none): not taken, and the request still waits.
        for cid in [None, Some("someone-else-1")] {
            let r = shared.received(answer.clone(), &props(cid));
            assert!(matches!(r, Received::Skip), "{cid:?}");
            assert_eq!(lock(&shared.state).unanswered.len(), 1, "{cid:?}");
        }
        // In a batch, too: the forged answer leaves it.
        let batch = format!("[{}]", String::from_utf8_lossy(&answer)).into_bytes();
        let Received::Message(_, Parsed::Batch(items), _) =
            shared.received(batch, &props(Some("someone-else-2")))
        else {
            panic!("a batch");
        };
        assert!(items.is_empty());
        assert_eq!(lock(&shared.state).unanswered.len(), 1);
        // The real one is taken.
        let r = answer_taken(&shared, answer, &message_id);
        assert_eq!(r.id(), Some(&RequestId::Number(4)));
        assert!(lock(&shared.state).unanswered.is_empty());
    }

    #[test]
    fn an_error_with_id_null_fails_the_request_its_correlation_id_names() {
        let config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "null").unwrap();
        let (shared, message_id) = waiting_for_4(&config);
        let refusal = json!({"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "the message exceeds the size limit"}})
        .to_string()
        .into_bytes();
        // Naming no request of ours: left to the client (which drops it).
        answer_taken(&shared, refusal.clone(), "elsewhere");
        assert_eq!(lock(&shared.state).unanswered.len(), 1);
        let r = answer_taken(&shared, refusal, &message_id);
        assert_eq!(r.id(), Some(&RequestId::Number(4)));
        let e = r.outcome().unwrap_err();
        assert_eq!(e.code, -32600);
        assert!(e.message.contains("size limit"), "{}", e.message);
        assert!(lock(&shared.state).unanswered.is_empty());
        // In a batch too: the refusal becomes the failure of its request.
        let (shared, message_id) = waiting_for_4(&config);
        let batch = json!([{"jsonrpc": "2.0", "id": null,
            "error": {"code": -32600, "message": "refused"}}])
        .to_string()
        .into_bytes();
        let Received::Message(_, Parsed::Batch(items), _) =
            shared.received(batch, &props(Some(&message_id)))
        else {
            panic!("a batch");
        };
        match items.as_slice() {
            [Ok(Message::Response(r))] => assert_eq!(r.id(), Some(&RequestId::Number(4))),
            other => panic!("{other:?}"),
        }
        assert!(lock(&shared.state).unanswered.is_empty());
    }

    #[test]
    fn only_a_not_found_naming_our_session_ends_it() {
        let config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "nf").unwrap();
        let (shared, _) = waiting_for_4(&config);
        let not_found = |session: &str| {
            Envelope {
                status: Some(SessionStatus::NotFound),
                session: Some(session.into()),
                ..Default::default()
            }
            .properties("m")
        };
        assert!(matches!(
            shared.received(Vec::new(), &not_found("s2")),
            Received::Skip
        ));
        assert!(!lock(&shared.state).forgotten);
        assert!(matches!(
            shared.received(Vec::new(), &not_found("s1")),
            Received::Over
        ));
        assert!(lock(&shared.state).forgotten);
    }

    #[test]
    fn what_the_broker_would_not_take_is_never_published() {
        let mut config = AmqpConfig::new("amqp://guest:guest@127.0.0.1:5672", "big").unwrap();
        config.max_publish_bytes = 200;
        let (shared, _) = waiting_for_4(&config);
        let big = "x".repeat(300);
        // A request: its write fails, and nothing waits for its answer.
        let request = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": big}}});
        let e = shared.write(&request).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("max_publish_bytes"), "{e}");
        assert!(!lock(&shared.state)
            .unanswered
            .contains_key(&RequestId::Number(5)));
        // A notification: the same.
        let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"data": big}});
        assert!(shared.write(&note).is_err());
        // An answer to the server's request: an error in its place (kept
        // for the next connection here, as there is none).
        let answer = json!({"jsonrpc": "2.0", "id": 9, "result": {"text": big}});
        shared.write(&answer).unwrap();
        let out = lock(&shared.outbox);
        assert_eq!(out.deferred.len(), 1);
        let sent = &out.deferred[0].message;
        assert_eq!(sent["id"], 9);
        assert_eq!(sent["error"]["code"], -32603);
        assert!(sent["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("over max_publish_bytes")));
    }
}
