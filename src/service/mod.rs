//! The supervised service the `mcpvisor` daemon runs (#12 builds it up
//! here): the top layer, over the server, the client and the transports.
//! Today: command tools.

pub mod command;

pub use command::CommandTool;
