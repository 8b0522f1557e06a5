//! Peers that stop reading must cost only their own connection (#11).

mod common;

use mcpvisor::client::{CallOptions, Client, ClientOptions, Connection};
use mcpvisor::server::{Server, Tool, ToolResult};
use mcpvisor::transport::tcp::TcpOptions;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

#[test]
fn a_tcp_peer_that_stops_reading_disturbs_no_other_client() {
    // #11 item 1 (repro t02): 8 KiB echoes from a client that never reads.
    let server = Server::builder("slow-peers", "1")
        .tool(Tool::new("echo", json!({"type": "object"}), |a, _| {
            Ok(ToolResult::text(a["message"].as_str().unwrap_or("")))
        }))
        .build()
        .unwrap();
    // The server stops reading a peer that does not read its answers; the
    // connection ends when a write has blocked for the write timeout.
    let tcp = server
        .start_tcp(
            TcpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_write_timeout(Duration::from_secs(1)),
        )
        .unwrap();
    let addr = tcp.local_addr();
    const CALLS: usize = 4000;
    let mut bad = TcpStream::connect(addr).unwrap();
    let mut writer = bad.try_clone().unwrap();
    let (wrote_tx, wrote) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let big = "x".repeat(8192);
        let mut lines = vec![
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        ];
        lines.extend((1..=CALLS).map(|i| {
            json!({"jsonrpc":"2.0","id":i,"method":"tools/call","params":{"name":"echo","arguments":{"message":big}}})
                .to_string()
        }));
        // Ends when all is written or when the server closes the socket.
        let done = lines.iter().try_for_each(|l| writeln!(writer, "{l}"));
        let _ = wrote_tx.send(done.is_ok());
    });
    // Let the server end the flood before the well-behaved client asks;
    // with the defect every handler thread is blocked on the flooder's
    // full queue by then.
    let _ = wrote.recv_timeout(WAIT);
    let good = Client::connect(Connection::tcp(addr).unwrap(), ClientOptions::default()).unwrap();
    let quick = CallOptions {
        timeout: Some(Duration::from_secs(10)),
        ..Default::default()
    };
    for i in 0..20 {
        let r = good
            .call_tool_with("echo", json!({"message": format!("m{i}")}), quick.clone())
            .expect("the other client is served");
        assert_eq!(r["content"][0]["text"], format!("m{i}"));
    }
    // The flooder's connection was ended: reading now reaches the end
    // before every answer came.
    bad.set_read_timeout(Some(WAIT)).unwrap();
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    let ended = loop {
        match bad.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => received += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break false
            }
            Err(_) => break true,
        }
    };
    assert!(
        ended,
        "the server closed the connection of the peer that did not read"
    );
    assert!(
        received < CALLS * 8192,
        "the answers were dropped, not buffered without bound ({received} bytes)"
    );
    // And its slot is free again.
    let deadline = Instant::now() + WAIT;
    while tcp.connection_count() > 1 {
        assert!(Instant::now() < deadline, "the connection slot was freed");
        std::thread::yield_now();
    }
    good.close();
}

#[test]
fn a_stdio_client_that_sends_everything_before_reading_gets_every_answer() {
    // A client that pipelines 20,000 calls and reads late: the server stops
    // reading while its outbox is half full, so the client's writes wait,
    // and every call is answered once the client reads (before, 1,024
    // unread answers cut the connection and lost the rest).
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    const CALLS: u64 = 20_000;
    let mut child = Command::new(common::example("echo"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn examples/echo");
    // However the server fails, reading below ends (60 s at most).
    let (finished, watchdog) = crossbeam_channel::bounded::<()>(1);
    let pid = child.id() as i32;
    std::thread::spawn(move || {
        if watchdog.recv_timeout(Duration::from_secs(60)) != Ok(()) {
            // SAFETY: kill(2) has no memory preconditions.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    let mut stdin = std::io::BufWriter::new(child.stdin.take().unwrap());
    let (wrote_tx, wrote) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let mut sent = writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#
        )
        .and_then(|_| writeln!(stdin, r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#));
        for id in 1..=CALLS {
            sent = sent.and_then(|_| {
                writeln!(
                    stdin,
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"m{id}"}}}}}}"#
                )
            });
        }
        let _ = wrote_tx.send(sent.and_then(|_| stdin.flush()).is_ok());
        // Dropping stdin is the end of input: the server exits when done.
    });
    // Read nothing until everything is sent or the server has stopped
    // taking requests in (the writer waits then; bounded either way).
    let _ = wrote.recv_timeout(Duration::from_secs(1));
    let mut ids = std::collections::BTreeSet::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let id = v["id"].as_u64().expect("an answer with its id");
        if id > 0 {
            assert_eq!(v["result"]["content"][0]["text"], format!("m{id}"), "{v}");
        }
        assert!(ids.insert(id), "answered once: {id}");
    }
    assert_eq!(ids.len() as u64, CALLS + 1, "every call answered");
    let _ = finished.send(());
    assert!(child.wait().unwrap().success());
}

/// A peer that ends its input and then reads what it is owed a few bytes
/// at a time (each write goes on, so none times out) is cut off once the
/// drain limit has passed: before, it held its connection's threads and
/// slot until the last byte, however long that took.
#[test]
fn a_tcp_peer_that_trickles_its_answers_out_is_cut_off_at_the_drain_limit() {
    let server = Server::builder("trickle", "1")
        .tool(Tool::new("big", json!({"type": "object"}), |_, _| {
            Ok(ToolResult::text("x".repeat(32 << 20)))
        }))
        .build()
        .unwrap();
    let mut options = TcpOptions::default()
        .with_bind("127.0.0.1:0".parse().unwrap())
        .with_write_timeout(Duration::from_secs(120));
    options.lines = options.lines.with_drain_limit(Duration::from_millis(300));
    let tcp = server.start_tcp(options).unwrap();
    let mut peer = TcpStream::connect(tcp.local_addr()).unwrap();
    for line in [
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}"#,
    ] {
        writeln!(peer, "{line}").unwrap();
    }
    peer.shutdown(std::net::Shutdown::Write).unwrap();
    // A slow reader: 64 bytes every 5 ms, until it is cut off (what the
    // kernel holds for it aside) or the test ends.
    let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reader = {
        let reading = reading.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while reading.load(std::sync::atomic::Ordering::SeqCst) {
                if matches!(peer.read(&mut buf), Ok(0) | Err(_)) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let deadline = Instant::now() + WAIT;
    while tcp.connection_count() > 0 {
        assert!(
            Instant::now() < deadline,
            "the trickling peer is still served"
        );
        std::thread::yield_now();
    }
    reading.store(false, std::sync::atomic::Ordering::SeqCst);
    reader.join().unwrap();
}
