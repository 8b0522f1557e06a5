//! A transport of your own, on the custom-transport seam: MCP over a
//! Unix-domain socket, one JSON-RPC message per line, one session per
//! connection. The seam does sessions, size limits, validation and error
//! answers; this file only moves bytes.
//!
//! ```text
//! unix_socket PATH
//! ```

use mcpvisor::transport::custom::{ConnectionOptions, ServerConnection};
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::io;
use std::os::unix::net::{UnixListener, UnixStream};
use std::process::ExitCode;

/// Serves one connection until the peer closes it.
fn serve(server: &Server, stream: UnixStream) -> io::Result<()> {
    let (connection, outbox) =
        ServerConnection::open(server.engine(), ConnectionOptions::default());
    let output = stream.try_clone()?;
    let writer = std::thread::spawn(move || outbox.write_lines(output));
    let read = connection.read_lines(stream);
    // Input ended (or failed): in-flight work gets its grace, then the
    // outbox ends and the writer with it.
    connection.close();
    let written = writer
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("writer panicked")));
    read.and(written)
}

fn main() -> ExitCode {
    mcpvisor::init_logging("warn");
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: unix_socket PATH");
        return ExitCode::from(2);
    };
    let server = Server::builder("unix-echo", env!("CARGO_PKG_VERSION"))
        .tool(Tool::new(
            "echo",
            json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}),
            |args, _| Ok(ToolResult::text(args["message"].as_str().unwrap_or_default())),
        ))
        .build()
        .expect("a valid server");
    let _ = std::fs::remove_file(&path);
    let listener = match UnixListener::bind(&path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("unix_socket: {path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("listening on unix:{path}");
    for stream in listener.incoming().flatten() {
        let server = server.clone();
        std::thread::spawn(move || {
            if let Err(e) = serve(&server, stream) {
                log::debug!("unix_socket: connection ended: {e}");
            }
        });
    }
    ExitCode::SUCCESS
}
