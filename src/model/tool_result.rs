//! A tool's result (`CallToolResult`), and a request's result as a
//! handler returns it ([`Answer`]): a tool's result stays typed until it
//! is written, its content serialized from where it lies.

use super::{blocks_from, meta_of, Content};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// The result of a tool call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolResult {
    /// Unstructured content blocks.
    pub content: Vec<Content>,
    /// Structured content: a JSON object (checked against the tool's
    /// output schema; anything but an object is refused at run time).
    pub structured_content: Option<Value>,
    /// Whether the tool failed (the model sees the content as an error).
    pub is_error: bool,
    /// `_meta`, free-form.
    pub meta: Map<String, Value>,
}

impl ToolResult {
    /// A result with the given content blocks.
    pub fn new(content: Vec<Content>) -> Self {
        ToolResult {
            content,
            ..Default::default()
        }
    }
    /// A result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Content::text(text)])
    }
    /// A result carrying structured content, with its JSON text as a text
    /// block for clients that only read `content`.
    pub fn structured(value: Value) -> Self {
        ToolResult {
            content: vec![Content::text(value.to_string())],
            structured_content: Some(value),
            ..Default::default()
        }
    }
    /// A failed result (`isError: true`) with one text block.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult {
            is_error: true,
            ..Self::text(message)
        }
    }
    /// This result with the entry `key` added to its `_meta`.
    pub fn with_meta(mut self, key: impl Into<String>, value: Value) -> Self {
        self.meta.insert(key.into(), value);
        self
    }
    /// The result as JSON.
    pub fn to_value(&self) -> Value {
        // It always serializes: its maps have string keys.
        serde_json::to_value(self).unwrap_or_default()
    }
    /// A `CallToolResult` read back (a client's typed view): content blocks
    /// as [`Content::from_value`] reads them. `None` without a `content`
    /// array.
    pub fn from_value(v: &Value) -> Option<ToolResult> {
        Some(ToolResult {
            content: blocks_from(v.get("content")?)?,
            structured_content: v.get("structuredContent").cloned(),
            is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
            meta: meta_of(v),
        })
    }
}

/// `{"content":[…]}` with `_meta`, `isError` (only when true) and
/// `structuredContent` when there are any; members in the order of their
/// names, as serde_json writes a value's.
impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        if !self.meta.is_empty() {
            m.serialize_entry("_meta", &self.meta)?;
        }
        m.serialize_entry("content", &self.content)?;
        if self.is_error {
            m.serialize_entry("isError", &true)?;
        }
        if let Some(structured) = &self.structured_content {
            m.serialize_entry("structuredContent", structured)?;
        }
        m.end()
    }
}

/// A request's result as its handler returned it, until it is written.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A result as JSON.
    Json(Value),
    /// A tool's result (`tools/call`), kept typed: written straight from
    /// its parts, its text and data never copied into a JSON tree.
    Tool(ToolResult),
}

impl Answer {
    /// The result as JSON (a tool's result converted, anything else moved).
    pub fn into_value(self) -> Value {
        match self {
            Answer::Json(v) => v,
            Answer::Tool(t) => t.to_value(),
        }
    }
    /// Whether it is a tool's result that says the tool failed
    /// (`"isError": true`).
    pub fn is_tool_error(&self) -> bool {
        match self {
            Answer::Json(v) => v.get("isError") == Some(&Value::Bool(true)),
            Answer::Tool(t) => t.is_error,
        }
    }
}

impl From<Value> for Answer {
    fn from(v: Value) -> Self {
        Answer::Json(v)
    }
}

impl From<Answer> for Value {
    fn from(a: Answer) -> Self {
        a.into_value()
    }
}

impl Serialize for Answer {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Answer::Json(v) => v.serialize(s),
            Answer::Tool(t) => t.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Annotations, ResourceContents, Role};
    use serde_json::json;

    /// The text written from the parts is the text of the JSON value, for
    /// every kind of block (the typed ones and those written as values).
    #[test]
    fn a_result_is_written_as_its_value_is() {
        let blocks = vec![
            Content::text("é\n\"<"),
            Content::image(b"\x89PNG", "image/png"),
            Content::audio(b"RIFF", "audio/wav"),
            Content::link("file:///a", "a"),
            Content::Resource(ResourceContents::text("file:///b", "text/plain", "body")),
            Content::text("t").annotate(Annotations {
                audience: vec![Role::User],
                ..Default::default()
            }),
            Content::text("m").with_meta("k", json!(1)),
            Content::Raw(json!({"type": "future", "z": [1, 2]})),
        ];
        let results = [
            ToolResult::new(blocks.clone()),
            ToolResult::new(Vec::new()),
            ToolResult::error("failed"),
            ToolResult::structured(json!({"n": 1, "a": {"b": null}})).with_meta("m", json!("x")),
        ];
        for r in results {
            let text = serde_json::to_string(&r).unwrap();
            let value = r.to_value();
            assert_eq!(text, value.to_string());
            assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
            assert_eq!(ToolResult::from_value(&value).as_ref(), Some(&r));
            let answer = Answer::Tool(r.clone());
            assert_eq!(serde_json::to_string(&answer).unwrap(), text);
            assert_eq!(answer.into_value(), value);
        }
        for b in blocks {
            assert_eq!(serde_json::to_string(&b).unwrap(), b.to_value().to_string());
        }
        assert_eq!(
            ToolResult::error("x").to_value(),
            json!({"content": [{"type": "text", "text": "x"}], "isError": true})
        );
        // The texts as the JSON values gave them before results were typed.
        let written = [
            (
                ToolResult::text("é\n\""),
                r#"{"content":[{"text":"é\n\"","type":"text"}]}"#,
            ),
            (
                ToolResult::new(vec![Content::Image {
                    data: "AA==".into(),
                    mime_type: "image/png".into(),
                }])
                .with_meta("k", json!(1)),
                r#"{"_meta":{"k":1},"content":[{"data":"AA==","mimeType":"image/png","type":"image"}]}"#,
            ),
            (
                ToolResult::structured(json!({"b": 1})),
                r#"{"content":[{"text":"{\"b\":1}","type":"text"}],"structuredContent":{"b":1}}"#,
            ),
            (
                ToolResult::new(vec![Content::Audio {
                    data: "AA==".into(),
                    mime_type: "audio/wav".into(),
                }]),
                r#"{"content":[{"data":"AA==","mimeType":"audio/wav","type":"audio"}]}"#,
            ),
        ];
        for (result, text) in written {
            assert_eq!(serde_json::to_string(&result).unwrap(), text);
            assert_eq!(serde_json::to_string(&result.to_value()).unwrap(), text);
        }
        assert!(Answer::Tool(ToolResult::error("x")).is_tool_error());
        assert!(Answer::Json(json!({"isError": true})).is_tool_error());
        assert!(!Answer::Json(json!({"isError": "yes"})).is_tool_error());
        assert!(!Answer::Tool(ToolResult::text("x")).is_tool_error());
    }
}
