//! The `mcpvisor` daemon (see `mcpvisor::service::daemon`).

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(mcpvisor::service::daemon::run(std::env::args().skip(1)))
}
