//! The supervised service the `mcpvisor` daemon runs (#12 builds it up
//! here): the top layer, over the server, the client and the transports.
//! Today: command tools and the configuration file.

pub mod command;
pub mod config;

pub use command::CommandTool;
pub use config::{Config, ConfigError};
