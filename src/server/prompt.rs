//! Prompts with arguments, and argument completion handlers.

use super::tool::ToolError;
pub use crate::model::Role;
use crate::model::{
    decoration_builders, insert_meta, insert_opt, meta_of, string, Completion, CompletionRequest,
    Content, Decorations,
};
use crate::protocol::Context;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// Renders a prompt from its (string) arguments.
pub type PromptHandler =
    dyn Fn(&HashMap<String, String>, &Context) -> Result<PromptResult, ToolError> + Send + Sync;

/// A prompt template.
pub struct Prompt {
    pub(crate) name: String,
    pub(crate) title: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) arguments: Vec<PromptArgument>,
    pub(crate) decorations: Decorations,
    pub(crate) handler: Box<PromptHandler>,
}

/// One argument of a prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptArgument {
    /// The argument's name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// Whether `prompts/get` must supply it (missing: -32602).
    pub required: bool,
}

impl PromptArgument {
    /// A required argument.
    pub fn required(name: impl Into<String>, description: impl Into<String>) -> Self {
        PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required: true,
        }
    }
    /// An optional argument.
    pub fn optional(name: impl Into<String>, description: impl Into<String>) -> Self {
        PromptArgument {
            required: false,
            ..Self::required(name, description)
        }
    }
}

impl Prompt {
    /// A prompt named `name` rendered by `handler`.
    pub fn new<F>(name: impl Into<String>, handler: F) -> Prompt
    where
        F: Fn(&HashMap<String, String>, &Context) -> Result<PromptResult, ToolError>
            + Send
            + Sync
            + 'static,
    {
        Prompt {
            name: name.into(),
            title: None,
            description: None,
            arguments: Vec::new(),
            decorations: Decorations::default(),
            handler: Box::new(handler),
        }
    }
    /// A human-readable title.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
    /// A description.
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
    /// Adds an argument.
    pub fn argument(mut self, argument: PromptArgument) -> Self {
        self.arguments.push(argument);
        self
    }
    decoration_builders!(decorations);
}

impl crate::server::entries::Listable for Prompt {
    fn listing(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), self.name.as_str().into());
        insert_opt(&mut m, "title", &self.title);
        insert_opt(&mut m, "description", &self.description);
        if !self.arguments.is_empty() {
            let args = self
                .arguments
                .iter()
                .map(|a| {
                    let mut o = Map::new();
                    o.insert("name".into(), a.name.as_str().into());
                    insert_opt(&mut o, "description", &a.description);
                    o.insert("required".into(), a.required.into());
                    Value::Object(o)
                })
                .collect();
            m.insert("arguments".into(), Value::Array(args));
        }
        self.decorations.fill(&mut m);
        Value::Object(m)
    }
}

/// A rendered prompt.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PromptResult {
    /// Optional description.
    pub description: Option<String>,
    /// The messages, in order.
    pub messages: Vec<(Role, Content)>,
    /// `_meta`, free-form.
    pub meta: Map<String, Value>,
}

impl PromptResult {
    /// A prompt result from messages.
    pub fn new(messages: Vec<(Role, Content)>) -> Self {
        PromptResult {
            description: None,
            messages,
            meta: Map::new(),
        }
    }
    /// This result with the entry `key` added to its `_meta`.
    pub fn with_meta(mut self, key: impl Into<String>, value: Value) -> Self {
        self.meta.insert(key.into(), value);
        self
    }
    /// A `GetPromptResult` read back (a client's typed view); `None` if a
    /// message has no known role or no content.
    pub fn from_value(v: &Value) -> Option<PromptResult> {
        let messages = v
            .get("messages")?
            .as_array()?
            .iter()
            .map(|m| {
                let role = Role::parse(m.get("role")?.as_str()?)?;
                Some((role, Content::from_value(m.get("content")?)))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(PromptResult {
            description: string(v, "description"),
            messages,
            meta: meta_of(v),
        })
    }
    /// As JSON.
    pub fn to_value(&self) -> Value {
        let messages: Vec<Value> = self
            .messages
            .iter()
            .map(|(role, content)| json!({"role": role.as_str(), "content": content.to_value()}))
            .collect();
        let mut m = Map::new();
        insert_opt(&mut m, "description", &self.description);
        m.insert("messages".into(), Value::Array(messages));
        insert_meta(&mut m, &self.meta);
        Value::Object(m)
    }
}

/// Produces completion values.
pub type CompletionHandler =
    dyn Fn(&CompletionRequest, &Context) -> Result<Completion, ToolError> + Send + Sync;
