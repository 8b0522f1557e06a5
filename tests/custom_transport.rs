//! The custom-transport seam: `examples/unix_socket` (MCP over a
//! Unix-domain socket in under 100 lines) serves our client, and the seam
//! applies the protocol's rules for it.

mod common;

use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::Child;

struct Example(Child, std::path::PathBuf);

impl Drop for Example {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_file(&self.1);
    }
}

fn start() -> Example {
    let path = std::env::temp_dir().join(format!(
        "mcpvisor-test-{}.sock",
        &mcpvisor::protocol::new_session_id()[..12]
    ));
    let (child, what) = common::spawn_listening("unix_socket", &[path.to_str().unwrap()]);
    assert_eq!(what, format!("unix:{}", path.display()));
    Example(child, path)
}

fn connect(example: &Example) -> UnixStream {
    UnixStream::connect(&example.1).expect("the example listens")
}

#[test]
fn the_unix_socket_example_serves_our_client() {
    let example = start();
    let stream = connect(&example);
    let connection = Connection::lines(stream.try_clone().unwrap(), stream);
    let client = Client::connect(connection, ClientOptions::default()).unwrap();
    assert_eq!(client.server_info()["name"], "unix-echo");
    let tools = client.list_tools().unwrap();
    assert_eq!(tools.len(), 1);
    let r = client
        .call_tool("echo", json!({"message": "over a unix socket"}))
        .unwrap();
    assert_eq!(r["content"][0]["text"], "over a unix socket");
    // The seam validates arguments against the schema like any transport.
    #[cfg(feature = "schema")]
    {
        // (2025-11-25: a tool execution error the model can correct.)
        let r = client.call_tool("echo", json!({})).unwrap();
        assert_eq!(r["isError"], true, "{r}");
    }
    client.close();
}

#[test]
fn bad_input_is_answered_and_the_connection_keeps_serving() {
    let example = start();
    let stream = connect(&example);
    let mut out = stream.try_clone().unwrap();
    let mut lines = BufReader::new(stream).lines();
    let mut answer = |line: &str| -> Value {
        writeln!(out, "{line}").unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    assert_eq!(answer("{not json")["error"]["code"], -32700);
    assert_eq!(
        answer(r#"{"jsonrpc":"2.0","id":1}"#)["error"]["code"],
        -32600
    );
    let early = answer(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#);
    assert_eq!(early["error"]["code"], -32600, "before initialize: {early}");
    let init = answer(
        r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
}
