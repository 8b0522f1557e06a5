//! Content blocks: text, image, audio, embedded resources, resource links.

use serde_json::{json, Map, Value};

/// One content block of a tool result or prompt message.
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

    /// The block as JSON.
    pub fn to_value(&self) -> Value {
        match self {
            Content::Text(t) => json!({"type": "text", "text": t}),
            Content::Image { data, mime_type } => {
                json!({"type": "image", "data": data, "mimeType": mime_type})
            }
            Content::Audio { data, mime_type } => {
                json!({"type": "audio", "data": data, "mimeType": mime_type})
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
            Content::Raw(v) => v.clone(),
        }
    }
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
        };
        m.insert("uri".into(), uri.as_str().into());
        insert_opt(&mut m, "mimeType", mime);
        m.insert(key.into(), body.as_str().into());
        Value::Object(m)
    }
}

pub(crate) fn insert_opt(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        m.insert(key.into(), Value::String(v.clone()));
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
