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
//!   (the server drops a copy of a request it is still running);
//! - the session is gone (its instance died, so the broker returns what is
//!   sent to its queue, or the instance says it does not know the session):
//!   the connection ends, and a client (`mcpvisor::client::Client`) with reconnection
//!   initializes again through the exchange, reaching another instance.

use crate::jsonrpc::RequestId;
use crate::transport::amqp::envelope::{accept, Envelope};
use crate::transport::amqp::link::{self, Outcome};
use crate::transport::amqp::{connect, topology, AmqpConfig};
use crate::transport::connection::{Connection, MessageReader, MessageWriter};
use amiquip::{Channel, ConsumerMessage, ConsumerOptions, Publish, Return};
use crossbeam_channel::{Receiver, Select, Sender};
use serde_json::Value;
use std::collections::HashMap;
use std::io;
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

type Incoming = io::Result<Option<Vec<u8>>>;

/// The session this connection talks to.
struct Target {
    session: String,
    queue: String,
    version: Option<String>,
}

/// A request published and not answered yet: published again after a
/// reconnection.
struct Unanswered {
    order: u64,
    message: Value,
    message_id: String,
}

/// State of the link thread; it outlives reconnections.
struct ClientLink {
    config: AmqpConfig,
    reply_queue: String,
    target: Option<Target>,
    unanswered: HashMap<RequestId, Unanswered>,
    /// Message ids of the server's requests, for the answers' correlation ids.
    server_requests: HashMap<RequestId, String>,
    incoming: Sender<Incoming>,
    next: u64,
    reconnected_at: Option<Instant>,
    // Since when the owning instance's queue has been found missing, with
    // no answer from it since.
    owner_missing_since: Option<Instant>,
    held: Vec<Return>,
}

fn request_id(message: &Value) -> Option<RequestId> {
    message.get("id").and_then(RequestId::from_value)
}

impl ClientLink {
    fn publish(&mut self, channel: &Channel, message: Value) -> Result<(), Outcome> {
        let method = message.get("method").and_then(Value::as_str);
        let id = request_id(&message);
        self.next += 1;
        let message_id = format!("{}-{}", self.reply_queue, self.next);
        let mut correlation_id = None;
        match (method, &id) {
            (Some("notifications/cancelled"), _) => {
                if let Some(id) = message
                    .pointer("/params/requestId")
                    .and_then(RequestId::from_value)
                {
                    self.unanswered.remove(&id);
                }
            }
            (Some(_), Some(id)) if self.unanswered.len() < self.config.max_backlog => {
                self.unanswered.insert(
                    id.clone(),
                    Unanswered {
                        order: self.next,
                        message: message.clone(),
                        message_id: message_id.clone(),
                    },
                );
            }
            (None, Some(id)) => correlation_id = self.server_requests.remove(id),
            _ => {}
        }
        self.send(channel, &message, &message_id, correlation_id)
    }

    fn send(
        &self,
        channel: &Channel,
        message: &Value,
        message_id: &str,
        correlation_id: Option<String>,
    ) -> Result<(), Outcome> {
        let initialize = message.get("method").and_then(Value::as_str) == Some("initialize");
        let target = self.target.as_ref().filter(|_| !initialize);
        let (exchange, routing_key) = match target {
            Some(t) => (String::new(), t.queue.clone()),
            None => (
                self.config.exchange.clone(),
                self.config.routing.routing_key(message),
            ),
        };
        let envelope = Envelope {
            correlation_id,
            reply_to: Some(self.reply_queue.clone()),
            server: target.is_none().then(|| self.config.server_name.clone()),
            session: target.map(|t| t.session.clone()),
            protocol_version: target.and_then(|t| t.version.clone()),
            app_id: "mcpvisor-client".into(),
            session_not_found: false,
        };
        let body = serde_json::to_vec(message).map_err(|e| Outcome::Lost(e.to_string()))?;
        channel
            .basic_publish(
                exchange,
                Publish {
                    body: &body,
                    routing_key,
                    mandatory: true,
                    immediate: false,
                    properties: envelope.properties(message_id),
                },
            )
            .map_err(|e| Outcome::Lost(format!("publish: {e}")))
    }

    /// Publishes again, in their original order, the requests not answered
    /// before the connection was lost.
    fn resend(&self, channel: &Channel) -> Result<(), Outcome> {
        let mut all: Vec<&Unanswered> = self.unanswered.values().collect();
        all.sort_by_key(|u| u.order);
        if !all.is_empty() {
            log::info!(
                "amqp client: publishing {} unanswered request(s) again",
                all.len()
            );
        }
        for u in all {
            self.send(channel, &u.message, &u.message_id, None)?;
        }
        Ok(())
    }

    /// One message from the client's queue. `Err` ends the connection.
    fn received(&mut self, body: Vec<u8>, props: &amiquip::AmqpProperties) -> Result<(), Outcome> {
        let envelope = Envelope::of(props);
        if envelope.session_not_found {
            log::warn!("amqp client: the server no longer knows the session; it is over");
            let _ = self.incoming.send(Ok(None));
            return Err(Outcome::Stop);
        }
        let parsed = match accept(
            &body,
            props.content_type().as_deref(),
            self.config.max_message_bytes,
        ) {
            Ok(p) => p,
            Err(why) => {
                log::warn!("amqp client: dropped a message from the server: {why}");
                return Ok(());
            }
        };
        // The owning instance answers: its queue is there.
        self.owner_missing_since = None;
        if let crate::jsonrpc::Parsed::Single(m) = &parsed {
            use crate::jsonrpc::Message;
            match m {
                Message::Response(r) => {
                    let answered = r.id().and_then(|id| self.unanswered.remove(id));
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
                            self.target = Some(Target {
                                session,
                                queue,
                                version,
                            });
                        }
                    }
                }
                Message::Request(r) => {
                    if let Some(mid) = props.message_id() {
                        if self.server_requests.len() < self.config.max_backlog {
                            self.server_requests.insert(r.id().clone(), mid.clone());
                        }
                    }
                }
                Message::Notification(_) => {}
            }
        }
        self.incoming
            .send(Ok(Some(body)))
            .map_err(|_| Outcome::Stop)
    }

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
            let _ = self.incoming.send(Ok(None));
        } else {
            let _ = self.incoming.send(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!(
                    "no MCP server {:?} is bound to exchange {:?} for routing key {:?}",
                    self.config.server_name, r.exchange, r.routing_key
                ),
            )));
        }
        Err(Outcome::Stop)
    }

    fn retry_held(&mut self, channel: &Channel) -> Result<(), Outcome> {
        for r in std::mem::take(&mut self.held) {
            channel
                .basic_publish(
                    r.exchange,
                    Publish {
                        body: &r.content,
                        routing_key: r.routing_key,
                        mandatory: true,
                        immediate: false,
                        properties: r.properties,
                    },
                )
                .map_err(|e| Outcome::Lost(format!("publish: {e}")))?;
        }
        Ok(())
    }

    /// The owning instance's queue is missing: whether it may still come
    /// back (we reconnected lately, or it went missing only just now, as
    /// when the instance itself is reconnecting).
    fn owner_may_come_back(&mut self) -> bool {
        let missing = *self.owner_missing_since.get_or_insert_with(Instant::now);
        self.reconnected_at
            .is_some_and(|t| t.elapsed() < RESUME_GRACE)
            || missing.elapsed() < OWNER_GONE_GRACE
    }

    /// Checks, on a channel of its own (a failed passive declare closes
    /// its channel), that the owning instance's queue still exists.
    fn probe_owner(&mut self, connection: &mut amiquip::Connection) -> Result<(), Outcome> {
        let Some(target) = &self.target else {
            return Ok(());
        };
        let probe = connection
            .open_channel(None)
            .map_err(|e| Outcome::Lost(format!("probe channel: {e}")))?;
        match probe.queue_declare_passive(target.queue.clone()) {
            Ok(_) => {
                let _ = probe.close();
                self.owner_missing_since = None;
                Ok(())
            }
            Err(amiquip::Error::ServerClosedChannel { code: 404, .. }) => {
                if self.owner_may_come_back() {
                    return Ok(());
                }
                log::warn!(
                    "amqp client: the queue of the session's server instance is gone; the session is over"
                );
                let _ = self.incoming.send(Ok(None));
                Err(Outcome::Stop)
            }
            Err(e) => Err(Outcome::Lost(format!("probe: {e}"))),
        }
    }

    /// One connection's message loop.
    fn serve(
        &mut self,
        connection: &mut amiquip::Connection,
        channel: &Channel,
        generation: u64,
        outgoing: &Receiver<Value>,
        stop: &Receiver<()>,
    ) -> Outcome {
        let lost = |what: &str, e: amiquip::Error| Outcome::Lost(format!("{what}: {e}"));
        if let Err(e) = channel.qos(0, self.config.prefetch, false) {
            return lost("qos", e);
        }
        if let Err(e) = topology::declare_exchange(channel, &self.config)
            .and_then(|()| topology::declare_private(channel, &self.config, &self.reply_queue))
        {
            return lost("declaring the reply queue", e);
        }
        let returns = match channel.listen_for_returns() {
            Ok(r) => r,
            Err(e) => return lost("returns", e),
        };
        let consumer = match channel.basic_consume(
            self.reply_queue.clone(),
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
        self.held.clear();
        if generation > 1 {
            self.reconnected_at = Some(Instant::now());
            if let Err(o) = self.resend(channel) {
                return o;
            }
        }
        let mut sel = Select::new();
        let i_in = sel.recv(consumer.receiver());
        let i_out = sel.recv(outgoing);
        let i_ret = sel.recv(&returns);
        let i_stop = sel.recv(stop);
        loop {
            let wait = if !self.held.is_empty() {
                Some(RESUME_RETRY)
            } else if !self.unanswered.is_empty() && self.target.is_some() {
                Some(OWNER_PROBE_INTERVAL)
            } else {
                None
            };
            // No spinning here: a client process may hold many links.
            let selected = match wait {
                None => Some(sel.select()),
                Some(t) => sel.select_timeout(t).ok(),
            };
            let op = match selected {
                Some(op) => op,
                None => {
                    let checked = if self.held.is_empty() {
                        self.probe_owner(connection)
                    } else {
                        self.retry_held(channel)
                    };
                    if let Err(o) = checked {
                        return o;
                    }
                    continue;
                }
            };
            let result = match op.index() {
                i if i == i_in => match op.recv(consumer.receiver()) {
                    Ok(ConsumerMessage::Delivery(d)) => self.received(d.body, &d.properties),
                    Ok(other) => Err(Outcome::Lost(format!("consumer ended: {other:?}"))),
                    Err(_) => Err(Outcome::Lost("consumer channel closed".into())),
                },
                i if i == i_out => match op.recv(outgoing) {
                    Ok(m) => self.publish(channel, m),
                    Err(_) => Err(Outcome::Stop),
                },
                i if i == i_ret => match op.recv(&returns) {
                    Ok(r) => self.returned(r),
                    Err(_) => Err(Outcome::Lost("the connection closed".into())),
                },
                i if i == i_stop => {
                    let _ = op.recv(stop);
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

struct AmqpWriter {
    outgoing: Option<Sender<Value>>,
    stop: Option<Sender<()>>,
}

impl MessageWriter for AmqpWriter {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        self.outgoing
            .as_ref()
            .and_then(|tx| tx.send(message.clone()).ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "the AMQP link is closed"))
    }
    fn close(&mut self) {
        // Dropping the stop sender stops the link thread: an intentional
        // close, after which it never reconnects.
        self.stop = None;
        self.outgoing = None;
    }
}

struct AmqpReader(Receiver<Incoming>);

impl MessageReader for AmqpReader {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        self.0.recv().unwrap_or(Ok(None))
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
        let (out_tx, out_rx) = crossbeam_channel::unbounded();
        let (in_tx, in_rx) = crossbeam_channel::unbounded();
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        let mut state = ClientLink {
            config: config.clone(),
            reply_queue: format!("mcp.client.{}", &topology::unique_suffix()[..16]),
            target: None,
            unanswered: HashMap::new(),
            server_requests: HashMap::new(),
            incoming: in_tx,
            next: 0,
            reconnected_at: None,
            owner_missing_since: None,
            held: Vec::new(),
        };
        std::thread::Builder::new()
            .name("mcpvisor-amqp-client".into())
            .spawn(move || {
                let config = state.config.clone();
                // One link per client connection, never restarted: its own count.
                let result = link::run(
                    &config,
                    &stop_rx,
                    &std::sync::atomic::AtomicU64::new(0),
                    Some(first),
                    |conn, channel, generation| {
                        state.serve(conn, channel, generation, &out_rx, &stop_rx)
                    },
                );
                if let Err(why) = result {
                    let _ = state
                        .incoming
                        .send(Err(io::Error::new(io::ErrorKind::NotConnected, why)));
                }
            })?;
        Ok(Connection::new(
            Box::new(AmqpWriter {
                outgoing: Some(out_tx),
                stop: Some(stop_tx),
            }),
            Box::new(AmqpReader(in_rx)),
        ))
    }
}
