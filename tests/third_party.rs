//! The client against a real third-party server over stdio: npm
//! `@modelcontextprotocol/server-everything` (pinned in tests/js).

mod common;

use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::json;
use std::process::Command;

#[test]
fn server_everything_over_stdio() {
    let js = common::npm_dir("js", "@modelcontextprotocol/server-everything");
    let entry = js.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut cmd = Command::new("node");
    cmd.arg(&entry).arg("stdio");
    let client = Client::connect(
        Connection::child(cmd).expect("spawn node"),
        ClientOptions::default(),
    )
    .expect("initialize");
    assert!(
        client.server_info()["name"]
            .as_str()
            .unwrap_or_default()
            .contains("everything"),
        "{}",
        client.server_info()
    );
    let tools = client.list_tools().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "echo"), "{tools:?}");
    let r = client
        .call_tool("echo", json!({"message": "from mcpvisor"}))
        .unwrap();
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("from mcpvisor"),
        "{r}"
    );
    let resources = client.list_resources().unwrap();
    let uri = resources
        .first()
        .and_then(|r| r["uri"].as_str())
        .expect("a resource")
        .to_owned();
    let read = client.read_resource(&uri).unwrap();
    assert_eq!(read["contents"][0]["uri"], uri.as_str());
    let prompt = client.get_prompt("simple-prompt", json!({})).unwrap();
    assert!(!prompt["messages"].as_array().unwrap().is_empty());
    client.close();
}
