//! One tool, `echo` ({message} -> that message as text): the benchmark target.
//!
//! ```text
//! echo [--stdio | --tcp ADDR | --http ADDR [--max-sessions N] | --amqp URL [--amqp-name NAME]]
//! ```

use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::process::ExitCode;

fn main() -> ExitCode {
    mcpvisor::init_logging("warn");
    let mut http: Option<std::net::SocketAddr> = None;
    let mut tcp: Option<std::net::SocketAddr> = None;
    let mut max_sessions = mcpvisor::transport::DEFAULT_MAX_SESSIONS;
    let mut amqp: Option<String> = None;
    let mut amqp_name = "mcpvisor-echo".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let parsed = match a.as_str() {
            "--stdio" => Some(()),
            "--tcp" => args
                .next()
                .and_then(|v| v.parse().ok())
                .map(|addr| tcp = Some(addr)),
            "--http" => args
                .next()
                .and_then(|v| v.parse().ok())
                .map(|addr| http = Some(addr)),
            "--amqp" => args.next().map(|url| amqp = Some(url)),
            "--amqp-name" => args.next().map(|name| amqp_name = name),
            "--max-sessions" => args
                .next()
                .and_then(|v| v.parse().ok())
                .map(|n| max_sessions = n),
            _ => None,
        };
        if parsed.is_none() {
            eprintln!(
                "echo: bad argument {a:?}\nusage: echo [--stdio | --tcp ADDR | --http ADDR [--max-sessions N] | --amqp URL [--amqp-name NAME]]"
            );
            return ExitCode::from(2);
        }
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
    let served = server.map(|s| match (tcp, http) {
        _ if amqp.is_some() => {
            let url = amqp.as_deref().unwrap_or_default();
            mcpvisor::transport::amqp::AmqpConfig::new(url, amqp_name.as_str())
                .map_err(std::io::Error::other)
                .and_then(|mut config| {
                    config.max_sessions = max_sessions;
                    let a = s.start_amqp(config)?;
                    println!("listening on {a}");
                    a.wait()
                })
        }
        (Some(addr), _) => s
            .start_tcp(mcpvisor::transport::tcp::TcpOptions::default().with_bind(addr))
            .and_then(|t| {
                println!("listening on tcp://{}", t.local_addr());
                t.wait()
            }),
        (None, Some(addr)) => s
            .start_http(
                mcpvisor::transport::http::HttpOptions::default()
                    .with_bind(addr)
                    .with_max_sessions(max_sessions),
            )
            .and_then(|h| {
                println!("listening on http://{}/mcp", h.local_addr());
                h.wait()
            }),
        (None, None) => s.serve_stdio(),
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
