//! The `mcpvisor` binary (#12): flags, configuration errors and exit
//! status, serving the example configuration, sd_notify, SIGTERM with
//! calls in flight, SIGHUP, socket activation, `mcpvisor status`,
//! `/metrics` and the journal's priorities.

mod common;

use common::{gone, pid_in, scratch, tool_names, unmanaged};
use mcpvisor::client::{Client, ClientOptions, Connection};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

fn example() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mcpvisor.json").to_owned()
}

/// The built daemon, without the test runner's own service manager
/// variables (a test sets those it means).
fn bin() -> Command {
    let mut cmd = Command::new(BIN);
    unmanaged(&mut cmd);
    cmd
}

/// The daemon on `config`, written to `dir/mcpvisor.json`, its log at warn.
fn configured(dir: &std::path::Path, config: &serde_json::Value) -> Command {
    let path = dir.join("mcpvisor.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let mut cmd = bin();
    cmd.args(["--config", path.to_str().unwrap()])
        .env("RUST_LOG", "warn");
    cmd
}

fn run(args: &[&str]) -> (i32, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The daemon with the example configuration on a free loopback port.
fn serving(mut cmd: Command) -> Command {
    cmd.args(["--config", &example(), "--listen", "http://127.0.0.1:0/mcp"]);
    cmd
}

#[test]
fn flags_and_configuration_errors_have_their_exit_status() {
    let (code, out, _) = run(&["--check-config", "--config", &example()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("valid (1 listener(s), 4 command tool(s))"),
        "{out}"
    );
    let (code, _, err) = run(&["--frobnicate"]);
    assert_eq!(code, 64, "{err}");
    let (code, _, err) = run(&["--check-config", "--log-level", "verbose"]);
    assert_eq!(code, 64, "{err}");
    let dir = std::env::temp_dir().join(format!("mcpvisor-daemon-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, wanted) in [
        ("{\n  \"comands\": {}\n}", ":2:3: comands: unknown key"),
        (
            "{\"commands\": {\"x\": {\"argv\": [\"a\"], \"timeoutMs\": \"soon\"}}}",
            "commands.x.timeoutMs: expected a positive integer",
        ),
        ("{\"listen\": [", "not valid JSON"),
        // What the file implies is checked too: the token file must exist.
        (
            "{\"http\": {\"bearerTokenFile\": \"/nonexistent/token\"}}",
            "/nonexistent/token",
        ),
        (
            "{\"commands\": {\"x\": {\"argv\": [\"echo\", \"{a} }\"]}}}",
            "lone",
        ),
        // Two listeners that cannot both run.
        (
            "{\"listen\": [\"stdio\", \"stdio\"]}",
            "cannot both be served",
        ),
        (
            "{\"listen\": [\"http://127.0.0.1:8808/mcp\", \"tcp://0.0.0.0:8808\"]}",
            "cannot both be served",
        ),
    ] {
        let file = dir.join("bad.json");
        std::fs::write(&file, text).unwrap();
        let (code, _, err) = run(&["--check-config", "--config", file.to_str().unwrap()]);
        assert_eq!(code, 78, "{text}: {err}");
        assert!(
            err.contains(wanted) && err.contains("bad.json:"),
            "{text}: {err}"
        );
    }
    let (code, _, err) = run(&["--config", "/nonexistent/mcpvisor.json"]);
    assert_eq!(code, 78, "{err}");
    // A listener that cannot start is named with its password hidden.
    let (code, _, err) = run(&[
        "--config",
        &example(),
        "--listen",
        "amqp://user:s3cret@127.0.0.1:1/?name=x",
    ]);
    assert_eq!(code, 71, "{err}");
    assert!(
        err.contains("amqp://user:***@127.0.0.1:1/") && !err.contains("s3cret"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_example_configuration_serves_its_tools_and_sigterm_stops_it() {
    let (mut child, url) = common::spawn_command_listening(serving(bin()));
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    let names = tool_names(&c);
    assert_eq!(names.len(), 4, "{names:?}");
    let r = c.call_tool("kernel", json!({})).unwrap();
    assert!(
        r["content"][0]["text"].as_str().unwrap().contains("Linux"),
        "{r}"
    );
    let small = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd");
    let r = c.call_tool("disk_usage", json!({ "path": small })).unwrap();
    assert_ne!(r["isError"], true, "{r}");
    c.close();
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean stop");
}

#[test]
fn the_service_manager_hears_ready_watchdog_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = std::env::temp_dir().join(format!("mcpvisor-sdnotify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("notify.sock");
    let manager = UnixDatagram::bind(&path).unwrap();
    manager
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 1024];
        let n = manager
            .recv(&mut buf)
            .expect("a message to the service manager");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    let mut cmd = serving(bin());
    cmd.env("NOTIFY_SOCKET", &path)
        .env("WATCHDOG_USEC", "200000")
        .env_remove("WATCHDOG_PID");
    let (mut child, url) = common::spawn_command_listening(cmd);
    let ready = recv();
    assert!(ready.starts_with("READY=1\n"), "{ready}");
    assert!(
        ready.contains(&format!("MAINPID={}", child.id())),
        "{ready}"
    );
    assert!(
        ready.contains("STATUS=serving 4 command tool(s) on http://"),
        "{ready}"
    );
    // READY means the listener answers.
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    c.ping().expect("answering once READY=1 was sent");
    c.close();
    assert_eq!(recv(), "WATCHDOG=1");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let stopping = loop {
        let m = recv();
        if m != "WATCHDOG=1" {
            break m;
        }
    };
    assert!(stopping.starts_with("STOPPING=1"), "{stopping}");
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The daemon over stdio on the example configuration, its `initialize`
/// sent: the child, its input, its output, and the first line it wrote.
fn stdio_daemon() -> (
    std::process::Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
    serde_json::Value,
) {
    use std::io::Write;
    let mut child = bin()
        .args(["--config", &example(), "--stdio"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"t","version":"0"}}}}}}"#).unwrap();
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    out.read_line(&mut line).unwrap();
    let first = serde_json::from_str(&line).expect("the first line is MCP");
    (child, stdin, out, first)
}

#[test]
fn over_stdio_only_mcp_is_written_and_the_end_of_stdin_stops_it() {
    let (mut child, stdin, _out, first) = stdio_daemon();
    assert_eq!(first["result"]["serverInfo"]["name"], "mcpvisor");
    drop(stdin);
    assert_eq!(
        child.wait().unwrap().code(),
        Some(0),
        "EOF on stdin stops it"
    );
}

/// A daemon started by a test: its stdout lines on a channel (read to
/// the end, so it can always print), its pid, and where it listens.
struct Daemon {
    child: std::process::Child,
    lines: crossbeam_channel::Receiver<String>,
    url: String,
}

impl Daemon {
    /// Starts `cmd` and waits for its first `listening on` line.
    fn start(mut cmd: Command) -> Daemon {
        cmd.stderr(Stdio::null());
        let mut d = Daemon::spawn(cmd);
        d.url = d.line("listening on ");
        d
    }

    /// Starts `cmd` (its stderr as the caller set it).
    fn spawn(mut cmd: Command) -> Daemon {
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let (tx, lines) = crossbeam_channel::unbounded();
        let out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        Daemon {
            child,
            lines,
            url: String::new(),
        }
    }

    /// The rest of the next line that starts with `prefix`.
    fn line(&self, prefix: &str) -> String {
        loop {
            let l = self
                .lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no line starting with {prefix:?}"));
            if let Some(rest) = l.strip_prefix(prefix) {
                return rest.to_owned();
            }
        }
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// SIGTERM, then its exit status.
    fn stop(mut self) -> Option<i32> {
        self.signal(libc::SIGTERM);
        self.child.wait().unwrap().code()
    }
}

/// SIGHUP, and the reload's start and end as the service manager hears them.
fn reload(d: &Daemon, manager: &Manager) {
    d.signal(libc::SIGHUP);
    assert!(manager.recv().starts_with("RELOADING=1"));
    assert!(manager.recv().starts_with("READY=1"));
}

/// A test that fails leaves no daemon behind (one that stopped is reaped
/// already: killing it does nothing).
impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fake service manager: the NOTIFY_SOCKET a test hands the daemon.
struct Manager(std::os::unix::net::UnixDatagram, std::path::PathBuf);

impl Manager {
    fn new(dir: &std::path::Path) -> Manager {
        let path = dir.join("notify.sock");
        let socket = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Manager(socket, path)
    }

    /// The next message that is not a watchdog ping.
    fn recv(&self) -> String {
        let mut buf = [0u8; 4096];
        loop {
            let n = self.0.recv(&mut buf).expect("a message to the manager");
            let m = String::from_utf8_lossy(&buf[..n]).into_owned();
            if m != "WATCHDOG=1" {
                return m;
            }
        }
    }
}

fn status_json(control: &std::path::Path) -> serde_json::Value {
    let (code, out, err) = run(&["status", "--json", "--control", control.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn sighup_swaps_tools_and_listeners_once_and_a_broken_file_changes_nothing() {
    let dir = scratch("reload");
    let config = dir.join("mcpvisor.json");
    let control = dir.join("control");
    let write = |tools: &[&str], listen: &[&str]| {
        let commands: serde_json::Map<String, serde_json::Value> = tools
            .iter()
            .map(|t| (t.to_string(), json!({"argv": ["echo", t]})))
            .collect();
        let text = json!({"listen": listen, "commands": commands, "control": control});
        std::fs::write(&config, text.to_string()).unwrap();
    };
    write(&["a"], &["tcp://127.0.0.1:0"]);
    let manager = Manager::new(&dir);
    let mut cmd = bin();
    cmd.args(["--config", config.to_str().unwrap()])
        .env("NOTIFY_SOCKET", &manager.1)
        .env("RUST_LOG", "warn");
    let d = Daemon::start(cmd);
    assert!(manager.recv().starts_with("READY=1"));
    let addr = d.url.strip_prefix("tcp://").unwrap().parse().unwrap();
    let (tx, changed) = crossbeam_channel::unbounded();
    let options = ClientOptions {
        on_notification: Some(std::sync::Arc::new(move |method: &str, _| {
            let _ = tx.send(method.to_owned());
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::tcp(addr).unwrap(), options).unwrap();
    assert_eq!(tool_names(&c), ["a"]);

    // A tool and a listener more.
    write(
        &["a", "b"],
        &["tcp://127.0.0.1:0", "http://127.0.0.1:0/mcp"],
    );
    d.signal(libc::SIGHUP);
    let reloading = manager.recv();
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading}"
    );
    let usec: u64 = reloading.lines().nth(1).unwrap()["MONOTONIC_USEC=".len()..]
        .parse()
        .unwrap();
    assert!(usec > 0);
    let ready = manager.recv();
    assert!(
        ready.starts_with("READY=1\nSTATUS=serving 2 command tool(s)"),
        "{ready}"
    );
    // The same session: its answers follow the notification on the wire.
    assert_eq!(tool_names(&c), ["a", "b"]);
    let got: Vec<String> = changed.try_iter().collect();
    assert_eq!(got, ["notifications/tools/list_changed"], "exactly one");
    let s = status_json(&control);
    let urls: Vec<&str> = s["listeners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls.len(), 2, "{s}");
    assert!(urls[1].starts_with("http://127.0.0.1:"), "{s}");
    let http_url = urls[1].to_owned();
    let h = Client::connect(
        Connection::http(&http_url).unwrap(),
        ClientOptions::default(),
    )
    .expect("the added listener serves");
    assert_eq!(tool_names(&h), ["a", "b"]);
    h.close();

    // A broken file: everything stays.
    std::fs::write(&config, "{\"listen\": [").unwrap();
    reload(&d, &manager);
    assert_eq!(tool_names(&c), ["a", "b"]);
    assert_eq!(
        status_json(&control)["reloads"],
        json!({"ok": 1, "failed": 1})
    );

    // The listener removed again; the session on the other one survives.
    write(&["a", "b"], &["tcp://127.0.0.1:0"]);
    reload(&d, &manager);
    c.ping().expect("the session survived three reloads");
    assert_eq!(
        status_json(&control)["listeners"].as_array().unwrap().len(),
        1
    );
    assert!(
        Client::connect(
            Connection::http(&http_url).unwrap(),
            ClientOptions::default()
        )
        .is_err(),
        "the removed listener is gone"
    );
    assert_eq!(changed.try_iter().count(), 0, "no change, no notification");
    c.close();
    assert_eq!(d.stop(), Some(0));
    assert!(
        !control.exists(),
        "the control socket is removed at the stop"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many running `sh` processes have `parent` as their parent.
fn shells_of(parent: u32) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| common::proc_stat(e.ok()?.file_name().to_str()?))
        .filter(|(name, f)| name == "sh" && f[0] != "Z" && f.get(1) == Some(&parent.to_string()))
        .count()
}

#[test]
fn sigterm_answers_the_100_calls_in_flight_then_exits_0() {
    let dir = scratch("drain");
    // The commands run until the test opens the gate, after SIGTERM.
    let gate = dir.join("gate");
    let wait = format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display());
    let control = dir.join("control");
    let text = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "handlerThreads": 64,
        "control": control,
        "commands": {"nap": {"argv": ["/bin/sh", "-c", wait]}},
    });
    let manager = Manager::new(&dir);
    let mut cmd = configured(&dir, &text);
    cmd.env("NOTIFY_SOCKET", &manager.1);
    let d = Daemon::start(cmd);
    assert!(manager.recv().starts_with("READY=1"));
    // Two sessions (one may have 64 requests in flight).
    let clients: Vec<Client> = (0..2)
        .map(|_| {
            Client::connect(Connection::http(&d.url).unwrap(), ClientOptions::default()).unwrap()
        })
        .collect();
    let pid = d.child.id();
    // Opens the gate however the scope ends, so a failed check cannot
    // leave 100 calls waiting for ever.
    struct Gate<'a>(&'a std::path::Path);
    impl Drop for Gate<'_> {
        fn drop(&mut self) {
            let _ = std::fs::write(self.0, "");
        }
    }
    let results = std::thread::scope(|s| {
        let _gate = Gate(&gate);
        // 100 calls: 64 run (the handler threads), 36 wait in the queue.
        let calls: Vec<_> = (0..100)
            .map(|i| {
                let c = &clients[i % 2];
                s.spawn(move || c.call_tool("nap", json!({})))
            })
            .collect();
        // The facts to wait for: 64 commands run and all 100 requests
        // reached the daemon (36 of them queued).
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while shells_of(pid) < 64 || status_json(&control)["requestsInFlight"] != 100 {
            assert!(
                std::time::Instant::now() < deadline,
                "64 commands never ran with 100 requests in flight"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        d.signal(libc::SIGTERM);
        assert!(manager.recv().starts_with("STOPPING=1"));
        std::fs::write(&gate, "").unwrap();
        calls
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(results.len(), 100);
    for r in &results {
        let r = r.as_ref().expect("every call in flight is answered");
        assert_ne!(r["isError"], true, "{r}");
    }
    let mut d = d;
    assert_eq!(d.child.wait().unwrap().code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `GET /metrics` from `url` (`http://ADDR/metrics`): status line and body.
fn scrape(url: &str) -> (String, String) {
    use std::io::{Read, Write};
    let addr = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/metrics"))
        .unwrap();
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // A scrape that hangs fails the test instead.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

#[test]
fn status_shows_the_tree_metrics_parse_and_the_journal_gets_priorities() {
    use std::os::unix::fs::MetadataExt;
    let dir = scratch("status");
    let control = dir.join("control");
    let log = dir.join("stderr.log");
    let stderr = std::fs::File::create(&log).unwrap();
    let meta = stderr.metadata().unwrap();
    let mut cmd = serving(bin());
    cmd.args(["--control", control.to_str().unwrap()])
        .args(["--metrics", "127.0.0.1:0"])
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .env_remove("RUST_LOG");
    cmd.stderr(stderr);
    let d = Daemon::spawn(cmd);
    let url = d.line("listening on ");
    let metrics = d.line("metrics at ");
    let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    c.call_tool("kernel", json!({})).unwrap();

    let (code, text, err) = run(&["status", "--control", control.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.contains("supervision tree:\nmcpvisor (one_for_one)"),
        "{text}"
    );
    assert!(
        text.contains(&format!("├── listener {url}"))
            || text.contains(&format!("└── listener {url}")),
        "{text}"
    );
    assert!(text.contains("control running, restarts 0"), "{text}");
    assert!(text.contains("commands  tools 4"), "{text}");
    assert!(text.contains(&format!("  {url}  sessions 1")), "{text}");
    let s = status_json(&control);
    assert_eq!(s["pid"], d.child.id());
    let children = s["tree"]["children"].as_array().unwrap();
    let ids: Vec<&str> = children.iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "engine-task-sweeper",
            format!("listener {url}").as_str(),
            "control",
            "metrics"
        ]
    );
    let listener: Vec<&str> = children[1]["subtree"]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listener,
        ["http-session-sweeper", "http-connections", "http-listener"],
        "{s}"
    );

    let (status, body) = scrape(&metrics);
    assert_eq!(status, "HTTP/1.1 200 OK");
    // The official client library's parser reads every family.
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, json\n\
             from prometheus_client.parser import text_string_to_metric_families as parse\n\
             out = {}\n\
             for f in parse(sys.stdin.read()):\n\
             \x20   for s in f.samples:\n\
             \x20       out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value\n\
             print(json.dumps(out))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (with prometheus_client: pip install prometheus_client)");
    let parsed = {
        use std::io::Write;
        let mut p = parsed;
        p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
        p.wait_with_output().unwrap()
    };
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );
    let samples: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
    let sample = |k: &str| {
        samples[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k} in {samples}"))
    };
    assert_eq!(
        sample(r#"mcpvisor_requests_total{"method": "tools/call", "outcome": "ok"}"#),
        1.0
    );
    assert_eq!(
        sample(r#"mcpvisor_command_runs_total{"end": "ok", "tool": "kernel"}"#),
        1.0
    );
    assert_eq!(
        sample(&format!(
            r#"mcpvisor_sessions{{"listener": "{url}", "transport": "http"}}"#
        )),
        1.0
    );
    assert_eq!(
        sample(r#"mcpvisor_request_duration_seconds_count{"method": "tools/call"}"#),
        1.0
    );
    c.close();
    assert_eq!(d.stop(), Some(0));
    // On the journal: priorities, no timestamps.
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(
        log.lines()
            .any(|l| l == "<6>mcpvisor::service::daemon: serving 4 command tool(s)"),
        "{log}"
    );
    assert!(log.lines().all(|l| l.starts_with('<')), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn socket_activation_serves_on_the_inherited_socket() {
    let dir = scratch("activation");
    let config = dir.join("mcpvisor.json");
    let control = dir.join("control");
    let text = json!({"commands": {"hello": {"argv": ["echo", "hello"]}}, "control": control});
    std::fs::write(&config, text.to_string()).unwrap();
    // systemd-socket-activate listens on a free port (another test may
    // take the one picked first: then it says nothing and exits, and the
    // next port is tried) and starts the daemon at the first connection.
    let (d, url, c) = (0..10)
        .find_map(|_| {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port();
            let mut cmd = Command::new("systemd-socket-activate");
            unmanaged(&mut cmd)
                .args(["-l", &format!("127.0.0.1:{port}"), "--fdname=http", BIN])
                .args(["--config", config.to_str().unwrap()])
                .env("RUST_LOG", "warn")
                .stderr(Stdio::piped());
            let mut d = Daemon::spawn(cmd);
            let mut said = String::new();
            let mut stderr = BufReader::new(d.child.stderr.take().unwrap());
            stderr.read_line(&mut said).ok()?;
            // Read to the end: it writes more when it starts the daemon.
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            if !said.starts_with("Listening on") {
                let _ = d.child.wait();
                return None;
            }
            let url = format!("http://127.0.0.1:{port}/mcp");
            let c = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default())
                .expect("the daemon started on the first connection");
            Some((d, url, c))
        })
        .expect("a free port for systemd-socket-activate");
    assert_eq!(d.line("listening on "), url);
    let r = c.call_tool("hello", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "hello\n");
    let s = status_json(&control);
    assert_eq!(s["listeners"][0]["inherited"], true, "{s}");
    assert_eq!(
        s["listeners"].as_array().unwrap().len(),
        1,
        "no default listener: {s}"
    );
    c.close();
    // A reload that configures another path on the socket's address: the
    // new listener takes the inherited socket over (it cannot bind it).
    let moved = url.replace("/mcp", "/v2");
    let text = json!({"listen": [moved], "commands": {"hello": {"argv": ["echo", "hello"]}},
        "control": control});
    std::fs::write(&config, text.to_string()).unwrap();
    d.signal(libc::SIGHUP);
    let s = common::eventually("the reload", || {
        let s = status_json(&control);
        assert_eq!(s["reloads"]["failed"], 0, "{s}");
        match s["listeners"][0]["url"].as_str() {
            Some(u) if u == moved => Ok(s),
            _ => Err(format!("{s}")),
        }
    });
    assert_eq!(s["listeners"][0]["inherited"], true, "{s}");
    assert_eq!(s["listeners"].as_array().unwrap().len(), 1, "{s}");
    let c = Client::connect(Connection::http(&moved).unwrap(), ClientOptions::default()).unwrap();
    let r = c.call_tool("hello", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "hello\n");
    c.close();
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The daemon blocks SIGTERM, SIGINT and SIGHUP in its threads (one
/// thread takes them with sigwait); its commands must not inherit that
/// mask, or `timeout`, `kill` and the like would not work in them.
#[test]
fn a_command_runs_with_no_signal_blocked() {
    let dir = scratch("sigmask");
    let text = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "commands": {"mask": {"argv": ["grep", "^SigBlk", "/proc/self/status"]}},
    });
    let d = Daemon::start(configured(&dir, &text));
    let c = Client::connect(Connection::http(&d.url).unwrap(), ClientOptions::default()).unwrap();
    let r = c.call_tool("mask", json!({})).unwrap();
    let mask = r["content"][0]["text"].as_str().unwrap_or_default();
    assert_eq!(mask.trim(), "SigBlk:\t0000000000000000", "{r}");
    c.close();
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_command_streams_progress_times_out_and_is_cancelled_with_its_whole_group() {
    let dir = scratch("commands");
    let (grandchild, waiting) = (dir.join("grandchild.pid"), dir.join("waiting.pid"));
    let text = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "commands": {
            "slow": {
                "argv": ["/bin/sh", "-c", format!("sleep 600 & echo $! > {}; wait", grandchild.display())],
                "timeoutMs": 2500,
            },
            // `$$` is the file's escape of `$`.
            "wait": {"argv": ["/bin/sh", "-c", format!("echo $$$$ > {}; exec sleep 600", waiting.display())]},
        },
    });
    let cmd = configured(&dir, &text);
    let d = Daemon::start(cmd);
    let c = Client::connect(Connection::http(&d.url).unwrap(), ClientOptions::default()).unwrap();

    let r = common::call_with_progress(&c, "slow");
    assert_eq!(r["isError"], true, "{r}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("timed out"),
        "{r}"
    );
    gone(pid_in(&grandchild), "the grandchild");

    common::cancel_and_see_it_killed(&c, "wait", &waiting);
    c.close();
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_past_the_shutdown_timeout_cancels_the_rest_and_kills_their_commands() {
    let dir = scratch("overdue");
    let pidfile = dir.join("pid");
    let text = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "shutdownTimeoutMs": 200,
        "commands": {"forever": {"argv": ["/bin/sh", "-c", format!("echo $$$$ > {}; exec sleep 600", pidfile.display())]}},
    });
    let cmd = configured(&dir, &text);
    let d = Daemon::start(cmd);
    let c = Client::connect(Connection::http(&d.url).unwrap(), ClientOptions::default()).unwrap();
    std::thread::scope(|s| {
        let call = s.spawn(|| c.call_tool("forever", json!({})));
        let pid = pid_in(&pidfile);
        let mut d = d;
        d.signal(libc::SIGTERM);
        assert_eq!(d.child.wait().unwrap().code(), Some(0));
        gone(pid, "the command");
        assert!(
            call.join().unwrap().is_err(),
            "never answered: the daemon is gone"
        );
    });
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stateless HTTP client of `url` that follows tasks.
fn task_client(url: &str) -> Client {
    let options = ClientOptions {
        generation: mcpvisor::client::Generation::Stateless,
        tasks: true,
        ..Default::default()
    };
    Client::connect(Connection::http(url).unwrap(), options).unwrap()
}

#[test]
fn a_command_task_outlives_its_request_and_its_client_and_tasks_cancel_kills_its_group() {
    use mcpvisor::client::ToolCall;
    let dir = scratch("task-command");
    let pidfile = dir.join("pid");
    let control = dir.join("control");
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "control": control,
        "metrics": "127.0.0.1:0",
        "commands": {
            // The pid of a child in the command's group, then a long wait.
            "backup": {
                "argv": ["sh", "-c", format!("sleep 600 & echo $! > {}; wait", pidfile.display())],
                "task": "optional",
                "timeoutMs": 600000
            },
            "quick": {"argv": ["echo", "done"], "task": "required"}
        }
    });
    let d = Daemon::spawn(configured(&dir, &config));
    let url = d.line("listening on ");
    let metrics = d.line("metrics at ");

    let first = task_client(&url);
    let ToolCall::Task(task) = first.call_tool_as_task("backup", json!({})).unwrap() else {
        panic!("a task was expected");
    };
    assert_eq!(task.created()["status"], "working");
    let id = task.id().to_owned();
    // The request was answered, and the command runs on.
    let pid = pid_in(&pidfile);
    assert!(common::alive(pid));
    first.close();
    drop(first);

    // Another connection follows the same task by its id.
    let second = task_client(&url);
    let again = second.task(&id);
    assert_eq!(again.get().unwrap()["status"], "working");
    assert_eq!(status_json(&control)["tasks"]["working"], 1);
    again.cancel().unwrap();
    common::eventually("the task cancelled", || {
        let t = again.get().map_err(|e| e.to_string())?;
        (t["status"] == "cancelled")
            .then_some(())
            .ok_or(t.to_string())
    });
    gone(pid, "the task's command after tasks/cancel");

    // A required task is followed to its end by a plain call_tool.
    let r = second.call_tool("quick", json!({})).unwrap();
    assert_eq!(
        r["content"][0]["text"].as_str().unwrap().trim(),
        "done",
        "{r}"
    );
    // A client that does not follow tasks is refused a required one.
    let plain = Client::connect(Connection::http(&url).unwrap(), ClientOptions::default()).unwrap();
    match plain.call_tool("quick", json!({})) {
        Err(mcpvisor::client::ClientError::Rpc(e)) => assert_eq!(e.code, -32021, "{e}"),
        other => panic!("expected -32021, got {other:?}"),
    }

    let status = status_json(&control);
    assert_eq!(status["tasks"]["cancelled"], 1, "{status}");
    assert_eq!(status["tasks"]["completed"], 1, "{status}");
    let (_, body) = scrape(&metrics);
    assert!(
        body.contains("mcpvisor_tasks{status=\"cancelled\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("mcpvisor_tasks{status=\"completed\"} 1"),
        "{body}"
    );
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_skill_changed_on_disk_changes_its_digest_and_the_old_entry_refuses_it() {
    let dir = scratch("skills");
    let skills = dir.join("skills");
    let skill = skills.join("notes");
    std::fs::create_dir_all(skill.join("refs")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: Keep notes short.\n---\nSee refs/STYLE.md.\n",
    )
    .unwrap();
    let style = skill.join("refs/STYLE.md");
    std::fs::write(&style, "Short sentences.\n").unwrap();
    let config = json!({"listen": ["http://127.0.0.1:0/mcp"], "skills": [skills]});
    let d = Daemon::start(configured(&dir, &config));
    for generation in [
        mcpvisor::client::Generation::Sessions,
        mcpvisor::client::Generation::Stateless,
    ] {
        let options = ClientOptions {
            generation,
            ..Default::default()
        };
        let c = Client::connect(Connection::http(&d.url).unwrap(), options).unwrap();
        assert!(c.serves_skills());
        let listed = c.list_skills().unwrap();
        assert_eq!(listed.len(), 1);
        let s = &listed[0];
        assert_eq!(s.uri, "skill://notes/SKILL.md");
        let md = c.read_skill_file(s, &s.uri).unwrap();
        assert!(String::from_utf8(md).unwrap().contains("refs/STYLE.md"));
        let uri = "skill://notes/refs/STYLE.md";
        assert_eq!(c.read_skill_file(s, uri).unwrap(), b"Short sentences.\n");
        assert_eq!(c.get_skill(&s.uri).unwrap(), *s);
    }
    let c = task_client(&d.url);
    let old = c.get_skill("skill://notes/SKILL.md").unwrap();
    let uri = "skill://notes/refs/STYLE.md";
    let digest_of = |s: &mcpvisor::model::skill::Skill| {
        s.files
            .as_ref()
            .unwrap()
            .iter()
            .find(|f| f.uri == uri)
            .unwrap()
            .digest
            .clone()
    };
    // Same length, other bytes: only the digest tells.
    std::fs::write(&style, "Brief sentence!!\n").unwrap();
    let new = common::eventually("the changed file's digest", || {
        let s = c
            .get_skill("skill://notes/SKILL.md")
            .map_err(|e| e.to_string())?;
        (digest_of(&s) != digest_of(&old))
            .then_some(s)
            .ok_or("unchanged".to_owned())
    });
    match c.read_skill_file(&old, uri) {
        Err(mcpvisor::client::ClientError::Skill(mcpvisor::model::skill::SkillError::Digest {
            ..
        })) => {}
        other => panic!("the old entry must refuse the new bytes: {other:?}"),
    }
    assert_eq!(c.read_skill_file(&new, uri).unwrap(), b"Brief sentence!!\n");
    // Longer: the size tells first.
    std::fs::write(&style, "Long sentences, and more of them.\n").unwrap();
    common::eventually("the changed file's size", || {
        let s = c
            .get_skill("skill://notes/SKILL.md")
            .map_err(|e| e.to_string())?;
        (digest_of(&s) != digest_of(&new))
            .then_some(())
            .ok_or("unchanged".to_owned())
    });
    match c.read_skill_file(&new, uri) {
        Err(mcpvisor::client::ClientError::Skill(mcpvisor::model::skill::SkillError::Size {
            ..
        })) => {}
        other => panic!("a longer file must fail on its size: {other:?}"),
    }
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_metrics_listener_rides_out_running_out_of_descriptors() {
    // The daemon with few descriptors; the test takes them all with idle
    // connections to its HTTP listener, then asks for /metrics: its
    // listener cannot accept, and must wait, not fail (failing restarted
    // it until the root gave up and the daemon exited 70).
    let mut cmd = Command::new("prlimit");
    cmd.args(["--nofile=96:96", BIN]);
    unmanaged(&mut cmd);
    let mut cmd = serving(cmd);
    cmd.args(["--metrics", "127.0.0.1:0"])
        .env("RUST_LOG", "warn");
    cmd.stderr(Stdio::piped());
    let mut d = Daemon::spawn(cmd);
    let url = d.line("listening on ");
    let metrics = d.line("metrics at ");
    let (log_tx, log) = crossbeam_channel::unbounded::<String>();
    let stderr = d.child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = log_tx.send(line);
        }
    });
    let logged = |what: &str| loop {
        let line = log
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("never logged {what:?}"));
        if line.contains(what) {
            return;
        }
    };
    let http = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap()
        .to_owned();
    // Connections until the listener says it cannot accept, or until
    // one does not get through: a listener out of descriptors leaves
    // them in its backlog, and once that is full a connect waits for the
    // kernel's SYN retries (a minute) unless it is given up.
    let addr: std::net::SocketAddr = http.parse().unwrap();
    let mut hogs = Vec::new();
    let mut failing = false;
    while hogs.len() < 200 && !failing {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(stream) => hogs.push(stream),
            Err(_) => break,
        }
        failing = log
            .try_iter()
            .any(|line| line.contains("http: accept failed"));
    }
    if !failing {
        logged("http: accept failed");
    }
    // The scrape waits while the metrics listener cannot accept (it logs
    // so); the HTTP listener's churn through its backlog may also free a
    // descriptor for a moment, and then the scrape is answered at once.
    let (scraped_tx, scraped) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = scraped_tx.send(scrape(&metrics));
    });
    let answered = loop {
        crossbeam_channel::select! {
            recv(log) -> line => {
                let line = line.expect("the daemon's log goes on");
                if line.contains("metrics: accept failed") {
                    break None;
                }
            }
            recv(scraped) -> answer => break Some(answer.expect("scraped")),
            default(Duration::from_secs(20)) => panic!("neither scraped nor logged a failed accept"),
        }
    };
    drop(hogs);
    let (status, body) = match answered {
        Some(answer) => answer,
        None => scraped
            .recv_timeout(Duration::from_secs(20))
            .expect("scraped once the descriptors are back"),
    };
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("mcpvisor_"), "{body}");
    assert!(d.child.try_wait().unwrap().is_none(), "still running");
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn a_reload_applies_a_new_token_file_to_the_listener_that_runs_on() {
    use common::http::post;
    let dir = scratch("tokens");
    let token = dir.join("token");
    std::fs::write(&token, "first\n").unwrap();
    let config = json!({
        "listen": ["http://127.0.0.1:0/mcp"],
        "http": {"bearerTokenFile": token},
    });
    let manager = Manager::new(&dir);
    let mut cmd = configured(&dir, &config);
    cmd.env("NOTIFY_SOCKET", &manager.1);
    let d = Daemon::start(cmd);
    assert!(manager.recv().starts_with("READY=1"));
    let addr = d
        .url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap()
        .parse()
        .unwrap();
    let init = common::http::initialize_request(json!({}));
    let status = |token: &str| {
        post(
            addr,
            None,
            &init,
            &[("authorization", &format!("Bearer {token}"))],
        )
        .status
    };
    assert_eq!(status("first"), 200);
    assert_eq!(status("second"), 401);
    // Its health to anyone, how many sessions it holds to token holders.
    let health = |h: &[(&str, &str)]| common::http::send(addr, "GET", "/healthz", h, b"").json();
    assert_eq!(health(&[]), json!({"status": "ok"}));
    assert_eq!(health(&[("authorization", "Bearer first")])["sessions"], 1);
    // The first token is revoked, a second one issued.
    std::fs::write(&token, "second\n").unwrap();
    reload(&d, &manager);
    assert_eq!(status("first"), 401, "the revoked token stops working");
    assert_eq!(status("second"), 200);
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_reload_moves_a_listener_to_a_new_path_on_its_address_or_keeps_it() {
    use common::http::post;
    let dir = scratch("same-address");
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let config = dir.join("mcpvisor.json");
    let write = |listen: &[String]| {
        std::fs::write(&config, json!({ "listen": listen }).to_string()).unwrap();
    };
    // A port of the daemon's own choosing (one the test freed could be
    // taken by another test before the daemon binds it).
    write(&["http://127.0.0.1:0/mcp".to_owned()]);
    let manager = Manager::new(&dir);
    let mut cmd = bin();
    cmd.args(["--config", config.to_str().unwrap()])
        .env("NOTIFY_SOCKET", &manager.1)
        .env("RUST_LOG", "warn");
    let d = Daemon::start(cmd);
    assert!(manager.recv().starts_with("READY=1"));
    let addr = common::http::addr_of(&d.url);
    let at = |path: &str| format!("http://{addr}{path}");
    let init = common::http::initialize_request(json!({}));
    let status = |path: &str| {
        let h = [common::http::ACCEPT_BOTH, common::http::JSON];
        common::http::send(addr, "POST", path, &h, init.to_string().as_bytes()).status
    };
    assert_eq!(post(addr, None, &init, &[]).status, 200);
    let taken = format!("tcp://{}", busy.local_addr().unwrap());
    // Its port named, another path, with a listener that cannot start:
    // the one configured with port 0 made room, and is back on its port.
    write(&[at("/v1"), taken.clone()]);
    reload(&d, &manager);
    assert_eq!(status("/mcp"), 200, "back where it was");
    assert_eq!(status("/v1"), 404);
    // The same address, another path: the old one makes room.
    write(&[at("/v1")]);
    reload(&d, &manager);
    assert_eq!(status("/v1"), 200, "moved");
    assert_eq!(status("/mcp"), 404);
    // Moved again along with a listener that cannot start: nothing
    // changes, and /v1 is served again.
    write(&[at("/v2"), taken]);
    reload(&d, &manager);
    assert_eq!(status("/v1"), 200, "kept");
    assert_eq!(status("/v2"), 404);
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn over_stdio_a_client_that_is_gone_stops_it_instead_of_a_new_session() {
    use std::io::Write;
    let (mut child, mut stdin, out, _) = stdio_daemon();
    // Its reader gone, the next answer cannot be written: the daemon
    // stops (it used to start a new session on the same streams).
    drop(out);
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"ping"}}"#).unwrap();
    let pid = child.id() as libc::pid_t;
    let (exited_tx, exited) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || exited_tx.send(child.wait().unwrap().code()));
    let status = exited
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|_| {
            // SAFETY: kill(2) on our own child, which has not been reaped.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("still running with its client gone")
        });
    assert_eq!(status, Some(0));
}

#[test]
fn an_idle_connection_to_metrics_holds_back_no_scrape() {
    use std::io::Read;
    let mut cmd = serving(bin());
    cmd.args(["--metrics", "127.0.0.1:0"])
        .env("RUST_LOG", "warn");
    cmd.stderr(Stdio::null());
    let d = Daemon::spawn(cmd);
    let metrics = d.line("metrics at ");
    let addr = metrics
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/metrics"))
        .unwrap()
        .to_owned();
    // Connected first, it sends nothing.
    let mut idle = std::net::TcpStream::connect(&addr).unwrap();
    let (status, _) = scrape(&metrics);
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Served beside it: the idle one is still open (served one at a time,
    // it was closed at its deadline before the scrape was read).
    idle.set_nonblocking(true).unwrap();
    let still_open =
        matches!(idle.read(&mut [0u8; 1]), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock);
    assert!(still_open, "the idle connection was served first");
    assert_eq!(d.stop(), Some(0));
}

#[test]
fn a_reload_neither_starts_nor_stops_stdio() {
    // Under a service manager stdin is /dev/null: a stdio listener a
    // reload started read its end at once and stopped the daemon.
    let dir = scratch("reload-stdio");
    let config = dir.join("mcpvisor.json");
    let control = dir.join("control");
    let write = |listen: &[&str]| {
        let text = json!({"listen": listen, "control": control});
        std::fs::write(&config, text.to_string()).unwrap();
    };
    write(&["http://127.0.0.1:0/mcp"]);
    let manager = Manager::new(&dir);
    let mut cmd = bin();
    cmd.args(["--config", config.to_str().unwrap()])
        .env("NOTIFY_SOCKET", &manager.1)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    let d = Daemon::start(cmd);
    assert!(manager.recv().starts_with("READY=1"));
    write(&["http://127.0.0.1:0/mcp", "stdio"]);
    reload(&d, &manager);
    let s = status_json(&control);
    assert_eq!(s["listeners"].as_array().unwrap().len(), 1, "{s}");
    let c = Client::connect(Connection::http(&d.url).unwrap(), ClientOptions::default())
        .expect("still serving");
    c.close();
    assert_eq!(d.stop(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}
