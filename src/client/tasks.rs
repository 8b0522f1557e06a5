//! Following tasks (the tasks extension, SEP-2663) from the client: a
//! `tools/call` the server answered with a task handle is polled with
//! `tasks/get`, its questions answered with `tasks/update`, and stopped
//! with `tasks/cancel`.

use super::{CallOptions, Client, ClientError};
use crate::jsonrpc::ErrorObject;
use crate::protocol::{CancelToken, PeerRequestHandler};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Polling interval when the server suggests none.
pub const DEFAULT_TASK_POLL: Duration = Duration::from_millis(500);
/// Polling is never faster than this, whatever the server suggests.
pub const MIN_TASK_POLL: Duration = Duration::from_millis(20);
/// Polling is never slower than this, whatever the server suggests (a
/// huge `pollIntervalMs` would otherwise put the caller to sleep for good).
pub const MAX_TASK_POLL: Duration = Duration::from_secs(30);
/// Most questions one wait answers for a task: past it the task is
/// cancelled (a server asking ever new questions would keep the caller,
/// and what it remembers of them, for good).
pub const MAX_TASK_QUESTIONS: usize = 1024;
/// The longest a task is waited for when neither the caller's limit nor
/// the task's `ttlMs` (null: kept for ever) bounds the wait: an hour, the
/// time a server of this crate keeps a task by default.
pub const MAX_TASK_WAIT: Duration = Duration::from_secs(3600);

/// How a `tools/call` was answered.
#[derive(Clone)]
pub enum ToolCall {
    /// With its result (`CallToolResult`).
    Done(Value),
    /// With a task that runs on.
    Task(TaskHandle),
}

impl ToolCall {
    /// A `tools/call` answer: a task when `resultType` says so (a task to
    /// a client that did not declare the extension is a protocol error).
    pub(crate) fn of(client: &Client, result: Value) -> Result<ToolCall, ClientError> {
        if result.get("resultType").and_then(Value::as_str) != Some("task") {
            return Ok(ToolCall::Done(result));
        }
        if !client.shared.options.tasks {
            return Err(ClientError::Protocol(
                "the server answered with a task, and this client did not declare the tasks extension".into(),
            ));
        }
        let id = result
            .get("taskId")
            .and_then(Value::as_str)
            .ok_or_else(|| ClientError::Protocol("a task result without taskId".into()))?;
        Ok(ToolCall::Task(TaskHandle {
            client: client.clone(),
            id: id.to_owned(),
            poll: poll_of(&result),
            created: result,
        }))
    }
}

fn poll_of(task: &Value) -> Duration {
    task.get("pollIntervalMs")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_TASK_POLL, Duration::from_millis)
        .clamp(MIN_TASK_POLL, MAX_TASK_POLL)
}

/// A task the server runs for a call: poll it, answer it, cancel it.
#[derive(Clone)]
pub struct TaskHandle {
    client: Client,
    id: String,
    poll: Duration,
    created: Value,
}

impl TaskHandle {
    /// The task's id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The `CreateTaskResult` that started it.
    pub fn created(&self) -> &Value {
        &self.created
    }
    /// `tasks/get`: the task as it stands (`status`, and `inputRequests`,
    /// `result` or `error` by status).
    pub fn get(&self) -> Result<Value, ClientError> {
        self.client.request("tasks/get", json!({"taskId": self.id}))
    }
    /// `tasks/update`: answers to the task's questions, by key.
    pub fn update(&self, responses: Map<String, Value>) -> Result<(), ClientError> {
        self.client
            .request(
                "tasks/update",
                json!({"taskId": self.id, "inputResponses": responses}),
            )
            .map(drop)
    }
    /// `tasks/cancel`: asks the server to stop the task.
    pub fn cancel(&self) -> Result<(), ClientError> {
        self.client
            .request("tasks/cancel", json!({"taskId": self.id}))
            .map(drop)
    }

    /// Polls until the task ends, answering its questions with the
    /// client's callbacks, and returns its result. A failed task is its
    /// error ([`ClientError::Rpc`]); a cancelled one is
    /// [`ClientError::Cancelled`]; past `timeout` (and never past the
    /// task's `ttlMs`; with neither, past [`MAX_TASK_WAIT`]) the task is
    /// cancelled and this is a [`ClientError::Protocol`] error that says
    /// so.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<Value, ClientError> {
        self.wait_with(timeout, None, None)
    }

    pub(crate) fn wait_with(
        &self,
        timeout: Option<Duration>,
        cancel: Option<&CancelToken>,
        on_request: Option<&PeerRequestHandler>,
    ) -> Result<Value, ClientError> {
        // Never past the task's time to live (and a poll): a server that
        // keeps a task working forever does not keep the caller.
        let ttl = self
            .created
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map(|ms| Duration::from_millis(ms) + self.poll * 2);
        let limit = wait_limit(timeout, ttl);
        let deadline = crate::wait::deadline_in(limit);
        let mut answered: HashSet<String> = HashSet::new();
        let mut poll = self.poll;
        loop {
            let task = self.get()?;
            let mut answered_now = false;
            if task.get("pollIntervalMs").is_some() {
                // The interval may change over the task's life.
                poll = poll_of(&task);
            }
            match task.get("status").and_then(Value::as_str) {
                Some("completed") => return Ok(task.get("result").cloned().unwrap_or(json!({}))),
                Some("failed") => {
                    let e = task.get("error").cloned().unwrap_or(Value::Null);
                    return Err(ClientError::Rpc(
                        ErrorObject::from_value(&e).unwrap_or_else(|| {
                            ErrorObject::internal(format!("task {} failed: {e}", self.id))
                        }),
                    ));
                }
                Some("cancelled") => return Err(ClientError::Cancelled),
                Some("input_required") => {
                    let responses = self.answers(&task, &mut answered, on_request);
                    if !responses.is_empty() {
                        self.update(responses)?;
                        answered_now = true;
                    }
                }
                Some("working") => {}
                other => {
                    return Err(ClientError::Protocol(format!(
                        "task {}: unknown status {other:?}",
                        self.id
                    )))
                }
            }
            let stop = |why: ClientError| {
                let _ = self.cancel();
                Err(why)
            };
            if cancel.is_some_and(CancelToken::is_cancelled) {
                return stop(ClientError::Cancelled);
            }
            if answered.len() > MAX_TASK_QUESTIONS {
                return stop(ClientError::Protocol(format!(
                    "task {} asked more than {MAX_TASK_QUESTIONS} questions; cancelled",
                    self.id
                )));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return stop(ClientError::Protocol(format!(
                    "task {} did not end within {limit:?}; cancelled",
                    self.id
                )));
            }
            let wait = poll.min(left);
            if answered_now {
                // The answers may have let it go on: look again at once.
                continue;
            }
            match cancel {
                Some(c) => {
                    let _ = c.receiver().recv_timeout(wait);
                }
                None => std::thread::sleep(wait),
            }
        }
    }

    /// Answers to the questions not answered yet (each key once: a poll
    /// that sees a question again before the server took the answer does
    /// not ask the user twice). A question the client cannot answer is
    /// declined (`{"action": "cancel"}`), which the server's check of the
    /// answer reports to its handler.
    fn answers(
        &self,
        task: &Value,
        answered: &mut HashSet<String>,
        on_request: Option<&PeerRequestHandler>,
    ) -> Map<String, Value> {
        let mut out = Map::new();
        let Some(requests) = task.get("inputRequests").and_then(Value::as_object) else {
            return out;
        };
        for (key, request) in requests {
            if !answered.insert(key.clone()) {
                continue;
            }
            let method = request.get("method").and_then(Value::as_str).unwrap_or("");
            let params = request.get("params").cloned().unwrap_or(json!({}));
            let answer = self
                .client
                .answer_input(method, params, on_request)
                .unwrap_or_else(|e| {
                    log::warn!("client: task {} asked {method}, not answered: {e}", self.id);
                    json!({"action": "cancel"})
                });
            out.insert(key.clone(), answer);
        }
        out
    }
}

impl Client {
    /// `tools/call` that hands over a task instead of waiting for it:
    /// [`ToolCall::Task`] when the server answered with one (it needs
    /// [`ClientOptions::tasks`](super::ClientOptions::tasks)), else the
    /// result.
    pub fn call_tool_as_task(&self, name: &str, arguments: Value) -> Result<ToolCall, ClientError> {
        let result = self.request_with(
            "tools/call",
            json!({"name": name, "arguments": arguments}),
            CallOptions::default(),
        )?;
        ToolCall::of(self, result)
    }

    /// The task `id`, to follow from this client: one started on another
    /// connection, or before a restart (clients should keep the ids of
    /// their tasks).
    pub fn task(&self, id: &str) -> TaskHandle {
        TaskHandle {
            client: self.clone(),
            id: id.to_owned(),
            poll: DEFAULT_TASK_POLL,
            created: json!({"taskId": id}),
        }
    }
}

/// How long a task is waited for: the caller's limit and the task's time
/// to live, whichever ends first. With neither (the server keeps the task
/// for ever, a `ttlMs` of null), [`MAX_TASK_WAIT`]: a server that keeps
/// it working for ever does not keep the caller for ever.
fn wait_limit(timeout: Option<Duration>, ttl: Option<Duration>) -> Duration {
    match (timeout, ttl) {
        (Some(t), Some(l)) => t.min(l),
        (Some(t), None) => t,
        (None, Some(l)) => l,
        (None, None) => MAX_TASK_WAIT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_wait_always_ends() {
        let (s, m) = (Duration::from_secs(1), Duration::from_secs(60));
        assert_eq!(wait_limit(Some(s), Some(m)), s);
        assert_eq!(wait_limit(Some(m), Some(s)), s);
        assert_eq!(wait_limit(None, Some(s)), s);
        assert_eq!(wait_limit(Some(m), None), m);
        assert_eq!(wait_limit(None, None), MAX_TASK_WAIT);
    }

    #[test]
    fn the_server_s_poll_interval_is_kept_within_bounds() {
        let poll = |ms: Value| poll_of(&json!({"pollIntervalMs": ms}));
        assert_eq!(poll(json!(u64::MAX)), MAX_TASK_POLL);
        assert_eq!(poll(json!(0)), MIN_TASK_POLL);
        assert_eq!(poll(json!(1500)), Duration::from_millis(1500));
        assert_eq!(poll_of(&json!({})), DEFAULT_TASK_POLL);
    }
}
