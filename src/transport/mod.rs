//! Transports, both roles: each turns bytes on a wire into messages for the
//! protocol engine (server side) or for the client, and writes what comes
//! back. They know the engine and the wire, never the `Server` builder or
//! the `Client`: a listener is handed an [`Engine`](crate::protocol::Engine),
//! a client gets a [`connection::Connection`].
//!
//! - [`stdio`], [`tcp`], [`http`], [`amqp`], [`memory`]: the transports;
//!   each network listener is a supervisor child spec (`child_spec`) that
//!   any supervision tree can own, with a `start` that runs it under a tree
//!   of its own.
//! - [`listen::Listen`]: the one way flags, config and examples name a listener.
//! - [`custom::ServerConnection`]: the seam for a transport of your own.
//! - [`connection`]: what a client talks through (child processes, TCP,
//!   line framing); the HTTP and AMQP client connections live with their
//!   transports.

#[cfg(any(feature = "tcp", feature = "http"))]
pub(crate) mod accept;
pub(crate) mod accept_errors;
#[cfg(feature = "amqp")]
pub mod amqp;
pub(crate) mod child_exit;
#[cfg(feature = "client")]
pub mod connection;
pub mod custom;
#[cfg(any(all(feature = "http", feature = "client"), feature = "amqp"))]
pub(crate) mod dial;
pub(crate) mod direct;
pub(crate) mod flow;
#[cfg(feature = "http")]
pub mod http;
pub mod lines;
pub mod listen;
pub mod memory;
#[cfg(any(feature = "client", feature = "amqp"))]
pub mod reconnect;
#[cfg(any(feature = "http", feature = "amqp"))]
pub(crate) mod session_table;
pub(crate) mod spare;
pub mod stdio;
#[cfg(feature = "tcp")]
pub mod tcp;
#[cfg(feature = "tls")]
pub(crate) mod tls;
pub mod tree;

#[cfg(any(feature = "http", feature = "amqp"))]
pub use session_table::{
    DEFAULT_IDLE_TIMEOUT as DEFAULT_SESSION_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS,
};
