//! The client over `https://` to a server that wants a bearer token
//! (#17), its calls on one kept TLS connection. A binary of its own: it points `SSL_CERT_FILE` at a test
//! authority while no other test runs.

mod common;

use mcpvisor::client::{Client, ClientOptions};
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;

fn text(result: &serde_json::Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn an_https_server_behind_a_bearer_token_is_reached() {
    let dir = common::scratch("surface-https");
    let pki = common::tls::pki("surface test CA");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    // The only test of this binary: nothing else reads the environment.
    std::env::set_var("SSL_CERT_FILE", &ca);
    let server = Server::builder("s", "1")
        .tool(Tool::new("hi", json!({"type": "object"}), |_, _| {
            Ok(ToolResult::text("hi"))
        }))
        .build()
        .unwrap();
    let http = server
        .start_http(
            mcpvisor::transport::http::HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_bearer_tokens(vec!["s3cret-token".into()]),
        )
        .unwrap();
    let (port, accepted) =
        common::tls::tls_terminator_counting(&pki, &http.local_addr().to_string());
    let url = format!("https://127.0.0.1:{port}/mcp");
    let token = dir.join("token");
    std::fs::write(&token, "# the service's token\n\ns3cret-token\n").unwrap();
    let conn = mcpvisor::client::Connection::http_bearer_file(&url, &token).unwrap();
    let c = Client::connect(conn, ClientOptions::default()).unwrap();
    assert_eq!(text(&c.call_tool("hi", json!({})).unwrap()), "hi");
    // Calls one after the other share one kept TLS connection. At most
    // one more opens: the standalone stream's GET, if it starts only now,
    // takes the idle connection once.
    let before = accepted.load(std::sync::atomic::Ordering::SeqCst);
    for _ in 0..10 {
        assert_eq!(text(&c.call_tool("hi", json!({})).unwrap()), "hi");
    }
    let opened = accepted.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert!(opened <= 1, "{opened} TLS connections for 10 calls");
    c.close();
    let anonymous = Client::connect(
        mcpvisor::client::Connection::http(&url).unwrap(),
        ClientOptions::default(),
    );
    let e = anonymous
        .err()
        .expect("refused without the token")
        .to_string();
    assert!(e.contains("401"), "{e}");
    let wrong = mcpvisor::client::Connection::http_bearer(&url, "wrong").unwrap();
    assert!(Client::connect(wrong, ClientOptions::default()).is_err());
    assert!(mcpvisor::client::Connection::http_bearer(&url, "two words").is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
