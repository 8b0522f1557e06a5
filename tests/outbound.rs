//! Requests the server sends back during a call, through the one outbound
//! path both sides share: the client answers them on a bounded pool of
//! named threads, a call's association answers those that belong to it,
//! and a failing callback costs one error answer, nothing more.

mod common;

use mcpvisor::client::{CallOptions, Client, ClientOptions, Connection, PeerRequestHandler};
use mcpvisor::server::{Server, Tool, ToolResult};
use mcpvisor::transport::tcp::{TcpOptions, TcpServer};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Asks the client's LLM and returns its answer's text.
fn ask(ctx: &mcpvisor::Context) -> Result<ToolResult, mcpvisor::ToolError> {
    let r = ctx.sample(
        json!({"messages": [], "maxTokens": 1}),
        Duration::from_secs(20),
    )?;
    Ok(ToolResult::text(
        r["content"]["text"].as_str().unwrap_or("?"),
    ))
}

/// `server` on a loopback TCP port.
fn on_tcp(server: &Server) -> TcpServer {
    server
        .start_tcp(TcpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap()
}

/// A server whose `ask` tool asks the client's LLM and returns the answer.
fn server() -> (Server, TcpServer) {
    let server = Server::builder("outbound-test", "1")
        .tool(Tool::new("ask", json!({"type": "object"}), |_, ctx| {
            ask(ctx)
        }))
        .build()
        .unwrap();
    let tcp = on_tcp(&server);
    (server, tcp)
}

fn sampled(text: &str) -> Value {
    json!({"role": "assistant", "content": {"type": "text", "text": text}, "model": "m"})
}

fn answer(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn server_requests_run_on_a_bounded_pool_of_named_threads() {
    let (_server, tcp) = server();
    let threads = Arc::new(Mutex::new(HashSet::new()));
    let t = threads.clone();
    let options = ClientOptions {
        callback_threads: 2,
        sampling: Some(Arc::new(move |_| {
            let name = std::thread::current().name().unwrap_or("").to_owned();
            t.lock().unwrap().insert(name);
            Ok(sampled("pooled"))
        })),
        ..Default::default()
    };
    let client = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    let calls: Vec<_> = (0..12)
        .map(|_| {
            let c = client.clone();
            std::thread::spawn(move || c.call_tool("ask", json!({})).unwrap())
        })
        .collect();
    for call in calls {
        assert_eq!(answer(&call.join().unwrap()), "pooled");
    }
    let threads = threads.lock().unwrap();
    assert!(
        !threads.is_empty() && threads.len() <= 2,
        "at most the pool's two threads: {threads:?}"
    );
    assert!(
        threads
            .iter()
            .all(|n| n.starts_with("mcpvisor-client-callback-")),
        "{threads:?}"
    );
}

#[test]
fn a_calls_association_answers_the_servers_requests_during_it() {
    let (_server, tcp) = server();
    let options = ClientOptions {
        sampling: Some(Arc::new(|_| Ok(sampled("the client's callback")))),
        ..Default::default()
    };
    let client = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let associated: PeerRequestHandler = Arc::new(move |method, params| {
        s.lock()
            .unwrap()
            .push((method.to_owned(), params["maxTokens"].clone()));
        Ok(sampled("the call's association"))
    });
    let with = CallOptions {
        on_request: Some(associated),
        ..Default::default()
    };
    let r = client.call_tool_with("ask", json!({}), with).unwrap();
    assert_eq!(answer(&r), "the call's association");
    assert_eq!(
        *seen.lock().unwrap(),
        [("sampling/createMessage".to_owned(), json!(1))]
    );
    // A call without one: the client's own callback answers.
    let r = client.call_tool("ask", json!({})).unwrap();
    assert_eq!(answer(&r), "the client's callback");
}

#[test]
fn a_panicking_callback_costs_one_error_answer() {
    let (_server, tcp) = server();
    let options = ClientOptions {
        callback_threads: 1,
        sampling: Some(Arc::new(|p| {
            if p["maxTokens"] == 1 {
                panic!("a callback bug");
            }
            Ok(sampled("never"))
        })),
        ..Default::default()
    };
    let client = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    for _ in 0..3 {
        // The server's sample() fails with the client's error; the tool
        // reports it; the one pool thread lives on for the next call.
        let r = client.call_tool("ask", json!({})).unwrap();
        assert_eq!(r["isError"], true, "{r}");
        assert!(answer(&r).contains("callback failed"), "{r}");
    }
}

/// A server whose `ask` tool asks the client's LLM once two calls are in
/// flight: only what ties each request to its call can tell them apart.
fn asking_in_pairs() -> Server {
    let barrier = Arc::new(std::sync::Barrier::new(2));
    Server::builder("outbound-pairs", "1")
        .tool(Tool::new(
            "ask",
            json!({"type": "object"}),
            move |_, ctx| {
                barrier.wait();
                ask(ctx)
            },
        ))
        .build()
        .unwrap()
}

/// Two calls in flight at once, each with its own handler for the
/// server's requests: each gets its own handler's answer, never the
/// client's callback.
fn each_calls_requests_reach_its_own_association(connection: Connection) {
    let options = ClientOptions {
        sampling: Some(Arc::new(|_| Ok(sampled("unassociated")))),
        ..Default::default()
    };
    let client = Client::connect(connection, options).unwrap();
    let calls: Vec<_> = ["first", "second"]
        .into_iter()
        .map(|label| {
            let c = client.clone();
            std::thread::spawn(move || {
                let mine: PeerRequestHandler = Arc::new(move |_, _| Ok(sampled(label)));
                let with = CallOptions {
                    on_request: Some(mine),
                    ..Default::default()
                };
                (label, c.call_tool_with("ask", json!({}), with).unwrap())
            })
        })
        .collect();
    for call in calls {
        let (label, result) = call.join().unwrap();
        assert_eq!(answer(&result), label);
    }
    client.close();
}

#[test]
fn over_http_each_calls_requests_reach_its_own_association() {
    let server = asking_in_pairs();
    let (http, url) = common::serve_http(&server);
    each_calls_requests_reach_its_own_association(Connection::http(&url).unwrap());
    http.shutdown().unwrap();
}

/// Over AMQP the server's request names the call's message as its
/// correlation id (before, the client ignored it: both went to the
/// client's callback; seed 000 C2, the client's side).
#[cfg(feature = "amqp")]
#[test]
fn over_amqp_each_calls_requests_reach_its_own_association() {
    let config = common::amqp::config("outbound-pairs");
    let _cleanup = common::amqp::Cleanup(config.clone());
    let running = asking_in_pairs()
        .start_amqp(config.clone())
        .expect("the local RabbitMQ (see .ci/run)");
    each_calls_requests_reach_its_own_association(Connection::amqp(&config).unwrap());
    running.shutdown().unwrap();
}

#[test]
fn a_notification_callback_may_call_the_client() {
    // #11 item 3: re-listing tools on `list_changed`, the natural use, ran
    // on the reader thread that its own answer needed.
    let server = Server::builder("outbound-notify", "1")
        .enable_tools()
        .build()
        .unwrap();
    let tcp = on_tcp(&server);
    let me: Arc<std::sync::OnceLock<Client>> = Arc::new(std::sync::OnceLock::new());
    let (tx, relisted) = crossbeam_channel::unbounded();
    let m = me.clone();
    let options = ClientOptions {
        on_notification: Some(Arc::new(move |method, _| {
            if let (Some(c), "notifications/tools/list_changed") = (m.get(), method) {
                let _ = tx.send(c.list_tools().map(|t| t.len()));
            }
        })),
        ..Default::default()
    };
    let client = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    let _ = me.set(client.clone());
    client.ping().unwrap(); // the session is operating
    server
        .add_tool(Tool::new("new", json!({"type": "object"}), |_, _| {
            Ok(ToolResult::text(""))
        }))
        .unwrap();
    let listed = relisted
        .recv_timeout(Duration::from_secs(10))
        .expect("the callback's own call was answered");
    assert_eq!(listed, Ok(1));
    client.close();
}

#[test]
fn ping_is_answered_while_every_callback_thread_is_busy() {
    // #11 item 21: the server's ping never waits behind user callbacks.
    let (release_tx, release) = crossbeam_channel::unbounded::<()>();
    let (asked_tx, asked) = crossbeam_channel::unbounded::<()>();
    let server = Server::builder("outbound-ping", "1")
        .tool(Tool::new("ask", json!({"type": "object"}), |_, ctx| {
            ask(ctx)
        }))
        .tool(Tool::new(
            "ping_client",
            json!({"type": "object"}),
            |_, ctx| {
                ctx.peer_request("ping", json!({}), None, Duration::from_secs(5))
                    .map_err(mcpvisor::ToolError::from)?;
                Ok(ToolResult::text("pong"))
            },
        ))
        .build()
        .unwrap();
    let tcp = on_tcp(&server);
    let options = ClientOptions {
        callback_threads: 1,
        sampling: Some(Arc::new(move |_| {
            let _ = asked_tx.send(());
            let _ = release.recv();
            Ok(sampled("released"))
        })),
        ..Default::default()
    };
    let client = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    let c = client.clone();
    let blocked = std::thread::spawn(move || c.call_tool("ask", json!({})).unwrap());
    asked.recv_timeout(Duration::from_secs(10)).unwrap(); // the one callback thread is busy
    let r = client.call_tool("ping_client", json!({})).unwrap();
    assert_eq!(answer(&r), "pong", "{r}");
    release_tx.send(()).unwrap();
    assert_eq!(answer(&blocked.join().unwrap()), "released");
}
