//! The supervised service the `mcpvisor` daemon runs (#12 builds it up
//! here): the top layer, over the server, the client and the transports.
//! Today: command tools, the configuration file, and the daemon's flags,
//! listeners and signals.

pub mod command;
pub mod config;
pub mod daemon;
pub mod notify;
pub mod signals;

pub use command::CommandTool;
pub use config::{Config, ConfigError};
