//! AMQP (RabbitMQ) transport — groundwork. Configuration (URL validation,
//! credential redaction) and method-derived routing keys are here; the
//! broker-facing server and client follow (issue 6).

pub mod config;
pub mod routing;

pub use config::{AmqpConfig, AmqpUrl, ConfigError};
pub use routing::{MethodRouting, RoutingStrategy};
