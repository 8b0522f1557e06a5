//! What the 2025-11-25 schema lets decorate a definition or a content
//! block: icons (SEP-973), annotations (audience, priority, last
//! modified) and `_meta`, plus the roles they name.

use serde_json::{Map, Value};

/// Who a message is from, or who content is meant for.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The user.
    User,
    /// The assistant (the model).
    Assistant,
}

impl Role {
    /// `user` or `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
    /// The role named `name`, if it is one.
    pub fn parse(name: &str) -> Option<Role> {
        match name {
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        }
    }
}

/// The background an icon is drawn for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IconTheme {
    /// For a light background.
    Light,
    /// For a dark background.
    Dark,
}

/// An icon a client may show for a server, client, tool, prompt, resource
/// or template (SEP-973). Clients must render `image/png` and
/// `image/jpeg`; SVG and WebP are a SHOULD.
#[derive(Clone, Debug, PartialEq)]
pub struct Icon {
    /// An `https:` URL or a `data:` URI.
    pub src: String,
    /// Its MIME type, where `src` does not make it clear.
    pub mime_type: Option<String>,
    /// Sizes it fits, `WxH` (`48x48`) or `any`; empty: any size.
    pub sizes: Vec<String>,
    /// The theme it is drawn for; `None`: any.
    pub theme: Option<IconTheme>,
}

impl Icon {
    /// An icon at `src` (an `https:` URL or a `data:` URI).
    pub fn new(src: impl Into<String>) -> Icon {
        Icon {
            src: src.into(),
            mime_type: None,
            sizes: Vec::new(),
            theme: None,
        }
    }
    /// Its MIME type (`image/png`).
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
    /// Adds a size it fits (`48x48`, or `any` for SVG).
    pub fn size(mut self, size: impl Into<String>) -> Self {
        self.sizes.push(size.into());
        self
    }
    /// The theme it is drawn for.
    pub fn theme(mut self, theme: IconTheme) -> Self {
        self.theme = Some(theme);
        self
    }
    /// As JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("src".into(), self.src.as_str().into());
        insert_opt(&mut m, "mimeType", &self.mime_type);
        if !self.sizes.is_empty() {
            m.insert("sizes".into(), self.sizes.clone().into());
        }
        if let Some(t) = self.theme {
            let t = match t {
                IconTheme::Light => "light",
                IconTheme::Dark => "dark",
            };
            m.insert("theme".into(), t.into());
        }
        Value::Object(m)
    }
    /// An icon from its JSON form (`src` required).
    pub fn from_value(v: &Value) -> Option<Icon> {
        let theme = match v.get("theme").and_then(Value::as_str) {
            Some("light") => Some(IconTheme::Light),
            Some("dark") => Some(IconTheme::Dark),
            _ => None,
        };
        Some(Icon {
            src: v.get("src")?.as_str()?.to_owned(),
            mime_type: string(v, "mimeType"),
            sizes: v
                .get("sizes")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            theme,
        })
    }
}

/// Hints for the client about a resource or a content block.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    /// Who it is for (empty: not said).
    pub audience: Vec<Role>,
    /// How important it is, from 0 (optional) to 1 (required).
    pub priority: Option<f64>,
    /// When it last changed, ISO 8601 (`2025-01-12T15:00:58Z`).
    pub last_modified: Option<String>,
}

impl Annotations {
    /// No annotation yet.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a role it is meant for.
    pub fn audience(mut self, role: Role) -> Self {
        if !self.audience.contains(&role) {
            self.audience.push(role);
        }
        self
    }
    /// How important it is: clamped to 0..=1 (the schema's range); a NaN
    /// leaves it unsaid.
    pub fn priority(mut self, priority: f64) -> Self {
        self.priority = (!priority.is_nan()).then(|| priority.clamp(0.0, 1.0));
        self
    }
    /// When it last changed (ISO 8601; see [`iso8601`](super::iso8601)).
    pub fn last_modified(mut self, when: impl Into<String>) -> Self {
        self.last_modified = Some(when.into());
        self
    }
    /// As JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        if !self.audience.is_empty() {
            let roles: Vec<Value> = self.audience.iter().map(|r| r.as_str().into()).collect();
            m.insert("audience".into(), Value::Array(roles));
        }
        // The schema's range is 0 to 1 (the field is public: a value set
        // outside it is brought in).
        if let Some(p) = self
            .priority
            .map(|p| p.clamp(0.0, 1.0))
            .and_then(serde_json::Number::from_f64)
        {
            m.insert("priority".into(), Value::Number(p));
        }
        insert_opt(&mut m, "lastModified", &self.last_modified);
        Value::Object(m)
    }
    /// Annotations from their JSON form (what is not understood is left out).
    pub fn from_value(v: &Value) -> Annotations {
        Annotations {
            audience: v
                .get("audience")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|r| Role::parse(r.as_str()?)).collect())
                .unwrap_or_default(),
            priority: v
                .get("priority")
                .and_then(Value::as_f64)
                .map(|p| p.clamp(0.0, 1.0)),
            last_modified: string(v, "lastModified"),
        }
    }
}

/// The decorations a listed tool, prompt, resource or template (and the
/// `Implementation` of a server or client) may carry beside its own
/// fields: icons, annotations, `_meta`. Rendered in one place.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Decorations {
    /// `icons` (SEP-973).
    pub icons: Vec<Icon>,
    /// `annotations` (resources and templates; tools have their own kind).
    pub annotations: Option<Annotations>,
    /// `_meta`, free-form.
    pub meta: Map<String, Value>,
}

impl Decorations {
    /// Adds its members to the object `m`.
    pub fn fill(&self, m: &mut Map<String, Value>) {
        if !self.icons.is_empty() {
            let icons = self.icons.iter().map(Icon::to_value).collect();
            m.insert("icons".into(), Value::Array(icons));
        }
        if let Some(a) = &self.annotations {
            m.insert("annotations".into(), a.to_value());
        }
        insert_meta(m, &self.meta);
    }
    /// Decorations read from a JSON object.
    pub fn from_value(v: &Value) -> Decorations {
        Decorations {
            icons: v
                .get("icons")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Icon::from_value).collect())
                .unwrap_or_default(),
            annotations: v.get("annotations").map(Annotations::from_value),
            meta: meta_of(v),
        }
    }
}

/// An `Implementation` (`serverInfo`, `clientInfo`): name and version,
/// then what is set of title, description, website and icons.
pub(crate) fn implementation(
    name: &str,
    version: &str,
    title: &Option<String>,
    description: &Option<String>,
    website_url: &Option<String>,
    icons: &[Icon],
) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), name.into());
    m.insert("version".into(), version.into());
    insert_opt(&mut m, "title", title);
    insert_opt(&mut m, "description", description);
    insert_opt(&mut m, "websiteUrl", website_url);
    let decorations = Decorations {
        icons: icons.to_vec(),
        ..Decorations::default()
    };
    decorations.fill(&mut m);
    Value::Object(m)
}

/// Adds `_meta` to `m` unless it is empty.
pub(crate) fn insert_meta(m: &mut Map<String, Value>, meta: &Map<String, Value>) {
    if !meta.is_empty() {
        m.insert("_meta".into(), Value::Object(meta.clone()));
    }
}

/// Whether the `_meta` key `key` has a prefix MCP reserves for itself: one
/// with a label `modelcontextprotocol` or `mcp` (`io.modelcontextprotocol/`,
/// `mcp.dev/`; the spec's `_meta` rules). Such keys mean something to one
/// hop of the protocol, never to be passed on as they are.
pub fn is_reserved_meta_key(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix
            .split('.')
            .any(|label| label == "modelcontextprotocol" || label == "mcp")
    })
}

/// The `_meta` object of `v` (empty if none).
pub(crate) fn meta_of(v: &Value) -> Map<String, Value> {
    v.get("_meta")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

pub(crate) fn insert_opt(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(v) = v {
        m.insert(key.into(), Value::String(v.clone()));
    }
}

/// The string member `key` of `v`.
pub(crate) fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// Builder methods `icon` and `meta` for a type whose [`Decorations`]
/// are the field (path) given: `decoration_builders!(decorations)`.
macro_rules! decoration_builders {
    ($($field:ident).+) => {
        /// Adds an icon (SEP-973; shown by 2025-11-25 clients, left out
        /// for older ones).
        pub fn icon(mut self, icon: $crate::model::Icon) -> Self {
            self.$($field).+.icons.push(icon);
            self
        }
        /// Adds the entry `key` to its `_meta` (free-form; keys under
        /// `modelcontextprotocol.io/` and `mcp.dev/` are the spec's).
        pub fn meta(mut self, key: impl Into<String>, value: serde_json::Value) -> Self {
            self.$($field).+.meta.insert(key.into(), value);
            self
        }
    };
}
pub(crate) use decoration_builders;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_out_of_range_is_brought_in() {
        let a = Annotations {
            priority: Some(7.0),
            ..Default::default()
        };
        assert_eq!(a.to_value()["priority"], serde_json::json!(1.0));
    }
    use serde_json::json;

    #[test]
    fn shapes_round_trip() {
        let icon = Icon::new("https://example.com/i.png")
            .mime_type("image/png")
            .size("48x48")
            .theme(IconTheme::Dark);
        let v = icon.to_value();
        assert_eq!(
            v,
            json!({"src": "https://example.com/i.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark"})
        );
        assert_eq!(Icon::from_value(&v), Some(icon));
        let a = Annotations::new()
            .audience(Role::User)
            .audience(Role::User)
            .priority(7.0)
            .last_modified("2025-01-12T15:00:58Z");
        let v = a.to_value();
        assert_eq!(
            v,
            json!({"audience": ["user"], "priority": 1.0, "lastModified": "2025-01-12T15:00:58Z"})
        );
        assert_eq!(Annotations::from_value(&v), a);
        assert_eq!(Annotations::new().priority(f64::NAN).priority, None);
    }
}
