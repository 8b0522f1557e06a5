//! The gateway (#13) through the built daemon: an upstream MCP server from
//! this repository (the conformance example, over stdio) served under its
//! namespace beside the command tools, with progress and sampling relayed
//! both ways; an upstream that dies is withdrawn, restarted and served
//! again; no upstream process outlives the daemon.

mod common;

use common::{alive, eventually, gone, pid_in, scratch, tool_names, unmanaged};
use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

struct Gateway {
    child: Child,
    url: String,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon on `config` (written to `dir/mcpvisor.json`), once it
/// listens.
fn start(dir: &std::path::Path, config: &Value) -> Gateway {
    start_with(dir, config, &[])
}

/// [`start`] with variables for the daemon.
fn start_with(
    dir: &std::path::Path,
    config: &Value,
    env: &[(&str, std::ffi::OsString)],
) -> Gateway {
    start_logging(dir, config, env, Stdio::null())
}

/// [`start_with`], the daemon's log going to `stderr`.
fn start_logging(
    dir: &std::path::Path,
    config: &Value,
    env: &[(&str, std::ffi::OsString)],
    stderr: Stdio,
) -> Gateway {
    let path = dir.join("mcpvisor.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let mut cmd = Command::new(BIN);
    unmanaged(&mut cmd)
        .args(["--config", path.to_str().unwrap()])
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(stderr);
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_owned();
    Gateway { child, url }
}

/// The daemon with the conformance example as upstream `conf` and one
/// command tool, over HTTP.
fn gateway(dir: &std::path::Path, upstream: Value) -> Gateway {
    let mut servers = json!({
        "conf": {"command": common::example("conformance"), "tools": {"deny": ["test_reconnection"]}},
    });
    if let Some(extra) = upstream.as_object() {
        for (k, v) in extra {
            servers[k] = v.clone();
        }
    }
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "commands": {"hello": {"argv": ["echo", "hello"]}},
        "mcpServers": servers,
    });
    start(dir, &config)
}

/// Polls `tools/list` until `done` holds of its names.
fn until(c: &Client, what: &str, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    eventually(what, || {
        let n = tool_names(c);
        if done(&n) {
            Ok(n)
        } else {
            Err(format!("{n:?}"))
        }
    })
}

/// mcpvisor itself as a remote upstream, in `dir/name`, over HTTP on an
/// ephemeral port, with one command tool `hi` that prints `says`; `extra`
/// is added to its configuration.
fn inner(dir: &std::path::Path, name: &str, says: &str, extra: Value) -> Gateway {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    let mut config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "commands": {"hi": {"argv": ["echo", says]}},
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        config[k] = v.clone();
    }
    start(&d, &config)
}

impl Gateway {
    /// Its `HOST:PORT`.
    fn addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned()
    }
}

/// The pids of the daemon's children running `program`.
fn upstream_pids(daemon: u32, program: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let pid = e.ok()?.file_name().to_str()?.to_owned();
            let (_, f) = common::proc_stat(&pid)?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            (f.get(1) == Some(&daemon.to_string())
                && f[0] != "Z"
                && String::from_utf8_lossy(&cmdline).contains(program))
            .then(|| pid.parse().ok())?
        })
        .collect()
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap_or_default()
}

#[test]
fn an_upstream_is_served_under_its_namespace_with_progress_and_sampling_relayed() {
    let dir = scratch("gateway");
    let g = gateway(&dir, json!({}));
    let (logged_tx, logged) = crossbeam_channel::unbounded();
    let options = ClientOptions {
        sampling: Some(Arc::new(|p: Value| {
            assert_eq!(p["maxTokens"], 100);
            Ok(
                json!({"role": "assistant", "content": {"type": "text", "text": "from the client"}, "model": "m"}),
            )
        })),
        on_notification: Some(Arc::new(move |m: &str, p: &Value| {
            if m == "notifications/message" {
                let _ = logged_tx.send(p.clone());
            }
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    let tools = until(&c, "the upstream's tools", |n| {
        n.iter().any(|t| t == "conf__test_simple_text")
    });
    assert!(tools.iter().any(|t| t == "hello"), "{tools:?}");
    // A session that starts now is told the upstream's instructions, under
    // its name.
    let later =
        Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    assert_eq!(
        later.instructions(),
        Some("## conf\n\nThe server of the MCP conformance suite's scenarios.")
    );
    later.close();
    assert!(
        !tools.iter().any(|t| t == "conf__test_reconnection"),
        "denied: {tools:?}"
    );
    assert!(tools
        .iter()
        .all(|t| t == "hello" || t.starts_with("conf__")));
    let r = c.call_tool("conf__test_simple_text", json!({})).unwrap();
    assert_eq!(text(&r), "This is a simple text response for testing.");
    let r = common::call_with_progress(&c, "conf__test_tool_with_progress");
    assert_eq!(text(&r), "Tool with progress executed successfully");
    let r = c
        .call_tool("conf__test_sampling", json!({"prompt": "hi"}))
        .unwrap();
    assert_eq!(text(&r), "LLM response: from the client", "{r}");
    let r = c.call_tool("conf__test_error_handling", json!({})).unwrap();
    assert_eq!(r["isError"], true, "{r}");
    // The upstream's log, to this session at its level, named after it.
    c.set_log_level(mcpvisor::LogLevel::Info).unwrap();
    c.call_tool("conf__test_tool_with_logging", json!({}))
        .unwrap();
    for wanted in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ] {
        let m = logged
            .recv_timeout(Duration::from_secs(30))
            .expect("the upstream's log message");
        assert_eq!(m["data"], wanted, "{m}");
        assert_eq!(m["logger"], "conf/conformance", "{m}");
        assert_eq!(m["level"], "info", "{m}");
    }
    // Completions are relayed with the upstream's own reference.
    let done = c
        .complete(
            json!({"type": "ref/prompt", "name": "conf__test_prompt_with_arguments"}),
            "arg1",
            "par",
        )
        .unwrap();
    assert_eq!(
        done["completion"]["values"],
        json!(["paris", "park", "party"]),
        "{done}"
    );
    // An embedded resource's URI is ours, and reading it reaches the upstream.
    let r = c
        .call_tool("conf__test_embedded_resource", json!({}))
        .unwrap();
    assert_eq!(
        r["content"][0]["resource"]["uri"], "mcpvisor://conf/test://embedded-resource",
        "{r}"
    );
    let p = c.get_prompt("conf__test_simple_prompt", json!({})).unwrap();
    assert!(p["messages"].is_array(), "{p}");
    let resources = c.list_resources().unwrap();
    let uri = resources[0]["uri"].as_str().unwrap().to_owned();
    assert!(uri.starts_with("mcpvisor://conf/"), "{uri}");
    let read = c.read_resource(&uri).unwrap();
    assert_eq!(read["contents"][0]["uri"], uri, "{read}");
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dead_upstream_is_withdrawn_restarted_and_served_again_and_none_outlives_the_daemon() {
    let dir = scratch("gateway-crash");
    let mut g = gateway(&dir, json!({}));
    let (tx, changed) = crossbeam_channel::unbounded();
    let options = ClientOptions {
        on_notification: Some(Arc::new(move |m: &str, _: &Value| {
            if m == "notifications/tools/list_changed" {
                let _ = tx.send(());
            }
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    until(&c, "the upstream's tools", |n| n.len() > 1);
    let daemon = g.child.id();
    let first = upstream_pids(daemon, "conformance");
    assert_eq!(first.len(), 1, "{first:?}");
    while changed.try_recv().is_ok() {}
    // SAFETY: kill(2) on a process of this test's daemon.
    unsafe { libc::kill(first[0], libc::SIGKILL) };
    until(&c, "withdrawn", |n| n == ["hello"]);
    let back = until(&c, "served again", |n| n.len() > 1);
    assert!(back.iter().any(|t| t == "conf__test_simple_text"));
    for what in ["withdrawn", "back"] {
        changed
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("list_changed: {what}"));
    }
    let second = upstream_pids(daemon, "conformance");
    assert_eq!(second.len(), 1, "{second:?}");
    assert_ne!(second, first, "a new process");
    assert!(
        common::proc_stat(&first[0].to_string()).is_none(),
        "the dead one was reaped (not even a zombie)"
    );
    c.close();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon as libc::pid_t, libc::SIGTERM) };
    assert_eq!(g.child.wait().unwrap().code(), Some(0));
    gone(second[0], "the upstream, after the daemon");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cancellation_and_a_crash_reach_the_right_calls_and_a_crash_loop_is_contained() {
    let dir = scratch("gateway-relay");
    // The upstream is mcpvisor itself over stdio, with a command tool that
    // runs until it is cancelled.
    let pidfile = dir.join("nap.pid");
    let inner = dir.join("inner.json");
    let nap = format!("echo $$$$ > {}; exec sleep 600", pidfile.display());
    std::fs::write(
        &inner,
        json!({"commands": {"nap": {"argv": ["/bin/sh", "-c", nap]}}}).to_string(),
    )
    .unwrap();
    let control = dir.join("control");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "control": control,
        "mcpServers": {
            "inner": {"command": BIN, "args": ["--config", inner, "--stdio"]},
            "broken": {"command": "false", "restart": {"intensity": 1, "backoffMs": 20}},
        },
    });
    let g = start(&dir, &config);
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "the inner tools", |n| n == ["inner__nap"]);

    // Cancelling the call downstream cancels it upstream: the inner
    // daemon kills its command.
    common::cancel_and_see_it_killed(&c, "inner__nap", &pidfile);

    // The upstream dies during a call: that call fails naming it.
    std::fs::remove_file(&pidfile).unwrap();
    let upstream = upstream_pids(g.child.id(), "inner.json");
    assert_eq!(upstream.len(), 1, "{upstream:?}");
    std::thread::scope(|s| {
        let call = s.spawn(|| c.call_tool("inner__nap", json!({})));
        let nap = pid_in(&pidfile);
        // SAFETY: kill(2) on a process of this test's daemon.
        unsafe { libc::kill(upstream[0], libc::SIGKILL) };
        let r = call.join().unwrap().unwrap();
        assert_eq!(r["isError"], true, "{r}");
        assert!(text(&r).contains("upstream inner"), "{r}");
        // Its group went with it.
        gone(nap, "the dead upstream's command");
    });
    // Withdrawn, then back.
    until(&c, "the inner tools withdrawn", |n| n.is_empty());
    until(&c, "the inner tools back", |n| n == ["inner__nap"]);

    // The crash loop is contained and reported; the rest answers.
    let s = eventually("broken never failed", || {
        let out = Command::new(BIN)
            .args(["status", "--json", "--control", control.to_str().unwrap()])
            .output()
            .unwrap();
        let s: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        match s["failedUpstreams"].get("broken") {
            Some(_) => Ok(s),
            None => Err(s.to_string()),
        }
    });
    let states: Vec<(&str, &str)> = s["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["name"].as_str().unwrap(), u["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [("broken", "failed"), ("inner", "serving")], "{s}");
    c.ping().unwrap();
    until(&c, "inner still served", |n| n == ["inner__nap"]);
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sighup_restarts_only_the_changed_upstream_and_sessions_survive() {
    let dir = scratch("gateway-reload");
    let inner = dir.join("inner.json");
    std::fs::write(
        &inner,
        json!({"commands": {"hi": {"argv": ["echo", "hi"]}}}).to_string(),
    )
    .unwrap();
    let path = dir.join("mcpvisor.json");
    let config = |timeout: u64| {
        json!({
            "listen": ["http://127.0.0.1:0/mcp"],
            "mcpServers": {
                "conf": {"command": common::example("conformance")},
                "inner": {"command": BIN, "args": ["--config", inner, "--stdio"], "timeoutMs": timeout},
            },
        })
    };
    let g = start(&dir, &config(60_000));
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "both upstreams", |n| {
        n.iter().any(|t| t == "inner__hi") && n.iter().any(|t| t == "conf__test_simple_text")
    });
    let daemon = g.child.id();
    let (conf, inner_before) = (
        upstream_pids(daemon, "conformance"),
        upstream_pids(daemon, "inner.json"),
    );
    assert_eq!((conf.len(), inner_before.len()), (1, 1));
    std::fs::write(&path, config(30_000).to_string()).unwrap();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon as libc::pid_t, libc::SIGHUP) };
    // The changed one is replaced by a new process...
    let inner_after = eventually("inner was not restarted", || {
        let now = upstream_pids(daemon, "inner.json");
        if now.len() == 1 && now != inner_before {
            Ok(now)
        } else {
            Err(format!("{now:?}"))
        }
    });
    gone(inner_before[0], "the replaced upstream");
    // ... the other keeps its process, and this session goes on.
    assert_eq!(upstream_pids(daemon, "conformance"), conf);
    until(&c, "inner served again", |n| {
        n.iter().any(|t| t == "inner__hi")
    });
    let r = c.call_tool("inner__hi", json!({})).unwrap();
    assert_eq!(text(&r), "hi\n");
    let r = c.call_tool("conf__test_simple_text", json!({})).unwrap();
    assert!(!text(&r).is_empty());
    assert_eq!(upstream_pids(daemon, "inner.json"), inner_after);
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upstream whose tools list but whose prompts/list fails is served
/// with its tools (its prompts left out, logged): before, the failure of
/// any list failed the upstream, started again and again until it was
/// given up, and a required one kept the daemon from being ready.
#[test]
fn an_upstream_whose_prompts_fail_to_list_is_served_with_its_tools() {
    let dir = scratch("gateway-prompts-fail");
    let script = dir.join("upstream.py");
    std::fs::write(
        &script,
        r#"import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, answer = m.get("method"), None
    if method == "initialize":
        answer = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}, "prompts": {}},
                  "serverInfo": {"name": "half-broken", "version": "1"}}
    elif method == "tools/list":
        answer = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        answer = {"content": [{"type": "text", "text": "called"}]}
    elif method == "ping":
        answer = {}
    if answer is None:
        code = -32603 if method == "prompts/list" else -32601
        out = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": code, "message": "broken"}}
    else:
        out = {"jsonrpc": "2.0", "id": m["id"], "result": answer}
    print(json.dumps(out), flush=True)
"#,
    )
    .unwrap();
    let notify = dir.join("notify.sock");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"half": {"command": "python3", "args": [script], "required": true,
            "protocol": "sessions", "restart": {"intensity": 1, "backoffMs": 20}}},
    });
    let g = start_with(&dir, &config, &[("NOTIFY_SOCKET", notify.clone().into())]);
    let mut buf = [0u8; 4096];
    let n = manager.recv(&mut buf).expect("READY=1");
    assert!(buf[..n].starts_with(b"READY=1"));
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    assert_eq!(tool_names(&c), ["half__t"]);
    let r = c.call_tool("half__t", json!({})).unwrap();
    assert_eq!(text(&r), "called");
    c.close();
    drop(g);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ready_waits_for_a_required_upstream_and_its_failure_is_the_daemon_s() {
    let dir = scratch("gateway-required");
    // READY comes once the required upstream serves: its tools are there.
    let notify = dir.join("notify.sock");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"conf": {"command": common::example("conformance"), "required": true}},
    });
    let g = start_with(&dir, &config, &[("NOTIFY_SOCKET", notify.clone().into())]);
    let mut buf = [0u8; 4096];
    let n = manager.recv(&mut buf).expect("READY=1");
    assert!(buf[..n].starts_with(b"READY=1"));
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    assert!(
        tool_names(&c).iter().any(|t| t == "conf__test_simple_text"),
        "served by READY"
    );
    c.close();
    drop(g);

    // A required upstream that cannot start: no READY, exit 70.
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"broken": {"command": "false", "required": true,
                                  "restart": {"intensity": 1, "backoffMs": 20}}},
    });
    let path = dir.join("mcpvisor.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let mut cmd = Command::new(BIN);
    let status = unmanaged(&mut cmd)
        .args(["--config", path.to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(70));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_asked_while_waiting_for_a_required_upstream_stops_at_once() {
    // The required upstream starts but never answers: READY waits (up to
    // a minute). SIGTERM meanwhile must stop the daemon then, not be
    // ignored until the service manager's SIGKILL.
    let dir = scratch("gateway-required-stop");
    let notify = dir.join("notify.sock");
    let manager = std::os::unix::net::UnixDatagram::bind(&notify).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = dir.join("started");
    let script = format!("touch {}; exec sleep 600", started.display());
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"mute": {"command": "sh", "args": ["-c", script], "required": true}},
    });
    let path = dir.join("mcpvisor.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let mut cmd = Command::new(BIN);
    let mut daemon = unmanaged(&mut cmd)
        .args(["--config", path.to_str().unwrap()])
        .env("NOTIFY_SOCKET", &notify)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    eventually("the upstream started", || {
        started
            .exists()
            .then_some(())
            .ok_or_else(|| "not yet".to_owned())
    });
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    let mut buf = [0u8; 4096];
    let n = manager.recv(&mut buf).expect("a word from the daemon");
    assert!(
        buf[..n].starts_with(b"STOPPING=1"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert_eq!(daemon.wait().unwrap().code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stop_is_not_held_up_by_an_upstream_that_never_answers_its_listing() {
    // The upstream answers `initialize` and never its `tools/list`; its
    // requests may take five minutes, and the daemon's stop as long.
    let dir = scratch("gateway-listing-stop");
    let listing = dir.join("listing");
    let script = format!(
        r#"
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": {{
            "protocolVersion": "2025-11-25", "capabilities": {{"tools": {{}}}},
            "serverInfo": {{"name": "mute", "version": "1"}}}}}}), flush=True)
    elif m.get("method") == "tools/list":
        open({listing:?}, "w").close()
"#,
        listing = listing.display().to_string()
    );
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "shutdownTimeoutMs": 300_000,
        // With a session at once (the script answers no server/discover).
        "mcpServers": {"mute": {"command": "python3", "args": ["-c", script],
            "timeoutMs": 300_000, "protocol": "sessions"}},
    });
    let log = dir.join("stderr.log");
    let stderr = std::fs::File::create(&log).unwrap();
    let mut g = start_logging(&dir, &config, &[], stderr.into());
    eventually("the upstream was asked for its tools", || {
        listing
            .exists()
            .then_some(())
            .ok_or_else(|| "not yet".to_owned())
    });
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(g.child.id() as libc::pid_t, libc::SIGTERM) };
    let status = eventually("the daemon stopped", || {
        g.child
            .try_wait()
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "still running".to_owned())
    });
    assert_eq!(status.code(), Some(0));
    // Its worker stopped when told (it was not left behind, detached,
    // after its 10 s to stop).
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("ignored its stop signal"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stopped_daemon_leaves_nothing_of_an_upstream_s_group_behind() {
    // The upstream leaves a helper in its group that does not end with
    // its stdin, and its shell lingers after its server ends (as a
    // wrapper script may): only the first close of its client, which
    // waits its grace period for the shell and then kills the group,
    // ends the helper, and the daemon must not exit before it has.
    let dir = scratch("gateway-stop-group");
    let helper = dir.join("helper.pid");
    let script = format!(
        "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > {helper}; {conf}; sleep 30 >/dev/null",
        helper = helper.display(),
        conf = common::example("conformance").display(),
    );
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"conf": {"command": "/bin/sh", "args": ["-c", script]}},
    });
    let mut g = start(&dir, &config);
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "the upstream's tools", |n| n.len() > 1);
    let helper = pid_in(&helper);
    assert!(alive(helper), "the helper runs");
    c.close();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(g.child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(g.child.wait().unwrap().code(), Some(0));
    // It was killed before the daemon exited: only its end is awaited.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(helper) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let survived = alive(helper);
    if survived {
        // SAFETY: kill(2) on the helper this test's upstream started.
        unsafe { libc::kill(helper, libc::SIGKILL) };
    }
    assert!(
        !survived,
        "the upstream's helper ({helper}) outlived the daemon"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The daemon with npm's server-everything (pinned in tests/js) as the
/// required upstream `everything`, and the tests/js directory.
fn everything(dir: &std::path::Path) -> (Gateway, std::path::PathBuf) {
    let js = common::npm_dir("js", "@modelcontextprotocol/server-everything");
    let entry = js.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"everything": {"command": "node", "args": [entry, "stdio"], "required": true}},
    });
    (start(dir, &config), js)
}

#[test]
fn server_everything_through_the_gateway_to_the_typescript_and_python_sdk_clients() {
    let dir = scratch("gateway-everything");
    let (g, js) = everything(&dir);
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "server-everything's tools", |n| {
        n.iter().any(|t| t == "everything__echo")
    });
    c.close();
    // The official TypeScript and Python SDK clients, each through the
    // daemon to server-everything.
    let py = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py");
    let python = py.join(".venv/bin/python");
    assert!(
        python.exists(),
        "the Python SDK: python3 -m venv tests/py/.venv && tests/py/.venv/bin/pip install -r tests/py/requirements.txt (.ci/run does)"
    );
    let clients = [
        (
            "typescript",
            Command::new("node")
                .arg(js.join("gateway_client.mjs"))
                .arg(&g.url)
                .output(),
        ),
        (
            "python",
            Command::new(&python)
                .arg(py.join("gateway_client.py"))
                .arg(&g.url)
                .output(),
        ),
    ];
    for (sdk, out) in clients {
        let out = out.unwrap_or_else(|e| panic!("{sdk}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{sdk} SDK client failed: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value =
            serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{sdk}: {e}: {stdout}"));
        let tools = r["tools"].as_array().unwrap();
        assert!(tools.len() > 5, "{sdk}: {r}");
        assert!(
            tools
                .iter()
                .all(|t| t.as_str().unwrap().starts_with("everything__")),
            "{sdk}: {r}"
        );
        assert_eq!(r["echo"], "Echo: hi", "{sdk}: {r}");
        assert!(
            !r["progress"].as_array().unwrap().is_empty(),
            "{sdk}: progress relayed: {r}"
        );
        assert!(
            r["sampling"].as_str().unwrap().contains("from "),
            "{sdk}: sampling relayed to the calling session: {r}"
        );
        assert!(!r["prompts"].as_array().unwrap().is_empty(), "{sdk}: {r}");
        let uri = r["resource"].as_str().unwrap();
        assert!(uri.starts_with("mcpvisor://everything/"), "{sdk}: {r}");
        assert_eq!(r["read"], uri, "{sdk}: {r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_subscription_through_the_gateway_gets_the_upstream_s_updates() {
    let dir = scratch("gateway-subscribe");
    let (g, _) = everything(&dir);
    let (tx, updated) = crossbeam_channel::unbounded();
    let options = ClientOptions {
        on_notification: Some(Arc::new(move |m: &str, p: &Value| {
            if m == "notifications/resources/updated" {
                let _ = tx.send(p["uri"].as_str().unwrap_or_default().to_owned());
            }
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    let uri = c.list_resources().unwrap()[0]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    c.subscribe(&uri).unwrap();
    // The upstream sends updates for what the gateway subscribed to, every
    // five seconds once asked to.
    c.call_tool("everything__toggle-subscriber-updates", json!({}))
        .unwrap();
    let got = updated
        .recv_timeout(Duration::from_secs(30))
        .expect("an update relayed");
    assert_eq!(got, uri);
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_http_upstream_is_reached_with_the_headers_it_asks_for() {
    let dir = scratch("gateway-http");
    // The upstream: mcpvisor itself over HTTP, behind a bearer token.
    let token = dir.join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let inner = inner(
        &dir,
        "inner",
        "hi",
        json!({"http": {"bearerTokenFile": token}}),
    );
    // The secret comes from the environment, not the file.
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"remote": {
            "type": "http",
            "url": inner.url,
            "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"},
            "required": true,
        }},
    });
    let g = start_with(&dir, &config, &[("REMOTE_TOKEN", "s3cret".into())]);
    let path = dir.join("mcpvisor.json");
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    assert_eq!(tool_names(&c), ["remote__hi"], "served by READY (required)");
    let r = c.call_tool("remote__hi", json!({})).unwrap();
    assert_eq!(text(&r), "hi\n");
    c.close();
    // A header the transport sets itself is a configuration error.
    let bad = json!({"mcpServers": {"remote": {"url": inner.url, "headers": {"Host": "x"}}}});
    std::fs::write(&path, bad.to_string()).unwrap();
    let out = Command::new(BIN)
        .args(["--check-config", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(78));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("mcpServers.remote.headers"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_per_session_upstream_gives_each_session_its_own_child_until_the_session_ends() {
    let dir = scratch("gateway-per-session");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"conf": {
            "command": common::example("conformance"),
            "perSession": true,
            "maxSessions": 2,
        }},
    });
    let g = start(&dir, &config);
    let daemon = g.child.id();
    // Each client counts the log messages it gets.
    let connect = || {
        let logs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = logs.clone();
        let options = ClientOptions {
            on_notification: Some(Arc::new(move |m: &str, _: &Value| {
                if m == "notifications/message" {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })),
            ..Default::default()
        };
        let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
        c.set_log_level(mcpvisor::LogLevel::Info).unwrap();
        (c, logs)
    };
    let ((a, a_logs), (b, b_logs), (c, _)) = (connect(), connect(), connect());
    until(&a, "the upstream's tools", |n| {
        n.iter().any(|t| t == "conf__test_simple_text")
    });
    // The lists come from one shared child, which no call reaches.
    let lister = upstream_pids(daemon, "conformance");
    assert_eq!(lister.len(), 1, "{lister:?}");
    let call = |client: &Client| {
        client
            .call_tool("conf__test_simple_text", json!({}))
            .unwrap()
    };
    let new_child = |before: &[i32]| -> i32 {
        let now = upstream_pids(daemon, "conformance");
        let fresh: Vec<i32> = now
            .iter()
            .copied()
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(fresh.len(), 1, "one new child: {before:?} -> {now:?}");
        fresh[0]
    };
    assert!(!text(&call(&a)).is_empty());
    let a_child = new_child(&lister);
    assert!(!text(&call(&b)).is_empty());
    let b_child = new_child(&[lister[0], a_child]);
    // A stateless client has no session to give a child of its own: its
    // call is refused, saying so, and starts none.
    let stateless = Client::connect(
        Connection::http(&g.url).unwrap(),
        ClientOptions {
            generation: mcpvisor::client::Generation::Stateless,
            ..Default::default()
        },
    )
    .unwrap();
    let r = stateless
        .call_tool("conf__test_simple_text", json!({}))
        .unwrap();
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("perSession"), "{r}");
    stateless.close();
    let mut known = lister.clone();
    known.extend([a_child, b_child]);
    assert_eq!(upstream_pids(daemon, "conformance").len(), known.len());
    // A session's next call goes to its own child again, and what that
    // child logs reaches that session alone.
    let r = a
        .call_tool("conf__test_tool_with_logging", json!({}))
        .unwrap();
    assert!(!text(&r).is_empty());
    assert_eq!(upstream_pids(daemon, "conformance").len(), 3);
    eventually("a's logs", || {
        match a_logs.load(std::sync::atomic::Ordering::SeqCst) {
            3.. => Ok(()),
            n => Err(format!("{n} of 3")),
        }
    });
    b.ping().unwrap();
    assert_eq!(b_logs.load(std::sync::atomic::Ordering::SeqCst), 0);
    // A third session is past maxSessions: a tool error that says so.
    let r = call(&c);
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("maxSessions"), "{r}");
    // A session that ends takes its child along; the others keep theirs.
    a.close();
    gone(a_child, "the ended session's child");
    assert!(alive(b_child) && alive(lister[0]));
    // Its place is free for the third once its connection is closed (the
    // thread closing it counts toward maxSessions until it is done).
    eventually("the ended session's place", || {
        let r = call(&c);
        if r["isError"] == true {
            Err(r.to_string())
        } else {
            Ok(())
        }
    });
    let c_child = new_child(&[lister[0], b_child]);
    // A session's child that dies is started again at its next call.
    // SAFETY: kill(2) on a process of this test's daemon.
    unsafe { libc::kill(b_child, libc::SIGKILL) };
    gone(b_child, "the killed child");
    eventually("never started again", || {
        let r = call(&b);
        if r["isError"] == true {
            Err(r.to_string())
        } else {
            Ok(())
        }
    });
    new_child(&[lister[0], c_child]);
    b.close();
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A session's child that is slow to stop (it outlives its input and
/// ignores SIGTERM, so closing it takes both grace periods) holds its
/// place under `maxSessions` until it is stopped: a client that opens and
/// ends sessions cannot pile up children that are still stopping.
#[test]
fn a_per_session_child_still_stopping_counts_toward_max_sessions() {
    let dir = scratch("gateway-per-session-stopping");
    let script = "trap '' TERM; \"$0\"; exec sleep 600";
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"conf": {
            "command": "/bin/sh",
            "args": ["-c", script, common::example("conformance").to_str().unwrap()],
            "perSession": true,
            "maxSessions": 1,
        }},
    });
    let g = start(&dir, &config);
    let connect =
        || Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    let (a, b) = (connect(), connect());
    until(&a, "the upstream's tools", |n| {
        n.iter().any(|t| t == "conf__test_simple_text")
    });
    let call = |client: &Client| {
        client
            .call_tool("conf__test_simple_text", json!({}))
            .unwrap()
    };
    assert_eq!(call(&a)["isError"], Value::Null);
    a.close();
    // a's child takes two grace periods (2 s each) to stop: meanwhile b
    // is refused ...
    let r = call(&b);
    assert_eq!(r["isError"], true, "{r}");
    assert!(text(&r).contains("maxSessions"), "{r}");
    // ... and served once it has stopped.
    eventually("a's place", || {
        let r = call(&b);
        if r["isError"] == true {
            Err(r.to_string())
        } else {
            Ok(())
        }
    });
    b.close();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A `perSession` upstream whose session connection never answers
/// `initialize` holds its session's calls no longer than their
/// `timeoutMs`, not the 30 s a start may take each, and they share one
/// start: one child, not one a call.
#[test]
fn a_per_session_start_that_hangs_holds_its_calls_no_longer_than_their_timeout() {
    let dir = scratch("gateway-per-session-hang");
    // The first child (the shared one, which lists) is the conformance
    // example; every later one (a session's own) never answers.
    let script = "mkdir \"$0\" 2>/dev/null && exec \"$1\"; exec sleep 600";
    let first = dir.join("first");
    let conformance = common::example("conformance");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "handlerThreads": 2,
        "mcpServers": {"conf": {
            "command": "/bin/sh",
            "args": ["-c", script, first.to_str().unwrap(), conformance.to_str().unwrap()],
            "perSession": true,
            "timeoutMs": 1000,
        }},
    });
    let g = start(&dir, &config);
    let daemon = g.child.id();
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "the upstream's tools", |n| {
        n.iter().any(|t| t == "conf__test_simple_text")
    });
    let began = Instant::now();
    // More calls than handler threads: each waits its second and frees
    // its thread for the next.
    let client = &c;
    let answers: Vec<Value> = std::thread::scope(|s| {
        let calls: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(move || {
                    client
                        .call_tool("conf__test_simple_text", json!({}))
                        .unwrap()
                })
            })
            .collect();
        calls.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let took = began.elapsed();
    assert!(took < Duration::from_secs(15), "{took:?}");
    for r in &answers {
        assert_eq!(r["isError"], true, "{r}");
        assert!(text(r).contains("did not start within 1000 ms"), "{r}");
    }
    // One start for them all, still under way.
    assert_eq!(upstream_pids(daemon, "sleep").len(), 1);
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_upstream_whose_helper_holds_its_output_is_still_seen_to_exit_and_its_helpers_go_too() {
    let dir = scratch("gateway-holder");
    // The upstream leaves a helper that keeps its stdout open, and one
    // that makes a session of its own under a shell of its group.
    let script = dir.join("upstream.sh");
    let (holder, escaper) = (dir.join("holder.pid"), dir.join("escaper.pid"));
    std::fs::write(
        &script,
        format!(
            "sleep 600 &\necho $! > {holder}\nsh -c 'setsid sleep 600 & echo $! > {escaper}; wait' &\nexec {conf}\n",
            holder = holder.display(),
            escaper = escaper.display(),
            conf = common::example("conformance").display(),
        ),
    )
    .unwrap();
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"conf": {"command": "/bin/sh", "args": [script]}},
    });
    let g = start(&dir, &config);
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "the upstream's tools", |n| n.len() > 1);
    let (holder, escaper) = (pid_in(&holder), pid_in(&escaper));
    let first = upstream_pids(g.child.id(), "conformance");
    assert_eq!(first.len(), 1, "{first:?}");
    // SAFETY: kill(2) on a process of this test's daemon.
    unsafe { libc::kill(first[0], libc::SIGKILL) };
    gone(holder, "the helper holding stdout");
    gone(escaper, "the helper in a session of its own");
    until(&c, "withdrawn", |n| n.is_empty());
    until(&c, "served again", |n| n.len() > 1);
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_remote_upstream_is_reconnected_without_giving_up_and_re_initialized_after_a_404() {
    let dir = scratch("gateway-remote");
    // Nothing serves the remote's port yet: this listener takes the
    // gateway's attempts and drops them.
    let port_holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = port_holder.local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"remote": {"url": url, "restart": {"intensity": 1, "backoffMs": 20}}},
    });
    let g = start(&dir, &config);
    // More attempts than its intensity allows restarts: it keeps trying.
    port_holder.set_nonblocking(true).unwrap();
    let (mut attempts, deadline) = (0, Instant::now() + Duration::from_secs(30));
    while attempts < 4 {
        match port_holder.accept() {
            Ok(_) => attempts += 1,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                assert!(
                    Instant::now() < deadline,
                    "it gave up after {attempts} attempts"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("{e}"),
        }
    }
    // Then the port forwards to a remote, and later to another one that
    // never saw the gateway's session: its next request gets 404.
    port_holder.set_nonblocking(false).unwrap();
    let backend = Arc::new(std::sync::Mutex::new(String::new()));
    let to = backend.clone();
    std::thread::spawn(move || {
        for client in port_holder.incoming().flatten() {
            let addr = to.lock().unwrap().clone();
            let Ok(server) = std::net::TcpStream::connect(&addr) else {
                continue;
            };
            for (mut from, mut into) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut into);
                    let _ = into.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    let remote = |name: &str| {
        let g = inner(&dir, name, name, json!({}));
        *backend.lock().unwrap() = g.addr();
        g
    };
    // A session that began before any upstream serves is told of every
    // kind one may bring, so their list_changed reach it later.
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    let caps = c.server_capabilities();
    for kind in ["tools", "prompts", "resources", "completions"] {
        assert!(caps.get(kind).is_some(), "{kind}: {caps}");
    }
    let _first = remote("first");
    until(&c, "the remote's tools", |n| n == ["remote__hi"]);
    assert_eq!(
        text(&c.call_tool("remote__hi", json!({})).unwrap()),
        "first\n"
    );
    // The port now leads to a remote that does not know the session (as
    // after a restart): 404, and the gateway initializes a new one there.
    let _second = remote("second");
    eventually("never served again", || {
        match c.call_tool("remote__hi", json!({})) {
            Ok(r) if text(&r) == "second\n" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_https_upstream_is_reached_over_tls_and_a_certificate_of_another_authority_is_refused() {
    let dir = scratch("gateway-https");
    // The upstream: mcpvisor itself over plain HTTP, behind a TLS
    // terminator whose certificate a test authority signed.
    let inner = inner(&dir, "inner", "hi", json!({}));
    let pki = common::tls::pki("gateway test CA");
    let port = common::tls::tls_terminator(&pki, &inner.addr());
    let (ca, other) = (dir.join("ca.pem"), dir.join("other.pem"));
    std::fs::write(&ca, &pki.ca_pem).unwrap();
    std::fs::write(&other, common::tls::pki("some other CA").ca_pem).unwrap();
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"remote": {
            "url": format!("https://127.0.0.1:{port}/mcp"),
            "required": true,
            "restart": {"intensity": 0},
        }},
    });
    // Trusting the test authority (SSL_CERT_FILE): served by READY.
    let g = start_with(&dir, &config, &[("SSL_CERT_FILE", ca.clone().into())]);
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    assert_eq!(tool_names(&c), ["remote__hi"]);
    for _ in 0..3 {
        let r = c.call_tool("remote__hi", json!({})).unwrap();
        assert_eq!(text(&r), "hi\n");
    }
    c.close();
    drop(g);
    // Trusting another authority: the required upstream fails, and the
    // daemon with it, saying why.
    let (path, log) = (dir.join("mcpvisor.json"), dir.join("stderr"));
    let mut cmd = Command::new(BIN);
    let mut daemon = unmanaged(&mut cmd)
        .args(["--config", path.to_str().unwrap()])
        .env("SSL_CERT_FILE", &other)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(s) = daemon.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = daemon.kill();
            panic!("the daemon did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(70));
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("certificate"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_elicitation_relayed_during_a_call_ends_with_the_call_or_when_withdrawn() {
    use mcpvisor::{Server, Tool, ToolResult};
    let dir = scratch("gateway-elicit");
    // The client never answers a question of `brief` (a user who walked
    // away), and tells when one reached it; it answers `ask` at once.
    let (reached_tx, reached) = crossbeam_channel::unbounded::<()>();
    let (_hold, held) = crossbeam_channel::bounded::<()>(0);
    // The client tells when the question of `withdraws` was withdrawn.
    let (withdrawn_tx, withdrawn) = crossbeam_channel::unbounded::<()>();
    // The upstream, in this process over HTTP: `brief` asks, and once its
    // question has reached the client it stops waiting and ends its call;
    // `ask` waits for the answer.
    let question = |name: &str| json!({"message": name, "requestedSchema": {"type": "object", "properties": {}}});
    let schema = json!({"type": "object"});
    let server = Server::builder("asker", "1.0")
        .tool(Tool::new("brief", schema.clone(), move |_, ctx| {
            let asking = ctx.clone();
            let q = question("brief");
            std::thread::spawn(move || asking.elicit(q, Duration::from_secs(60)));
            Ok(ToolResult::text(
                match reached.recv_timeout(Duration::from_secs(20)) {
                    Ok(()) => "gave up",
                    Err(_) => "its question never reached the client",
                },
            ))
        }))
        .tool(Tool::new("ask", schema.clone(), move |_, ctx| {
            Ok(match ctx.elicit(question("ask"), Duration::from_secs(30)) {
                Ok(r) => ToolResult::text(r["action"].as_str().unwrap_or("?")),
                Err(e) => ToolResult::text(format!("no answer: {e}")),
            })
        }))
        // Asks, gives up waiting after 10 s (the question is withdrawn:
        // `notifications/cancelled`), and goes on with its call until the
        // client saw that. (The client's callback, which waits to be told,
        // must have started by then: a callback still queued when its
        // question is withdrawn never runs. It has threads to spare.)
        .tool(Tool::new("withdraws", schema, move |_, ctx| {
            // Long enough for the question to reach the client's callback
            // through the daemon on a loaded machine.
            let _ = ctx.elicit(question("withdraws"), Duration::from_secs(10));
            Ok(ToolResult::text(
                match withdrawn.recv_timeout(Duration::from_secs(20)) {
                    Ok(()) => "withdrawn",
                    Err(_) => "the client was never told",
                },
            ))
        }))
        .build()
        .unwrap();
    let (_http, url) = common::serve_http(&server);
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        // The upstream's questions as requests during its call (a
        // stateless upstream asks by ending the call instead).
        "mcpServers": {"up": {"url": url, "required": true, "protocol": "sessions"}},
    });
    let g = start(&dir, &config);
    // More unanswered questions than the gateway has threads for an
    // upstream's requests (its RELAY_THREADS, 64).
    let briefs = 64 + 2;
    let options = ClientOptions {
        elicitation: Some(Arc::new(move |params: Value| {
            if params["message"] == "brief" {
                let _ = reached_tx.send(());
                let _ = held.recv();
            }
            if params["message"] == "withdraws" {
                let token = mcpvisor::client::callback_cancel_token().expect("in a callback");
                let _ = token.receiver().recv_timeout(Duration::from_secs(20));
                if token.is_cancelled() {
                    let _ = withdrawn_tx.send(());
                }
            }
            Ok(json!({"action": "accept", "content": {}}))
        })),
        callback_threads: briefs + 2,
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    for _ in 0..briefs {
        let r = c.call_tool("up__brief", json!({})).unwrap();
        assert_eq!(text(&r), "gave up", "{r}");
    }
    // Their questions ended with their calls, so a new call's question
    // still gets through.
    let r = c
        .request_with(
            "tools/call",
            json!({"name": "up__ask", "arguments": {}}),
            mcpvisor::client::CallOptions {
                timeout: Some(Duration::from_secs(20)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(text(&r), "accept", "{r}");
    // A question the upstream withdraws during its call is withdrawn
    // from the client at once, not when the call ends.
    let r = c.call_tool("up__withdraws", json!({})).unwrap();
    assert_eq!(text(&r), "withdrawn", "{r}");
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn questions_are_relayed_between_both_generations_each_way() {
    use mcpvisor::client::Generation;
    let dir = scratch("gateway-generations");
    // The upstream, in this process over HTTP.
    let server = common::asking_server("asker");
    let (_http, url) = common::serve_http(&server);
    // `new` by default (auto: the upstream answers server/discover),
    // `old` with a session.
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {
            "new": {"url": url, "required": true},
            "old": {"url": url, "required": true, "protocol": "sessions"},
        },
    });
    let g = start(&dir, &config);
    for generation in [Generation::Sessions, Generation::Stateless] {
        let options = ClientOptions {
            generation,
            elicitation: Some(Arc::new(|_: Value| {
                Ok(json!({"action": "accept", "content": {"name": "Alice"}}))
            })),
            ..Default::default()
        };
        let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
        for (tool, upstream) in [("new__ask", "2026-07-28"), ("old__ask", "2025-11-25")] {
            let r = c.call_tool(tool, json!({})).unwrap();
            assert_eq!(
                text(&r),
                format!("{upstream} Alice"),
                "{generation:?} client, {tool}: {r}"
            );
        }
        c.close();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_stateless_client_s_question_cancels_the_upstream_call_it_came_from() {
    use mcpvisor::client::Generation;
    let dir = scratch("gateway-stateless-question");
    // A session upstream whose tool asks something no client is asked,
    // then a question it goes on without when it gets no answer: it
    // waits to be cancelled (and says so), up to a minute.
    let (cancelled_tx, cancelled) = crossbeam_channel::unbounded();
    let q = json!({"message": "name?", "requestedSchema": {"type": "object",
        "properties": {"name": {"type": "string"}}}});
    let server = mcpvisor::Server::builder("persisting", "1.0")
        .tool(mcpvisor::Tool::new(
            "persists",
            json!({"type": "object"}),
            move |_, ctx| {
                let odd = ctx.peer_request("x/odd", json!({}), None, Duration::from_secs(20));
                let code = match odd {
                    Err(mcpvisor::PeerError::Rpc(e)) => e.code.to_string(),
                    other => format!("{other:?}"),
                };
                match ctx.elicit(q.clone(), Duration::from_secs(20)) {
                    Ok(a) => Ok(mcpvisor::ToolResult::text(format!(
                        "{code} {}",
                        a["content"]["name"].as_str().unwrap_or("?")
                    ))),
                    Err(_) => {
                        let ended = ctx.cancel_token().receiver();
                        let was = ended.recv_timeout(Duration::from_secs(60)).is_err()
                            && ctx.cancel_token().is_cancelled();
                        let _ = cancelled_tx.send(was);
                        Ok(mcpvisor::ToolResult::text("went on without the answer"))
                    }
                }
            },
        ))
        .build()
        .unwrap();
    let (_http, url) = common::serve_http(&server);
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"old": {"url": url, "required": true, "protocol": "sessions"}},
    });
    let g = start(&dir, &config);
    let options = ClientOptions {
        generation: Generation::Stateless,
        elicitation: Some(Arc::new(|_: Value| {
            Ok(json!({"action": "accept", "content": {"name": "Alice"}}))
        })),
        request_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    // The first round's upstream call is cancelled as soon as its question
    // goes to the client; the retry brings the answer. What a client is
    // never asked is refused as no method of the client's.
    let r = c.call_tool("old__persists", json!({})).unwrap();
    assert_eq!(text(&r), "-32601 Alice", "{r}");
    assert_eq!(
        cancelled.recv_timeout(Duration::from_secs(20)),
        Ok(true),
        "the first upstream call was cancelled"
    );
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stateless client's question from an upstream over stdio, which
/// cannot say which call a question belongs to: the first round's upstream
/// call is cancelled as its question goes to the client, and the retry's
/// call asks again and gets the answer. Before, the first call, given up,
/// made every question of that upstream go unrouted for 30 s (in case it
/// came from the call given up), so the retry was refused.
#[test]
fn a_stateless_client_answers_a_question_of_a_stdio_upstream() {
    use mcpvisor::client::Generation;
    let dir = scratch("gateway-stdio-question");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        // With a session: its questions are requests during its call.
        "mcpServers": {"conf": {"command": common::example("conformance"), "required": true,
            "protocol": "sessions"}},
    });
    let g = start(&dir, &config);
    let options = ClientOptions {
        generation: Generation::Stateless,
        elicitation: Some(Arc::new(|_: Value| {
            Ok(
                json!({"action": "accept", "content": {"username": "alice", "email": "a@example.org"}}),
            )
        })),
        request_timeout: Duration::from_secs(30),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    for round in 0..2 {
        let r = c
            .call_tool("conf__test_elicitation", json!({"message": "who?"}))
            .unwrap();
        assert!(text(&r).contains("alice"), "round {round}: {r}");
    }
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_relayed_call_runs_as_a_task_and_the_upstream_s_question_waits_in_it() {
    use mcpvisor::client::{Generation, ToolCall};
    let dir = scratch("gateway-tasks");
    let server = common::asking_server("asker");
    let (_http, url) = common::serve_http(&server);
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"up": {"url": url, "required": true, "task": "optional"}},
    });
    let g = start(&dir, &config);
    for generation in [Generation::Sessions, Generation::Stateless] {
        let options = ClientOptions {
            generation,
            tasks: true,
            elicitation: Some(Arc::new(|_: Value| {
                Ok(json!({"action": "accept", "content": {"name": "Alice"}}))
            })),
            ..Default::default()
        };
        let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
        let ToolCall::Task(t) = c.call_tool_as_task("up__ask", json!({})).unwrap() else {
            panic!("{generation:?}: the relayed call was to be a task");
        };
        // The upstream's elicitation waits in the task.
        let asked = eventually("the relayed question", || {
            let d = t.get().map_err(|e| e.to_string())?;
            (d["status"] == "input_required")
                .then_some(d.clone())
                .ok_or(d.to_string())
        });
        let (_, q) = asked["inputRequests"]
            .as_object()
            .unwrap()
            .iter()
            .next()
            .unwrap();
        assert_eq!(q["method"], "elicitation/create", "{asked}");
        let r = t.wait(Some(Duration::from_secs(30))).unwrap();
        assert_eq!(text(&r), "2026-07-28 Alice", "{generation:?}: {r}");
        c.close();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILL of one upstream in the middle of a load on two: calls to the
/// other are all answered, calls to the killed one fail (or reach its
/// replacement) and none hangs (each has a 10 s timeout).
#[test]
fn killing_one_upstream_under_load_fails_only_its_calls() {
    let dir = scratch("gateway-kill-load");
    let echo = common::example("echo");
    // The markers tell the two children apart in /proc.
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {
            "a": {"command": echo, "args": ["--max-sessions", "1111"]},
            "b": {"command": echo, "args": ["--max-sessions", "2222"]},
        },
    });
    let g = start(&dir, &config);
    let options = ClientOptions {
        request_timeout: Duration::from_secs(10),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    until(&c, "both upstreams", |n| {
        ["a__echo", "b__echo"]
            .iter()
            .all(|t| n.iter().any(|x| x == t))
    });
    let victim = upstream_pids(g.child.id(), "1111");
    assert_eq!(victim.len(), 1, "{victim:?}");
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    // `killed` is set once `a` is killed; `stop` ends the load, also when a
    // check below fails (so the test fails rather than hangs).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let (stop, killed) = (AtomicBool::new(false), AtomicBool::new(false));
    // Calls to `b` answered after the kill.
    let b_after = AtomicUsize::new(0);
    let (warm_tx, warm) = crossbeam_channel::unbounded();
    let a_failed = std::thread::scope(|s| {
        let _stop = Stop(&stop);
        let load = |tool: &'static str| {
            let (c, stop, killed, b_after, warm) = (&c, &stop, &killed, &b_after, warm_tx.clone());
            s.spawn(move || {
                let (mut ok, mut failed) = (0, 0);
                while !stop.load(SeqCst) {
                    let says = format!("{tool} {ok}");
                    let after_kill = killed.load(SeqCst);
                    match c.call_tool(tool, json!({"message": says})) {
                        Ok(r) if r["isError"] != true && text(&r) == says => {
                            ok += 1;
                            if tool == "b__echo" && after_kill {
                                b_after.fetch_add(1, SeqCst);
                            }
                        }
                        Ok(r) => {
                            assert_eq!(tool, "a__echo", "{r}");
                            failed += 1;
                        }
                        Err(e) => {
                            assert_eq!(tool, "a__echo", "{e}");
                            failed += 1;
                        }
                    }
                    if ok == 20 && failed == 0 {
                        let _ = warm.send(());
                    }
                }
                failed
            })
        };
        let threads: Vec<_> = ["a__echo", "b__echo"]
            .iter()
            .cycle()
            .take(6)
            .map(|t| load(t))
            .collect();
        drop(warm_tx);
        for _ in 0..6 {
            warm.recv_timeout(Duration::from_secs(30))
                .expect("every load thread made 20 calls");
        }
        killed.store(true, SeqCst);
        // SAFETY: kill(2) on a process of this test's daemon.
        unsafe { libc::kill(victim[0], libc::SIGKILL) };
        // Load on, until `a` is back in a new process and answers.
        eventually("a restarted", || {
            let now = upstream_pids(g.child.id(), "1111");
            if now.len() == 1 && now != victim {
                Ok(now)
            } else {
                Err(format!("{now:?}"))
            }
        });
        eventually("a answers again", || {
            c.call_tool("a__echo", json!({"message": "back"}))
                .map_err(|e| e.to_string())
                .and_then(|r| {
                    if text(&r) == "back" {
                        Ok(())
                    } else {
                        Err(r.to_string())
                    }
                })
        });
        stop.store(true, SeqCst);
        threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .sum::<usize>()
    });
    let b_after = b_after.load(SeqCst);
    assert!(b_after > 0, "b was served while a was down and back");
    // Calls in flight when `a` died failed; every failure was `a`'s (the
    // threads assert that). There may be none if no call was in flight.
    eprintln!(
        "{a_failed} calls to the killed upstream failed; b answered {b_after} after the kill"
    );
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}

/// An upstream over stdio, in Python, whose tools answer `tools/call` with
/// what `results` maps their names to.
const SHAPES: &str = r#"
import json, sys
results = {
    "array": [],
    "null": None,
    "text": {"content": "not a list"},
    "good": {"content": [{"type": "text", "text": "ok"}]},
}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    method, answer = m.get("method"), {"jsonrpc": "2.0", "id": m["id"]}
    if method == "initialize":
        answer["result"] = {
            "protocolVersion": m["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "shapes", "version": "1"},
        }
    elif method == "tools/list":
        answer["result"] = {
            "tools": [{"name": n, "inputSchema": {"type": "object"}} for n in results]
        }
    elif method == "tools/call":
        answer["result"] = results[m["params"]["name"]]
    elif method == "ping":
        answer["result"] = {}
    else:
        answer["error"] = {"code": -32601, "message": "method not found"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()
"#;

/// An upstream's answer to `tools/call` that is no tool result (an array,
/// `null`, content that is not a list) reaches the caller as a tool error
/// naming the upstream, and the upstream's other calls go on.
#[test]
fn an_upstream_result_that_is_no_tool_result_is_a_tool_error() {
    let dir = scratch("gateway-shapes");
    let script = dir.join("shapes.py");
    std::fs::write(&script, SHAPES).unwrap();
    let g = gateway(
        &dir,
        json!({"shapes": {"command": "python3", "args": [script]}}),
    );
    let c = Client::connect(Connection::http(&g.url).unwrap(), ClientOptions::default()).unwrap();
    until(&c, "the upstream's tools", |n| {
        n.iter().any(|t| t == "shapes__good")
    });
    for tool in ["shapes__array", "shapes__null", "shapes__text"] {
        let r = c.call_tool(tool, json!({})).unwrap();
        assert_eq!(r["isError"], true, "{tool}: {r}");
        assert!(
            text(&r).contains("upstream shapes") && text(&r).contains("no content list"),
            "{tool}: {r}"
        );
    }
    let r = c.call_tool("shapes__good", json!({})).unwrap();
    assert_eq!(text(&r), "ok");
    c.close();
}

/// A `perSession` upstream's connection is its session's alone: the
/// upstream gets that session's roots also outside a call (as it starts),
/// and hears when they change.
#[test]
fn a_per_session_upstream_gets_its_session_s_roots_and_their_changes() {
    use mcpvisor::server::SessionEvent;
    use mcpvisor::{Server, Tool, ToolResult};
    let dir = scratch("gateway-roots");
    let server = Server::builder("rooted", "1.0")
        .tool(Tool::new("hi", json!({"type": "object"}), |_, _| {
            Ok(ToolResult::text("hi"))
        }))
        .build()
        .unwrap();
    // Every session of the upstream is asked for its roots as it opens
    // and when they change; what each answered is told.
    let (roots_tx, roots) = crossbeam_channel::unbounded::<Result<Value, String>>();
    let events = server.session_events();
    std::thread::spawn(move || {
        while let Some(e) = events.recv() {
            let (SessionEvent::Opened(h) | SessionEvent::RootsChanged(h)) = e else {
                continue;
            };
            // Each on its own: one may wait for a client that never answers.
            // (A session that has just opened may not have its GET stream,
            // where a request outside a call goes, yet: it waits there.)
            let roots_tx = roots_tx.clone();
            std::thread::spawn(move || {
                let asked = h.list_roots(Duration::from_secs(20));
                let _ = roots_tx.send(asked.map_err(|e| e.to_string()));
            });
        }
    });
    let (_http, url) = common::serve_http(&server);
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "mcpServers": {"up": {"url": url, "perSession": true, "protocol": "sessions", "required": true}},
    });
    let g = start(&dir, &config);
    let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = asked.clone();
    let options = ClientOptions {
        roots: Some(Arc::new(move |_| {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok(json!({"roots": [{"uri": format!("file:///root{n}"), "name": "r"}]}))
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::http(&g.url).unwrap(), options).unwrap();
    // The first call starts the session's own connection.
    assert_eq!(text(&c.call_tool("up__hi", json!({})).unwrap()), "hi");
    // Answers from the shared connection (which lists, and has no one to
    // ask) are errors; the session's connection answers with its roots.
    let ours = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match roots.recv_deadline(deadline) {
                Ok(Ok(v)) => return v["roots"][0]["uri"].as_str().unwrap_or("").to_owned(),
                Ok(Err(_)) => continue,
                Err(_) => panic!("{what}: the upstream never got the session's roots"),
            }
        }
    };
    assert_eq!(ours("as it starts"), "file:///root0");
    c.roots_changed().unwrap();
    assert_eq!(ours("after the change"), "file:///root1");
    c.close();
    let _ = std::fs::remove_dir_all(&dir);
}
