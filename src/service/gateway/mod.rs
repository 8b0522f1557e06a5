//! The gateway: the upstream MCP servers of `mcpServers`, each supervised
//! (`upstream`), served as one server together with the command tools
//! under names of our own ([`names`]), every request relayed both ways
//! (`proxy`).

pub mod names;
#[cfg(feature = "client")]
mod proxy;
#[cfg(feature = "client")]
mod sessions;
#[cfg(feature = "client")]
pub(crate) mod upstream;
