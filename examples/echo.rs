//! One tool, `echo` ({message} -> that message as text): the benchmark target.
//!
//! ```text
//! echo [--stdio | --http ADDR]
//! ```

use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::process::ExitCode;

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let http = match args.as_slice() {
        [] => None,
        [s] if s == "--stdio" => None,
        [flag, addr] if flag == "--http" && addr.parse::<std::net::SocketAddr>().is_ok() => {
            addr.parse().ok()
        }
        _ => {
            eprintln!("echo: bad arguments {args:?}\nusage: echo [--stdio | --http ADDR]");
            return ExitCode::from(2);
        }
    };
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
    let served = server.map(|s| match http {
        Some(addr) => s
            .start_http(mcpvisor::transport::http::HttpOptions::default().with_bind(addr))
            .and_then(|h| {
                println!("listening on http://{}/mcp", h.local_addr());
                h.wait()
            }),
        None => s.serve_stdio(),
    });
    match served {
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
