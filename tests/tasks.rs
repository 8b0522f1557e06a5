//! The tasks extension (SEP-2663) through the library, in both
//! generations: a call answered with a task, its questions asked through
//! `tasks/get` and answered with `tasks/update`, a handler that asks first
//! and detaches, cancellation reaching the handler, and bounded storage.

mod common;

use common::eventually;
use mcpvisor::client::{Client, ClientError, ClientOptions, Connection, Generation, ToolCall};
use mcpvisor::protocol::{EngineOptions, TaskOptions, TaskStatus};
use mcpvisor::server::{Server, TaskSupport, Tool, ToolError, ToolResult};
use mcpvisor::transport::http::HttpOptions;
use mcpvisor::transport::memory;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn no_args() -> Value {
    json!({"type": "object"})
}

fn ask_name() -> Value {
    json!({
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
    })
}

fn server(tasks: TaskOptions, cancelled: Arc<AtomicBool>) -> Server {
    Server::builder("tasks", "1")
        .options(EngineOptions {
            tasks,
            ..Default::default()
        })
        .tool(
            Tool::new("instant", no_args(), |_, _| Ok(ToolResult::text("now")))
                .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new("ask", no_args(), |_, ctx| {
                let a = ctx.elicit(ask_name(), Duration::from_secs(60))?;
                Ok(ToolResult::text(format!("got {}", a["content"]["name"])))
            })
            .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new("wait", no_args(), move |_, ctx| {
                let _ = ctx.cancelled().recv_timeout(Duration::from_secs(60));
                cancelled.store(ctx.is_cancelled(), Ordering::SeqCst);
                Err(ToolError::new("stopped"))
            })
            .task_support(TaskSupport::Optional),
        )
        .tool(
            Tool::new("then_task", no_args(), |_, ctx| {
                let a = ctx.elicit(ask_name(), Duration::from_secs(60))?;
                let became = ctx.detach();
                Ok(ToolResult::text(format!(
                    "{became} {} {}",
                    a["content"]["name"],
                    ctx.task_id().is_some()
                )))
            })
            .task_support(TaskSupport::Optional)
            .detach_in_handler(),
        )
        .build()
        .unwrap()
}

fn client(s: &Server, generation: Generation, tasks: bool) -> Client {
    let (a, b) = memory::pair();
    s.serve_memory(a).unwrap();
    let options = ClientOptions {
        generation,
        tasks,
        elicitation: Some(Arc::new(|_| {
            Ok(json!({"action": "accept", "content": {"name": "Ada"}}))
        })),
        ..Default::default()
    };
    Client::connect(b.into_connection(), options).unwrap()
}

const BOTH: [Generation; 2] = [Generation::Sessions, Generation::Stateless];

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn a_task_asks_through_tasks_get_and_completes_in_both_generations() {
    let s = server(TaskOptions::default(), Arc::default());
    for generation in BOTH {
        let c = client(&s, generation, true);
        // Followed to its end by a plain call.
        assert_eq!(text(&c.call_tool("ask", json!({})).unwrap()), "got \"Ada\"");
        // Handed over, and answered by hand.
        let ToolCall::Task(t) = c.call_tool_as_task("ask", json!({})).unwrap() else {
            panic!("a task was expected ({generation:?})");
        };
        let created = t.created();
        assert_eq!(created["resultType"], "task");
        assert!(created["ttlMs"].as_u64().unwrap() > 0);
        assert!(created.get("requestState").is_none());
        let asked = eventually("the question", || {
            let d = t.get().map_err(|e| e.to_string())?;
            (d["status"] == "input_required")
                .then_some(d.clone())
                .ok_or(d.to_string())
        });
        assert_eq!(asked["resultType"], "complete");
        let requests = asked["inputRequests"].as_object().unwrap();
        assert_eq!(requests.len(), 1);
        let (key, request) = requests.iter().next().unwrap();
        assert_eq!(request["method"], "elicitation/create");
        t.update(Map::from_iter([(
            key.clone(),
            json!({"action": "accept", "content": {"name": "Bo"}}),
        )]))
        .unwrap();
        assert_eq!(
            text(&t.wait(Some(Duration::from_secs(30))).unwrap()),
            "got \"Bo\""
        );
        let done = t.get().unwrap();
        assert_eq!(done["status"], "completed");
        assert!(done["result"]
            .get("_meta")
            .is_none_or(|m| m.get("io.modelcontextprotocol/related-task").is_none()));
    }
}

#[test]
fn without_the_extension_calls_are_plain_and_task_methods_refused() {
    let s = server(TaskOptions::default(), Arc::default());
    for generation in BOTH {
        let c = client(&s, generation, false);
        let r = c.call_tool("instant", json!({})).unwrap();
        assert_eq!(text(&r), "now");
        assert_ne!(r["resultType"], "task");
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            match c.request(method, json!({"taskId": "x", "inputResponses": {}})) {
                Err(ClientError::Rpc(e)) => {
                    assert_eq!(e.code, -32021, "{method}: {e}");
                    let data = e.data.unwrap();
                    assert!(data["requiredCapabilities"]["extensions"]
                        ["io.modelcontextprotocol/tasks"]
                        .is_object());
                }
                other => panic!("{method}: {other:?}"),
            }
        }
        let with = client(&s, generation, true);
        for method in ["tasks/result", "tasks/list"] {
            match with.request(method, json!({"taskId": "x"})) {
                Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32601, "{method}"),
                other => panic!("{method}: {other:?}"),
            }
        }
        match with.request("tasks/get", json!({"taskId": "no-such-task"})) {
            Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602),
            other => panic!("{other:?}"),
        }
    }
}

/// A server that runs no tasks runs a `Required` tool plainly, for a
/// client with or without the extension (it offers none to declare).
#[test]
fn with_no_task_storage_a_required_tool_runs_plainly() {
    let s = Server::builder("no-tasks", "1")
        .options(EngineOptions {
            tasks: TaskOptions {
                max_tasks: 0,
                ..Default::default()
            },
            ..Default::default()
        })
        .tool(
            Tool::new("must", no_args(), |_, _| Ok(ToolResult::text("plain")))
                .task_support(TaskSupport::Required),
        )
        .build()
        .unwrap();
    for generation in BOTH {
        for tasks in [false, true] {
            let c = client(&s, generation, tasks);
            let r = c.call_tool("must", json!({})).unwrap();
            assert_eq!(text(&r), "plain", "{generation:?}, tasks {tasks}");
        }
    }
}

/// A TCP connection that ends (here: idle) is closed for its peer at
/// once, though a task of its session, which outlives it, still holds the
/// session's sink.
#[cfg(feature = "tcp")]
#[test]
fn a_tcp_connection_ends_for_its_peer_while_its_task_runs() {
    let s = server(TaskOptions::default(), Arc::default());
    let tcp = s
        .start_tcp(
            mcpvisor::transport::tcp::TcpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_idle_timeout(Duration::from_millis(200)),
        )
        .unwrap();
    let (closed_tx, closed) = crossbeam_channel::bounded(1);
    let options = ClientOptions {
        tasks: true,
        on_closed: Some(Arc::new(move |_: &ClientError| {
            let _ = closed_tx.try_send(());
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::tcp(tcp.local_addr()).unwrap(), options).unwrap();
    let ToolCall::Task(task) = c.call_tool_as_task("wait", json!({})).unwrap() else {
        panic!("not a task");
    };
    // The task waits (60 s) while the connection idles out.
    closed
        .recv_timeout(Duration::from_secs(20))
        .expect("the client sees its connection end");
    drop(task);
    tcp.shutdown().unwrap();
}

#[test]
fn a_handler_asks_as_a_plain_call_then_detaches_into_a_task() {
    let s = server(TaskOptions::default(), Arc::default());
    for generation in BOTH {
        let c = client(&s, generation, true);
        let ToolCall::Task(t) = c.call_tool_as_task("then_task", json!({})).unwrap() else {
            panic!("the handler detached ({generation:?})");
        };
        let r = t.wait(Some(Duration::from_secs(30))).unwrap();
        assert_eq!(text(&r), "true \"Ada\" true");
        // A client that follows no tasks: the handler runs on as a plain call.
        let plain = client(&s, generation, false);
        let r = plain.call_tool("then_task", json!({})).unwrap();
        assert_eq!(text(&r), "false \"Ada\" false");
    }
}

#[test]
fn tasks_cancel_reaches_the_handler_and_the_task_stays_cancelled() {
    let flag = Arc::new(AtomicBool::new(false));
    let s = server(TaskOptions::default(), flag.clone());
    let c = client(&s, Generation::Stateless, true);
    let ToolCall::Task(t) = c.call_tool_as_task("wait", json!({})).unwrap() else {
        panic!("a task was expected");
    };
    t.cancel().unwrap();
    eventually("the handler saw it", || {
        flag.load(Ordering::SeqCst)
            .then_some(())
            .ok_or("not yet".into())
    });
    assert_eq!(t.get().unwrap()["status"], "cancelled");
    // Idempotent on an ended task.
    t.cancel().unwrap();
    assert!(matches!(t.wait(None), Err(ClientError::Cancelled)));
}

#[test]
fn task_storage_stays_bounded_under_10000_abandoned_tasks() {
    // As many task threads, and as many tasks for one client, as stored
    // tasks: storage, not the threads (whose places come back only when
    // each has run, however briefly), is what fills first.
    let options = TaskOptions {
        max_running: mcpvisor::protocol::tasks::DEFAULT_MAX_TASKS,
        max_per_owner: mcpvisor::protocol::tasks::DEFAULT_MAX_TASKS,
        ..Default::default()
    };
    let s = server(options, Arc::default());
    let c = client(&s, Generation::Sessions, true);
    let (mut tasks, mut plain) = (0, 0);
    for _ in 0..10_000 {
        match c.call_tool_as_task("instant", json!({})).unwrap() {
            ToolCall::Task(_) => tasks += 1,
            ToolCall::Done(r) => {
                assert_eq!(text(&r), "now");
                plain += 1;
            }
        }
    }
    let max = mcpvisor::protocol::tasks::DEFAULT_MAX_TASKS;
    assert_eq!(tasks, max, "tasks made until storage was full");
    assert_eq!(plain, 10_000 - max, "then served as plain calls");
    let kept: usize = s.engine().task_counts().iter().map(|(_, n)| n).sum();
    assert_eq!(kept, max);
}

#[test]
fn one_client_fills_only_its_share_of_the_task_storage() {
    let options = TaskOptions {
        max_tasks: 16,
        max_per_owner: 2,
        ..Default::default()
    };
    let s = server(options, Arc::default());
    let is_task = |c: &Client| {
        matches!(
            c.call_tool_as_task("instant", json!({})).unwrap(),
            ToolCall::Task(_)
        )
    };
    // A connection has a share of its own, in either generation; past
    // it, a plain call.
    for generation in BOTH {
        for c in [client(&s, generation, true), client(&s, generation, true)] {
            assert!(is_task(&c) && is_task(&c));
            assert!(!is_task(&c), "over its share: a plain call");
        }
    }
    // Over HTTP each stateless request is a session of its own: without a
    // credential they are one client.
    let http = s
        .start_http(HttpOptions::default().with_bind("127.0.0.1:0".parse().unwrap()))
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr());
    let stateless = || {
        let options = ClientOptions {
            generation: Generation::Stateless,
            tasks: true,
            ..Default::default()
        };
        Client::connect(Connection::http(&url).unwrap(), options).unwrap()
    };
    let (x, y) = (stateless(), stateless());
    assert!(is_task(&x) && is_task(&x));
    assert!(
        !is_task(&y),
        "the share of stateless HTTP requests is taken"
    );
    http.shutdown().unwrap();
}

#[test]
fn expired_tasks_are_dropped_and_make_room() {
    let ttl = Duration::from_secs(2);
    let options = TaskOptions {
        ttl,
        max_tasks: 4,
        ..Default::default()
    };
    // Full storage serves a call as a plain one; a machine so loaded that
    // the first task expired before the fifth call made room for a task
    // again, and the round is made once more.
    let mut rounds = 0;
    let (s, c, first) = loop {
        rounds += 1;
        assert!(rounds <= 10, "ten rounds each slower than the time to live");
        let s = server(options.clone(), Arc::default());
        let c = client(&s, Generation::Stateless, true);
        let began = Instant::now();
        let first: Vec<_> = (0..4)
            .map(
                |_| match c.call_tool_as_task("instant", json!({})).unwrap() {
                    ToolCall::Task(t) => t,
                    ToolCall::Done(_) => panic!("room for four"),
                },
            )
            .collect();
        match c.call_tool_as_task("instant", json!({})).unwrap() {
            ToolCall::Done(_) => break (s, c, first),
            ToolCall::Task(_) => assert!(
                began.elapsed() >= ttl,
                "a task though storage was full and none had expired"
            ),
        }
    };
    eventually("a task again once the first expired", || {
        match c
            .call_tool_as_task("instant", json!({}))
            .map_err(|e| e.to_string())?
        {
            ToolCall::Task(_) => Ok(()),
            ToolCall::Done(_) => Err("still full".into()),
        }
    });
    match first[0].get() {
        Err(ClientError::Rpc(e)) => assert_eq!(e.code, -32602, "an expired task is unknown"),
        other => panic!("{other:?}"),
    }
    eventually("every task kept has completed", || {
        let counts = s.engine().task_counts();
        let done = counts
            .iter()
            .all(|(st, n)| *st == TaskStatus::Completed || *n == 0);
        done.then_some(()).ok_or(format!("{counts:?}"))
    });
}

#[test]
fn a_call_cancelled_before_it_detaches_leaves_no_task_behind() {
    // The handler waits for its call's cancellation, then tries to become
    // a task: refused, and the task it was to be no longer holds the one
    // place in storage (it held it for its hour to live).
    let (refused_tx, refused) = crossbeam_channel::unbounded();
    let (started_tx, started) = crossbeam_channel::unbounded();
    let s = Server::builder("tasks", "1")
        .options(EngineOptions {
            tasks: TaskOptions {
                max_tasks: 1,
                ..Default::default()
            },
            ..Default::default()
        })
        .tool(
            Tool::new("late", no_args(), move |_, ctx| {
                let _ = started_tx.send(());
                let _ = ctx.cancelled().recv_timeout(Duration::from_secs(60));
                let _ = refused_tx.send(ctx.detach());
                Err(ToolError::new("stopped"))
            })
            .task_support(TaskSupport::Optional)
            .detach_in_handler(),
        )
        .tool(
            Tool::new("instant", no_args(), |_, _| Ok(ToolResult::text("now")))
                .task_support(TaskSupport::Optional),
        )
        .build()
        .unwrap();
    let c = client(&s, Generation::Sessions, true);
    let cancel = mcpvisor::protocol::CancelToken::new();
    let caller = {
        let (c, cancel) = (c.clone(), cancel.clone());
        std::thread::spawn(move || {
            c.call_tool_with(
                "late",
                json!({}),
                mcpvisor::client::CallOptions {
                    cancel: Some(cancel),
                    ..Default::default()
                },
            )
        })
    };
    // Cancelled once its handler runs: the client's call is given up at
    // once, and the server told.
    started.recv_timeout(Duration::from_secs(20)).unwrap();
    cancel.cancel();
    assert!(caller.join().unwrap().is_err());
    assert_eq!(refused.recv_timeout(Duration::from_secs(20)), Ok(false));
    let kept: usize = s.engine().task_counts().iter().map(|(_, n)| n).sum();
    assert_eq!(kept, 0, "no task left behind");
    assert!(matches!(
        c.call_tool_as_task("instant", json!({})).unwrap(),
        ToolCall::Task(_)
    ));
}

/// With bearer tokens a task is followed only with the token it was made
/// with (the tasks extension's rule where there is an authorization
/// context): another token's `tasks/get` or `tasks/cancel` finds none.
#[cfg(feature = "http")]
#[test]
fn a_task_is_followed_only_with_the_token_it_was_made_with() {
    use mcpvisor::transport::http::HttpOptions;
    let s = server(TaskOptions::default(), Arc::new(AtomicBool::new(false)));
    let http = s
        .start_http(
            HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap())
                .with_bearer_tokens(vec!["alpha".into(), "beta".into()]),
        )
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr());
    for generation in BOTH {
        let connect = |token: &str| {
            let options = ClientOptions {
                generation,
                tasks: true,
                ..Default::default()
            };
            Client::connect(
                mcpvisor::client::Connection::http_bearer(&url, token).unwrap(),
                options,
            )
            .unwrap()
        };
        let (a, b) = (connect("alpha"), connect("beta"));
        let ToolCall::Task(t) = a.call_tool_as_task("wait", json!({})).unwrap() else {
            panic!("a task was expected");
        };
        let theirs = b.task(t.id());
        let e = theirs.get().unwrap_err();
        assert!(
            e.to_string().contains("Task not found"),
            "{generation:?}: {e}"
        );
        assert!(theirs.cancel().is_err(), "{generation:?}");
        assert_eq!(t.get().unwrap()["status"], "working", "{generation:?}");
        t.cancel().unwrap();
        a.close();
        b.close();
    }
    http.shutdown().unwrap();
}
