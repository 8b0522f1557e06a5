//! One tool, `echo` ({message} -> that message as text): the benchmark target.
//!
//! ```text
//! echo [--listen LISTEN | --stdio | --tcp ADDR | --http ADDR] [--max-sessions N]
//! ```
//! `LISTEN` is `stdio` (the default), `tcp://ADDR`, `http://ADDR/mcp` or
//! `amqp://USER:PASS@HOST/VHOST?name=NAME`; port 0 picks a free port. The
//! bound listener is printed as `listening on ...`.

#[path = "common/listen_args.rs"]
mod listen_args;

use listen_args::{listen_flag, LISTEN_USAGE};
use mcpvisor::serve::ListenOptions;
use mcpvisor::transport::listen::Listen;
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::process::ExitCode;

fn main() -> ExitCode {
    mcpvisor::init_logging("warn");
    let mut listen = Listen::Stdio;
    let mut max_sessions: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let parsed = match listen_flag(&a, &mut args) {
            Some(l) => l.map(|l| listen = l),
            None if a == "--max-sessions" => args
                .next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| "--max-sessions needs a number".to_owned())
                .map(|n| max_sessions = Some(n)),
            None => Err(format!("unknown argument {a:?}")),
        };
        if let Err(e) = parsed {
            eprintln!("echo: {e}\nusage: echo {LISTEN_USAGE} [--max-sessions N]");
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
            .description("Returns the message it is given")
            // It returns at once and never asks the client anything: it runs
            // on the thread that read the call.
            .quick(),
        )
        .build();
    let served = server.map_err(std::io::Error::other).and_then(|s| {
        let running = s.start_with(&listen, &options(max_sessions))?;
        // On stdio, stdout carries MCP and nothing else.
        if listen != Listen::Stdio {
            println!("listening on {}", running.listener());
        }
        running.wait()
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo: {e}");
            ExitCode::FAILURE
        }
    }
}

#[allow(unused_mut, unused_variables)]
fn options(max_sessions: Option<usize>) -> ListenOptions {
    let mut options = ListenOptions::default();
    if let Some(n) = max_sessions {
        #[cfg(feature = "http")]
        {
            options.http = options.http.with_max_sessions(n);
        }
        #[cfg(feature = "amqp")]
        if let Ok(mut c) = mcpvisor::transport::amqp::AmqpConfig::new("amqp://localhost", "echo") {
            c.max_sessions = n;
            options.amqp = Some(c);
        }
    }
    options
}
