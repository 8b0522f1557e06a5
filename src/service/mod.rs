//! The supervised service the `mcpvisor` daemon runs: the top layer, over
//! the server, the client and the transports. Command tools, the
//! configuration file, the daemon's flags, listeners (socket activation
//! included), signals, reload, the control socket, metrics, sd_notify and
//! the journal.

pub mod activation;
pub mod command;
pub mod config;
pub mod control;
pub mod daemon;
pub mod flags;
pub mod gateway;
pub mod journal;
mod listeners;
mod local;
pub mod metrics;
pub mod notify;
pub mod signals;
mod state;

pub use command::CommandTool;
pub use config::{Config, ConfigError};
