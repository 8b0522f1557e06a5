//! `amqps://` against the real RabbitMQ: the local broker listens in plain
//! AMQP only, so the test puts a TLS terminator of its own (rustls, with a
//! certificate authority made for the test) in front of it. Both the server
//! instance and the client go through it, with messages large enough to
//! fill the socket buffers on the way.

use mcpvisor::client::{Client, ClientOptions, Connection};
use mcpvisor::transport::amqp::{AmqpConfig, AmqpUrl};
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::path::PathBuf;

mod common;

use common::amqp::{config, Cleanup};
use common::tls::{pki, tls_terminator};

/// The local broker, in plain AMQP.
const BROKER: &str = "127.0.0.1:5672";

/// Writes `pem` to a file of its own; the directory goes with the guard.
struct TempFile(PathBuf);

impl TempFile {
    fn new(pem: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "mcpvisor-tls-{}",
            &mcpvisor::protocol::new_session_id()[..12]
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, pem).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn tls_config(plain: &AmqpConfig, port: u16, ca: &TempFile) -> AmqpConfig {
    let mut c = plain.clone();
    c.url = AmqpUrl::parse(&format!(
        "amqps://guest:guest@localhost:{port}?cacertfile={}",
        ca.0.display()
    ))
    .unwrap();
    c
}

#[test]
fn a_server_and_a_client_talk_through_tls() {
    let pki = pki("mcpvisor test CA");
    let port = tls_terminator(&pki, BROKER);
    let ca = TempFile::new(&pki.ca_pem);
    let plain = config("tls");
    let _cleanup = Cleanup(plain.clone());
    let config = tls_config(&plain, port, &ca);
    let server = Server::builder("tls-test", "1.0")
        .tool(Tool::new(
            "echo",
            json!({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}),
            |args, _| Ok(ToolResult::text(args["message"].as_str().unwrap_or_default())),
        ))
        .build()
        .unwrap()
        .start_amqp(config.clone())
        .expect("serving through TLS");
    let client =
        Client::connect(Connection::amqp(&config).unwrap(), ClientOptions::default()).unwrap();
    for i in 0..50 {
        let r = client
            .call_tool("echo", json!({ "message": format!("hello {i}") }))
            .unwrap();
        assert_eq!(r["content"][0]["text"], format!("hello {i}"));
    }
    // 900 KiB each way: many TLS records, more than a socket buffer holds.
    let big = "x".repeat(900 * 1024);
    let r = client.call_tool("echo", json!({ "message": big })).unwrap();
    assert_eq!(
        r["content"][0]["text"].as_str().map(str::len),
        Some(big.len())
    );
    client.close();
    server.shutdown().unwrap();
}

#[test]
fn a_broker_certificate_from_another_authority_is_refused() {
    let port = tls_terminator(&pki("the broker's CA"), BROKER);
    let other = TempFile::new(&pki("some other CA").ca_pem);
    let plain = config("tls-refused");
    let config = tls_config(&plain, port, &other);
    let e = Connection::amqp(&config).err().expect("refused");
    let text = e.to_string();
    assert!(
        text.contains("TLS") && text.contains("certificate"),
        "{text}"
    );
    assert!(!text.contains("guest:guest"), "{text}");
}
