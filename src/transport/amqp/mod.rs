//! AMQP (RabbitMQ) transport, server and client sides: the body of every
//! message is the raw JSON-RPC message; transport data travels in AMQP
//! properties and headers. See [`topology`] for the broker objects and how
//! sessions are owned by instances.

#[cfg(feature = "client")]
mod client;
pub mod config;
pub mod connect;
pub mod envelope;
pub(crate) mod link;
pub mod routing;
pub mod server;
#[cfg(feature = "amqps")]
pub(crate) mod tls;
pub mod topology;

#[cfg(feature = "client")]
pub use client::{OWNER_PROBE_INTERVAL, RESUME_GRACE};
pub use config::{AmqpConfig, AmqpEvent, AmqpUrl, ConfigError, EventHandler};
pub use connect::{open, ConnectError};
pub use routing::{MethodRouting, RoutingStrategy};
pub use server::{AmqpListener, AmqpServer};
