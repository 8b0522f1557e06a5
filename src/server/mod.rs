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

mod content;
mod prompt;
pub(crate) mod registry;
mod resource;
pub(crate) mod tool;
mod uri_template;

pub use content::{base64, Content, ResourceContents};
pub use prompt::{
    Completion, CompletionHandler, CompletionRef, CompletionRequest, Prompt, PromptArgument,
    PromptHandler, PromptResult, Role, MAX_COMPLETION_VALUES,
};
pub use resource::{Resource, ResourceHandler, ResourceTemplate, TemplateHandler};
pub use tool::{Tool, ToolError, ToolHandler, ToolResult};
pub use uri_template::UriTemplate;

use crate::protocol::{Context, Engine, EngineOptions, ListKind, ServerInfo};
use crate::transport::stdio::StdioOptions;
use registry::{RegisteredTool, Registry};
use std::sync::Arc;

/// Builds a [`Server`].
#[derive(Default)]
pub struct ServerBuilder {
    info: ServerInfo,
    options: EngineOptions,
    registry: Registry,
    tools: Vec<Tool>,
}

impl ServerBuilder {
    /// A display title for `serverInfo`.
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.info.title = Some(title.into());
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
        self.registry
            .resources
            .insert(resource.uri.clone(), Arc::new(resource));
        self
    }
    /// Adds a resource template.
    pub fn resource_template(mut self, template: ResourceTemplate) -> Self {
        self.registry
            .templates
            .insert(template.template.clone(), Arc::new(template));
        self
    }
    /// Adds a prompt.
    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.registry
            .prompts
            .insert(prompt.name.clone(), Arc::new(prompt));
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
        self.registry
            .completions
            .insert(reference, Arc::new(handler));
        self
    }
    /// Advertises the tools capability even with no tool registered yet.
    pub fn enable_tools(mut self) -> Self {
        self.registry.enabled.tools = true;
        self
    }
    /// Advertises the resources capability even with none registered yet.
    pub fn enable_resources(mut self) -> Self {
        self.registry.enabled.resources = true;
        self
    }
    /// Advertises the prompts capability even with none registered yet.
    pub fn enable_prompts(mut self) -> Self {
        self.registry.enabled.prompts = true;
        self
    }

    /// Compiles every tool's schemas and starts the handler pool.
    pub fn build(mut self) -> Result<Server, BuildError> {
        for tool in self.tools {
            let t = RegisteredTool::compile(tool).map_err(BuildError::Schema)?;
            self.registry.tools.insert(t.tool.name.clone(), Arc::new(t));
        }
        let engine = Engine::new(self.info, self.options, self.registry).map_err(BuildError::Io)?;
        Ok(Server { engine })
    }
}

/// Why a server could not be built or a tool not added.
#[derive(Debug)]
pub enum BuildError {
    /// A tool's input or output schema is not a valid JSON Schema object.
    Schema(String),
    /// The handler threads could not be started.
    Io(std::io::Error),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Schema(e) => f.write_str(e),
            BuildError::Io(e) => write!(f, "cannot start handler threads: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// An MCP server. Cheap to clone; every clone serves the same registry, and
/// changes made at run time reach connected clients as `list_changed`.
#[derive(Clone)]
pub struct Server {
    engine: Arc<Engine>,
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

    /// Adds or replaces a tool at run time and notifies clients.
    pub fn add_tool(&self, tool: Tool) -> Result<(), BuildError> {
        let t = RegisteredTool::compile(tool).map_err(BuildError::Schema)?;
        self.engine
            .registry_mut()
            .tools
            .insert(t.tool.name.clone(), Arc::new(t));
        self.engine.notify_list_changed(ListKind::Tools);
        Ok(())
    }
    /// Removes a tool at run time; notifies clients if it existed.
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = self.engine.registry_mut().tools.remove(name).is_some();
        if removed {
            self.engine.notify_list_changed(ListKind::Tools);
        }
        removed
    }
    /// Adds or replaces a resource at run time and notifies clients.
    pub fn add_resource(&self, resource: Resource) {
        self.engine
            .registry_mut()
            .resources
            .insert(resource.uri.clone(), Arc::new(resource));
        self.engine.notify_list_changed(ListKind::Resources);
    }
    /// Removes a resource at run time; notifies clients if it existed.
    pub fn remove_resource(&self, uri: &str) -> bool {
        let removed = self.engine.registry_mut().resources.remove(uri).is_some();
        if removed {
            self.engine.notify_list_changed(ListKind::Resources);
        }
        removed
    }
    /// Adds or replaces a prompt at run time and notifies clients.
    pub fn add_prompt(&self, prompt: Prompt) {
        self.engine
            .registry_mut()
            .prompts
            .insert(prompt.name.clone(), Arc::new(prompt));
        self.engine.notify_list_changed(ListKind::Prompts);
    }
    /// Removes a prompt at run time; notifies clients if it existed.
    pub fn remove_prompt(&self, name: &str) -> bool {
        let removed = self.engine.registry_mut().prompts.remove(name).is_some();
        if removed {
            self.engine.notify_list_changed(ListKind::Prompts);
        }
        removed
    }
    /// Tells subscribed clients that the resource at `uri` changed.
    pub fn notify_resource_updated(&self, uri: &str) {
        self.engine.notify_resource_updated(uri);
    }

    /// Serves MCP over Streamable HTTP until the transport fails (blocking).
    pub fn serve_http(&self, options: crate::transport::http::HttpOptions) -> std::io::Result<()> {
        self.start_http(options)?.wait()
    }

    /// Starts the Streamable HTTP transport in the background.
    pub fn start_http(
        &self,
        options: crate::transport::http::HttpOptions,
    ) -> std::io::Result<crate::transport::http::HttpServer> {
        crate::transport::http::HttpServer::start(self.engine.clone(), options)
    }

    /// Starts an instance of this server on AMQP in the background: it
    /// shares new sessions with the other instances of `config.server_name`.
    pub fn start_amqp(
        &self,
        config: crate::transport::amqp::AmqpConfig,
    ) -> std::io::Result<crate::transport::amqp::AmqpServer> {
        crate::transport::amqp::AmqpServer::start(self.engine.clone(), config)
    }

    /// Serves on AMQP until the transport's supervision tree ends.
    pub fn serve_amqp(&self, config: crate::transport::amqp::AmqpConfig) -> std::io::Result<()> {
        self.start_amqp(config)?.wait()
    }

    /// Starts the TCP transport (newline-delimited JSON-RPC) in the background.
    pub fn start_tcp(
        &self,
        options: crate::transport::tcp::TcpOptions,
    ) -> std::io::Result<crate::transport::tcp::TcpServer> {
        crate::transport::tcp::TcpServer::start(self.engine.clone(), options)
    }

    /// Serves one end of an in-process pair on a new thread; returns at once.
    pub fn serve_memory(&self, end: crate::transport::memory::MemoryEnd) -> std::io::Result<()> {
        let engine = self.engine.clone();
        std::thread::Builder::new()
            .name("mcpvisor-memory".into())
            .spawn(move || {
                crate::transport::memory::serve(
                    &engine,
                    end,
                    crate::transport::stdio::DEFAULT_SHUTDOWN_GRACE,
                )
            })?;
        Ok(())
    }

    /// Serves MCP over this process's stdin and stdout until EOF on stdin.
    pub fn serve_stdio(&self) -> std::io::Result<()> {
        self.serve_stdio_with(StdioOptions::default())
    }

    /// [`Server::serve_stdio`] with options.
    pub fn serve_stdio_with(&self, options: StdioOptions) -> std::io::Result<()> {
        crate::transport::stdio::serve(&self.engine, options)
    }
}
