//! Typed views of the server's answers, beside the raw `Value`s: tool
//! definitions, tool results (checked against the tool's `outputSchema`,
//! as the spec asks clients to), resource contents, prompts and
//! completions.

use super::{Client, ClientError};
use crate::model::schema::Schema;
use crate::model::{string, Completion, Decorations, ResourceContents};
use crate::server::{PromptResult, ToolResult};
use crate::sync::lock;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A tool as `tools/list` describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    /// Its name.
    pub name: String,
    /// A display title.
    pub title: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// The JSON Schema of its `structuredContent`, if it declares one.
    pub output_schema: Option<Value>,
    /// Its annotations (`readOnlyHint`, ...), as JSON.
    pub annotations: Option<Value>,
    /// Its icons and `_meta`.
    pub decorations: Decorations,
}

impl ToolInfo {
    /// A definition from `tools/list`; `None` without a string `name`.
    pub fn from_value(v: &Value) -> Option<ToolInfo> {
        let mut decorations = Decorations::from_value(v);
        // A tool's annotations are its own kind, kept as JSON.
        decorations.annotations = None;
        Some(ToolInfo {
            name: string(v, "name")?,
            title: string(v, "title"),
            description: string(v, "description"),
            input_schema: v.get("inputSchema").cloned().unwrap_or_else(|| json!({})),
            output_schema: v.get("outputSchema").cloned(),
            annotations: v.get("annotations").cloned(),
            decorations,
        })
    }
}

/// The compiled `outputSchema`s of the tools last listed, by tool name.
#[derive(Default)]
pub(crate) struct OutputSchemas(std::sync::Mutex<HashMap<String, Arc<Schema>>>);

impl OutputSchemas {
    /// Learns the output schemas of `tools` (a whole `tools/list`
    /// listing), replacing everything known before.
    pub(crate) fn learn(&self, tools: &[Value]) {
        let mut known = lock(&self.0);
        known.clear();
        for t in tools {
            let Some(name) = t.get("name").and_then(Value::as_str) else {
                continue;
            };
            match t.get("outputSchema").map(Schema::compile) {
                Some(Ok(schema)) => {
                    known.insert(name.to_owned(), Arc::new(schema));
                }
                Some(Err(e)) => {
                    log::warn!("client: tool {name}: its outputSchema is unusable ({e}); results not checked");
                }
                None => {}
            }
        }
    }

    /// Checks a successful result of `tool` against its output schema.
    fn check(&self, tool: &str, result: &ToolResult) -> Result<(), ClientError> {
        let Some(schema) = lock(&self.0).get(tool).cloned() else {
            return Ok(());
        };
        if result.is_error {
            return Ok(());
        }
        schema
            .check_output(tool, result.structured_content.as_ref())
            .map_err(ClientError::Protocol)
    }
}

fn malformed(method: &str, v: &Value) -> ClientError {
    ClientError::Protocol(format!("{method}: malformed result {v}"))
}

impl Client {
    /// `tools/list` as [`ToolInfo`]s (their output schemas are learnt for
    /// [`Client::call_tool_typed`]).
    pub fn list_tools_typed(&self) -> Result<Vec<ToolInfo>, ClientError> {
        let tools = self.list_tools()?;
        tools
            .iter()
            .map(|t| ToolInfo::from_value(t).ok_or_else(|| malformed("tools/list", t)))
            .collect()
    }

    /// `tools/call` as a [`ToolResult`]. When the tool declared an
    /// `outputSchema` in the last `tools/list`, a successful result must
    /// carry `structuredContent` that satisfies it, or this is
    /// [`ClientError::Protocol`] saying why.
    pub fn call_tool_typed(&self, name: &str, arguments: Value) -> Result<ToolResult, ClientError> {
        let v = self.call_tool(name, arguments)?;
        let result = ToolResult::from_value(&v).ok_or_else(|| malformed("tools/call", &v))?;
        self.shared.output_schemas.check(name, &result)?;
        Ok(result)
    }

    /// `resources/read` as [`ResourceContents`].
    pub fn read_resource_typed(&self, uri: &str) -> Result<Vec<ResourceContents>, ClientError> {
        let v = self.read_resource(uri)?;
        v.get("contents")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().map(ResourceContents::from_value).collect())
            .ok_or_else(|| malformed("resources/read", &v))
    }

    /// `prompts/get` as a [`PromptResult`].
    pub fn get_prompt_typed(
        &self,
        name: &str,
        arguments: Value,
    ) -> Result<PromptResult, ClientError> {
        let v = self.get_prompt(name, arguments)?;
        PromptResult::from_value(&v).ok_or_else(|| malformed("prompts/get", &v))
    }

    /// `completion/complete` (with `context.arguments`) as a [`Completion`].
    pub fn complete_typed(
        &self,
        reference: Value,
        argument: &str,
        value: &str,
        context: &[(&str, &str)],
    ) -> Result<Completion, ClientError> {
        let v = self.complete_with(reference, argument, value, context)?;
        Completion::from_value(&v["completion"]).ok_or_else(|| malformed("completion/complete", &v))
    }
}
