//! AMQP (RabbitMQ) transport — groundwork. Configuration (URL validation,
//! credential redaction), method-derived routing keys and broker connections
//! with TCP_NODELAY are here; the server and client follow (issue 6).

pub mod config;
pub mod connect;
pub mod envelope;
pub mod routing;

pub use config::{AmqpConfig, AmqpUrl, ConfigError};
pub use connect::{open, ConnectError};
pub use routing::{MethodRouting, RoutingStrategy};
