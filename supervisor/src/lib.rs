//! Erlang/OTP-style supervision for plain std threads. This crate knows
//! nothing of MCP; its supervisors, child specs and restart strategies are
//! the subject of the next milestone. It is a member of the workspace now so
//! that the layout matches the architecture.
