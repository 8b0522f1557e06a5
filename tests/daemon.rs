//! The `mcpvisor` binary (#12, in progress): flags, configuration errors
//! and exit status, serving the example configuration, SIGTERM.

mod common;

use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

fn example() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mcpvisor.json").to_owned()
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The daemon with the example configuration on a free loopback port.
fn serving(mut cmd: Command) -> Command {
    cmd.args(["--config", &example(), "--listen", "http://127.0.0.1:0/mcp"]);
    cmd
}

#[test]
fn flags_and_configuration_errors_have_their_exit_status() {
    let (code, out, _) = run(&["--check-config", "--config", &example()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("valid (1 listener(s), 4 command tool(s))"),
        "{out}"
    );
    let (code, _, err) = run(&["--frobnicate"]);
    assert_eq!(code, 64, "{err}");
    let (code, _, err) = run(&["--check-config", "--log-level", "verbose"]);
    assert_eq!(code, 64, "{err}");
    let dir = std::env::temp_dir().join(format!("mcpvisor-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, wanted) in [
        ("{\n  \"comands\": {}\n}", ":2:3: comands: unknown key"),
        (
            "{\"commands\": {\"x\": {\"argv\": [\"a\"], \"timeoutMs\": \"soon\"}}}",
            "commands.x.timeoutMs: expected a positive integer",
        ),
        ("{\"listen\": [", "not valid JSON"),
        // What the file implies is checked too: the token file must exist.
        (
            "{\"http\": {\"bearerTokenFile\": \"/nonexistent/token\"}}",
            "/nonexistent/token",
        ),
        (
            "{\"commands\": {\"x\": {\"argv\": [\"echo\", \"{a} }\"]}}}",
            "lone",
        ),
    ] {
        let file = dir.join("bad.json");
        std::fs::write(&file, text).unwrap();
        let (code, _, err) = run(&["--check-config", "--config", file.to_str().unwrap()]);
        assert_eq!(code, 78, "{text}: {err}");
        assert!(
            err.contains(wanted) && err.contains("bad.json:"),
            "{text}: {err}"
        );
    }
    let (code, _, err) = run(&["--config", "/nonexistent/mcpvisor.json"]);
    assert_eq!(code, 78, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_example_configuration_serves_its_tools_and_sigterm_stops_it() {
    let (mut child, url) = common::spawn_command_listening(serving(Command::new(BIN)));
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    let names: Vec<String> = c
        .list_tools()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    let r = c.call_tool("kernel", json!({})).unwrap();
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("Linux"),
        "{r}"
    );
    let small = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd");
    let r = c.call_tool("disk_usage", json!({ "path": small })).unwrap();
    assert_ne!(r["isError"], true, "{r}");
    c.close();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
}

#[test]
fn the_service_manager_hears_ready_watchdog_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = std::env::temp_dir().join(format!("mcpvisor-sdnotify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notify.sock");
    let manager = UnixDatagram::bind(&path).unwrap();
    manager
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 1024];
        let n = manager
            .recv(&mut buf)
            .expect("a message to the service manager");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut cmd = serving(Command::new(BIN));
    cmd.env("NOTIFY_SOCKET", &path)
        .env("WATCHDOG_USEC", "200000")
        .env_remove("WATCHDOG_PID");
    let (mut child, url) = common::spawn_command_listening(cmd);
    let ready = recv();
    assert!(ready.starts_with("READY=1\n"), "{ready}");
    assert!(
        ready.contains(&format!("MAINPID={}", child.id())),
        "{ready}"
    );
    assert!(
        ready.contains("STATUS=serving 4 command tool(s) on http://"),
        "{ready}"
    );
    // READY means the listener answers.
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    c.ping().expect("answering once READY=1 was sent");
    c.close();
    assert_eq!(recv(), "WATCHDOG=1");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let stopping = loop {
        let m = recv();
        if m != "WATCHDOG=1" {
            break m;
        }
    };
    assert!(stopping.starts_with("STOPPING=1"), "{stopping}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn over_stdio_only_mcp_is_written_and_the_end_of_stdin_stops_it() {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(["--config", &example(), "--stdio"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let first: serde_json::Value = serde_json::from_str(&line).expect("the first line is MCP");
    assert_eq!(first["result"]["serverInfo"]["name"], "mcpvisor");
    drop(stdin);
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "EOF on stdin stops it"
    );
}
