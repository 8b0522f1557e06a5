//! Where outgoing messages go: the seam between the engine and a transport.

use crate::jsonrpc::RequestId;
use serde_json::Value;

/// One outgoing message, labelled with what the transport needs to route it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    /// The response to a request (`id: None` for an error about an unreadable one).
    Response {
        /// The id answered.
        id: Option<RequestId>,
        /// The whole JSON-RPC response.
        message: Value,
    },
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
    /// The JSON to write, if any.
    pub fn message(&self) -> Option<&Value> {
        match self {
            Outgoing::Response { message, .. } => Some(message),
            Outgoing::Notification(m) | Outgoing::Request(m) => Some(m),
            Outgoing::Suppressed { .. } | Outgoing::Reconnect { .. } => None,
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
