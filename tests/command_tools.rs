//! Command tools (#12) through a real client: they run without a shell,
//! report progress, are cut off at their output limit, killed with their
//! whole process group at their time limit or when the call is cancelled.

mod common;

use common::alive;
use mcpvisor::client::{Client, ClientOptions};
use mcpvisor::server::Server;
use mcpvisor::service::command::{RunEnd, Runs};
use mcpvisor::service::CommandTool;
use mcpvisor::transport::memory;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn client(tools: Vec<CommandTool>) -> Client {
    client_recording(tools, Arc::new(Runs::default()))
}

fn client_recording(tools: Vec<CommandTool>, runs: Arc<Runs>) -> Client {
    let mut b = Server::builder("commands", "1");
    for t in tools {
        b = b.tool(t.into_tool(runs.clone()));
    }
    let server = b.build().unwrap();
    let (a, c) = memory::pair();
    server.serve_memory(a).unwrap();
    Client::connect(c.into_connection(), ClientOptions::default()).unwrap()
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn arguments_are_passed_whole_and_exit_status_decides_the_result() {
    let mut echo = CommandTool::new("echo", argv(&["printf", "%s|", "{a}", "{b}"]));
    echo.input_schema =
        json!({"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}});
    let mut fail = CommandTool::new("fail", argv(&["sh", "-c", "echo oops >&2; exit 3"]));
    fail.env.insert("PATH".into(), "/usr/bin:/bin".into());
    let mut env = CommandTool::new("env", argv(&["/usr/bin/env"]));
    env.env.insert("ONLY".into(), "this".into());
    let mut json_out = CommandTool::new("json", argv(&["printf", "{{\"n\": 2}}"]));
    json_out.output_schema = Some(json!({"type":"object","properties":{"n":{"type":"integer"}}}));
    let c = client(vec![echo, fail, env, json_out]);
    let r = c
        .call_tool("echo", json!({"a": "two words; $(rm -rf /)", "b": "*"}))
        .unwrap();
    assert_eq!(text(&r), "two words; $(rm -rf /)|*|");
    let r = c.call_tool("fail", json!({})).unwrap();
    assert_eq!(r["isError"], true);
    assert!(
        text(&r).contains("exited with status 3") && text(&r).contains("oops"),
        "{r}"
    );
    let r = c.call_tool("env", json!({})).unwrap();
    assert_eq!(text(&r).trim(), "ONLY=this", "a cleared environment");
    let r = c.call_tool("json", json!({})).unwrap();
    assert_eq!(r["structuredContent"], json!({"n": 2}));
}

#[test]
fn output_is_cut_at_its_limit_and_the_result_says_so() {
    let mut big = CommandTool::new("big", argv(&["head", "-c", "100000", "/dev/zero"]));
    big.max_output_bytes = 1000;
    let c = client(vec![big]);
    let r = c.call_tool("big", json!({})).unwrap();
    let t = text(&r);
    let end = t.get(1000..).unwrap_or(t);
    assert!(t.contains("[output cut at 1000 of 100000 bytes]"), "{end}");
}

#[test]
fn a_timeout_kills_the_whole_process_group_and_progress_flows_meanwhile() {
    // The command starts a grandchild that would outlive a plain kill.
    let dir = std::env::temp_dir().join(format!("mcpvisor-cmd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("grandchild.pid");
    let script = format!("sleep 600 & echo $! > {}; wait", pidfile.display());
    let mut slow = CommandTool::new("slow", argv(&["/bin/sh", "-c", &script]));
    slow.timeout = Duration::from_secs(3);
    let runs = Arc::new(Runs::default());
    let c = client_recording(vec![slow], runs.clone());
    let r = common::call_with_progress(&c, "slow");
    assert_eq!(r["isError"], true);
    assert!(text(&r).contains("timed out"), "{r}");
    assert_eq!(runs.ends(), [("slow".to_owned(), RunEnd::TimedOut, 1)]);
    assert_eq!(runs.running(), 0);
    // The grandchild was started before the first progress, a second in.
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("the grandchild's pid")
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while alive(pid) {
        assert!(Instant::now() < deadline, "the grandchild {pid} survived");
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cancelling_the_call_kills_the_command() {
    let dir = std::env::temp_dir().join(format!("mcpvisor-cancel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("pid");
    let script = format!("echo $$ > {}; exec sleep 600", pidfile.display());
    let c = client(vec![CommandTool::new(
        "wait",
        argv(&["/bin/sh", "-c", &script]),
    )]);
    common::cancel_and_see_it_killed(&c, "wait", &pidfile);
    let _ = std::fs::remove_dir_all(&dir);
}
