//! Content blocks: text, image, audio, embedded resources, resource
//! links, and sampling's tool use and tool results; resource contents.
//! Each turns into its JSON form and back.

use super::meta::{insert_meta, insert_opt, meta_of, string, Annotations};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Map, Value};

/// One content block of a tool result, prompt message or sampling message.
#[derive(Clone, Debug, PartialEq)]
pub enum Content {
    /// `{"type":"text","text":..}`
    Text(String),
    /// `{"type":"image","data":<base64>,"mimeType":..}`
    Image {
        /// Base64-encoded bytes.
        data: String,
        /// e.g. `image/png`.
        mime_type: String,
    },
    /// `{"type":"audio","data":<base64>,"mimeType":..}` (2025-03-26 and later).
    Audio {
        /// Base64-encoded bytes.
        data: String,
        /// e.g. `audio/wav`.
        mime_type: String,
    },
    /// `{"type":"resource","resource":{..}}`: an embedded resource.
    Resource(ResourceContents),
    /// `{"type":"resource_link",..}` (2025-06-18 and later).
    ResourceLink {
        /// The linked resource's URI.
        uri: String,
        /// Its name.
        name: String,
        /// Optional description.
        description: Option<String>,
        /// Optional MIME type.
        mime_type: Option<String>,
    },
    /// `{"type":"tool_use",..}`: the model asks to call a tool (sampling
    /// with tools, SEP-1577; 2025-11-25 and later).
    ToolUse {
        /// Matches the [`Content::ToolResult`] that answers it.
        id: String,
        /// The tool's name.
        name: String,
        /// Its arguments.
        input: Map<String, Value>,
    },
    /// `{"type":"tool_result",..}`: what a tool the model asked for
    /// returned (SEP-1577).
    ToolResult {
        /// The [`Content::ToolUse`] `id` it answers.
        tool_use_id: String,
        /// The result's content blocks.
        content: Vec<Content>,
        /// Its structured content (an object).
        structured_content: Option<Value>,
        /// Whether the tool failed.
        is_error: bool,
    },
    /// A block with `annotations` and/or `_meta` (see [`Content::annotate`]
    /// and [`Content::with_meta`]), or with members this type does not
    /// model, kept as they came ([`Content::from_value`]).
    Annotated {
        /// The block.
        block: Box<Content>,
        /// Its annotations.
        annotations: Option<Annotations>,
        /// Its `_meta`.
        meta: Map<String, Value>,
        /// Other members (a resource link's `title` or `size`, an explicit
        /// `"isError": false`, members of later revisions).
        extra: Map<String, Value>,
    },
    /// Any other JSON content block, sent as given.
    Raw(Value),
}

impl Content {
    /// Text content.
    pub fn text(text: impl Into<String>) -> Content {
        Content::Text(text.into())
    }
    /// Image content from raw bytes (base64-encoded here).
    pub fn image(bytes: &[u8], mime_type: impl Into<String>) -> Content {
        Content::Image {
            data: base64(bytes),
            mime_type: mime_type.into(),
        }
    }
    /// Audio content from raw bytes (base64-encoded here).
    pub fn audio(bytes: &[u8], mime_type: impl Into<String>) -> Content {
        Content::Audio {
            data: base64(bytes),
            mime_type: mime_type.into(),
        }
    }
    /// A link to a resource.
    pub fn link(uri: impl Into<String>, name: impl Into<String>) -> Content {
        Content::ResourceLink {
            uri: uri.into(),
            name: name.into(),
            description: None,
            mime_type: None,
        }
    }
    /// A tool use (sampling with tools): the model calls `name` with `input`.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Content {
        Content::ToolUse {
            id: id.into(),
            name: name.into(),
            input: input.as_object().cloned().unwrap_or_default(),
        }
    }
    /// The result of the tool use `tool_use_id`, as content blocks.
    pub fn tool_result(tool_use_id: impl Into<String>, content: Vec<Content>) -> Content {
        Content::ToolResult {
            tool_use_id: tool_use_id.into(),
            content,
            structured_content: None,
            is_error: false,
        }
    }

    /// This block with `annotations` (audience, priority, last modified).
    pub fn annotate(self, annotations: Annotations) -> Content {
        match self {
            Content::Annotated {
                block, meta, extra, ..
            } => Content::Annotated {
                block,
                annotations: Some(annotations),
                meta,
                extra,
            },
            block => Content::Annotated {
                block: Box::new(block),
                annotations: Some(annotations),
                meta: Map::new(),
                extra: Map::new(),
            },
        }
    }
    /// This block with the entry `key` added to its `_meta`.
    pub fn with_meta(self, key: impl Into<String>, value: Value) -> Content {
        let (block, annotations, mut meta, extra) = match self {
            Content::Annotated {
                block,
                annotations,
                meta,
                extra,
            } => (block, annotations, meta, extra),
            block => (Box::new(block), None, Map::new(), Map::new()),
        };
        meta.insert(key.into(), value);
        Content::Annotated {
            block,
            annotations,
            meta,
            extra,
        }
    }

    /// The block as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            // Written from their parts (`Parts`). It always serializes:
            // its maps have string keys.
            Content::Text(_) | Content::Image { .. } | Content::Audio { .. } => {
                serde_json::to_value(self.parts()).unwrap_or_default()
            }
            Content::Resource(r) => json!({"type": "resource", "resource": r.to_value()}),
            Content::ResourceLink {
                uri,
                name,
                description,
                mime_type,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), "resource_link".into());
                m.insert("uri".into(), uri.as_str().into());
                m.insert("name".into(), name.as_str().into());
                insert_opt(&mut m, "description", description);
                insert_opt(&mut m, "mimeType", mime_type);
                Value::Object(m)
            }
            Content::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            Content::ToolResult {
                tool_use_id,
                content,
                structured_content,
                is_error,
            } => {
                let mut m = Map::new();
                m.insert("type".into(), "tool_result".into());
                m.insert("toolUseId".into(), tool_use_id.as_str().into());
                m.insert("content".into(), blocks_value(content));
                if let Some(s) = structured_content {
                    m.insert("structuredContent".into(), s.clone());
                }
                if *is_error {
                    m.insert("isError".into(), true.into());
                }
                Value::Object(m)
            }
            Content::Annotated {
                block,
                annotations,
                meta,
                extra,
            } => {
                let mut v = block.to_value();
                if let Some(m) = v.as_object_mut() {
                    for (k, x) in extra {
                        m.entry(k.as_str()).or_insert_with(|| x.clone());
                    }
                    if let Some(a) = annotations {
                        m.insert("annotations".into(), a.to_value());
                    }
                    insert_meta(m, meta);
                }
                v
            }
            Content::Raw(v) => v.clone(),
        }
    }

    /// A block from its JSON form. Nothing is lost: members it does not
    /// model are kept in [`Content::Annotated`]'s `extra`; a block it
    /// cannot read (an unknown `type`, a member of the wrong shape) is
    /// [`Content::Raw`]. Numbers compare by value (`1` is `1.0`).
    pub fn from_value(v: &Value) -> Content {
        Self::lenient(v).unwrap_or_else(|| Content::Raw(v.clone()))
    }

    fn lenient(v: &Value) -> Option<Content> {
        let block = Self::typed(v)?;
        let rendered = block.to_value();
        let annotations = v.get("annotations").map(Annotations::from_value);
        if let (Some(a), Some(given)) = (&annotations, v.get("annotations")) {
            if !same(&a.to_value(), given) {
                return None;
            }
        }
        let mut extra = Map::new();
        for (k, given) in v.as_object()? {
            if k == "annotations" || k == "_meta" {
                continue;
            }
            match rendered.get(k) {
                Some(r) if !same(r, given) => return None,
                Some(_) => {}
                None => {
                    extra.insert(k.clone(), given.clone());
                }
            }
        }
        let meta = meta_of(v);
        Some(
            if annotations.is_none() && meta.is_empty() && extra.is_empty() {
                block
            } else {
                Content::Annotated {
                    block: Box::new(block),
                    annotations,
                    meta,
                    extra,
                }
            },
        )
    }

    fn typed(v: &Value) -> Option<Content> {
        let s = |k: &str| string(v, k);
        let block = match v.get("type")?.as_str()? {
            "text" => Content::Text(s("text")?),
            "image" => Content::Image {
                data: s("data")?,
                mime_type: s("mimeType")?,
            },
            "audio" => Content::Audio {
                data: s("data")?,
                mime_type: s("mimeType")?,
            },
            "resource" => Content::Resource(ResourceContents::from_value(v.get("resource")?)?),
            "resource_link" => Content::ResourceLink {
                uri: s("uri")?,
                name: s("name")?,
                description: s("description"),
                mime_type: s("mimeType"),
            },
            "tool_use" => Content::ToolUse {
                id: s("id")?,
                name: s("name")?,
                input: v.get("input")?.as_object()?.clone(),
            },
            "tool_result" => Content::ToolResult {
                tool_use_id: s("toolUseId")?,
                content: blocks_from(v.get("content")?)?,
                structured_content: v.get("structuredContent").cloned(),
                is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
            },
            _ => return None,
        };
        Some(block)
    }

    /// The block under any annotations.
    pub fn block(&self) -> &Content {
        match self {
            Content::Annotated { block, .. } => block.block(),
            other => other,
        }
    }
    /// Its text, if it is a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self.block() {
            Content::Text(t) => Some(t),
            _ => None,
        }
    }
}

/// Text, image and audio blocks, the ones tool results are made of, are
/// written straight from their parts; the others as their JSON value
/// ([`Content::to_value`]). Members come in the order of their names, as
/// serde_json writes a value's.
impl Serialize for Content {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.parts() {
            Some(parts) => parts.serialize(s),
            None => self.to_value().serialize(s),
        }
    }
}

/// A text, image or audio block's members (the blocks tool results are
/// made of), borrowed where they lie.
#[derive(Clone, Copy)]
enum Parts<'a> {
    Text(&'a str),
    Media {
        kind: &'static str,
        data: &'a str,
        mime_type: &'a str,
    },
}

impl Serialize for Parts<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        match *self {
            Parts::Text(text) => {
                m.serialize_entry("text", text)?;
                m.serialize_entry("type", "text")?;
            }
            Parts::Media {
                kind,
                data,
                mime_type,
            } => {
                m.serialize_entry("data", data)?;
                m.serialize_entry("mimeType", mime_type)?;
                m.serialize_entry("type", kind)?;
            }
        }
        m.end()
    }
}

impl Content {
    /// Its members, for a block written from its parts (`None` for the
    /// others, written as their JSON value).
    fn parts(&self) -> Option<Parts<'_>> {
        match self {
            Content::Text(text) => Some(Parts::Text(text)),
            Content::Image { data, mime_type } => Some(Parts::Media {
                kind: "image",
                data,
                mime_type,
            }),
            Content::Audio { data, mime_type } => Some(Parts::Media {
                kind: "audio",
                data,
                mime_type,
            }),
            _ => None,
        }
    }
}

/// Whether two JSON values are the same, numbers compared by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Content blocks as a JSON array.
pub(crate) fn blocks_value(blocks: &[Content]) -> Value {
    Value::Array(blocks.iter().map(Content::to_value).collect())
}

/// Content blocks from a JSON array (`None` if it is not one).
pub(crate) fn blocks_from(v: &Value) -> Option<Vec<Content>> {
    Some(v.as_array()?.iter().map(Content::from_value).collect())
}

/// The contents of a resource, as read or embedded.
#[derive(Clone, Debug, PartialEq)]
pub enum ResourceContents {
    /// Text contents.
    Text {
        /// The resource URI.
        uri: String,
        /// Optional MIME type.
        mime_type: Option<String>,
        /// The text.
        text: String,
    },
    /// Binary contents.
    Blob {
        /// The resource URI.
        uri: String,
        /// Optional MIME type.
        mime_type: Option<String>,
        /// Base64-encoded bytes.
        blob: String,
    },
    /// Contents with `_meta` (see [`ResourceContents::with_meta`]).
    WithMeta(Box<ResourceContents>, Map<String, Value>),
}

impl ResourceContents {
    /// Text contents with a MIME type.
    pub fn text(
        uri: impl Into<String>,
        mime_type: impl Into<String>,
        text: impl Into<String>,
    ) -> Self {
        ResourceContents::Text {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            text: text.into(),
        }
    }
    /// Binary contents from raw bytes (base64-encoded here).
    pub fn blob(uri: impl Into<String>, mime_type: impl Into<String>, bytes: &[u8]) -> Self {
        ResourceContents::Blob {
            uri: uri.into(),
            mime_type: Some(mime_type.into()),
            blob: base64(bytes),
        }
    }
    /// These contents with the entry `key` added to their `_meta`.
    pub fn with_meta(self, key: impl Into<String>, value: Value) -> Self {
        let (inner, mut meta) = match self {
            ResourceContents::WithMeta(inner, meta) => (inner, meta),
            other => (Box::new(other), Map::new()),
        };
        meta.insert(key.into(), value);
        ResourceContents::WithMeta(inner, meta)
    }
    /// The URI they are the contents of.
    pub fn uri(&self) -> &str {
        match self {
            ResourceContents::Text { uri, .. } | ResourceContents::Blob { uri, .. } => uri,
            ResourceContents::WithMeta(inner, _) => inner.uri(),
        }
    }
    /// The contents as JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let (uri, mime, key, body) = match self {
            ResourceContents::Text {
                uri,
                mime_type,
                text,
            } => (uri, mime_type, "text", text),
            ResourceContents::Blob {
                uri,
                mime_type,
                blob,
            } => (uri, mime_type, "blob", blob),
            ResourceContents::WithMeta(inner, meta) => {
                let mut v = inner.to_value();
                if let Some(m) = v.as_object_mut() {
                    insert_meta(m, meta);
                }
                return v;
            }
        };
        m.insert("uri".into(), uri.as_str().into());
        insert_opt(&mut m, "mimeType", mime);
        m.insert(key.into(), body.as_str().into());
        Value::Object(m)
    }
    /// Contents from their JSON form (`uri` and `text` or `blob` required;
    /// unknown members are dropped).
    pub fn from_value(v: &Value) -> Option<ResourceContents> {
        let uri = string(v, "uri")?;
        let mime_type = string(v, "mimeType");
        let plain = match (string(v, "text"), string(v, "blob")) {
            (Some(text), None) => ResourceContents::Text {
                uri,
                mime_type,
                text,
            },
            (None, Some(blob)) => ResourceContents::Blob {
                uri,
                mime_type,
                blob,
            },
            _ => return None,
        };
        let meta = meta_of(v);
        Some(if meta.is_empty() {
            plain
        } else {
            ResourceContents::WithMeta(Box::new(plain), meta)
        })
    }
}

const BASE64_ALPHABET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 (RFC 4648, with padding), as MCP's `data` and `blob` fields use.
pub fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = BASE64_ALPHABET;
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(A[((n >> shift) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 strictly: whole groups of four with the
/// padding they need, nothing outside the alphabet, no whitespace, and no
/// stray bits in the last group. `None` for anything else.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| {
        BASE64_ALPHABET
            .iter()
            .position(|&a| a == c)
            .map(|p| p as u32)
    };
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let groups = bytes.len() / 4;
    for (g, chunk) in bytes.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && g + 1 != groups) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        // Bits the padding says are unused must be zero (canonical form).
        if decoded[3 - pad..].iter().any(|&b| b != 0) {
            return None;
        }
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decoding_is_strict() {
        for want in ["", "f", "fo", "foo", "foob", "fooba", "foobar", "Hello"] {
            assert_eq!(
                base64_decode(&base64(want.as_bytes())).unwrap(),
                want.as_bytes()
            );
        }
        for bad in [
            "SGVsbG8",
            "SGVs!!!bG8=",
            "Zg=",
            "Zg===",
            "Zh==",
            "Zm9v\n",
            "Zg==Zg==",
            " Zg==",
        ] {
            assert_eq!(base64_decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }

    #[test]
    fn blocks_read_back_as_written() {
        use crate::model::{Annotations, Role};
        let blocks = [
            Content::text("hi").annotate(Annotations::new().audience(Role::User).priority(0.5)),
            Content::image(b"png", "image/png").with_meta("k", json!(1)),
            Content::tool_use("u1", "add", json!({"a": 1})),
            Content::tool_result("u1", vec![Content::text("2")]),
            Content::Resource(
                ResourceContents::text("a://b", "text/plain", "t").with_meta("x", json!(true)),
            ),
            Content::link("a://b", "b"),
        ];
        for b in blocks {
            assert_eq!(Content::from_value(&b.to_value()), b);
        }
        // Members it does not model are kept beside the typed block.
        let link = json!({"type": "resource_link", "uri": "a://b", "name": "b", "size": 3});
        let typed = Content::from_value(&link);
        assert!(
            matches!(typed.block(), Content::ResourceLink { .. }),
            "{typed:?}"
        );
        assert_eq!(typed.to_value(), link);
        let done = json!({"type": "text", "text": "t", "annotations": {"priority": 1}});
        assert_eq!(Content::from_value(&done).as_text(), Some("t"));
        let odd = json!({"type": "tool_use", "id": "u", "name": "n", "input": 3});
        assert_eq!(Content::from_value(&odd), Content::Raw(odd.clone()));
        assert_eq!(
            Content::text("t")
                .annotate(Annotations::new().audience(Role::Assistant))
                .to_value(),
            json!({"type": "text", "text": "t", "annotations": {"audience": ["assistant"]}})
        );
    }

    #[test]
    fn content_shapes() {
        assert_eq!(
            Content::text("hi").to_value(),
            json!({"type":"text","text":"hi"})
        );
        assert_eq!(
            Content::image(b"f", "image/png").to_value(),
            json!({"type":"image","data":"Zg==","mimeType":"image/png"})
        );
        assert_eq!(
            Content::Resource(ResourceContents::text("a://b", "text/plain", "t")).to_value(),
            json!({"type":"resource","resource":{"uri":"a://b","mimeType":"text/plain","text":"t"}})
        );
        assert_eq!(
            Content::link("a://b", "b").to_value(),
            json!({"type":"resource_link","uri":"a://b","name":"b"})
        );
    }
}
