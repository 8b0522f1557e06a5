//! What a server offers: tools, resources, templates, prompts, completions,
//! in deterministic (name / URI) order.

use super::prompt::{CompletionHandler, CompletionRef, Prompt};
use super::resource::{Resource, ResourceTemplate};
use super::tool::Tool;
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A tool with its compiled schemas and its listing JSON, built once.
pub(crate) struct RegisteredTool {
    pub(crate) tool: Tool,
    pub(crate) input: jsonschema::Validator,
    pub(crate) output: Option<jsonschema::Validator>,
    pub(crate) listing: Value,
}

impl RegisteredTool {
    pub(crate) fn compile(tool: Tool) -> Result<RegisteredTool, String> {
        if tool.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(format!(
                "tool {:?}: inputSchema must be a JSON Schema object with \"type\": \"object\"",
                tool.name
            ));
        }
        let input = jsonschema::validator_for(&tool.input_schema)
            .map_err(|e| format!("tool {:?}: invalid inputSchema: {e}", tool.name))?;
        let output = match &tool.output_schema {
            Some(s) => Some(
                jsonschema::validator_for(s)
                    .map_err(|e| format!("tool {:?}: invalid outputSchema: {e}", tool.name))?,
            ),
            None => None,
        };
        let listing = tool.listing();
        Ok(RegisteredTool {
            tool,
            input,
            output,
            listing,
        })
    }

    /// Checks arguments against the input schema; the error lists every violation.
    pub(crate) fn check_arguments(&self, args: &Value) -> Result<(), String> {
        check(&self.input, args)
    }
}

/// Validates `instance`; the error names each violation and where it is.
pub(crate) fn check(validator: &jsonschema::Validator, instance: &Value) -> Result<(), String> {
    if validator.is_valid(instance) {
        return Ok(());
    }
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let path = e.instance_path().to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    Err(errors.join("; "))
}

/// Which kinds of things the server advertises even when none is registered
/// yet (so that tools added at run time reach clients via list_changed).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Enabled {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

#[derive(Default)]
pub(crate) struct Registry {
    pub(crate) tools: BTreeMap<String, Arc<RegisteredTool>>,
    pub(crate) resources: BTreeMap<String, Arc<Resource>>,
    pub(crate) templates: BTreeMap<String, Arc<ResourceTemplate>>,
    pub(crate) prompts: BTreeMap<String, Arc<Prompt>>,
    pub(crate) completions: HashMap<CompletionRef, Arc<CompletionHandler>>,
    pub(crate) enabled: Enabled,
}

impl Registry {
    /// Whether the server offers a capability (`tools`, `resources`,
    /// `prompts`, `logging`, `completions`).
    pub(crate) fn has_capability(&self, name: &str) -> bool {
        match name {
            "tools" => self.enabled.tools || !self.tools.is_empty(),
            "resources" => {
                self.enabled.resources || !self.resources.is_empty() || !self.templates.is_empty()
            }
            "prompts" => self.enabled.prompts || !self.prompts.is_empty(),
            "logging" => true,
            "completions" => !self.completions.is_empty(),
            _ => false,
        }
    }

    /// The `capabilities` object of the initialize result, derived from what
    /// is registered. Every capability is an object, never a boolean.
    pub(crate) fn capabilities(&self) -> Value {
        let all = [
            ("tools", json!({"listChanged": true})),
            ("resources", json!({"subscribe": true, "listChanged": true})),
            ("prompts", json!({"listChanged": true})),
            ("logging", json!({})),
            ("completions", json!({})),
        ];
        let caps: Map<String, Value> = all
            .into_iter()
            .filter(|(name, _)| self.has_capability(name))
            .map(|(n, v)| (n.to_owned(), v))
            .collect();
        Value::Object(caps)
    }
}
