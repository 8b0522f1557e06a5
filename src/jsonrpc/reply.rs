//! A response this side sends ([`Reply`]), written out straight from its
//! parts: its envelope is never built as a JSON object.

use super::{ErrorObject, RequestId, JSONRPC_VERSION};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

/// A response this side sends. Serialized, it is the JSON-RPC response:
/// `{"id":…,"jsonrpc":"2.0","result":…}`, the same with `"error"`, or a
/// batch's array. Its members, and an error object's, come in the order
/// of their names, as serde_json writes an object's members unless its
/// `preserve_order` feature is on (this crate does not turn it on).
///
/// `R` is the result: JSON, or anything that serializes to it (a layer
/// above keeps a tool's result typed until it is written).
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<R = Value> {
    /// The result of the request `id`.
    Result(RequestId, R),
    /// An error; `None` when the request's id could not be read (the
    /// response then says `"id":null`).
    Error(Option<RequestId>, ErrorObject),
    /// The responses to a batch's requests, each whole, as one array.
    Batch(Vec<Value>),
}

impl<R> Reply<R> {
    /// The answer to the request `id`: its result, or its error.
    pub fn answer(id: RequestId, outcome: Result<R, ErrorObject>) -> Reply<R> {
        match outcome {
            Ok(result) => Reply::Result(id, result),
            Err(error) => Reply::Error(Some(id), error),
        }
    }

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
}

impl Reply {
    /// An error response: [`Reply::Error`] where nothing says what a
    /// result would have been.
    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Reply {
        Reply::Error(id, error)
    }
}

impl<R: Serialize> Reply<R> {
    /// The response as a JSON value.
    pub fn to_value(&self) -> Value {
        // It always serializes: every map in it has string keys.
        serde_json::to_value(self).unwrap_or_default()
    }
}

impl<R: Into<Value>> Reply<R> {
    /// The response as a JSON value, its result (or a batch's responses)
    /// moved, not copied.
    pub fn into_value(self) -> Value {
        let (envelope, result) = match self {
            Reply::Batch(items) => return Value::Array(items),
            Reply::Error(id, error) => return Reply::error(id, error).to_value(),
            Reply::Result(id, result) => (Reply::Result(id, Value::Null), result.into()),
        };
        let mut whole = envelope.to_value();
        whole["result"] = result;
        whole
    }
}

impl<R: Serialize> Serialize for Reply<R> {
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

    #[test]
    fn a_reply_is_written_as_the_object_was() {
        // The text each gave when it was built as an object, and the value.
        let cases = [
            (
                Reply::Result(
                    RequestId::Number(-7),
                    json!({"content": [{"type": "text", "text": "é\n\""}]}),
                ),
                r#"{"id":-7,"jsonrpc":"2.0","result":{"content":[{"text":"é\n\"","type":"text"}]}}"#,
            ),
            (
                Reply::Result(RequestId::String("a\"b".into()), json!(null)),
                r#"{"id":"a\"b","jsonrpc":"2.0","result":null}"#,
            ),
            (
                Reply::answer(
                    RequestId::Number(3),
                    Err(ErrorObject::method_not_found("x")),
                ),
                r#"{"error":{"code":-32601,"message":"Method not found: x"},"id":3,"jsonrpc":"2.0"}"#,
            ),
            (
                Reply::Error(None, ErrorObject::new(-32700, "bad").with_data(json!([1]))),
                r#"{"error":{"code":-32700,"data":[1],"message":"bad"},"id":null,"jsonrpc":"2.0"}"#,
            ),
            (
                Reply::Batch(vec![
                    json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
                    json!(2),
                ]),
                r#"[{"id":1,"jsonrpc":"2.0","result":{}},2]"#,
            ),
        ];
        for (reply, text) in cases {
            assert_eq!(crate::jsonrpc::to_text(&reply), text);
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(reply.to_value(), value);
            assert_eq!(reply.clone().into_value(), value);
        }
        assert_eq!(
            Reply::answer(RequestId::Number(1), Ok(json!(5))),
            Reply::Result(RequestId::Number(1), json!(5))
        );
    }

    #[test]
    fn ids_and_kinds() {
        let id = RequestId::Number(1);
        assert_eq!(Reply::Result(id.clone(), json!(1)).id(), Some(&id));
        assert_eq!(Reply::error(None, ErrorObject::internal("x")).id(), None);
        assert!(Reply::error(None, ErrorObject::internal("x")).is_error());
        assert!(!Reply::<Value>::Batch(vec![json!({"error": {}})]).is_error());
        assert!(!Reply::Result(id, json!({"error": 1})).is_error());
    }
}
