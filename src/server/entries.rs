//! The builder's tools, resources, templates, prompts and completions as
//! catalog entries: each definition rendered once, arguments checked
//! against the tool's schema, typed results turned into JSON, and the
//! handler's errors mapped to what the spec asks for.

use super::prompt::{CompletionHandler, Prompt};
use super::resource::{Resource, ResourceTemplate};
use super::tool::{ErrorKind, Tool, ToolError, ToolResult};
use crate::jsonrpc::ErrorObject;
use crate::model::schema::Schema;
use crate::model::{Answer, CompletionRef, CompletionRequest, ResourceContents};
use crate::protocol::catalog::{
    CompletionEntry, PromptEntry, ResourceEntry, TemplateEntry, ToolEntry,
};
use crate::protocol::tasks::TaskSupport;
use crate::protocol::Context;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A tool's `member` schema: a JSON Schema object schema (`"type":
/// "object"`), compiled.
fn object_schema(tool: &str, member: &str, schema: &Value) -> Result<Schema, String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!(
            "tool {tool:?}: {member} must be a JSON Schema object with \"type\": \"object\""
        ));
    }
    Schema::compile(schema).map_err(|e| format!("tool {tool:?}: invalid {member}: {e}"))
}

/// A tool with its compiled schemas and its definition, built once.
pub(crate) struct LocalTool {
    tool: Tool,
    input: Schema,
    output: Option<Schema>,
    definition: Value,
}

impl LocalTool {
    pub(crate) fn compile(tool: Tool) -> Result<LocalTool, String> {
        crate::model::check_tool_name(&tool.name)?;
        if tool.quick && tool.detach_in_handler {
            return Err(format!(
                "tool {}: a quick tool cannot make its call a task itself (detach_in_handler): it runs on the thread that reads requests",
                tool.name
            ));
        }
        let input = object_schema(&tool.name, "inputSchema", &tool.input_schema)?;
        // A tool whose x-mcp-header declarations break the rules would be
        // dropped by 2026-07-28 clients and have none of its headers
        // checked: a mistake of the program's, said at build.
        crate::model::param_headers(&tool.input_schema)
            .map_err(|e| format!("tool {}: inputSchema: {e}", tool.name))?;
        let output = match &tool.output_schema {
            // structuredContent is an object: so is what describes it.
            Some(s) => Some(object_schema(&tool.name, "outputSchema", s)?),
            None => None,
        };
        let definition = tool.listing();
        Ok(LocalTool {
            tool,
            input,
            output,
            definition,
        })
    }

    pub(crate) fn name(&self) -> &str {
        &self.tool.name
    }

    fn checked(&self, result: ToolResult) -> Result<Answer, ErrorObject> {
        let name = &self.tool.name;
        if let Some(s) = result
            .structured_content
            .as_ref()
            .filter(|s| !s.is_object())
        {
            return Err(ErrorObject::internal(format!(
                "tool {name} returned structuredContent that is not a JSON object: {s}"
            )));
        }
        if let (Some(schema), false) = (&self.output, result.is_error) {
            schema
                .check_output(name, result.structured_content.as_ref())
                .map_err(ErrorObject::internal)?;
        }
        Ok(Answer::Tool(result))
    }
}

impl ToolEntry for LocalTool {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn task_support(&self) -> TaskSupport {
        self.tool.task_support
    }
    fn detaches_itself(&self) -> bool {
        self.tool.detach_in_handler
    }
    fn is_quick(&self) -> bool {
        self.tool.quick
    }

    fn call(&self, arguments: Value, ctx: &Context) -> Result<Answer, ErrorObject> {
        let name = &self.tool.name;
        if let Err(e) = self.input.check(&arguments) {
            let message = format!("Invalid arguments for tool {name}: {e}");
            if ctx.protocol().version.input_errors_are_tool_errors() {
                return Ok(Answer::Tool(ToolResult::error(message)));
            }
            return Err(ErrorObject::invalid_params(message));
        }
        let args = match arguments {
            Value::Object(args) => args,
            _ => Map::new(),
        };
        match (self.tool.handler)(args, ctx) {
            Ok(result) => self.checked(result),
            Err(ToolError(ErrorKind::Failed(m))) => Ok(Answer::Tool(ToolResult::error(m))),
            Err(ToolError(ErrorKind::Rpc(e))) => Err(e),
        }
    }
}

fn contents(result: Result<Vec<ResourceContents>, ToolError>) -> Result<Value, ErrorObject> {
    let contents = result.map_err(ToolError::into_rpc)?;
    Ok(json!({"contents": contents.iter().map(ResourceContents::to_value).collect::<Vec<_>>()}))
}

/// A builder item with its definition rendered once.
pub(crate) struct Local<T> {
    pub(crate) item: T,
    definition: Value,
}

/// A builder item that renders its own list definition.
pub(crate) trait Listable {
    fn listing(&self) -> Value;
}

impl<T: Listable> Local<T> {
    pub(crate) fn new(item: T) -> Self {
        let definition = item.listing();
        Local { item, definition }
    }
}

impl ResourceEntry for Local<Resource> {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn read(&self, uri: &str, ctx: &Context) -> Result<Value, ErrorObject> {
        contents((self.item.handler)(uri, ctx))
    }
}

impl TemplateEntry for Local<ResourceTemplate> {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn matches(&self, uri: &str) -> bool {
        self.item.matcher.matches(uri).is_some()
    }
    fn read(&self, uri: &str, ctx: &Context) -> Result<Value, ErrorObject> {
        let vars = self.item.matcher.matches(uri).unwrap_or_default();
        contents((self.item.handler)(uri, &vars, ctx))
    }
}

impl PromptEntry for Local<Prompt> {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn get(&self, arguments: &Value, ctx: &Context) -> Result<Value, ErrorObject> {
        // The engine checked that every value is a string.
        let args: HashMap<String, String> = arguments
            .as_object()
            .into_iter()
            .flat_map(Map::iter)
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        let prompt = &self.item;
        if let Some(missing) = prompt
            .arguments
            .iter()
            .find(|a| a.required && !args.contains_key(&a.name))
        {
            return Err(ErrorObject::invalid_params(format!(
                "prompt {}: missing required argument {:?}",
                prompt.name, missing.name
            )));
        }
        (prompt.handler)(&args, ctx)
            .map(|r| r.to_value())
            .map_err(ToolError::into_rpc)
    }
}

/// A completion handler of the builder.
pub(crate) struct LocalCompletion(pub(crate) Arc<CompletionHandler>);

impl CompletionEntry for LocalCompletion {
    fn complete(
        &self,
        _: &CompletionRef,
        request: &CompletionRequest,
        ctx: &Context,
    ) -> Result<Value, ErrorObject> {
        let completion = (self.0)(request, ctx).map_err(ToolError::into_rpc)?;
        Ok(json!({"completion": completion.to_value()}))
    }
}

/// A tool whose definition and results pass through untouched: no schema
/// check, no rewriting, unknown members and `_meta` kept. What a proxy
/// offers for a tool of another server.
pub struct PassThroughTool<F> {
    definition: Value,
    call: F,
    task_support: TaskSupport,
}

impl<F> PassThroughTool<F>
where
    F: Fn(&Value, &Context) -> Result<Value, ErrorObject> + Send + Sync + 'static,
{
    /// A tool listed as `definition` (which must hold a string `name`) and
    /// answered by `call` (arguments in, the whole `CallToolResult` out).
    pub fn new(definition: Value, call: F) -> Self {
        PassThroughTool {
            definition,
            call,
            task_support: TaskSupport::Forbidden,
        }
    }
    /// Whether its calls may run as tasks (default
    /// [`TaskSupport::Forbidden`]).
    pub fn task_support(mut self, support: TaskSupport) -> Self {
        self.task_support = support;
        self
    }
}

impl<F> ToolEntry for PassThroughTool<F>
where
    F: Fn(&Value, &Context) -> Result<Value, ErrorObject> + Send + Sync + 'static,
{
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn call(&self, arguments: Value, ctx: &Context) -> Result<Answer, ErrorObject> {
        (self.call)(&arguments, ctx).map(Answer::Json)
    }
    fn task_support(&self) -> TaskSupport {
        self.task_support
    }
}
