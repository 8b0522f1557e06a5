//! # mcpvisor
//!
//! A Model Context Protocol (MCP) runtime for synchronous Rust: no async
//! runtime, blocking worker threads, crossbeam channels.
//!
//! - [`jsonrpc`]: the wire layer (parsing, validation, error responses).
//! - [`protocol`]: the engine (lifecycle, versions, dispatch, cancellation,
//!   progress, logging, server-to-client requests).
//! - [`server`]: the synchronous server API (tools, resources, prompts).
//! - [`transport`]: stdio, TCP, Streamable HTTP, AMQP, line framing, in-process pairs.
//! - [`client`]: the synchronous client.
//! - [`session`]: session identities.
#![warn(missing_docs)]

pub mod client;
pub mod jsonrpc;
pub mod protocol;
pub mod server;
pub mod session;
pub mod transport;
mod wait;

/// Module whose debug log shows the broker login as sent (amiquip logs its
/// SASL `StartOk` frame, password included); [`init_logging`] caps it at info.
pub const SECRET_LOGGING_MODULE: &str = "amiquip::io_loop::handshake_state";

/// Initializes `env_logger` from `RUST_LOG` (else `default_filter`), never
/// letting [`SECRET_LOGGING_MODULE`] log below info, so no level setting
/// puts broker credentials in the log. Programs that set up their own
/// logger should apply the same cap.
pub fn init_logging(default_filter: &str) {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter))
        .filter_module(SECRET_LOGGING_MODULE, log::LevelFilter::Info)
        .init();
}

pub use protocol::{Context, LogLevel, PeerError, ProtocolVersion, ToolContext};
pub use server::{
    Content, Prompt, Resource, ResourceTemplate, Server, Tool, ToolError, ToolResult,
};
