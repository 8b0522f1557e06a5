//! `amqps://` against the real RabbitMQ: the local broker listens in plain
//! AMQP only, so the test puts a TLS terminator of its own (rustls, with a
//! certificate authority made for the test) in front of it. Both the server
//! instance and the client go through it, with messages large enough to
//! fill the socket buffers on the way.

use mcpvisor::client::{Client, ClientOptions, Connection};
use mcpvisor::transport::amqp::{AmqpConfig, AmqpUrl};
use mcpvisor::{Server, Tool, ToolResult};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection};
use serde_json::json;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

mod common;

use common::amqp::{config, Cleanup};

/// A certificate authority and a server certificate for `localhost` it signed.
struct Pki {
    ca_pem: String,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
}

fn pki(name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        server_chain: vec![cert.der().clone()],
        server_key: key.serialize_der(),
    }
}

/// Terminates TLS on an ephemeral port and forwards the plaintext to the
/// local broker, a thread pair per connection.
fn tls_terminator(pki: &Pki) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                pki.server_chain.clone(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone())),
            )
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tls in listener.incoming().flatten() {
            let config = config.clone();
            std::thread::spawn(move || forward(config, tls));
        }
    });
    port
}

fn forward(config: Arc<ServerConfig>, mut tls: TcpStream) {
    let mut conn = ServerConnection::new(config).unwrap();
    while conn.is_handshaking() {
        if conn.complete_io(&mut tls).is_err() {
            return; // the client refused our certificate
        }
    }
    let plain = TcpStream::connect("127.0.0.1:5672").unwrap();
    let conn = Arc::new(Mutex::new(conn));
    // plain -> TLS
    let (c, mut from_broker, mut tls_out) = (
        conn.clone(),
        plain.try_clone().unwrap(),
        tls.try_clone().unwrap(),
    );
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_broker.read(&mut buf) {
            let mut conn = c.lock().unwrap();
            conn.writer().write_all(&buf[..n]).unwrap();
            while conn.wants_write() {
                if conn.write_tls(&mut tls_out).is_err() {
                    return;
                }
            }
        }
        let _ = tls_out.shutdown(Shutdown::Both);
    });
    // TLS -> plain
    let mut to_broker = plain;
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = tls.read(&mut buf) {
        let mut plaintext = Vec::new();
        {
            let mut conn = conn.lock().unwrap();
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                conn.read_tls(&mut rest).unwrap();
                if conn.process_new_packets().is_err() {
                    return;
                }
                let _ = conn.reader().read_to_end(&mut plaintext);
            }
            while conn.wants_write() {
                let _ = conn.write_tls(&mut tls);
            }
        }
        if to_broker.write_all(&plaintext).is_err() {
            return;
        }
    }
    let _ = to_broker.shutdown(Shutdown::Both);
}

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
    let port = tls_terminator(&pki);
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
    let port = tls_terminator(&pki("the broker's CA"));
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
