//! The gateway hop: `tools/call echo` of `examples/echo` (release) called
//! directly over stdio, against the same upstream through the daemon (an
//! HTTP client -> mcpvisor -> the echo server over stdio), with 1 and 32
//! clients; calls/s, p50, p99, and what the hop adds at p50. Each HTTP
//! row runs twice: with mcpvisor's own client (a connection per request),
//! and with a small keep-alive client (`-ka`), which shows what the
//! gateway itself costs.
//!
//! ```text
//! cargo bench --bench gateway_hop -- [--calls N]
//! ```

mod common;

use common::keepalive::{parse_url, Conn};
use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

fn echo(c: &Client, tool: &str) {
    let r = c.call_tool(tool, json!({"message": "hi"})).expect("call");
    assert_eq!(r["content"][0]["text"], "hi", "{r}");
}

fn main() {
    let mut calls = 20_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--calls" {
            calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N");
        }
    }
    // Builds the echo example in release.
    let (mut probe, _) = common::spawn_echo(&["--tcp", "127.0.0.1:0"]);
    let _ = probe.kill();
    let _ = probe.wait();
    let upstream = concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/examples/echo");

    let direct = Client::connect(
        Connection::child(Command::new(upstream)).expect("echo"),
        ClientOptions::default(),
    )
    .expect("initialize");

    let dir = std::env::temp_dir().join(format!("mcpvisor-hop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("mcpvisor.json");
    let text = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "logLevel": "warn",
        "mcpServers": {"echo": {"command": upstream}},
    });
    std::fs::write(&config, text.to_string()).unwrap();
    let mut daemon = Command::new(BIN)
        .args(["--config", config.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mcpvisor");
    let mut line = String::new();
    BufReader::new(daemon.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().trim_start_matches("listening on ").to_owned();
    let connect = || {
        let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default())
            .expect("connect to the gateway");
        // The upstream may still be starting: wait for its tool.
        while !c
            .list_tools()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo__echo")
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        for _ in 0..200 {
            echo(&c, "echo__echo");
        }
        c
    };

    // The same client over HTTP to the echo server itself: what HTTP costs
    // without the hop.
    let (mut http_echo, http_url) = common::spawn_echo(&["--http", "127.0.0.1:0"]);
    let http_connect = || {
        let c = Client::connect(
            Connection::http(&http_url).unwrap(),
            ClientOptions::default(),
        )
        .expect("connect to the echo server");
        for _ in 0..200 {
            echo(&c, "echo");
        }
        c
    };

    common::header("clients");
    for clients in [1, 32] {
        let n = if clients == 1 {
            calls
        } else {
            calls / clients * 4
        };
        let d = common::concurrent(
            clients,
            n,
            || {
                for _ in 0..200 {
                    echo(&direct, "echo");
                }
                direct.clone()
            },
            |c| echo(c, "echo"),
        );
        common::row("direct", clients, &d);
        let h = common::concurrent(clients, n, http_connect, |c| echo(c, "echo"));
        common::row("http", clients, &h);
        let g = common::concurrent(clients, n, connect, |c| echo(c, "echo__echo"));
        common::row("gateway", clients, &g);
        // A keep-alive client that costs little, to the echo server's HTTP
        // listener and to the gateway's: what the gateway itself adds.
        let ka = |url: &str, tool: &'static str| {
            let (addr, path) = parse_url(url);
            let call = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"message":"hi"}}}}}}"#
            );
            common::concurrent(
                clients,
                n,
                || {
                    let mut c = Conn::open(addr, &path);
                    c.initialize();
                    for _ in 0..200 {
                        c.post(&call);
                    }
                    (c, call.clone())
                },
                |(c, call)| {
                    let answer = c.post(call);
                    debug_assert!(answer.contains("\"hi\""), "{answer}");
                },
            )
        };
        let hk = ka(&http_url, "echo");
        common::row("http-ka", clients, &hk);
        let gk = ka(&url, "echo__echo");
        common::row("gateway-ka", clients, &gk);
        for (what, via, plain) in [("our client", &g, &h), ("keep-alive", &gk, &hk)] {
            println!(
                "{:<10} {clients:>9} {what}: the hop adds {:.1} µs at p50 beyond HTTP, {:.1} µs beyond direct stdio; {:.2}x the direct calls/s",
                "hop",
                via.p50_us - plain.p50_us,
                via.p50_us - d.p50_us,
                via.calls_per_sec / d.calls_per_sec
            );
        }
    }
    direct.close();
    let _ = http_echo.kill();
    let _ = http_echo.wait();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
