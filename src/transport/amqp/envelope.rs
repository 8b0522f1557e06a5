//! What travels with a message on AMQP: the body is the raw JSON-RPC
//! message and nothing else; transport data lives in AMQP properties and
//! headers. Incoming deliveries are checked here once (size, content type,
//! JSON-RPC validity) and the reason for a rejection is a value.

use crate::jsonrpc::{self, ParseError, Parsed};
use crate::transport::lines::KEPT_HEAD;
use amiquip::{AmqpProperties, AmqpValue, FieldTable};
use serde_json::Value;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// The only content type sent and accepted.
pub const CONTENT_TYPE: &str = "application/json";
/// Header carrying the MCP session id.
pub const SESSION_HEADER: &str = "mcp-session-id";
/// Header naming the logical server a new session is for.
pub const SERVER_HEADER: &str = "mcp-server";
/// Header carrying the MCP protocol revision.
pub const PROTOCOL_VERSION_HEADER: &str = "mcp-protocol-version";
/// Header telling the receiver what became of a session: see
/// [`SessionStatus`].
pub const SESSION_STATUS_HEADER: &str = "mcp-session-status";
/// JSON-RPC error code of the answer to a request for an unknown session.
pub const SESSION_NOT_FOUND_CODE: i64 = -32001;
/// Value of [`SESSION_STATUS_HEADER`] for an unknown session.
pub const SESSION_NOT_FOUND: &str = "not-found";
/// Value of [`SESSION_STATUS_HEADER`] for a session its client ended.
pub const SESSION_ENDED: &str = "ended";
/// Value of [`SESSION_STATUS_HEADER`] for a session whose instance
/// reconnected to the broker.
pub const SESSION_RESUMED: &str = "resumed";

/// What [`SESSION_STATUS_HEADER`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionStatus {
    /// From a server, on the -32001 error: the message named a session the
    /// instance does not have (it expired); the client must initialize
    /// again, as after an HTTP 404.
    NotFound,
    /// From a client, on a message with no body sent to the session's
    /// instance as it leaves: end the session now (the AMQP form of an HTTP
    /// `DELETE`), not at its idle expiry.
    Ended,
    /// From a server, on a message with no body sent to each of its
    /// sessions' clients after its connection to the broker was made
    /// again: its queue was declared anew, and what the old one held (or
    /// was delivering) is gone, so the client publishes again the requests
    /// it has had no answer to (the server drops a copy of one it is still
    /// running). From a client, the same sent to its session's instance
    /// after its own connection was made again: its queue is back, so the
    /// session lives on, whatever the broker returned to the instance in
    /// between.
    Resumed,
}

impl SessionStatus {
    /// The header's value.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionStatus::NotFound => SESSION_NOT_FOUND,
            SessionStatus::Ended => SESSION_ENDED,
            SessionStatus::Resumed => SESSION_RESUMED,
        }
    }

    /// The status a header value names; `None` for any other value.
    pub fn parse(value: &str) -> Option<SessionStatus> {
        [
            SessionStatus::NotFound,
            SessionStatus::Ended,
            SessionStatus::Resumed,
        ]
        .into_iter()
        .find(|s| s.as_str() == value)
    }
}

/// Transport data of one outgoing message.
#[derive(Clone, Debug, Default)]
pub struct Envelope {
    /// Ties a reply to its request (the request's message id).
    pub correlation_id: Option<String>,
    /// Where replies go (the sender's reply queue).
    pub reply_to: Option<String>,
    /// The logical server addressed (messages published to the exchange).
    pub server: Option<String>,
    /// The MCP session.
    pub session: Option<String>,
    /// The negotiated protocol revision.
    pub protocol_version: Option<String>,
    /// The sending application.
    pub app_id: String,
    /// What became of the named session (see [`SESSION_STATUS_HEADER`]).
    pub status: Option<SessionStatus>,
}

impl Envelope {
    /// AMQP properties for a message with `message_id`.
    pub fn properties(&self, message_id: &str) -> AmqpProperties {
        let mut headers = FieldTable::new();
        if let Some(s) = &self.server {
            headers.insert(SERVER_HEADER.into(), AmqpValue::LongString(s.clone()));
        }
        if let Some(s) = &self.session {
            headers.insert(SESSION_HEADER.into(), AmqpValue::LongString(s.clone()));
        }
        if let Some(v) = &self.protocol_version {
            headers.insert(
                PROTOCOL_VERSION_HEADER.into(),
                AmqpValue::LongString(v.clone()),
            );
        }
        if let Some(s) = self.status {
            headers.insert(
                SESSION_STATUS_HEADER.into(),
                AmqpValue::LongString(s.as_str().into()),
            );
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut p = AmqpProperties::default()
            .with_content_type(CONTENT_TYPE.into())
            .with_message_id(message_id.into())
            .with_timestamp(now)
            .with_app_id(self.app_id.clone())
            .with_headers(headers);
        if let Some(c) = &self.correlation_id {
            p = p.with_correlation_id(c.clone());
        }
        if let Some(r) = &self.reply_to {
            p = p.with_reply_to(r.clone());
        }
        p
    }

    /// Reads the envelope of a delivery.
    pub fn of(props: &AmqpProperties) -> Envelope {
        let header = |name: &str| match props.headers().as_ref().and_then(|h| h.get(name)) {
            Some(AmqpValue::LongString(s)) => Some(s.clone()),
            _ => None,
        };
        Envelope {
            correlation_id: props.correlation_id().clone(),
            reply_to: props.reply_to().clone(),
            server: header(SERVER_HEADER),
            session: header(SESSION_HEADER),
            protocol_version: header(PROTOCOL_VERSION_HEADER),
            app_id: props.app_id().clone().unwrap_or_default(),
            status: header(SESSION_STATUS_HEADER).and_then(|v| SessionStatus::parse(&v)),
        }
    }
}

/// Why a delivery is rejected (without requeue, to the dead-letter exchange).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// The body exceeds the size limit.
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
        /// The error for it, as its first bytes show what it was
        /// (`ParseError::about`, on as many as a line transport keeps of
        /// a line too long): a request is answered with its id; a response
        /// is not answered, and the call it answers fails.
        error: ParseError,
    },
    /// A content type other than `application/json`.
    ContentType(String),
    /// Not JSON, or not valid JSON-RPC.
    Invalid(ParseError),
    /// A session status from a client ([`SessionStatus::Ended`],
    /// [`SessionStatus::Resumed`]) that cannot be taken, and why.
    Status(&'static str),
}

impl Rejection {
    /// The JSON-RPC error of a message too large or invalid: when it was a
    /// response, [`ParseError::failed_response`] fails the call it answers.
    pub fn parse_error(&self) -> Option<&ParseError> {
        match self {
            Rejection::TooLarge { error, .. } | Rejection::Invalid(error) => Some(error),
            Rejection::ContentType(_) | Rejection::Status(_) => None,
        }
    }

    /// The error response for the sender, when one is owed and a reply address exists.
    pub fn reply(&self) -> Option<Value> {
        match self {
            Rejection::TooLarge { error, .. } => error.response(),
            Rejection::ContentType(ct) => Some(jsonrpc::error_response_value(
                None,
                &jsonrpc::ErrorObject::invalid_request(format!(
                    "content type must be {CONTENT_TYPE}, got {ct:?}"
                )),
            )),
            Rejection::Invalid(e) => e.response(),
            // It has no id to answer, and its reply queue may not be the
            // session's client's.
            Rejection::Status(_) => None,
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::TooLarge { size, limit, .. } => {
                write!(f, "message of {size} bytes exceeds the limit of {limit}")
            }
            Rejection::ContentType(ct) => write!(f, "content type {ct:?} is not {CONTENT_TYPE}"),
            Rejection::Invalid(e) => write!(f, "invalid JSON-RPC: {e}"),
            Rejection::Status(why) => write!(f, "a session status refused: {why}"),
        }
    }
}

/// Checks one incoming delivery: size first (before parsing), then content
/// type (absent is tolerated), then JSON-RPC validity — never repaired.
pub fn accept(body: &[u8], content_type: Option<&str>, limit: usize) -> Result<Parsed, Rejection> {
    if body.len() > limit {
        let head = &body[..body.len().min(KEPT_HEAD)];
        return Err(Rejection::TooLarge {
            size: body.len(),
            limit,
            error: ParseError::too_large(limit).about(head),
        });
    }
    if let Some(ct) = content_type {
        if !ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case(CONTENT_TYPE)
        {
            return Err(Rejection::ContentType(ct.to_owned()));
        }
    }
    jsonrpc::parse(body).map_err(Rejection::Invalid)
}

/// Checks a session status from a client ([`SessionStatus::Ended`],
/// [`SessionStatus::Resumed`]): it names the session, says which queue it
/// comes from (the receiver takes it only when that is the session's
/// pinned reply queue) and has no body.
/// Returns (session id, reply queue).
pub fn accept_status<'a>(
    envelope: &'a Envelope,
    body: &[u8],
) -> Result<(&'a str, &'a str), Rejection> {
    let named = |v: &'a Option<String>| v.as_deref().filter(|s| !s.is_empty());
    let Some(session) = named(&envelope.session) else {
        return Err(Rejection::Status("it names no session"));
    };
    let Some(reply_to) = named(&envelope.reply_to) else {
        return Err(Rejection::Status("it has no reply queue"));
    };
    if !body.is_empty() {
        return Err(Rejection::Status("it carries a body"));
    }
    Ok((session, reply_to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_carry_the_transport_data() {
        let env = Envelope {
            correlation_id: Some("c-1".into()),
            reply_to: Some("amq.gen-reply".into()),
            server: Some("files".into()),
            session: Some("abc".into()),
            protocol_version: Some("2025-11-25".into()),
            app_id: "mcpvisor".into(),
            status: Some(SessionStatus::NotFound),
        };
        let p = env.properties("m-1");
        assert_eq!(p.content_type().as_deref(), Some(CONTENT_TYPE));
        assert_eq!(p.message_id().as_deref(), Some("m-1"));
        assert!(p.timestamp().is_some_and(|t| t > 0));
        let back = Envelope::of(&p);
        assert_eq!(
            (
                back.correlation_id.as_deref(),
                back.reply_to.as_deref(),
                back.session.as_deref(),
                back.protocol_version.as_deref(),
                back.app_id.as_str()
            ),
            (
                Some("c-1"),
                Some("amq.gen-reply"),
                Some("abc"),
                Some("2025-11-25"),
                "mcpvisor"
            )
        );
        assert_eq!(back.status, Some(SessionStatus::NotFound));
        assert_eq!(back.server.as_deref(), Some("files"));
    }

    #[test]
    fn a_session_status_travels_as_its_header_value() {
        for status in [
            SessionStatus::NotFound,
            SessionStatus::Ended,
            SessionStatus::Resumed,
        ] {
            let env = Envelope {
                status: Some(status),
                ..Default::default()
            };
            let p = env.properties("m-1");
            let value = p
                .headers()
                .as_ref()
                .and_then(|h| h.get(SESSION_STATUS_HEADER));
            assert_eq!(value, Some(&AmqpValue::LongString(status.as_str().into())));
            assert_eq!(Envelope::of(&p).status, Some(status));
        }
        assert_eq!(
            SessionStatus::parse(SESSION_ENDED),
            Some(SessionStatus::Ended)
        );
        // Another value, or none, is no status (the message is an ordinary one).
        assert_eq!(SessionStatus::parse("closed"), None);
        assert_eq!(
            Envelope::of(&Envelope::default().properties("m")).status,
            None
        );
    }

    #[test]
    fn an_end_of_session_names_its_session_and_queue_and_has_no_body() {
        let end = Envelope {
            session: Some("s-1".into()),
            reply_to: Some("mcp.client.1".into()),
            status: Some(SessionStatus::Ended),
            ..Default::default()
        };
        assert_eq!(accept_status(&end, b""), Ok(("s-1", "mcp.client.1")));
        assert_eq!(
            accept_status(&end, b"{}"),
            Err(Rejection::Status("it carries a body"))
        );
        for (session, reply_to, why) in [
            (None, Some("q"), "it names no session"),
            (Some(""), Some("q"), "it names no session"),
            (Some("s-1"), None, "it has no reply queue"),
            (Some("s-1"), Some(""), "it has no reply queue"),
        ] {
            let env = Envelope {
                session: session.map(str::to_owned),
                reply_to: reply_to.map(str::to_owned),
                ..end.clone()
            };
            assert_eq!(accept_status(&env, b""), Err(Rejection::Status(why)));
            assert_eq!(Rejection::Status(why).reply(), None, "never answered");
        }
    }

    #[test]
    fn a_delivery_too_large_is_answered_as_its_first_bytes_show() {
        let too_large = |body: &str| match accept(body.as_bytes(), None, 16) {
            Err(r @ Rejection::TooLarge { .. }) => r,
            other => panic!("{other:?}"),
        };
        // A request: answered with its id.
        let request = too_large(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{}}"#);
        let reply = request.reply().unwrap();
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["error"]["code"], -32600);
        // A response (the client's answer to a call of ours): not
        // answered, and the call fails.
        let response = too_large(r#"{"jsonrpc":"2.0","id":"s1","result":{"content":[]}}"#);
        assert_eq!(response.reply(), None);
        let failed = response
            .parse_error()
            .and_then(|e| e.failed_response("client"))
            .expect("the call it answers fails");
        assert_eq!(failed.id(), Some(&jsonrpc::RequestId::String("s1".into())));
        // Only the first bytes a line transport keeps are looked at: an id
        // beyond them is not read, and the answer's id is null.
        let padded = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{{"pad":"{}"}},"id":7}}"#,
            "p".repeat(KEPT_HEAD)
        );
        assert_eq!(too_large(&padded).reply().unwrap()["id"], Value::Null);
    }

    #[test]
    fn deliveries_are_checked_never_repaired() {
        let ok = br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(accept(ok, Some("application/json"), 1024).is_ok());
        assert!(accept(ok, None, 1024).is_ok());
        assert_eq!(
            accept(ok, Some("text/plain"), 1024).unwrap_err(),
            Rejection::ContentType("text/plain".into())
        );
        assert!(matches!(
            accept(ok, None, 10).unwrap_err(),
            Rejection::TooLarge { size, limit: 10, .. } if size == ok.len()
        ));
        let missing = br#"{"id":1,"method":"ping"}"#;
        match accept(missing, None, 1024) {
            Err(r @ Rejection::Invalid(_)) => {
                assert_eq!(r.reply().unwrap()["error"]["code"], -32600)
            }
            other => panic!("{other:?}"),
        }
        match accept(b"not json", None, 1024) {
            Err(r) => assert_eq!(r.reply().unwrap()["error"]["code"], -32700),
            other => panic!("{other:?}"),
        }
    }
}
