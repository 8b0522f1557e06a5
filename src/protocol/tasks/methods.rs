//! `tasks/get`, `tasks/update` and `tasks/cancel`: answered on the
//! transport's thread (they run no user code and never block).

use super::{Task, TASKS_EXTENSION};
use crate::jsonrpc::{ErrorObject, Request};
use crate::protocol::dispatch::{params, required_str};
use crate::protocol::session::Session;
use crate::protocol::stateless::Envelope;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The task a request names, once the request has declared the extension
/// (-32021 otherwise); -32602 for a missing or unknown id.
fn named(session: &Arc<Session>, req: &Request) -> Result<Arc<Task>, ErrorObject> {
    let capabilities = match session.phase() {
        crate::protocol::Phase::Stateless => Envelope::parse(req)?.capabilities,
        _ => session.protocol_context().client_capabilities(),
    };
    if !crate::model::declares_extension(&capabilities, TASKS_EXTENSION) {
        return Err(ErrorObject::missing_client_extension(TASKS_EXTENSION));
    }
    let id = required_str(params(req), "taskId")?;
    // Another credential's task is as unknown as one that never was.
    let mine = |t: &Arc<Task>| t.credential == session.credential();
    session.engine.tasks.get(id).filter(mine).ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "Task not found: {} (unknown, or expired)",
            crate::jsonrpc::excerpt(id)
        ))
    })
}

/// `tasks/get`: the task as it stands, with its questions, result or error.
pub(crate) fn get(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let mut detailed = named(session, req)?.detailed();
    detailed.insert("resultType".into(), "complete".into());
    Ok(Value::Object(detailed))
}

/// `tasks/update`: answers to the task's open questions; an empty ack.
pub(crate) fn update(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let task = named(session, req)?;
    let responses = match params(req).get("inputResponses") {
        Some(Value::Object(m)) => m,
        _ => {
            return Err(ErrorObject::invalid_params(
                "params.inputResponses (an object of answers by key) is required",
            ))
        }
    };
    task.update(responses);
    Ok(ack())
}

/// `tasks/cancel`: ends the task as cancelled unless it already ended; an
/// empty ack either way.
pub(crate) fn cancel(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    named(session, req)?.cancel("cancelled by the client");
    Ok(ack())
}

fn ack() -> Value {
    Value::Object(Map::from_iter([(
        "resultType".to_owned(),
        json!("complete"),
    )]))
}
