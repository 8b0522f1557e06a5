//! Tools: definition, result and error types.

use crate::jsonrpc::ErrorObject;
pub use crate::model::ToolResult;
use crate::model::{decoration_builders, insert_opt, Decorations};
use crate::protocol::tasks::TaskSupport;
use crate::protocol::Context;
use serde_json::{Map, Value};
use std::fmt;

/// The closure behind a tool: arguments in, result out. It runs on a pool
/// thread and may block; it should check `ctx.is_cancelled()` if it is long.
pub type ToolHandler =
    dyn Fn(Map<String, Value>, &Context) -> Result<ToolResult, ToolError> + Send + Sync;

/// A tool definition with its handler.
pub struct Tool {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) input_schema: Value,
    pub(crate) output_schema: Option<Value>,
    pub(crate) annotations: Option<Value>,
    pub(crate) decorations: Decorations,
    pub(crate) task_support: TaskSupport,
    pub(crate) detach_in_handler: bool,
    pub(crate) quick: bool,
    pub(crate) handler: Box<ToolHandler>,
}

impl Tool {
    /// A tool named `name` whose arguments must satisfy `input_schema` (a JSON
    /// Schema object, 2020-12 unless it says otherwise via `$schema`).
    pub fn new<F>(name: impl Into<String>, input_schema: Value, handler: F) -> Tool
    where
        F: Fn(Map<String, Value>, &Context) -> Result<ToolResult, ToolError>
            + Send
            + Sync
            + 'static,
    {
        Tool {
            name: name.into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            annotations: None,
            decorations: Decorations::default(),
            task_support: TaskSupport::Forbidden,
            detach_in_handler: false,
            quick: false,
            handler: Box::new(handler),
        }
    }
    /// A human-readable title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// A description for the model.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
    decoration_builders!(decorations);
    /// A schema that `structuredContent` of every successful result must
    /// satisfy; an object schema (`"type": "object"`), as the spec asks
    /// (checked at build).
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }
    /// Tool annotations (`readOnlyHint`, `destructiveHint`, ...), as JSON.
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.annotations = Some(annotations);
        self
    }
    /// Whether its calls may run as tasks (default
    /// [`TaskSupport::Forbidden`]): for a client that declared the tasks
    /// extension, a call is answered at once with a task handle and the
    /// handler runs on, on a thread of its own. See [`crate::protocol::tasks`].
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }
    /// The handler starts as a plain call and makes it a task itself with
    /// [`Context::detach`] (say, once it has asked the client what it
    /// needs); a call that never detaches is answered as a plain call.
    pub fn detach_in_handler(mut self) -> Self {
        self.detach_in_handler = true;
        self
    }
    /// The handler returns within microseconds and never waits: its calls
    /// run on the thread that read the request (the connection's reader),
    /// with no hand-off to the handler pool and back. Everything else about
    /// a call stays as it is (argument and result checks, progress, logs,
    /// tasks, a panic answered with -32603).
    ///
    /// The price: while it runs, nothing else on its connection is read (on
    /// AMQP, nothing on its instance: one thread serves all its sessions),
    /// so a quick handler that takes long holds up every request behind
    /// it, and on stdio, TCP and AMQP its own cancellation is read only
    /// after it returned. It cannot wait for an answer: asking its client
    /// (sampling, elicitation, roots, [`Context::peer_request`], a
    /// [`SessionHandle`](crate::protocol::SessionHandle)'s requests) or
    /// another server through a `client::Client` fails at
    /// once with an error, as the answer may have to come through the
    /// thread it runs on. It cannot make its own call a task
    /// ([`Context::detach`] returns `false`; with
    /// [`Tool::detach_in_handler`] too, `build()` fails); a client may
    /// still ask for a task when its [`TaskSupport`] allows, which then
    /// runs on a task thread of its own, not on the reading thread. Over HTTP its progress and log messages wait until it
    /// returns (the thread that would write them runs it), so a quick
    /// handler should send few: a stream whose queue (1,024 messages) fills
    /// before its connection writes is detached and must be resumed.
    /// Default: not quick.
    pub fn quick(mut self) -> Self {
        self.quick = true;
        self
    }
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The definition as `tools/list` shows it.
    pub(crate) fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), self.name.as_str().into());
        insert_opt(&mut m, "title", &self.title);
        insert_opt(&mut m, "description", &self.description);
        m.insert("inputSchema".into(), self.input_schema.clone());
        if let Some(s) = &self.output_schema {
            m.insert("outputSchema".into(), s.clone());
        }
        if let Some(a) = &self.annotations {
            m.insert("annotations".into(), a.clone());
        }
        self.decorations.fill(&mut m);
        Value::Object(m)
    }
}

/// Why a handler failed. Any `std::error::Error` converts into it with `?`.
///
/// From a tool, a plain error becomes a result with `isError: true` (the
/// model sees it); [`ToolError::rpc`] becomes a JSON-RPC error instead. From a
/// resource, prompt or completion handler, a plain error becomes -32603.
#[derive(Debug)]
pub struct ToolError(pub(crate) ErrorKind);

#[derive(Debug)]
pub(crate) enum ErrorKind {
    Failed(String),
    Rpc(ErrorObject),
}

impl ToolError {
    /// A failure with a message.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(ErrorKind::Failed(message.into()))
    }
    /// A protocol-level error sent as a JSON-RPC error response.
    pub fn rpc(error: ErrorObject) -> Self {
        ToolError(ErrorKind::Rpc(error))
    }
    /// As a JSON-RPC error (plain failures become -32603).
    pub(crate) fn into_rpc(self) -> ErrorObject {
        match self.0 {
            ErrorKind::Failed(m) => ErrorObject::internal(m),
            ErrorKind::Rpc(e) => e,
        }
    }
}

impl<E: std::error::Error> From<E> for ToolError {
    fn from(e: E) -> Self {
        ToolError::new(e.to_string())
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            ErrorKind::Failed(m) => f.write_str(m),
            ErrorKind::Rpc(e) => e.fmt(f),
        }
    }
}
