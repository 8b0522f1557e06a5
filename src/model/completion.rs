//! Argument completion (`completion/complete`): what is completed, the
//! request a provider sees, and the values it returns.

use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// What a completion is for: a prompt's argument or a resource template's variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum CompletionRef {
    /// `ref/prompt` by prompt name.
    Prompt(String),
    /// `ref/resource` by URI template.
    Resource(String),
}

/// A `completion/complete` request as a handler sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct CompletionRequest {
    /// The argument being completed.
    pub argument: String,
    /// What the user typed so far.
    pub value: String,
    /// Already-resolved arguments (`context.arguments`).
    pub context: HashMap<String, String>,
}

/// Completion values (at most 100 are sent; `hasMore` is set when cut).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    /// Suggested values, best first.
    pub values: Vec<String>,
    /// Total number of matches, if known.
    pub total: Option<u64>,
    /// Whether more matches exist than were sent.
    pub has_more: bool,
}

/// The spec's maximum number of completion values per response.
pub const MAX_COMPLETION_VALUES: usize = 100;

impl Completion {
    /// A `completion` object read back (a client's typed view); `None`
    /// without a `values` array of strings.
    pub fn from_value(c: &Value) -> Option<Completion> {
        let values = c.get("values")?.as_array()?;
        Some(Completion {
            values: values
                .iter()
                .map(|s| s.as_str().map(str::to_owned))
                .collect::<Option<_>>()?,
            total: c.get("total").and_then(Value::as_u64),
            has_more: c.get("hasMore").and_then(Value::as_bool).unwrap_or(false),
        })
    }
    /// As the `completion` object of the result.
    pub fn to_value(&self) -> Value {
        let cut = self.values.len() > MAX_COMPLETION_VALUES;
        let values: Vec<&String> = self.values.iter().take(MAX_COMPLETION_VALUES).collect();
        let mut m = Map::new();
        m.insert("values".into(), json!(values));
        let total = self.total.or(cut.then_some(self.values.len() as u64));
        if let Some(t) = total {
            m.insert("total".into(), t.into());
        }
        m.insert("hasMore".into(), (self.has_more || cut).into());
        Value::Object(m)
    }
}
