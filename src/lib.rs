//! # mcpvisor
//!
//! A Model Context Protocol (MCP) runtime for synchronous Rust: no async
//! runtime, blocking worker threads, crossbeam channels.
//!
//! - [`jsonrpc`]: the wire layer (parsing, validation, error responses).
//! - [`protocol`]: the engine (lifecycle, versions, dispatch, cancellation,
//!   progress, logging, server-to-client requests).
//! - [`server`]: the synchronous server API (tools, resources, prompts).
//! - [`transport`]: stdio, Streamable HTTP, line framing, in-process pairs.
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

pub use protocol::{Context, LogLevel, PeerError, ProtocolVersion, ToolContext};
pub use server::{
    Content, Prompt, Resource, ResourceTemplate, Server, Tool, ToolError, ToolResult,
};
