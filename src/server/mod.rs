//! The synchronous server API: register tools, resources, prompts and
//! completions, then serve a transport with one blocking call.
//!
//! ```no_run
//! use mcpvisor::server::{Server, Tool, ToolResult};
//! use serde_json::json;
//!
//! let server = Server::builder("greeter", "1.0.0")
//!     .tool(Tool::new(
//!         "greet",
//!         json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
//!         |args, _ctx| Ok(ToolResult::text(format!("Hello, {}!", args["name"].as_str().unwrap_or("?")))),
//!     ))
//!     .build()
//!     .expect("valid server");
//! server.serve_stdio().expect("stdio");
//! ```

mod entries;
mod methods;
mod prompt;
mod resource;
mod skills;
#[cfg(test)]
mod tests;
pub(crate) mod tool;
mod uri_template;

pub use crate::model::{
    base64, Annotations, Completion, CompletionRef, CompletionRequest, Content, Icon, IconTheme,
    ResourceContents, MAX_COMPLETION_VALUES,
};
pub use crate::protocol::tasks::TaskSupport;
pub use crate::protocol::{SessionEvent, SessionEvents, SessionHandle};
pub use entries::PassThroughTool;
pub use methods::MethodHandler;
pub use prompt::{CompletionHandler, Prompt, PromptArgument, PromptHandler, PromptResult, Role};
pub use resource::{Resource, ResourceHandler, ResourceTemplate, TemplateHandler};
pub use skills::{SkillsDir, DEFAULT_SKILLS_POLL_INTERVAL};
pub use tool::{Tool, ToolError, ToolHandler, ToolResult};
pub use uri_template::UriTemplate;

use crate::protocol::catalog::{
    key_of, CatalogError, PromptEntry, ResourceEntry, Source, ToolEntry,
};
use crate::protocol::{Changes, Context, Engine, EngineOptions, ServerInfo};
use crate::sync::lock;
use entries::{Local, LocalCompletion, LocalTool};
use std::sync::{Arc, Mutex};

/// The id of the builder's own catalog source. It is empty, so it sorts
/// before every other source id and its names win any clash.
pub const LOCAL_SOURCE: &str = "";

/// Builds a [`Server`].
#[derive(Default)]
pub struct ServerBuilder {
    info: ServerInfo,
    options: EngineOptions,
    enabled: crate::protocol::catalog::Enabled,
    source: Source,
    tools: Vec<Tool>,
    skills: Vec<SkillsDir>,
    methods: methods::Methods,
}

impl ServerBuilder {
    /// A display title for `serverInfo`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
        self
    }
    /// A description of what the server does (`serverInfo.description`).
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.info.description = Some(description.into());
        self
    }
    /// The server's home page (`serverInfo.websiteUrl`).
    pub fn website_url(mut self, url: impl Into<String>) -> Self {
        self.info.website_url = Some(url.into());
        self
    }
    /// Adds an icon to `serverInfo` (SEP-973).
    pub fn icon(mut self, icon: Icon) -> Self {
        self.info.icons.push(icon);
        self
    }
    /// Instructions returned by `initialize`.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.info.instructions = Some(instructions.into());
        self
    }
    /// Engine options (pool size, queue, page size).
    pub fn options(mut self, options: EngineOptions) -> Self {
        self.options = options;
        self
    }
    /// Adds a tool.
    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }
    /// Adds a resource.
    pub fn resource(mut self, resource: Resource) -> Self {
        self.source = self
            .source
            .resource(Arc::new(Local::<Resource>::new(resource)));
        self
    }
    /// Adds a resource template.
    pub fn resource_template(mut self, template: ResourceTemplate) -> Self {
        self.source = self
            .source
            .template(Arc::new(Local::<ResourceTemplate>::new(template)));
        self
    }
    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.source = self.source.prompt(Arc::new(Local::<Prompt>::new(prompt)));
        self
    }
    /// Adds a completion provider for a prompt argument or template variable.
    pub fn completion<F>(mut self, reference: CompletionRef, handler: F) -> Self
    where
        F: Fn(&CompletionRequest, &Context) -> Result<Completion, ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.source = self
            .source
            .completion(reference, Arc::new(LocalCompletion(Arc::new(handler))));
        self
    }
    /// Serves the Agent Skills under `path` (the skills extension,
    /// SEP-2640): each folder holding a `SKILL.md` as
    /// `skill://<folder path>/SKILL.md`, its files as resources with their
    /// digests and sizes. Read at [`build`](Self::build) (an unreadable
    /// directory fails it); [`SkillsDir::watcher`] reloads it on change.
    pub fn skills_dir(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.skills.push(SkillsDir::new(path));
        self
    }
    /// Serves the custom method `name` (one the spec does not define;
    /// vendor methods are best named with a prefix of their own,
    /// `example.com/echo`). Requests for it run on the handler pool like
    /// a tool call, with a [`Context`]; a method the engine itself serves
    /// is refused at [`build`](Self::build). Notifications of unknown
    /// methods are ignored, as the spec asks.
    pub fn method<F>(mut self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(
                &serde_json::Map<String, serde_json::Value>,
                &Context,
            ) -> Result<serde_json::Value, ToolError>
            + Send
            + Sync
            + 'static,
    {
        self.methods.0.insert(name.into(), Arc::new(handler));
        self
    }
    /// Declares `capabilities.experimental[name]` (non-standard features
    /// the server offers; `settings` is an object, `{}` for none).
    pub fn experimental(mut self, name: impl Into<String>, settings: serde_json::Value) -> Self {
        self.info.experimental.insert(name.into(), settings);
        self
    }
    /// Advertises the tools capability even with no tool registered yet.
    pub fn enable_tools(mut self) -> Self {
        self.enabled.tools = true;
        self
    }
    /// Advertises the resources capability even with none registered yet.
    pub fn enable_resources(mut self) -> Self {
        self.enabled.resources = true;
        self
    }
    /// Advertises the prompts capability even with none registered yet.
    pub fn enable_prompts(mut self) -> Self {
        self.enabled.prompts = true;
        self
    }
    /// Advertises the completions capability even with no completion
    /// handler registered yet.
    pub fn enable_completions(mut self) -> Self {
        self.enabled.completions = true;
        self
    }

    /// Compiles every tool's schemas and starts the handler pool. A tool
    /// name that breaks SEP-986, a schema that is not an object schema, or
    /// two tools (prompts, resources, templates) under one name (URI) is
    /// an error, never a silent replacement.
    pub fn build(mut self) -> Result<Server, BuildError> {
        let s = &self.source;
        unique("tool", self.tools.iter().map(|t| Some(t.name.clone())))?;
        unique(
            "prompt",
            s.prompts.iter().map(|p| key_of(p.definition(), "name")),
        )?;
        unique(
            "resource",
            s.resources.iter().map(|r| key_of(r.definition(), "uri")),
        )?;
        let templates = s.templates.iter();
        unique(
            "resource template",
            templates.map(|t| key_of(t.definition(), "uriTemplate")),
        )?;
        if let Some(m) = self
            .methods
            .0
            .keys()
            .find(|m| crate::protocol::is_engine_method(m))
        {
            return Err(BuildError::Duplicate(format!(
                "custom method {m:?} is one the engine serves itself"
            )));
        }
        for (name, settings) in &self.info.experimental {
            if !settings.is_object() {
                return Err(BuildError::Schema(format!(
                    "experimental capability {name:?} must be a JSON object"
                )));
            }
        }
        for tool in self.tools {
            self.source = self.source.tool(compile(tool)?);
        }
        let engine = Engine::new(self.info, self.options, self.enabled).map_err(BuildError::Io)?;
        engine
            .replace_source(LOCAL_SOURCE, self.source)
            .map_err(|e| BuildError::Schema(e.to_string()))?;
        if !self.methods.0.is_empty() {
            engine.set_fallback(Some(Arc::new(self.methods)));
        }
        for dir in &self.skills {
            dir.serve(&engine)
                .map_err(|e| BuildError::Schema(format!("{}: {e}", dir.source_id())))?;
        }
        Ok(Server {
            engine,
            local: Arc::new(Mutex::new(())),
        })
    }
}

/// Refuses a second entry of `kind` with the same key.
fn unique(kind: &str, keys: impl Iterator<Item = Option<String>>) -> Result<(), BuildError> {
    let mut seen = std::collections::HashSet::new();
    for key in keys.flatten() {
        if !seen.insert(key.clone()) {
            return Err(BuildError::Duplicate(format!(
                "{kind} {key:?} is registered twice"
            )));
        }
    }
    Ok(())
}

fn compile(tool: Tool) -> Result<Arc<dyn ToolEntry>, BuildError> {
    Ok(Arc::new(
        LocalTool::compile(tool).map_err(BuildError::Schema)?,
    ))
}

impl Tool {
    /// This tool as a catalog entry (schemas compiled), for a [`Source`] of
    /// your own: see [`Server::replace_source`].
    pub fn into_entry(self) -> Result<Arc<dyn ToolEntry>, BuildError> {
        compile(self)
    }
}

/// Why a server could not be built or a tool not added.
#[derive(Debug)]
pub enum BuildError {
    /// A tool's name breaks SEP-986, its input or output schema is not a
    /// valid JSON Schema object schema, its `x-mcp-header` declarations
    /// break SEP-2243's rules, or it is both `quick` and
    /// `detach_in_handler`.
    Schema(String),
    /// Two entries of one kind share a name (a URI for resources).
    Duplicate(String),
    /// The handler threads could not be started.
    Io(std::io::Error),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Schema(e) | BuildError::Duplicate(e) => f.write_str(e),
            BuildError::Io(e) => write!(f, "cannot start handler threads: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// An MCP server. Cheap to clone; every clone serves the same catalog, and
/// changes made at run time reach connected clients as `list_changed`.
///
/// What the builder registered is the catalog source [`LOCAL_SOURCE`];
/// `add_*` / `remove_*` change it one entry at a time, and
/// [`Server::replace_source`] swaps a whole source of your own at once.
#[derive(Clone)]
pub struct Server {
    engine: Arc<Engine>,
    // Held while a change to the local source is applied, so changes
    // apply in order (the source itself lives in the engine).
    local: Arc<Mutex<()>>,
}

impl Server {
    /// Starts building a server with `serverInfo` name and version.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        let mut b = ServerBuilder::default();
        b.info.name = name.into();
        b.info.version = version.into();
        b
    }

    /// The protocol engine, for transports.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Replaces (or adds) the catalog source `id` in one step: clients get
    /// one `list_changed` per kind whose listing changed. `id` must not be
    /// [`LOCAL_SOURCE`] (the builder's own, changed with `add_*`).
    pub fn replace_source(&self, id: &str, source: Source) -> Result<Changes, CatalogError> {
        if id == LOCAL_SOURCE {
            return Err(CatalogError(
                "the local source is changed with add_* and remove_*".into(),
            ));
        }
        self.engine.replace_source(id, source)
    }

    /// Withdraws the catalog source `id` with all its entries.
    pub fn withdraw_source(&self, id: &str) -> Changes {
        if id == LOCAL_SOURCE {
            return Changes::default();
        }
        self.engine.withdraw_source(id)
    }

    /// Applies `change` to the local source (as the engine holds it) and
    /// swaps it in; clients are told after the lock is released.
    fn update_local(&self, change: impl FnOnce(&mut Source) -> bool) -> bool {
        let changes = {
            let _ordered = lock(&self.local);
            let mut source = self.engine.source(LOCAL_SOURCE).unwrap_or_default();
            if !change(&mut source) {
                return false;
            }
            match self.engine.catalog.replace(LOCAL_SOURCE, source) {
                Ok(changes) => changes,
                Err(e) => {
                    // Entries are checked when they are made; this cannot happen.
                    log::error!("server: local catalog change refused: {e}");
                    return false;
                }
            }
        };
        self.engine.announce(changes);
        true
    }

    /// Adds or replaces a tool at run time and notifies clients.
    pub fn add_tool(&self, tool: Tool) -> Result<(), BuildError> {
        let entry = LocalTool::compile(tool).map_err(BuildError::Schema)?;
        let name = entry.name().to_owned();
        self.update_local(|s| {
            remove(&mut s.tools, |t| t.definition(), "name", &name);
            s.tools.push(Arc::new(entry));
            true
        });
        Ok(())
    }
    /// Removes a tool at run time; notifies clients if it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        self.update_local(|s| remove(&mut s.tools, |t| t.definition(), "name", name))
    }
    /// Adds or replaces a resource at run time and notifies clients.
    pub fn add_resource(&self, resource: Resource) {
        let entry: Arc<dyn ResourceEntry> = Arc::new(Local::<Resource>::new(resource));
        let uri = key_of(entry.definition(), "uri").unwrap_or_default();
        self.update_local(|s| {
            remove(&mut s.resources, |r| r.definition(), "uri", &uri);
            s.resources.push(entry);
            true
        });
    }
    /// Removes a resource at run time; notifies clients if it existed.
    pub fn remove_resource(&self, uri: &str) -> bool {
        self.update_local(|s| remove(&mut s.resources, |r| r.definition(), "uri", uri))
    }
    /// Adds or replaces a prompt at run time and notifies clients.
    pub fn add_prompt(&self, prompt: Prompt) {
        let entry: Arc<dyn PromptEntry> = Arc::new(Local::<Prompt>::new(prompt));
        let name = key_of(entry.definition(), "name").unwrap_or_default();
        self.update_local(|s| {
            remove(&mut s.prompts, |p| p.definition(), "name", &name);
            s.prompts.push(entry);
            true
        });
    }
    /// Removes a prompt at run time; notifies clients if it existed.
    pub fn remove_prompt(&self, name: &str) -> bool {
        self.update_local(|s| remove(&mut s.prompts, |p| p.definition(), "name", name))
    }
    /// Session events (a client's handshake done, its roots changed, its
    /// session closed) for a worker thread, from now on for as long as the
    /// receiver lives. Each [`SessionEvent::Opened`] carries a
    /// [`SessionHandle`] the thread may keep to reach that client later.
    pub fn session_events(&self) -> SessionEvents {
        self.engine.session_events()
    }
    /// Tells subscribed clients that the resource at `uri` changed.
    pub fn notify_resource_updated(&self, uri: &str) {
        self.engine.notify_resource_updated(uri);
    }
}

/// Removes the entries whose `member` is `value`; whether any was there.
fn remove<T: ?Sized>(
    entries: &mut Vec<Arc<T>>,
    definition: impl Fn(&T) -> &serde_json::Value,
    member: &str,
    value: &str,
) -> bool {
    let before = entries.len();
    entries.retain(|e| key_of(definition(e), member).as_deref() != Some(value));
    entries.len() != before
}
