//! The `mcpvisor` daemon. The supervised service (config, listeners,
//! upstream servers, systemd integration) grows here; today it reports its
//! version and points at the examples.

use std::process::ExitCode;

const USAGE: &str = "usage: mcpvisor [--version | --help]\n\
The daemon's listeners and configuration arrive in a later release;\n\
run a server from examples/ (cargo run --release --example conformance).";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version") | Some("-V") => {
            println!("mcpvisor {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        None | Some("--help") | Some("-h") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("mcpvisor: unknown argument {other:?}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
