//! Transports: each turns bytes on a wire into messages for the protocol
//! engine and writes what the engine sends back.

pub(crate) mod accept;
pub mod amqp;
pub mod http;
pub mod lines;
pub mod memory;
pub mod stdio;
pub mod tcp;
