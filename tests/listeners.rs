//! Listeners as child specs: a tree of the caller's owns them, restarts
//! them when they fail, and a listener can be handed a socket that is
//! already bound (socket activation).

mod common;

use mcpvisor::client::{Client, ClientOptions, Connection};
use mcpvisor::serve::{ListenOptions, Listener};
use mcpvisor::server::{Server, Tool, ToolResult};
use mcpvisor::transport::listen::Listen;
use mcpvisor::transport::tcp::TcpOptions;
use serde_json::json;
use std::time::Duration;
use supervisor::{EventKind, Strategy, Supervisor, SupervisorSpec};

const WAIT: Duration = Duration::from_secs(20);

fn echo() -> Server {
    Server::builder("listeners-test", "1")
        .tool(Tool::new("echo", json!({"type": "object"}), |a, _| {
            Ok(ToolResult::text(a["message"].as_str().unwrap_or("")))
        }))
        .build()
        .unwrap()
}

fn call(connection: Connection) -> String {
    let client = Client::connect(connection, ClientOptions::default()).unwrap();
    let r = client.call_tool("echo", json!({"message": "hi"})).unwrap();
    client.close();
    r["content"][0]["text"].as_str().unwrap().to_owned()
}

/// Waits for the next event that `want` accepts; the others are skipped.
fn wait_for(
    events: &crossbeam_channel::Receiver<supervisor::Event>,
    want: impl Fn(&supervisor::Event) -> bool,
) -> supervisor::Event {
    loop {
        let e = events
            .recv_timeout(WAIT)
            .expect("the event within the wait");
        if want(&e) {
            return e;
        }
    }
}

fn started(child: &'static str) -> impl Fn(&supervisor::Event) -> bool {
    move |e| matches!(&e.kind, EventKind::Started { child: c } if c == child)
}

fn restarting(child: &'static str) -> impl Fn(&supervisor::Event) -> bool {
    move |e| matches!(&e.kind, EventKind::Restarting { child: c, .. } if c == child)
}

#[test]
fn an_http_listener_runs_under_a_callers_tree_which_restarts_it() {
    let server = echo();
    let listen: Listen = "http://127.0.0.1:0/mcp".parse().unwrap();
    let (spec, listener) = server.listener(&listen).unwrap();
    let Listener::Http(http) = listener.clone() else {
        panic!("{listener}")
    };
    let (tx, events) = crossbeam_channel::unbounded();
    let root = Supervisor::start(
        SupervisorSpec::new("daemon", Strategy::OneForOne)
            .intensity(5, Duration::from_secs(60))
            .on_event(move |e| {
                let _ = tx.send(e.clone());
            })
            .child(spec),
    )
    .unwrap();
    let url = listener.to_string();
    assert_eq!(url, format!("http://{}/mcp", http.local_addr()));
    assert_eq!(call(Connection::http(&url).unwrap()), "hi");
    let tree = root.handle().snapshot().unwrap().to_string();
    assert!(
        tree.contains("daemon") && tree.contains("http-listener"),
        "the listener is part of the caller's tree:\n{tree}"
    );

    // The listener's own supervisor restarts its accept loop, which rebinds.
    http.break_listener_for_tests();
    wait_for(&events, restarting("http-listener"));
    wait_for(&events, started("http-listener"));
    assert_eq!(call(Connection::http(&url).unwrap()), "hi");

    // Failing faster than its own intensity (10 in 10 s), the listener's
    // supervisor gives up; the caller's tree restarts the whole listener.
    let by_the_caller = |e: &supervisor::Event| {
        e.supervisor == "daemon"
            && matches!(&e.kind, EventKind::Restarting { child, .. } if child == "http")
    };
    let mut breaks = 0;
    let restarted = loop {
        http.break_listener_for_tests();
        breaks += 1;
        let e = wait_for(&events, |e| {
            restarting("http-listener")(e) || by_the_caller(e)
        });
        if by_the_caller(&e) {
            break e;
        }
        wait_for(&events, started("http-listener"));
        assert!(breaks <= 11, "the listener's supervisor never gave up");
    };
    assert!(matches!(
        restarted.kind,
        EventKind::Restarting { restarts: 1, .. }
    ));
    wait_for(&events, |e| e.supervisor == "daemon" && started("http")(e));
    assert_eq!(call(Connection::http(&url).unwrap()), "hi");
    root.shutdown().unwrap();
}

#[test]
fn a_tcp_listener_takes_an_already_bound_socket() {
    let server = echo();
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    let options = ListenOptions {
        tcp: TcpOptions::default().with_listener(socket).unwrap(),
        ..Default::default()
    };
    let running = server.start_with(&Listen::Tcp(addr), &options).unwrap();
    assert_eq!(running.listener().to_string(), format!("tcp://{addr}"));
    assert_eq!(call(Connection::tcp(addr).unwrap()), "hi");
    running.shutdown().unwrap();
}

#[test]
fn a_listener_that_cannot_bind_is_the_callers_error() {
    let server = echo();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = Listen::Tcp(taken.local_addr().unwrap());
    let e = server
        .listener(&listen)
        .err()
        .expect("the address is in use");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
}

#[test]
fn a_started_stdio_listener_ends_at_eof() {
    use std::io::{BufRead, BufReader, Write};
    // `examples/echo` serves stdio through `Server::start(&Listen::Stdio)`.
    let mut child = std::process::Command::new(common::example("echo"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.contains(r#""id":1"#) && line.contains("result"),
        "{line}"
    );
    drop(stdin);
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = rx
        .recv_timeout(WAIT)
        .expect("the server exits after EOF")
        .unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn dropping_a_started_listener_stops_it() {
    // #11 item 22: dropping HttpServer / TcpServer left them running
    // forever, with no handle left to stop them.
    let server = echo();
    let http = server
        .start_http(
            mcpvisor::transport::http::HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let tcp = server
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let addrs = [http.local_addr(), tcp.local_addr()];
    for addr in addrs {
        std::net::TcpStream::connect(addr).expect("serving");
    }
    drop((http, tcp));
    // Stopped synchronously: the sockets are closed when drop returns.
    for addr in addrs {
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "{addr} still accepts after its listener was dropped"
        );
    }
}

/// A TCP listener that is shut down ends its open connections too: each
/// session ends as at its peer's end of input (its answers written). Before,
/// they went on being served for as long as their clients talked.
#[test]
fn shutting_a_tcp_listener_down_ends_its_connections() {
    let server = echo();
    let tcp = server
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let client = Client::connect(
        Connection::tcp(tcp.local_addr()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let r = client
        .call_tool("echo", json!({"message": "before"}))
        .unwrap();
    assert_eq!(r["content"][0]["text"], "before");
    // Its input ended before shutdown returned: the request is never read,
    // and the connection closes.
    tcp.shutdown().unwrap();
    let after = client.call_tool("echo", json!({"message": "after"}));
    assert!(after.is_err(), "still served after shutdown: {after:?}");
    client.close();
}
