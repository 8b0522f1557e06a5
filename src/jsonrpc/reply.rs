//! A response this side sends ([`Reply`]), written out straight from its
//! parts: its envelope is never built as a JSON object.

use super::{ErrorObject, RequestId, JSONRPC_VERSION};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// A response this side sends. Serialized, it is the JSON-RPC response:
/// `{"id":…,"jsonrpc":"2.0","result":…}`, the same with `"error"`, or a
/// batch's array. Its members come in the order serde_json's objects
/// write theirs (by name), so the text is what an object would give.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// The result of the request `id`.
    Result(RequestId, Value),
    /// An error; `None` when the request's id could not be read (the
    /// response then says `"id":null`).
    Error(Option<RequestId>, ErrorObject),
    /// The responses to a batch's requests, each whole, as one array.
    Batch(Vec<Value>),
}

impl Reply {
    /// The request answered (`None` for a batch, or for an error about a
    /// request whose id could not be read).
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Reply::Result(id, _) => Some(id),
            Reply::Error(id, _) => id.as_ref(),
            Reply::Batch(_) => None,
        }
    }

    /// Whether it is an error response (a batch is not one, whatever it holds).
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(..))
    }

    /// The response as a JSON value.
    pub fn to_value(&self) -> Value {
        // It always serializes: every map in it has string keys.
        serde_json::to_value(self).unwrap_or_default()
    }

    /// The response as a JSON value, its result (or a batch's responses)
    /// moved, not copied.
    pub fn into_value(self) -> Value {
        match self {
            Reply::Batch(items) => Value::Array(items),
            Reply::Result(id, result) => {
                let mut whole = Reply::Result(id, Value::Null).to_value();
                whole["result"] = result;
                whole
            }
            error => error.to_value(),
        }
    }
}

impl Serialize for Reply {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if let Reply::Batch(items) = self {
            return items.serialize(s);
        }
        let mut m = s.serialize_map(Some(3))?;
        match self {
            Reply::Result(id, result) => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
                m.serialize_entry("result", result)?;
            }
            Reply::Error(id, error) => {
                m.serialize_entry("error", error)?;
                m.serialize_entry("id", id)?;
                m.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
            }
            Reply::Batch(_) => {}
        }
        m.end()
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            RequestId::Number(n) => s.serialize_i64(*n),
            RequestId::String(text) => s.serialize_str(text),
        }
    }
}

impl Serialize for ErrorObject {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2 + usize::from(self.data.is_some())))?;
        m.serialize_entry("code", &self.code)?;
        if let Some(data) = &self.data {
            m.serialize_entry("data", data)?;
        }
        m.serialize_entry("message", &self.message)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the envelope built as an object gives (the text before).
    fn as_object(v: Value) -> String {
        serde_json::to_string(&v).unwrap()
    }

    #[test]
    fn a_reply_is_written_as_the_object_would_be() {
        let cases = [
            (
                Reply::Result(
                    RequestId::Number(-7),
                    json!({"content": [{"type": "text", "text": "é\n\""}]}),
                ),
                json!({"jsonrpc": "2.0", "id": -7, "result": {"content": [{"type": "text", "text": "é\n\""}]}}),
            ),
            (
                Reply::Result(RequestId::String("a\"b".into()), json!(null)),
                json!({"jsonrpc": "2.0", "id": "a\"b", "result": null}),
            ),
            (
                Reply::Error(
                    Some(RequestId::Number(3)),
                    ErrorObject::method_not_found("x"),
                ),
                json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found: x"}}),
            ),
            (
                Reply::Error(None, ErrorObject::new(-32700, "bad").with_data(json!([1]))),
                json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "bad", "data": [1]}}),
            ),
            (
                Reply::Batch(vec![
                    json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
                    json!(2),
                ]),
                json!([{"jsonrpc": "2.0", "id": 1, "result": {}}, 2]),
            ),
        ];
        for (reply, object) in cases {
            assert_eq!(crate::jsonrpc::to_text(&reply), as_object(object.clone()));
            assert_eq!(reply.to_value(), object);
            assert_eq!(reply.clone().into_value(), object);
        }
    }

    #[test]
    fn ids_and_kinds() {
        let id = RequestId::Number(1);
        assert_eq!(Reply::Result(id.clone(), json!(1)).id(), Some(&id));
        assert_eq!(Reply::Error(None, ErrorObject::internal("x")).id(), None);
        assert!(Reply::Error(None, ErrorObject::internal("x")).is_error());
        assert!(!Reply::Batch(vec![json!({"error": {}})]).is_error());
        assert!(!Reply::Result(id, json!({"error": 1})).is_error());
    }
}
