//! The synchronous client against this repo's servers: in-process pair,
//! TCP, and a child process over stdio.

mod common;

use mcpvisor::client::{CallOptions, Client, ClientError, ClientOptions, Connection};
use mcpvisor::protocol::CancelToken;
use mcpvisor::server::{Server, Tool, ToolResult};
use mcpvisor::transport::memory;
use mcpvisor::transport::tcp::TcpOptions;
use mcpvisor::LogLevel;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn server() -> Server {
    Server::builder("client-test", "1")
        .instructions("be nice")
        .tool(Tool::new("echo", json!({"type":"object"}), |a, _| {
            Ok(ToolResult::text(a["message"].as_str().unwrap_or("")))
        }))
        .tool(Tool::new("progress", json!({"type":"object"}), |_, ctx| {
            for i in 1..=3 {
                ctx.progress(f64::from(i), Some(3.0), None);
            }
            Ok(ToolResult::text("done"))
        }))
        .tool(Tool::new("ask", json!({"type":"object"}), |_, ctx| {
            let s = ctx
                .sample(
                    json!({"messages": [], "maxTokens": 1}),
                    Duration::from_secs(10),
                )
                .map_err(mcpvisor::ToolError::from)?;
            let e = ctx
                .elicit(
                    json!({"message": "ok?", "requestedSchema": {"type": "object"}}),
                    Duration::from_secs(10),
                )
                .map_err(mcpvisor::ToolError::from)?;
            Ok(ToolResult::text(format!(
                "{} / {}",
                s["content"]["text"], e["action"]
            )))
        }))
        .tool(Tool::new("log", json!({"type":"object"}), |_, ctx| {
            ctx.log(LogLevel::Warning, Some("t"), json!("careful"));
            Ok(ToolResult::text(""))
        }))
        .tool(Tool::new("wait", json!({"type":"object"}), |_, ctx| {
            let _ = ctx.cancelled().recv_timeout(Duration::from_secs(30));
            Ok(ToolResult::text("woke"))
        }))
        .build()
        .unwrap()
}

fn memory_client(options: ClientOptions) -> (Client, Server) {
    let s = server();
    let (a, b) = memory::pair();
    s.serve_memory(a).unwrap();
    (Client::connect(b.into_connection(), options).unwrap(), s)
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn in_process_pair_lifecycle_tools_and_info() {
    let (c, _s) = memory_client(ClientOptions::default());
    assert_eq!(c.server_info()["name"], "client-test");
    assert_eq!(c.instructions(), Some("be nice"));
    assert!(c.server_capabilities()["tools"].is_object());
    assert_eq!(c.protocol_version().as_str(), "2025-11-25");
    let names: Vec<String> = c
        .list_tools()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["ask", "echo", "log", "progress", "wait"]);
    assert_eq!(
        text(&c.call_tool("echo", json!({"message": "hi"})).unwrap()),
        "hi"
    );
    c.ping().unwrap();
    match c.call_tool("nope", json!({})) {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602),
        other => panic!("{other:?}"),
    }
    c.close();
    assert_eq!(c.ping(), Err(ClientError::Closed));
}

#[test]
fn progress_callbacks_get_every_notification() {
    let (c, _s) = memory_client(ClientOptions::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let opts = CallOptions {
        progress: Some(Arc::new(move |p, t, _| s2.lock().unwrap().push((p, t)))),
        ..Default::default()
    };
    assert_eq!(
        text(&c.call_tool_with("progress", json!({}), opts).unwrap()),
        "done"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]
    );
}

#[test]
fn sampling_elicitation_and_notifications_reach_the_callbacks() {
    let logs = Arc::new(Mutex::new(Vec::new()));
    let l2 = logs.clone();
    let options = ClientOptions {
        sampling: Some(Arc::new(|_| {
            Ok(
                json!({"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}),
            )
        })),
        elicitation: Some(Arc::new(|_| Ok(json!({"action": "accept", "content": {}})))),
        on_notification: Some(Arc::new(move |m, p| {
            l2.lock().unwrap().push((m.to_owned(), p.clone()))
        })),
        ..Default::default()
    };
    let (c, _s) = memory_client(options);
    assert_eq!(
        text(&c.call_tool("ask", json!({})).unwrap()),
        "\"sampled\" / \"accept\""
    );
    c.call_tool("log", json!({})).unwrap();
    let logs = logs.lock().unwrap();
    assert!(
        logs.iter()
            .any(|(m, p)| m == "notifications/message" && p["data"] == "careful"),
        "{logs:?}"
    );
}

#[test]
fn without_callbacks_no_capability_is_advertised() {
    let (c, _s) = memory_client(ClientOptions::default());
    let r = c.call_tool("ask", json!({})).unwrap();
    assert_eq!(
        r["isError"],
        json!(true),
        "the server saw no sampling capability"
    );
}

#[test]
fn cancel_from_another_thread_and_timeouts_tell_the_server() {
    let (c, _s) = memory_client(ClientOptions::default());
    let token = CancelToken::new();
    let t2 = token.clone();
    let canceller = std::thread::spawn(move || t2.cancel());
    let r = c.call_tool_with(
        "wait",
        json!({}),
        CallOptions {
            cancel: Some(token),
            ..Default::default()
        },
    );
    canceller.join().unwrap();
    assert_eq!(r, Err(ClientError::Cancelled));
    let r = c.call_tool_with(
        "wait",
        json!({}),
        CallOptions {
            timeout: Some(Duration::from_millis(50)),
            ..Default::default()
        },
    );
    assert!(matches!(r, Err(ClientError::Timeout { .. })), "{r:?}");
    // The server was told both times: the next call is answered normally.
    assert_eq!(
        text(&c.call_tool("echo", json!({"message": "after"})).unwrap()),
        "after"
    );
}

#[test]
fn tcp_sessions_are_per_connection() {
    let s = server();
    let tcp = s
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let a = Client::connect(
        Connection::tcp(tcp.local_addr()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let b = Client::connect(
        Connection::tcp(tcp.local_addr()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    assert_eq!(
        text(&a.call_tool("echo", json!({"message": "a"})).unwrap()),
        "a"
    );
    assert_eq!(
        text(&b.call_tool("echo", json!({"message": "b"})).unwrap()),
        "b"
    );
    assert_eq!(tcp.connection_count(), 2);
    a.close();
    b.close();
    tcp.shutdown().unwrap();
}

#[test]
fn a_child_process_over_stdio() {
    let conn =
        Connection::child(std::process::Command::new(common::example("conformance"))).unwrap();
    let pid = conn.process_id().expect("a child pid");
    let c = Client::connect(conn, ClientOptions::default()).unwrap();
    assert_eq!(c.server_info()["name"], "mcpvisor-conformance");
    assert_eq!(c.list_tools().unwrap().len(), 37);
    assert_eq!(
        text(&c.call_tool("test_simple_text", json!({})).unwrap()),
        "This is a simple text response for testing."
    );
    let r = c.read_resource("test://static-text").unwrap();
    assert_eq!(
        r["contents"][0]["text"],
        "This is the content of the static text resource."
    );
    let p = c
        .get_prompt(
            "test_prompt_with_arguments",
            json!({"arg1": "x", "arg2": "y"}),
        )
        .unwrap();
    assert!(p["messages"][0]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("arg1='x'"));
    c.close(); // closes stdin; the server exits at EOF and is reaped
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the child was reaped, no zombie left"
    );
}

#[test]
fn a_child_that_ignores_eof_is_terminated_and_reaped() {
    // Answers initialize only once asked (so the answer cannot race the
    // request), then `sleep` never reads stdin: EOF does nothing, SIGTERM ends it.
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "read request; echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"sh\",\"version\":\"0\"}}}'; exec sleep 600"]);
    let conn = Connection::child(cmd).unwrap();
    let pid = conn.process_id().unwrap();
    let c = Client::connect(conn, ClientOptions::default()).expect("a canned initialize answer");
    assert_eq!(c.server_info()["name"], "sh");
    c.close();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "terminated and reaped"
    );
}

#[test]
fn a_failed_write_ends_a_child_that_keeps_its_output_open() {
    // The child answers initialize, then closes its input (a write to it
    // fails at once) but neither exits nor closes its output: closing our
    // end of its input alone left the client open for ever, every call
    // failing, `on_closed` never called and the child never reaped.
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "read request; echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"sh\",\"version\":\"0\"}}}'; read initialized; exec sleep 600 <&-"]);
    let conn = Connection::child(cmd).unwrap();
    let pid = conn.process_id().unwrap();
    let (closed_tx, closed) = crossbeam_channel::unbounded();
    let options = ClientOptions {
        on_closed: Some(Arc::new(move |e: &ClientError| {
            drop(closed_tx.send(e.to_string()))
        })),
        ..Default::default()
    };
    let c = Client::connect(conn, options).unwrap();
    // Once its input is closed, a write to it fails; until then a ping
    // may wait in the pipe, and is given up soon.
    let quick = CallOptions {
        timeout: Some(Duration::from_millis(200)),
        ..Default::default()
    };
    let deadline = std::time::Instant::now() + common::WAIT;
    // The child is stopped (it ignores its input's end, not SIGTERM), its
    // output ends, and the client closes and says so.
    let why = loop {
        let _ = c.request_with("ping", json!({}), quick.clone());
        if let Ok(why) = closed.recv_timeout(Duration::from_millis(10)) {
            break why;
        }
        assert!(std::time::Instant::now() < deadline, "never closed");
    };
    assert!(why.contains("closed"), "{why}");
    assert!(c.is_closed());
    // Closed, the client has waited for the child to be reaped.
    c.close();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "terminated and reaped"
    );
}

#[test]
fn closing_never_waits_for_a_write_to_a_child_that_stopped_reading() {
    // #11 item 10: a call blocked writing to a child that does not read
    // held the writer lock, so close() and Drop waited forever and the
    // child was never signalled or reaped.
    use std::os::fd::AsRawFd;
    let mut cmd = std::process::Command::new("sh");
    cmd.args(["-c", "read request; echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"sh\",\"version\":\"0\"}}}'; exec sleep 600"]);
    let conn = Connection::child(cmd).unwrap();
    let pid = conn.process_id().unwrap();
    let c = Client::connect(conn, ClientOptions::default()).unwrap();
    let caller = {
        let c = c.clone();
        let big = "x".repeat(4 << 20);
        std::thread::spawn(move || c.call_tool("x", json!({ "data": big })))
    };
    // The fact to wait for: the call's bytes reach the child's stdin pipe,
    // so its write holds the writer and cannot finish (4 MiB never fit).
    let pipe = std::fs::File::open(format!("/proc/{pid}/fd/0")).unwrap();
    let deadline = std::time::Instant::now() + common::WAIT;
    loop {
        let mut queued: libc::c_int = 0;
        // SAFETY: a FIONREAD query on a descriptor we hold open.
        unsafe { libc::ioctl(pipe.as_raw_fd(), libc::FIONREAD, &mut queued) };
        if queued > 4096 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the call never reached the pipe"
        );
        std::thread::yield_now();
    }
    drop(pipe);
    c.close();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "terminated and reaped"
    );
    assert!(caller.join().unwrap().is_err(), "the blocked call failed");
}

#[test]
fn streamable_http_against_our_server() {
    let s = server();
    let (http, url) = common::serve_http(&s);
    let options = ClientOptions {
        sampling: Some(Arc::new(|_| {
            Ok(json!({"role": "assistant", "content": {"type": "text", "text": "s"}, "model": "m"}))
        })),
        elicitation: Some(Arc::new(|_| Ok(json!({"action": "decline"})))),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&url).unwrap(), options).unwrap();
    assert_eq!(c.server_info()["name"], "client-test");
    assert_eq!(c.list_tools().unwrap().len(), 5);
    assert_eq!(
        text(
            &c.call_tool("echo", json!({"message": "over http"}))
                .unwrap()
        ),
        "over http"
    );
    // Server-to-client requests ride the POST's SSE stream; answers are POSTed back.
    assert_eq!(
        text(&c.call_tool("ask", json!({})).unwrap()),
        "\"s\" / \"decline\""
    );
    let seen = Arc::new(Mutex::new(0));
    let s2 = seen.clone();
    let opts = CallOptions {
        progress: Some(Arc::new(move |_, _, _| *s2.lock().unwrap() += 1)),
        ..Default::default()
    };
    c.call_tool_with("progress", json!({}), opts).unwrap();
    assert_eq!(*seen.lock().unwrap(), 3);
    assert_eq!(http.session_count(), 1);
    c.close(); // DELETE ends the session
    assert_eq!(http.session_count(), 0);
    http.shutdown().unwrap();
}

mod reconnection {
    use super::*;
    use mcpvisor::client::Reconnect;
    use std::io::{BufRead, BufReader, Write};
    use std::net::SocketAddr;
    use std::process::Child;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn echo_tcp(addr: &str) -> (Child, SocketAddr) {
        let listen = format!("tcp://{addr}");
        let (child, url) = common::spawn_listening("echo", &["--listen", &listen]);
        (child, url.trim_start_matches("tcp://").parse().unwrap())
    }

    fn quick(attempts: u32) -> Reconnect {
        let mut r = Reconnect::default();
        r.backoff.initial = Duration::from_millis(10);
        r.backoff.max = Duration::from_millis(100);
        r.max_attempts = attempts;
        r
    }

    #[test]
    fn reconnects_after_the_server_restarts() {
        let (mut server, addr) = echo_tcp("127.0.0.1:0");
        let (re_tx, re_rx) = crossbeam_channel::unbounded();
        let options = ClientOptions {
            reconnect: Some(quick(200)),
            on_reconnected: Some(Arc::new(move || {
                let _ = re_tx.send(());
            })),
            ..Default::default()
        };
        let c = Client::connect_with(move || Connection::tcp(addr), options).unwrap();
        assert_eq!(
            text(&c.call_tool("echo", json!({"message": "before"})).unwrap()),
            "before"
        );
        server.kill().unwrap();
        server.wait().unwrap();
        let (mut again, _) = echo_tcp(&addr.to_string());
        re_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("reconnected");
        assert_eq!(
            text(&c.call_tool("echo", json!({"message": "after"})).unwrap()),
            "after"
        );
        c.close();
        let _ = again.kill();
        let _ = again.wait();
    }

    #[test]
    fn no_reconnection_after_close_and_a_clean_give_up() {
        let (mut server, addr) = echo_tcp("127.0.0.1:0");
        let connects = Arc::new(AtomicUsize::new(0));
        let n = connects.clone();
        let (closed_tx, closed_rx) = crossbeam_channel::unbounded();
        let options = ClientOptions {
            reconnect: Some(quick(3)),
            on_closed: Some(Arc::new(move |e: &ClientError| {
                drop(closed_tx.send(e.to_string()))
            })),
            ..Default::default()
        };
        let c = Client::connect_with(
            move || {
                n.fetch_add(1, Ordering::SeqCst);
                Connection::tcp(addr)
            },
            options.clone(),
        )
        .unwrap();
        c.close();
        server.kill().unwrap();
        server.wait().unwrap();
        // Nothing reconnects and no close event fires after an intentional close:
        // a second client that gives up proves the event path, then we check the first.
        let (mut server2, addr2) = echo_tcp("127.0.0.1:0");
        let c2 = Client::connect_with(move || Connection::tcp(addr2), options).unwrap();
        server2.kill().unwrap();
        server2.wait().unwrap();
        let why = closed_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("give-up event");
        assert!(
            why.contains("gave up reconnecting after 3 attempts"),
            "{why}"
        );
        assert!(c2.is_closed());
        assert_eq!(
            c2.ping(),
            Err(ClientError::Closed),
            "callers fail instead of hanging"
        );
        assert_eq!(
            connects.load(Ordering::SeqCst),
            1,
            "the closed client never reconnected"
        );
        assert!(
            closed_rx.try_recv().is_err(),
            "no close event for the intentional close"
        );
    }

    #[test]
    fn a_missed_heartbeat_closes_with_a_clear_error() {
        // A server that answers initialize and then never again.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mute = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let id: Value = serde_json::from_str::<Value>(&line).unwrap()["id"].clone();
            let answer = json!({"jsonrpc":"2.0","id":id,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"mute","version":"0"}}});
            writeln!(w, "{answer}").unwrap();
            // Read and ignore everything until the client hangs up.
            while r.read_line(&mut line).is_ok_and(|n| n > 0) {}
        });
        let (closed_tx, closed_rx) = crossbeam_channel::unbounded();
        let options = ClientOptions {
            heartbeat: Some(Duration::from_millis(100)),
            on_closed: Some(Arc::new(move |e: &ClientError| {
                drop(closed_tx.send(e.to_string()))
            })),
            ..Default::default()
        };
        let c = Client::connect(Connection::tcp(addr).unwrap(), options).unwrap();
        let why = closed_rx
            .recv_timeout(Duration::from_secs(20))
            .expect("closed by the heartbeat");
        assert!(why.contains("heartbeat"), "{why}");
        assert!(c.is_closed());
        mute.join().unwrap();
    }
}

#[test]
fn progress_extends_the_timeout_but_not_the_total_limit() {
    let s = Server::builder("slow", "1")
        .tool(Tool::new("ticker", json!({"type":"object"}), |_, ctx| {
            for i in 1..=200 {
                if ctx.is_cancelled() {
                    break;
                }
                ctx.progress(f64::from(i), None, None);
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(ToolResult::text("done"))
        }))
        .build()
        .unwrap();
    let (a, b) = memory::pair();
    s.serve_memory(a).unwrap();
    let options = ClientOptions {
        // Margins a loaded machine keeps: a tick stalled for a second
        // would end the call early.
        request_timeout: Duration::from_secs(1),
        max_total_timeout: Some(Duration::from_millis(2500)),
        ..Default::default()
    };
    let c = Client::connect(b.into_connection(), options).unwrap();
    let started = std::time::Instant::now();
    let opts = CallOptions {
        progress: Some(Arc::new(|_, _, _| {})),
        ..Default::default()
    };
    let r = c.call_tool_with("ticker", json!({}), opts);
    assert!(matches!(r, Err(ClientError::Timeout { .. })), "{r:?}");
    // Progress kept the 1 s timeout alive well past it; the 2.5 s total
    // stopped it (the ticks would have gone on for 4 s).
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn http_404_leads_to_a_fresh_initialize() {
    let clock = supervisor::ManualClock::new();
    let s = server();
    let http = s
        .start_http(
            mcpvisor::transport::http::HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_clock(Arc::new(clock.clone()))
                .with_get_stream(false),
        )
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr());
    let (options, re_rx) = common::reconnecting();
    let u = url.clone();
    let c = Client::connect_with(move || Connection::http(&u), options).unwrap();
    assert_eq!(
        text(&c.call_tool("echo", json!({"message": "one"})).unwrap()),
        "one"
    );
    clock.advance(Duration::from_secs(3600));
    // The background sweeper (on the same clock) may take it first.
    assert!(http.sweep_sessions() <= 1);
    assert_eq!(http.session_count(), 0);
    // The server answers 404: this call fails, the client re-initializes.
    assert!(c.call_tool("echo", json!({"message": "lost"})).is_err());
    re_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("re-initialized");
    assert_eq!(
        text(&c.call_tool("echo", json!({"message": "two"})).unwrap()),
        "two"
    );
    assert_eq!(http.session_count(), 1);
    c.close();
    http.shutdown().unwrap();
}

#[test]
fn dropping_the_last_handle_closes_and_reaps_the_child() {
    let conn =
        Connection::child(std::process::Command::new(common::example("conformance"))).unwrap();
    let pid = conn.process_id().unwrap();
    let c = Client::connect(conn, ClientOptions::default()).unwrap();
    let c2 = c.clone();
    drop(c);
    c2.ping().unwrap(); // a clone keeps it open
    drop(c2);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "closed and reaped on drop"
    );
}

#[test]
fn a_tcp_connection_waiting_for_a_long_call_is_not_idle() {
    // The call outlasts the idle timeout three times over while its
    // client sends nothing: the connection stays, and the call is not
    // cancelled (it was: the idle close ended the session).
    let s = Server::builder("long", "1")
        .tool(Tool::new("long", json!({"type":"object"}), |_, ctx| {
            let cancelled = ctx
                .cancelled()
                .recv_timeout(Duration::from_millis(600))
                .is_ok();
            Ok(ToolResult::text(if cancelled {
                "cancelled"
            } else {
                "done"
            }))
        }))
        .build()
        .unwrap();
    // A short grace: an idle close would cancel the call before its end.
    let mut options = TcpOptions::default()
        .with_bind("127.0.0.1:0".parse().unwrap())
        .with_idle_timeout(Duration::from_millis(200));
    options.lines.shutdown_grace = Duration::from_millis(50);
    let tcp = s.start_tcp(options).unwrap();
    let c = Client::connect(
        Connection::tcp(tcp.local_addr()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let r = c.call_tool("long", json!({})).expect("answered");
    assert_eq!(r["content"][0]["text"], "done");
    tcp.shutdown().unwrap();
}

/// A listener that stopped accepting still ends its open connections
/// when it is shut down.
#[test]
fn tcp_connections_open_after_stop_accepting_end_at_shutdown() {
    use std::io::Read;
    let s = server();
    let tcp = s
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let c = Client::connect(
        Connection::tcp(tcp.local_addr()).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    let mut raw = std::net::TcpStream::connect(tcp.local_addr()).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // Both connections are being served (not waiting in the backlog).
    c.ping().unwrap();
    std::io::Write::write_all(
        &mut raw,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n",
    )
    .unwrap();
    let mut answer = [0u8; 256];
    let n = raw.read(&mut answer).unwrap();
    assert!(
        n > 0 && answer[..n].ends_with(b"\n"),
        "the ping is answered"
    );
    tcp.stop_accepting();
    c.ping().expect("open connections go on");
    tcp.shutdown().unwrap();
    assert!(
        matches!(raw.read(&mut [0u8; 16]), Ok(0)),
        "the connection ended with the listener"
    );
    assert!(c.ping().is_err(), "the client's connection ended too");
}

#[test]
fn tcp_idle_connections_are_closed_and_the_cap_holds() {
    use std::io::Read;
    let s = server();
    let tcp = s
        .start_tcp(
            TcpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_idle_timeout(Duration::from_millis(200))
                .with_max_connections(1),
        )
        .unwrap();
    let mut idle = std::net::TcpStream::connect(tcp.local_addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // While it is open, a second connection is refused (closed at once).
    let mut second = std::net::TcpStream::connect(tcp.local_addr()).unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        second.read(&mut [0u8; 16]).unwrap_or(0),
        0,
        "refused beyond the cap"
    );
    // The idle one is closed by the server after its idle timeout.
    assert_eq!(
        idle.read(&mut [0u8; 16]).unwrap_or(0),
        0,
        "closed after idling"
    );
    tcp.shutdown().unwrap();
}

/// `max_total_timeout` covers a stateless call's every input-required
/// round and the questions between them, not each round afresh.
#[test]
fn a_total_limit_covers_every_input_required_round() {
    let server = Server::builder("rounds", "1")
        .tool(Tool::new(
            "asks_forever",
            json!({"type": "object"}),
            |_, ctx| {
                let mut round = 0;
                loop {
                    round += 1;
                    let question = mcpvisor::protocol::InputRequest::elicit(json!({
                        "message": format!("question {round}"),
                        "requestedSchema": {"type": "object", "properties": {}}
                    }))
                    .key(format!("q{round}"));
                    ctx.input(question)?;
                }
            },
        ))
        .build()
        .unwrap();
    let (a, b) = memory::pair();
    server.serve_memory(a).unwrap();
    let options = ClientOptions {
        generation: mcpvisor::client::Generation::Stateless,
        max_total_timeout: Some(Duration::from_millis(600)),
        elicitation: Some(Arc::new(|_| {
            // Each answer takes a while: 16 rounds take longer than the limit.
            std::thread::sleep(Duration::from_millis(100));
            Ok(json!({"action": "accept", "content": {}}))
        })),
        ..Default::default()
    };
    let c = Client::connect(b.into_connection(), options).unwrap();
    match c.call_tool("asks_forever", json!({})) {
        Err(ClientError::Timeout { .. }) => {}
        other => panic!("{other:?}"),
    }
}
