//! One tool, `echo` ({message} -> that message as text): the benchmark target.
//!
//! ```text
//! echo [--stdio]
//! ```

use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::process::ExitCode;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    if let Some(other) = std::env::args().skip(1).find(|a| a != "--stdio") {
        eprintln!("echo: unknown argument {other:?}\nusage: echo [--stdio]");
        return ExitCode::from(2);
    }
    let server = Server::builder("mcpvisor-echo", env!("CARGO_PKG_VERSION"))
        .tool(
            Tool::new(
                "echo",
                json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
                |args, _| Ok(ToolResult::text(args["message"].as_str().unwrap_or_default())),
            )
            .description("Returns the message it is given"),
        )
        .build();
    match server.map(|s| s.serve_stdio()) {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("echo: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::FAILURE
        }
    }
}
