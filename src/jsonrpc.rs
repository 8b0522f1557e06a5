//! JSON-RPC 2.0 wire layer: parsing, validation and error responses.
//!
//! Every rule of the JSON-RPC framing that MCP keeps is stated here once:
//! `jsonrpc` must be exactly `"2.0"` (never repaired), request ids are strings
//! or integers (never null), `method` is a string, `params` is an object, and a
//! response carries exactly one of `result` / `error` (`validate_members`,
//! whichever way a message's members were read). A parsed message keeps
//! every member it arrived with, so `_meta` and unknown members pass through
//! untouched. [`ParseError::reply`] is the one place where a parse or
//! validation failure becomes the error response sent back.

use serde_json::{Map, Value};
use std::fmt;
use std::sync::OnceLock;

mod head;
mod members;
pub(crate) use head::{read as read_head, Head};
mod reply;
use members::{Members, Version};
pub use reply::Reply;

/// The only accepted value of the `jsonrpc` member.
pub const JSONRPC_VERSION: &str = "2.0";

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist or is not available.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error.
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP: the requested resource does not exist (before 2026-07-28; since
/// then, SEP-2164, it is [`INVALID_PARAMS`] with the URI in `data`).
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// MCP 2026-07-28: HTTP headers disagree with the body, or a required one
/// is missing or malformed (HTTP 400).
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: serving the request needs a client capability the
/// request did not declare (HTTP 400); `data.requiredCapabilities` names it.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the request's protocol version is not served (HTTP
/// 400); `data` carries `supported` and `requested`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The request needs URL-mode elicitations completed first (2025-11-25,
/// `URLElicitationRequiredError`).
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// A request id: a string or an integer. `null` is not a valid request id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl RequestId {
    /// Reads an id from JSON; `None` for null, floats, and every other type.
    pub fn from_value(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) => Some(RequestId::String(s.clone())),
            Value::Number(n) => n.as_i64().map(RequestId::Number),
            _ => None,
        }
    }

    /// [`RequestId::from_value`], refusing a string longer than
    /// [`MAX_ID_BYTES`] (also the rule for a progress token, which is
    /// repeated in each progress notification as an id is in each answer).
    pub fn bounded(value: &Value) -> Option<RequestId> {
        match value {
            Value::String(s) if s.len() > MAX_ID_BYTES => None,
            other => RequestId::from_value(other),
        }
    }

    /// The id as JSON, exactly as it was received.
    pub fn to_value(&self) -> Value {
        match self {
            RequestId::Number(n) => Value::from(*n),
            RequestId::String(s) => Value::String(s.clone()),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// The member of an error's `data` that marks an error made by this side's
/// transport ([`ErrorObject::transport_failure`]).
pub const TRANSPORT_FAILURE: &str = "io.mcpvisor/transportFailure";

/// A JSON-RPC error object (`code`, `message`, optional `data`).
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// Optional structured detail.
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
    /// -32600 with a message.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }
    /// -32601 naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            format!("Method not found: {}", excerpt(method)),
        )
    }
    /// -32602 with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }
    /// -32603 with a message.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }
    /// -32603 made by this side's transport for a request that could get
    /// no answer (the HTTP request failed: a 502 from a proxy, a reset):
    /// its `data` says so ([`TRANSPORT_FAILURE`]), so that it is never
    /// taken for the peer's own answer ([`is_transport_failure`](Self::is_transport_failure)).
    pub fn transport_failure(message: impl Into<String>) -> Self {
        ErrorObject {
            data: Some(serde_json::json!({ TRANSPORT_FAILURE: true })),
            ..Self::internal(message)
        }
    }
    /// Whether this error was made by this side's transport
    /// ([`transport_failure`](Self::transport_failure)), not sent by the peer.
    pub fn is_transport_failure(&self) -> bool {
        self.code == INTERNAL_ERROR
            && self
                .data
                .as_ref()
                .and_then(|d| d.get(TRANSPORT_FAILURE))
                .is_some_and(|v| v == true)
    }
    /// -32020: an HTTP header disagrees with the body (or is missing).
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, message)
    }
    /// -32021 naming the client capability (`sampling`, `elicitation`,
    /// `roots`) the request needed but did not declare.
    pub fn missing_client_capability(capability: &str) -> Self {
        // `elicitation.url` is `{"elicitation": {"url": {}}}`.
        let required = capability
            .rsplit('.')
            .fold(Value::Object(Map::new()), |inner, key| {
                let mut m = Map::new();
                m.insert(key.to_owned(), inner);
                Value::Object(m)
            });
        Self::missing("capability", capability, required)
    }
    /// -32021 naming the client extension (`io.modelcontextprotocol/tasks`)
    /// the request needed but did not declare in `capabilities.extensions`.
    pub fn missing_client_extension(extension: &str) -> Self {
        let mut m = Map::new();
        m.insert(extension.to_owned(), Value::Object(Map::new()));
        Self::missing("extension", extension, serde_json::json!({"extensions": m}))
    }
    /// -32021 for `name`, a client `kind` (capability, extension), with
    /// `data.requiredCapabilities` shaped as `capabilities` holds it.
    fn missing(kind: &str, name: &str, required: Value) -> Self {
        Self::new(
            MISSING_CLIENT_CAPABILITY,
            format!("this request needs the client {kind} {name:?}, which it did not declare"),
        )
        .with_data(serde_json::json!({"requiredCapabilities": required}))
    }
    /// -32042 (2025-11-25, SEP-1036): the request cannot go on until the
    /// user has completed the URL-mode elicitations `elicitations` (each
    /// an `ElicitRequestURLParams`: `mode: "url"`, `message`, `url`,
    /// `elicitationId`).
    pub fn url_elicitation_required(message: impl Into<String>, elicitations: Vec<Value>) -> Self {
        Self::new(URL_ELICITATION_REQUIRED, message)
            .with_data(serde_json::json!({"elicitations": elicitations}))
    }
    /// Adds `data`.
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }
    /// The error object as JSON.
    pub fn to_value(&self) -> Value {
        // It always serializes (see its `Serialize`): string keys only.
        serde_json::to_value(self).unwrap_or_default()
    }
    pub(crate) fn from_value(v: &Value) -> Option<ErrorObject> {
        let o = v.as_object()?;
        Some(ErrorObject {
            code: o.get("code")?.as_i64()?,
            message: o.get("message")?.as_str()?.to_owned(),
            data: o.get("data").cloned(),
        })
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for ErrorObject {}

/// A request: it has an `id` and expects exactly one response.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    id: RequestId,
    call: Call,
}

impl Request {
    /// The request id, as received.
    pub fn id(&self) -> &RequestId {
        &self.id
    }
    /// The method name.
    pub fn method(&self) -> &str {
        &self.call.method
    }
    /// The `params` object, if present.
    pub fn params(&self) -> Option<&Map<String, Value>> {
        self.call.params.as_ref()
    }
    /// Consumes the request into its params.
    pub(crate) fn into_params(self) -> Option<Map<String, Value>> {
        self.call.params
    }
    /// `params._meta`, if present.
    pub fn meta(&self) -> Option<&Map<String, Value>> {
        self.params()?.get("_meta")?.as_object()
    }
    /// The whole message, every member as it arrived.
    pub fn object(&self) -> &Map<String, Value> {
        self.call.object(Some(&self.id))
    }
    /// Builds a request object (used by the server for server-to-client requests).
    pub fn new(id: RequestId, method: &str, params: Option<Value>) -> Request {
        let (params, extra) = match params {
            Some(Value::Object(p)) => (Some(p), Map::new()),
            // Not an object: kept as given, as a member of its own.
            Some(other) => (None, Map::from_iter([("params".to_owned(), other)])),
            None => (None, Map::new()),
        };
        Request {
            id,
            call: Call::new(method.to_owned(), params, extra),
        }
    }
    /// The message as JSON.
    pub fn into_value(self) -> Value {
        Value::Object(self.call.into_object(Some(self.id)))
    }
}

/// A notification: a `method` and no `id`; never answered.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    call: Call,
}

impl Notification {
    /// The method name.
    pub fn method(&self) -> &str {
        &self.call.method
    }
    /// The `params` object, if present.
    pub fn params(&self) -> Option<&Map<String, Value>> {
        self.call.params.as_ref()
    }
    /// The whole message, every member as it arrived.
    pub fn object(&self) -> &Map<String, Value> {
        self.call.object(None)
    }
}

/// What a request and a notification both carry.
#[derive(Clone)]
struct Call {
    method: String,
    params: Option<Map<String, Value>>,
    /// Members other than `jsonrpc`, `id`, `method` and an object `params`
    /// (`params` that is not an object, given to [`Request::new`], is here).
    extra: Map<String, Value>,
    /// The whole message, put together again when first asked for.
    whole: OnceLock<Map<String, Value>>,
}

impl Call {
    fn new(method: String, params: Option<Map<String, Value>>, extra: Map<String, Value>) -> Call {
        Call {
            method,
            params,
            extra,
            whole: OnceLock::new(),
        }
    }

    /// The whole message, with `id` unless it is a notification.
    fn object(&self, id: Option<&RequestId>) -> &Map<String, Value> {
        self.whole.get_or_init(|| {
            let (params, extra) = (self.params.clone(), self.extra.clone());
            assemble(id.cloned(), self.method.clone(), params, extra)
        })
    }

    fn into_object(self, id: Option<RequestId>) -> Map<String, Value> {
        assemble(id, self.method, self.params, self.extra)
    }
}

impl PartialEq for Call {
    /// Equal members; whether the whole object was put together yet does
    /// not count.
    fn eq(&self, other: &Self) -> bool {
        (&self.method, &self.params, &self.extra) == (&other.method, &other.params, &other.extra)
    }
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("method", &self.method)
            .field("params", &self.params)
            .field("extra", &self.extra)
            .finish()
    }
}

/// A request's or notification's members as one JSON object again: the
/// envelope first (`jsonrpc`, `id`, `method`, `params`), then the others.
fn assemble(
    id: Option<RequestId>,
    method: String,
    params: Option<Map<String, Value>>,
    extra: Map<String, Value>,
) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("jsonrpc".into(), JSONRPC_VERSION.into());
    if let Some(id) = id {
        object.insert("id".into(), id.to_value());
    }
    object.insert("method".into(), method.into());
    if let Some(p) = params {
        object.insert("params".into(), Value::Object(p));
    }
    object.extend(extra);
    object
}

/// A response to a request this side sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    id: Option<RequestId>,
    object: Map<String, Value>,
}

impl Response {
    /// The id it answers; `None` for an error about an unreadable request.
    pub fn id(&self) -> Option<&RequestId> {
        self.id.as_ref()
    }
    /// `Ok(result)` or `Err(error)`.
    pub fn outcome(&self) -> Result<&Value, ErrorObject> {
        match self.object.get("result") {
            Some(r) => Ok(r),
            None => Err(self
                .object
                .get("error")
                .and_then(ErrorObject::from_value)
                .unwrap_or_else(|| ErrorObject::internal("malformed error"))),
        }
    }
    /// Consumes the response into `Ok(result)` or `Err(error)`.
    pub fn into_outcome(mut self) -> Result<Value, ErrorObject> {
        match self.object.remove("result") {
            Some(r) => Ok(r),
            None => Err(self
                .outcome()
                .err()
                .unwrap_or_else(|| ErrorObject::internal("malformed error"))),
        }
    }
    /// The whole message, every member as it arrived.
    pub fn object(&self) -> &Map<String, Value> {
        &self.object
    }
    /// An error response to `id` made on this side: the answer a call
    /// gets when the peer's response to it came broken ([`ParseError::response_id`]).
    pub fn error(id: RequestId, error: &ErrorObject) -> Response {
        let mut object = Map::with_capacity(3);
        object.insert("jsonrpc".into(), JSONRPC_VERSION.into());
        object.insert("id".into(), id.to_value());
        object.insert("error".into(), error.to_value());
        Response {
            id: Some(id),
            object,
        }
    }
}

/// One parsed JSON-RPC message.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response (result or error).
    Response(Response),
}

/// What a line or body of bytes held.
#[derive(Debug)]
pub enum Parsed {
    /// A single message.
    Single(Message),
    /// A batch (JSON array, non-empty); each element validated on its own.
    Batch(Vec<Result<Message, ParseError>>),
}

impl Parsed {
    /// How many answers it is owed: one for a request; for a batch, see
    /// [`answers_owed_in`].
    pub fn answers_owed(&self) -> usize {
        match self {
            Parsed::Single(m) => usize::from(matches!(m, Message::Request(_))),
            Parsed::Batch(items) => answers_owed_in(items),
        }
    }
}

/// How many answers a batch's `items` are owed: one for each request, and
/// one for each item that is broken but answerable (a response or a
/// notification gets none).
pub fn answers_owed_in(items: &[Result<Message, ParseError>]) -> usize {
    items
        .iter()
        .filter(|item| match item {
            Ok(m) => matches!(m, Message::Request(_)),
            Err(e) => e.answerable,
        })
        .count()
}

/// Why bytes could not become a message.
#[derive(Clone, Debug, PartialEq)]
pub struct ParseError {
    /// The JSON-RPC error code to answer with.
    pub code: i64,
    /// A human-readable reason.
    pub message: String,
    /// The id, when it could be read.
    pub id: Option<RequestId>,
    /// Whether an answer is owed: false when the broken message was a
    /// notification or a response (those are never answered).
    pub answerable: bool,
}

impl ParseError {
    fn new(code: i64, message: impl Into<String>, id: Option<RequestId>) -> Self {
        ParseError {
            code,
            message: message.into(),
            id,
            answerable: true,
        }
    }

    /// A message too large for the transport's limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            INVALID_REQUEST,
            format!("message exceeds the size limit of {limit} bytes"),
            None,
        )
    }

    /// A message the server had no memory for at the moment (shared with
    /// other connections): not the sender's fault; it may send it again.
    pub fn busy() -> Self {
        Self::new(
            INTERNAL_ERROR,
            "the server is out of memory for incoming messages; send it again later",
            None,
        )
    }

    /// This error for the message whose first bytes are `head`, discarded
    /// without being read whole (too large, or no memory for it), as
    /// [`read_head`] tells what it was: a request is answered with its id;
    /// a response (the peer's answer to a call) owes no answer, and its
    /// call fails ([`ParseError::failed_response`]); a notification owes
    /// none. When `head` does not tell, the answer's id is `null`.
    pub(crate) fn about(mut self, head: &[u8]) -> Self {
        match read_head(head) {
            Some(Head::Request(id)) => self.id = Some(id),
            Some(Head::Response(id)) => {
                self.id = Some(id);
                self.answerable = false;
            }
            Some(Head::Notification) => self.answerable = false,
            None => {}
        }
        self
    }

    /// A batch sent by a client whose protocol revision has no batches.
    pub fn batch_not_supported() -> Self {
        Self::new(
            INVALID_REQUEST,
            "JSON-RPC batches are not supported by this protocol revision",
            None,
        )
    }

    /// The error response to send back, or `None` when no answer is owed.
    /// `id` is `null` when the id could not be read.
    pub fn reply<R>(&self) -> Option<Reply<R>> {
        self.answerable.then(|| {
            Reply::Error(
                self.id.clone(),
                ErrorObject::new(self.code, self.message.clone()),
            )
        })
    }

    /// [`ParseError::reply`] as a JSON value.
    pub fn response(&self) -> Option<Value> {
        self.reply::<Value>().map(Reply::into_value)
    }

    /// The id of the response this was, when it looked like one and its
    /// id could be read: the call it answers need not wait for its
    /// timeout ([`Response::error`]).
    pub fn response_id(&self) -> Option<&RequestId> {
        // Only a broken response owes no answer and has a readable id (a
        // broken notification has no id).
        self.id.as_ref().filter(|_| !self.answerable)
    }

    /// [`Response::error`] for the call a broken response answers, if its
    /// id could be read: the call fails now, saying why.
    pub fn failed_response(&self, peer: &str) -> Option<Response> {
        let id = self.response_id()?.clone();
        let why = ErrorObject::internal(format!(
            "the {peer}'s response was malformed: {}",
            self.message
        ));
        Some(Response::error(id, &why))
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ParseError {}

/// Whether `bytes` may hold a request (or a batch with one), looked at
/// before parsing: false only when the member name `"method"` or `"id"`
/// appears nowhere, which no request with its names written plainly can
/// do. A notification or a response may be taken for one (a member of
/// its params or result with that name); never the other way round.
pub(crate) fn may_be_request(bytes: &[u8]) -> bool {
    let has = |name: &[u8]| bytes.windows(name.len()).any(|w| w == name);
    has(b"\"method\"") && has(b"\"id\"")
}

/// `value` (a [`Value`], a [`Reply`]) as JSON text, serialized straight
/// into a buffer (`Value`'s `Display`, `to_string()`, writes through a
/// formatter a piece at a time and is several times slower). Both always
/// serialize: their maps have string keys.
pub(crate) fn to_text(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Longest excerpt of peer input quoted in an error message.
pub const MAX_EXCERPT: usize = 64;

/// Longest string id taken (1 KiB): every answer and cancellation repeats
/// the id, so a peer that sent megabytes of id and never read would have
/// the answers queue gigabytes. A longer one is refused as no id at all.
pub const MAX_ID_BYTES: usize = 1024;

/// Peer input as quoted in errors and logs: at most [`MAX_EXCERPT`] bytes
/// (on a character boundary) and the total size, so a huge bad member is
/// neither echoed back nor logged whole.
pub fn excerpt(value: impl fmt::Display) -> String {
    let text = value.to_string();
    if text.len() <= MAX_EXCERPT {
        return text;
    }
    let mut end = MAX_EXCERPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// Parses bytes into a message or batch, validating every framing rule.
pub fn parse(bytes: &[u8]) -> Result<Parsed, ParseError> {
    // JSON text is UTF-8 (RFC 8259, 8.1). Checked here once, as a whole,
    // the parser need not check each string again.
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ParseError::new(PARSE_ERROR, format!("Parse error: not UTF-8: {e}"), None))?;
    // One object, as nearly every message is: its members are read
    // straight from the text. Anything else (a batch, bad JSON) is parsed
    // into a value first.
    if let Some(members) = members::read(text) {
        return validate_members(members).map(Parsed::Single);
    }
    let value: Value = serde_json::from_str(text)
        .map_err(|e| ParseError::new(PARSE_ERROR, format!("Parse error: {e}"), None))?;
    match value {
        Value::Array(items) if items.is_empty() => {
            Err(ParseError::new(INVALID_REQUEST, "empty batch", None))
        }
        Value::Array(items) => Ok(Parsed::Batch(items.into_iter().map(validate).collect())),
        other => validate(other).map(Parsed::Single),
    }
}

/// Validates one JSON value as a JSON-RPC message.
pub fn validate(value: Value) -> Result<Message, ParseError> {
    match value {
        Value::Object(object) => validate_members(Members::of(object)),
        _ => Err(ParseError::new(
            INVALID_REQUEST,
            "a JSON-RPC message must be an object",
            None,
        )),
    }
}

/// What a message's members make: every rule of the framing, for messages
/// read either way ([`parse`] reads an object's members straight from its
/// text).
fn validate_members(m: Members) -> Result<Message, ParseError> {
    let Members {
        jsonrpc,
        id: raw_id,
        method,
        params,
        result,
        error,
        mut extra,
    } = m;
    // The id, when readable, goes into any error we send.
    let id_too_long = matches!(&raw_id, Some(Value::String(s)) if s.len() > MAX_ID_BYTES);
    let id = raw_id.as_ref().and_then(RequestId::bounded);
    let bad_id = |kind: &str, raw: &Value| {
        if id_too_long {
            format!("{kind} id longer than {MAX_ID_BYTES} bytes")
        } else if raw.is_u64() {
            // An integer, but beyond what ids can be here (i64).
            format!(
                "{kind} id {raw} is out of range: integer ids are taken up to {}",
                i64::MAX
            )
        } else {
            format!(
                "{kind} id must be a string or an integer, got {}",
                excerpt(raw)
            )
        }
    };
    // Responses are never answered; anything else that is broken is (with
    // `id: null` when the id cannot be read), as JSON-RPC asks.
    let looks_like_response = method.is_none() && (result.is_some() || error.is_some());
    let answerable = !looks_like_response;
    let fail = |code: i64, msg: String| ParseError {
        code,
        message: msg,
        id: id.clone(),
        answerable,
    };

    match &jsonrpc {
        Some(Version::Exact) => {}
        Some(Version::Other(other)) => {
            return Err(fail(
                INVALID_REQUEST,
                format!("jsonrpc must be \"2.0\", got {}", excerpt(other)),
            ));
        }
        None => return Err(fail(INVALID_REQUEST, "missing jsonrpc member".into())),
    }

    match method {
        Some(Value::String(method)) => {
            let params = match params {
                None => None,
                Some(Value::Object(p)) => Some(p),
                // A notification with bad params is still a notification: never answered.
                Some(_) => {
                    return Err(ParseError {
                        answerable: raw_id.is_some(),
                        ..fail(INVALID_PARAMS, "params must be an object".into())
                    })
                }
            };
            // Kept as members of their own, as anything else unknown.
            for (name, value) in [("result", result), ("error", error)] {
                if let Some(value) = value {
                    extra.insert(name.into(), value);
                }
            }
            let call = Call::new(method, params, extra);
            match (raw_id, id) {
                (None, _) => Ok(Message::Notification(Notification { call })),
                (Some(_), Some(id)) => Ok(Message::Request(Request { id, call })),
                (Some(raw), None) => Err(ParseError::new(
                    INVALID_REQUEST,
                    bad_id("request", &raw),
                    None,
                )),
            }
        }
        Some(other) => Err(fail(
            INVALID_REQUEST,
            format!("method must be a string, got {}", excerpt(&other)),
        )),
        None => {
            let (name, outcome) = match (result, error) {
                (None, None) => {
                    return Err(fail(
                        INVALID_REQUEST,
                        "message has neither method nor result/error".into(),
                    ))
                }
                (Some(_), Some(_)) => {
                    return Err(fail(
                        INVALID_REQUEST,
                        "response has both result and error".into(),
                    ))
                }
                (Some(r), None) => ("result", r),
                (None, Some(e)) => {
                    if ErrorObject::from_value(&e).is_none() {
                        return Err(fail(
                            INVALID_REQUEST,
                            "error must have an integer code and a string message".into(),
                        ));
                    }
                    ("error", e)
                }
            };
            let id = match (&raw_id, id.clone()) {
                (Some(Value::Null), _) if name == "error" => None,
                (Some(_), Some(id)) => Some(id),
                (Some(raw), None) => return Err(fail(INVALID_REQUEST, bad_id("response", raw))),
                (None, _) => return Err(fail(INVALID_REQUEST, "response has no id".into())),
            };
            // The whole message, every member as it arrived.
            let members = [
                ("jsonrpc", jsonrpc.map(Version::into_value)),
                ("id", raw_id),
                (name, Some(outcome)),
                ("params", params),
            ];
            let mut object: Map<String, Value> = members
                .into_iter()
                .filter_map(|(name, value)| Some((name.to_owned(), value?)))
                .collect();
            object.extend(extra);
            Ok(Message::Response(Response { id, object }))
        }
    }
}

/// A success response `{"jsonrpc":"2.0","id":..,"result":..}` as a JSON
/// value ([`Reply::Result`]).
pub fn result_response(id: &RequestId, result: Value) -> Value {
    Reply::Result(id.clone(), result).into_value()
}

/// An error response as a JSON value; `id: null` when `id` is `None`
/// ([`Reply::Error`]).
pub fn error_response_value(id: Option<&RequestId>, error: &ErrorObject) -> Value {
    Reply::error(id.cloned(), error.clone()).into_value()
}

/// A notification `{"jsonrpc":"2.0","method":..,"params":..}`.
pub fn notification(method: &str, params: Value) -> Value {
    let mut m = Map::with_capacity(3);
    m.insert("jsonrpc".into(), JSONRPC_VERSION.into());
    m.insert("method".into(), method.into());
    m.insert("params".into(), params);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_quote_a_bounded_excerpt_of_bad_input() {
        // #11 item 34 (repro t15): a 4 MiB member was echoed and logged whole.
        let big = "A".repeat(4 * 1024 * 1024);
        for bad in [
            serde_json::json!({"jsonrpc": big, "id": 1, "method": "ping"}),
            serde_json::json!({"jsonrpc": "2.0", "id": [big], "method": "ping"}),
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": [big]}),
        ] {
            let e = parse(bad.to_string().as_bytes()).unwrap_err();
            assert!(e.message.len() < 200, "{}", e.message.len());
            assert!(e.to_string().len() < 200);
            assert!(e.message.contains("bytes)"), "{}", e.message);
        }
        assert!(ErrorObject::method_not_found(&big).message.len() < 200);
        assert_eq!(excerpt("short"), "short");
        let multibyte = "é".repeat(100);
        assert!(excerpt(&multibyte).starts_with("éé"));
    }

    use super::*;

    #[test]
    fn a_transport_failure_is_told_from_the_peer_s_errors() {
        let made = ErrorObject::transport_failure("the HTTP request failed: 502");
        assert_eq!(made.code, INTERNAL_ERROR);
        assert!(made.is_transport_failure());
        // Through the wire and back, as the client reads it.
        let back = ErrorObject::from_value(&serde_json::to_value(&made).unwrap()).unwrap();
        assert!(back.is_transport_failure());
        assert!(!ErrorObject::internal("the peer's own").is_transport_failure());
        let other_data = ErrorObject {
            data: Some(serde_json::json!({"detail": 1})),
            ..ErrorObject::internal("x")
        };
        assert!(!other_data.is_transport_failure());
    }

    #[test]
    fn a_request_is_never_taken_for_something_else() {
        for request in [
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{ "method" : "tools/call", "params": {}, "id" : "a", "jsonrpc":"2.0" }"#,
            r#"[{"jsonrpc":"2.0","method":"x"},{"jsonrpc":"2.0","id":2,"method":"y"}]"#,
        ] {
            assert!(may_be_request(request.as_bytes()), "{request}");
        }
        for other in [
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
            "",
        ] {
            assert!(!may_be_request(other.as_bytes()), "{other}");
        }
    }
    use serde_json::json;

    #[test]
    fn a_message_discarded_unread_is_answered_by_what_its_head_shows() {
        let about = |head: &str| ParseError::too_large(8).about(head.as_bytes());
        // A request: answered with its id.
        let request = about(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"#);
        let reply = request.response().unwrap();
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["error"]["code"], INVALID_REQUEST);
        assert!(request.failed_response("client").is_none());
        // A response: no answer, its call fails.
        let response = about(r#"{"jsonrpc":"2.0","id":"s1","result":{"content":[{"#);
        assert!(response.response().is_none());
        let failed = response.failed_response("client").unwrap();
        assert_eq!(failed.id(), Some(&RequestId::String("s1".into())));
        assert!(failed.outcome().is_err());
        // A notification, whole: no answer.
        let note = about(r#"{"jsonrpc":"2.0","method":"notifications/x","params":{}}"#);
        assert!(note.response().is_none() && note.failed_response("client").is_none());
        // Nothing told: answered with id null, as before.
        let unknown = about(r#"{"jsonrpc":"2.0","params":{"#);
        assert_eq!(unknown.response().unwrap()["id"], Value::Null);
    }

    fn err(bytes: &str) -> ParseError {
        match parse(bytes.as_bytes()) {
            Err(e) => e,
            Ok(p) => panic!("expected an error for {bytes}, got {p:?}"),
        }
    }

    fn single(bytes: &str) -> Message {
        match parse(bytes.as_bytes()) {
            Ok(Parsed::Single(m)) => m,
            other => panic!("expected a message for {bytes}, got {other:?}"),
        }
    }

    #[test]
    fn an_id_past_the_limit_is_refused_and_never_echoed() {
        let long = "i".repeat(MAX_ID_BYTES + 1);
        let e = err(&json!({"jsonrpc": "2.0", "id": long, "method": "ping"}).to_string());
        assert_eq!(e.code, INVALID_REQUEST);
        let r = e.response().unwrap();
        assert_eq!(r["id"], Value::Null);
        assert!(r.to_string().len() < 200, "{r}");
        // In a batch too; at the limit it is an id.
        let batch = json!([{"jsonrpc": "2.0", "id": long, "method": "ping"}]).to_string();
        let Ok(Parsed::Batch(items)) = parse(batch.as_bytes()) else {
            panic!("a batch");
        };
        let Err(e) = &items[0] else {
            panic!("refused");
        };
        assert_eq!(e.response().unwrap()["id"], Value::Null);
        let at = "i".repeat(MAX_ID_BYTES);
        assert!(parse(
            json!({"jsonrpc": "2.0", "id": at, "method": "ping"})
                .to_string()
                .as_bytes()
        )
        .is_ok());
    }

    #[test]
    fn a_broken_response_names_the_call_it_answers() {
        let e = parse(br#"{"jsonrpc":"2.0","id":3,"result":{},"error":{"code":1,"message":"x"}}"#)
            .unwrap_err();
        assert_eq!(e.response_id(), Some(&RequestId::Number(3)));
        let failed = e.failed_response("client").unwrap();
        assert_eq!(failed.id(), Some(&RequestId::Number(3)));
        assert!(failed.outcome().unwrap_err().message.contains("malformed"));
        // A broken request is answered instead; a broken notification has no id.
        for text in [
            &br#"{"jsonrpc":"2.0","id":3,"method":7}"#[..],
            br#"{"jsonrpc":"2.0","method":"x","params":[1]}"#,
        ] {
            assert_eq!(parse(text).unwrap_err().response_id(), None);
        }
    }

    #[test]
    fn an_integer_id_beyond_i64_is_refused_as_out_of_range() {
        let e =
            parse(br#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}"#).unwrap_err();
        assert_eq!(e.code, INVALID_REQUEST);
        assert!(e.message.contains("out of range"), "{}", e.message);
    }

    #[test]
    fn invalid_json_is_parse_error_with_null_id() {
        let e = err("{not json");
        assert_eq!(e.code, PARSE_ERROR);
        let r = e.response().unwrap();
        assert_eq!(r["id"], Value::Null);
        assert_eq!(r["error"]["code"], json!(-32700));
    }

    #[test]
    fn wrong_or_missing_jsonrpc_is_rejected_not_repaired() {
        let e = err(r#"{"jsonrpc":"1.0","id":7,"method":"ping"}"#);
        assert_eq!(
            (e.code, e.id.clone()),
            (INVALID_REQUEST, Some(RequestId::Number(7)))
        );
        assert_eq!(e.response().unwrap()["id"], json!(7));
        let e = err(r#"{"id":"a","method":"ping"}"#);
        assert_eq!(
            (e.code, e.id),
            (INVALID_REQUEST, Some(RequestId::String("a".into())))
        );
        let e = err(r#"{"jsonrpc":2.0,"id":1,"method":"ping"}"#);
        assert_eq!(e.code, INVALID_REQUEST);
    }

    #[test]
    fn null_and_float_ids_are_invalid() {
        let e = err(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#);
        assert_eq!((e.code, e.id.clone()), (INVALID_REQUEST, None));
        assert_eq!(e.response().unwrap()["id"], Value::Null);
        let e = err(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#);
        assert_eq!(e.code, INVALID_REQUEST);
        let e = err(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#);
        assert_eq!(e.code, INVALID_REQUEST);
    }

    #[test]
    fn method_must_be_a_string() {
        let e = err(r#"{"jsonrpc":"2.0","id":1,"method":5}"#);
        assert_eq!(
            (e.code, e.id),
            (INVALID_REQUEST, Some(RequestId::Number(1)))
        );
    }

    #[test]
    fn params_must_be_an_object() {
        let e = err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#);
        assert_eq!(
            (e.code, e.id.clone()),
            (INVALID_PARAMS, Some(RequestId::Number(1)))
        );
        // A notification with bad params is never answered.
        let e = err(r#"{"jsonrpc":"2.0","method":"x","params":3}"#);
        assert!(e.response().is_none());
    }

    #[test]
    fn non_object_is_invalid_request() {
        let e = err("42");
        assert_eq!((e.code, e.id.clone()), (INVALID_REQUEST, None));
        assert!(e.response().is_some());
        assert_eq!(err("[]").code, INVALID_REQUEST);
    }

    #[test]
    fn responses_are_validated_and_never_answered() {
        let e = err(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#);
        assert_eq!(e.code, INVALID_REQUEST);
        assert!(e.response().is_none());
        let e = err(r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}"#);
        assert!(e.response().is_none());
        match single(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}"#) {
            Message::Response(r) => assert_eq!(r.id(), None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn neither_method_nor_result_is_invalid_request() {
        let e = err(r#"{"jsonrpc":"2.0","id":3}"#);
        assert_eq!(
            (e.code, e.id.clone()),
            (INVALID_REQUEST, Some(RequestId::Number(3)))
        );
        assert!(e.response().is_some());
    }

    #[test]
    fn messages_keep_every_member() {
        let text = r#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"_meta":{"progressToken":7},"name":"a"},"extra":true}"#;
        match single(text) {
            Message::Request(r) => {
                assert_eq!(r.id(), &RequestId::String("x-1".into()));
                assert_eq!(r.meta().unwrap()["progressToken"], json!(7));
                let back = r.into_value();
                assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn members_read_from_the_bytes_make_what_the_parsed_object_makes() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}"#,
            r#"{"method":"x","jsonrpc":"2.0","extra":[1],"id":"s\u0041"}"#,
            r#"{"\u006asonrpc":"2\u002e0","\u006dethod":"a","\u0069d":7}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775807,"result":{"a":1},"other":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":"r","error":{"code":-1,"message":"m","data":[]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","x":1,"x":2}"#,
            r#"{"jsonrpc":"1.0","jsonrpc":"2.0","method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","result":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"params":{}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":1}"#,
            r#"{"jsonrpc":"2.0","result":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            r#"{"jsonrpc":"2.0","method":"a","params":[]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a","params":null}"#,
            r#"{"jsonrpc":"2.00","method":"a"}"#,
            r#"{"jsonrpc":2.0,"method":"a"}"#,
            r#"{"jsonrpc":2,"id":1,"method":"a"}"#,
            r#"{"jsonrpc":-2,"method":"a"}"#,
            r#"{"jsonrpc":18446744073709551616,"method":"a"}"#,
            r#"{"jsonrpc":2e0,"id":1,"method":"a"}"#,
            r#"{"jsonrpc":-0,"id":1,"method":"a"}"#,
            r#"{"jsonrpc":null,"id":"x","method":"a"}"#,
            r#"{"jsonrpc":true,"method":"a"}"#,
            r#"{"jsonrpc":["2.0"],"id":1,"method":"a"}"#,
            r#"{"jsonrpc":{"version":"2.0"},"id":1,"method":"a"}"#,
            r#"{"jsonrpc":"2.0 ","method":"a"}"#,
            r#"{"jsonrpc":"2.0","method":7}"#,
            r#"{"id":1,"method":"a"}"#,
            r#"{"jsonrpc":"2.0"}"#,
            "{}",
        ] {
            // Read the short way indeed (not given up on, then read the long way).
            assert!(members::read(text).is_some(), "{text}");
            let long = validate(serde_json::from_str(text).unwrap());
            match (parse(text.as_bytes()), long) {
                (Ok(Parsed::Single(short)), Ok(long)) => assert_eq!(short, long, "{text}"),
                (Err(short), Err(long)) => assert_eq!(short, long, "{text}"),
                (short, long) => panic!("{text}: {short:?} against {long:?}"),
            }
        }
        // A member given twice counts with its last value, as in an object.
        let twice = r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#;
        assert!(matches!(single(twice), Message::Request(r) if r.method() == "b"));
        let escaped = r#"{"\u006asonrpc":"2\u002e0","\u006dethod":"a","\u0069d":7}"#;
        assert!(matches!(single(escaped), Message::Request(r) if r.id() == &RequestId::Number(7)));
    }

    #[test]
    fn invalid_utf8_is_parse_error() {
        // Inside a string, outside one, and cut in the middle of a character.
        for bytes in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xff\"}"[..],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\xc3",
            b"\xef\xbb",
        ] {
            let e = parse(bytes).unwrap_err();
            assert_eq!((e.code, e.id, e.answerable), (PARSE_ERROR, None, true));
            assert!(e.message.contains("not UTF-8"), "{}", e.message);
        }
        // Characters beyond ASCII are read as they are.
        let m = single(r#"{"jsonrpc":"2.0","id":"é","method":"ü→"}"#);
        assert!(matches!(m, Message::Request(r) if r.method() == "ü→"));
    }

    #[test]
    fn batches_are_split_and_each_element_validated() {
        match parse(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"1.0","method":"x"}]"#)
        {
            Ok(Parsed::Batch(items)) => {
                assert!(items[0].is_ok());
                assert_eq!(items[1].as_ref().unwrap_err().code, INVALID_REQUEST);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn response_builders() {
        let id = RequestId::Number(4);
        assert_eq!(
            result_response(&id, json!({})),
            json!({"jsonrpc":"2.0","id":4,"result":{}})
        );
        assert_eq!(
            error_response_value(None, &ErrorObject::method_not_found("nope")),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found: nope"}})
        );
    }
}
