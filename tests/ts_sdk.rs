//! A real client from outside this repo: the official TypeScript SDK client
//! (npm `@modelcontextprotocol/sdk`) drives `examples/conformance` over stdio.

mod common;

use serde_json::{json, Value};
use std::process::Command;

#[test]
fn typescript_sdk_client_lists_calls_reads_and_gets() {
    let js = common::npm_dir("js", "@modelcontextprotocol/sdk");
    let out = Command::new("node")
        .arg(js.join("sdk_client.mjs"))
        .arg(common::example("conformance"))
        .output()
        .expect("node must be installed to run the TypeScript SDK test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "SDK client failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(r["server"]["name"], "mcpvisor-conformance");
    assert_eq!(r["tools"].as_array().unwrap().len(), 37);
    assert_eq!(r["text"], "This is a simple text response for testing.");
    assert_eq!(r["error"], json!(true));
    assert_eq!(r["sampling"], "LLM response: from ts: hi");
    // The SDK dispatches notifications asynchronously and drops progress that
    // it handles after the response; the wire order is checked in tests/stdio.rs.
    let progress = r["progress"].as_array().unwrap();
    assert!(
        progress.len() >= 2 && progress[0] == json!(0) && progress[1] == json!(50),
        "{progress:?}"
    );
    assert_eq!(
        r["resource"],
        "This is the content of the static text resource."
    );
    assert!(r["templated"].as_str().unwrap().contains("Data for ID: 7"));
    assert_eq!(r["prompts"].as_array().unwrap().len(), 5);
    assert_eq!(r["prompt"], "Prompt with arguments: arg1='a', arg2='b'");
    assert_eq!(r["completion"], json!(["paris", "park", "party"]));
    assert_eq!(r["unknownTool"], json!(-32602));
}
