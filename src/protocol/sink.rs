//! Where outgoing messages go: the seam between the engine and a transport.

use crate::jsonrpc::{self, Reply, RequestId};
use crate::model::Answer;
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;

/// One outgoing message, labelled with what the transport needs to route it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// The response to a request, to a batch, or about an unreadable
    /// request.
    Response(Reply<Answer>),
    /// A request ended without a response (it was cancelled). Nothing is
    /// written; streams that wait for the request's end can close.
    Suppressed {
        /// The cancelled request's id.
        id: RequestId,
    },
    /// A notification (progress, log message, list changed, ...).
    Notification(Value),
    /// A server-to-client request (sampling, elicitation, roots, ping).
    Request(Value),
    /// Close the request's stream now and let the client resume it after
    /// `retry` (SSE polling). Transports without resumable streams ignore it.
    Reconnect {
        /// How long the client should wait before it reconnects.
        retry: std::time::Duration,
    },
}

impl Outgoing {
    /// The message as JSON, if there is one to write. A response is put
    /// together as a value here; to write one, [`Outgoing::write_json`]
    /// and [`Outgoing::to_text`] serialize it straight from its parts.
    pub fn message(&self) -> Option<Cow<'_, Value>> {
        self.written().map(|m| match m {
            Written::Reply(reply) => Cow::Owned(reply.to_value()),
            Written::Value(value) => Cow::Borrowed(value),
        })
    }

    /// Whether there is a message to write (not for a suppressed response
    /// or a reconnection).
    pub fn has_message(&self) -> bool {
        self.written().is_some()
    }

    /// Appends the message's JSON text to `out`; false when there is no
    /// message to write.
    pub fn write_json(&self, out: &mut Vec<u8>) -> bool {
        // It always serializes: every map in it has string keys.
        self.written()
            .is_some_and(|m| serde_json::to_writer(out, &m).is_ok())
    }

    /// The message's JSON text, if there is one to write.
    pub fn to_text(&self) -> Option<String> {
        self.written().map(|m| jsonrpc::to_text(&m))
    }

    fn written(&self) -> Option<Written<'_>> {
        match self {
            Outgoing::Response(reply) => Some(Written::Reply(reply)),
            Outgoing::Notification(m) | Outgoing::Request(m) => Some(Written::Value(m)),
            Outgoing::Suppressed { .. } | Outgoing::Reconnect { .. } => None,
        }
    }
}

/// What of an [`Outgoing`] is written.
enum Written<'a> {
    Reply(&'a Reply<Answer>),
    Value(&'a Value),
}

impl Serialize for Written<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Written::Reply(r) => r.serialize(s),
            Written::Value(v) => v.serialize(s),
        }
    }
}

/// A destination for outgoing messages: a stdio writer, a TCP connection, an
/// HTTP response stream, an AMQP reply queue. `send` must not block for long;
/// a sink whose peer is gone drops messages.
pub trait Sink: Send + Sync {
    /// Delivers one message.
    fn send(&self, out: Outgoing);
}

impl<F: Fn(Outgoing) + Send + Sync> Sink for F {
    fn send(&self, out: Outgoing) {
        self(out)
    }
}
