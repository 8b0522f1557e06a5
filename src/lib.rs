//! # mcpvisor
//!
//! A Model Context Protocol (MCP) runtime for synchronous Rust: no async
//! runtime, blocking worker threads, crossbeam channels.
//!
//! The layers point one way; each names only those listed before it:
//!
//! - [`jsonrpc`]: the wire (parsing, validation, error responses).
//! - [`model`]: data types (revisions, log levels, content, completions).
//! - [`protocol`]: the engine (lifecycle, dispatch, the [`protocol::catalog`]
//!   of sources, cancellation, progress, logging, the one path for requests
//!   to the peer, what a handler sees).
//! - [`transport`]: stdio, TCP, Streamable HTTP, AMQP, in-process pairs,
//!   both roles; listeners as supervisor child specs; the custom-transport seam.
//! - [`server`]: the synchronous server API (tools, resources, prompts as a
//!   local catalog source); [`client`]: the synchronous client.
//! - [`serve`]: `serve_*` / `start_*` on a [`Server`], and listeners from a
//!   [`transport::listen::Listen`].
//!
//! Cargo features follow the layers (all on by default): `tcp`, `http`,
//! `amqp`, `amqps` (TLS for AMQP), `client`, `schema` (JSON Schema
//! validation of tool arguments and results). stdio and the in-process pair
//! are always there.
#![warn(missing_docs)]

#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod jsonrpc;
pub mod model;
pub mod protocol;
pub mod serve;
pub mod server;
pub mod service;
mod sync;
mod throttle;
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

pub use model::{LogLevel, ProtocolVersion};
pub use protocol::{Context, PeerError, ToolContext};
pub use server::{
    Content, Prompt, Resource, ResourceTemplate, Server, Tool, ToolError, ToolResult,
};
