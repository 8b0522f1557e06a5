//! A real browser: headless Chromium (Debian's package, driven by npm
//! `playwright-core`) loads a page from another localhost origin, which
//! initializes a session and calls a tool with `fetch()` through CORS.

mod common;

use serde_json::Value;
use std::process::Command;

#[test]
fn chromium_initializes_and_calls_a_tool_across_origins() {
    let js = common::npm_dir("js", "playwright-core");
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists(),
        "install Debian's chromium (apt-get install chromium); .ci/run does"
    );
    let (mut server, url) =
        common::spawn_listening("echo", &["--listen", "http://127.0.0.1:0/mcp"]);
    let out = Command::new("node")
        .arg(js.join("browser.mjs"))
        .arg(&url)
        .output()
        .expect("node");
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser run failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(
        r["origin"]
            .as_str()
            .unwrap()
            .starts_with("http://localhost:"),
        "a different origin than the server: {r}"
    );
    assert_eq!(r["initStatus"], 200);
    assert_eq!(r["protocol"], "2025-11-25");
    assert_eq!(
        r["session"].as_str().map(str::len),
        Some(32),
        "the page can read Mcp-Session-Id (exposed by CORS): {r}"
    );
    assert_eq!(r["noteStatus"], 202);
    assert_eq!(r["callStatus"], 200);
    assert_eq!(r["text"], "hello from chromium");
}
