//! Resources (fixed URIs) and resource templates (RFC 6570 URI templates).

use super::tool::ToolError;
use super::uri_template::UriTemplate;
use crate::model::{decoration_builders, insert_opt, Annotations, Decorations, ResourceContents};
use crate::protocol::Context;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Reads a fixed resource: its URI in, contents out.
pub type ResourceHandler =
    dyn Fn(&str, &Context) -> Result<Vec<ResourceContents>, ToolError> + Send + Sync;
/// Reads a templated resource: the URI and its template variables in.
pub type TemplateHandler = dyn Fn(&str, &HashMap<String, String>, &Context) -> Result<Vec<ResourceContents>, ToolError>
    + Send
    + Sync;

/// Listing metadata shared by resources and templates.
#[derive(Clone, Debug, Default)]
pub(crate) struct Meta {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) mime_type: Option<String>,
    pub(crate) decorations: Decorations,
}

impl Meta {
    fn fill(&self, m: &mut Map<String, Value>) {
        m.insert("name".into(), self.name.as_str().into());
        insert_opt(m, "title", &self.title);
        insert_opt(m, "description", &self.description);
        insert_opt(m, "mimeType", &self.mime_type);
        self.decorations.fill(m);
    }
}

macro_rules! meta_builders {
    () => {
        /// A human-readable title.
        pub fn title(mut self, title: impl Into<String>) -> Self {
            self.meta.title = Some(title.into());
            self
        }
        /// A description.
        pub fn description(mut self, description: impl Into<String>) -> Self {
            self.meta.description = Some(description.into());
            self
        }
        /// The MIME type of the contents.
        pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
            self.meta.mime_type = Some(mime_type.into());
            self
        }
        /// Annotations for the client: who it is for, how important, when
        /// it last changed.
        pub fn annotations(mut self, annotations: Annotations) -> Self {
            self.meta.decorations.annotations = Some(annotations);
            self
        }
        decoration_builders!(meta.decorations);
    };
}

/// A resource with a fixed URI.
pub struct Resource {
    pub(crate) uri: String,
    pub(crate) size: Option<u64>,
    pub(crate) meta: Meta,
    pub(crate) handler: Box<ResourceHandler>,
}

impl Resource {
    /// A resource at `uri` named `name`, read by `handler`.
    pub fn new<F>(uri: impl Into<String>, name: impl Into<String>, handler: F) -> Resource
    where
        F: Fn(&str, &Context) -> Result<Vec<ResourceContents>, ToolError> + Send + Sync + 'static,
    {
        Resource {
            uri: uri.into(),
            size: None,
            meta: Meta {
                name: name.into(),
                ..Meta::default()
            },
            handler: Box::new(handler),
        }
    }
    meta_builders!();
    /// The size of its raw contents in bytes (before base64), if known.
    pub fn size(mut self, bytes: u64) -> Self {
        self.size = Some(bytes);
        self
    }
}

impl crate::server::entries::Listable for Resource {
    fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("uri".into(), self.uri.as_str().into());
        self.meta.fill(&mut m);
        if let Some(size) = self.size {
            m.insert("size".into(), size.into());
        }
        Value::Object(m)
    }
}

/// A family of resources whose URIs match a template such as `file:///{+path}`.
pub struct ResourceTemplate {
    pub(crate) template: String,
    pub(crate) matcher: UriTemplate,
    pub(crate) meta: Meta,
    pub(crate) handler: Box<TemplateHandler>,
}

impl ResourceTemplate {
    /// A template named `name`; an unsupported template is an error.
    pub fn new<F>(
        template: impl Into<String>,
        name: impl Into<String>,
        handler: F,
    ) -> Result<ResourceTemplate, String>
    where
        F: Fn(&str, &HashMap<String, String>, &Context) -> Result<Vec<ResourceContents>, ToolError>
            + Send
            + Sync
            + 'static,
    {
        let template = template.into();
        let matcher = UriTemplate::parse(&template)?;
        Ok(ResourceTemplate {
            template,
            matcher,
            meta: Meta {
                name: name.into(),
                ..Meta::default()
            },
            handler: Box::new(handler),
        })
    }
    meta_builders!();
}

impl crate::server::entries::Listable for ResourceTemplate {
    fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("uriTemplate".into(), self.template.as_str().into());
        self.meta.fill(&mut m);
        Value::Object(m)
    }
}
