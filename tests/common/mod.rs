//! Test helpers: run an example server as a child process and talk to it
//! line by line; every message it emits is validated against the official
//! schema of the negotiated protocol revision.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// How long a test waits for any one message before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// `tests/<sub>` with its pinned npm packages installed (`npm ci` once,
/// when `marker` under `node_modules` is missing). Tests of one binary
/// and of others run at once: an exclusive lock on a file in the target
/// directory lets one install while the others wait (`npm ci` removes
/// `node_modules` first, so none may look while it runs).
pub fn npm_dir(sub: &str, marker: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(sub);
    let lock = std::fs::File::create(
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("npm-ci-{sub}.lock")),
    )
    .expect("the npm lock file");
    lock.lock().expect("locking the npm lock file");
    if !dir.join("node_modules").join(marker).exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status();
        assert!(
            ok.is_ok_and(|s| s.success()),
            "npm ci failed in tests/{sub} (npm must be installed)"
        );
    }
    dir
}

/// Starts an example that prints `listening on <url>` first; returns the
/// child and the URL.
pub fn spawn_listening(name: &str, args: &[&str]) -> (Child, String) {
    spawn_listening_with_env(name, args, &[])
}

/// [`spawn_listening`] with extra environment variables for the child.
pub fn spawn_listening_with_env(
    name: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (Child, String) {
    let mut cmd = Command::new(example(name));
    cmd.args(args).envs(env.iter().copied());
    spawn_command_listening(cmd)
}

/// The variables a service manager sets for a process: a program a test
/// starts must not act on the test runner's own.
pub const SERVICE_MANAGER_VARS: [&str; 9] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "LISTEN_FDS",
    "LISTEN_PID",
    "LISTEN_FDNAMES",
    "JOURNAL_STREAM",
    "RUNTIME_DIRECTORY",
    "CREDENTIALS_DIRECTORY",
];

/// `cmd` without [`SERVICE_MANAGER_VARS`].
pub fn unmanaged(cmd: &mut Command) -> &mut Command {
    for v in SERVICE_MANAGER_VARS {
        cmd.env_remove(v);
    }
    cmd
}

/// A fresh temporary directory for `test` (this process's own).
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpvisor-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fields of `/proc/PID/stat` after the command name (state first,
/// then the parent's pid), and the name; `None` once the process is gone.
pub fn proc_stat(pid: &str) -> Option<(String, Vec<String>)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(") ")?;
    let name = head.split_once(" (")?.1.to_owned();
    Some((name, rest.split(' ').map(str::to_owned).collect()))
}

/// Whether the process `pid` is alive (and not a zombie).
pub fn alive(pid: i32) -> bool {
    proc_stat(&pid.to_string()).is_some_and(|(_, f)| f.first().is_some_and(|s| s != "Z"))
}

/// Starts `cmd` (any program that prints `listening on <url>` first, its
/// log at warn); returns the child and the URL.
pub fn spawn_command_listening(mut cmd: Command) -> (Child, String) {
    let mut child = cmd
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("listening line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, url)
}

/// The path of a built example.
pub fn example(name: &str) -> PathBuf {
    let mut dir = std::env::current_exe().expect("test executable path");
    dir.pop();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built (cargo builds examples with the tests)",
        path.display()
    );
    path
}

type Cache = Mutex<HashMap<(String, String), Arc<jsonschema::Validator>>>;

fn validator(version: &str, def: &str) -> Arc<jsonschema::Validator> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    static DOCS: OnceLock<Mutex<HashMap<String, Value>>> = OnceLock::new();
    let key = (version.to_owned(), def.to_owned());
    if let Some(v) = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .get(&key)
    {
        return v.clone();
    }
    let doc = DOCS
        .get_or_init(Default::default)
        .lock()
        .unwrap()
        .entry(version.to_owned())
        .or_insert_with(|| {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/schema")
                .join(version)
                .join("schema.json");
            serde_json::from_str(
                &std::fs::read_to_string(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display())),
            )
            .unwrap()
        })
        .clone();
    let mut root = doc.clone();
    let defs_key = if doc.get("$defs").is_some() {
        "$defs"
    } else {
        "definitions"
    };
    root.as_object_mut()
        .unwrap()
        .insert("$ref".into(), json!(format!("#/{defs_key}/{def}")));
    let v = Arc::new(
        jsonschema::validator_for(&root).unwrap_or_else(|e| panic!("schema {version} {def}: {e}")),
    );
    CACHE.get().unwrap().lock().unwrap().insert(key, v.clone());
    v
}

/// Asserts `message` is valid as definition `def` of revision `version`.
pub fn assert_valid(version: &str, def: &str, message: &Value) {
    let v = validator(version, def);
    let errors: Vec<String> = v
        .iter_errors(message)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "message is not a valid {def} of {version}: {errors:?}\n{message}"
    );
}

#[cfg(feature = "amqp")]
pub mod amqp;
pub mod http;
#[cfg(all(feature = "client", feature = "tcp"))]
pub mod tap;
#[cfg(feature = "tls")]
pub mod tls;

/// Validates one message a server sent, answering a request of `method`
/// (ignored for notifications and requests), against revision `version`.
pub fn validate_server_message(version: &str, m: &Value, method: &str) {
    if m.get("method").is_some() {
        let def = if m.get("id").is_some() {
            "ServerRequest"
        } else {
            "ServerNotification"
        };
        assert_valid(version, def, m);
    } else if let Some(result) = m.get("result") {
        assert_valid(
            version,
            if version == "2025-11-25" {
                "JSONRPCResultResponse"
            } else {
                "JSONRPCResponse"
            },
            m,
        );
        assert_valid(version, result_def(method), result);
    } else {
        let mut m = m.clone();
        if m.get("id") == Some(&Value::Null) {
            m.as_object_mut().unwrap().remove("id");
        }
        assert_valid("2025-11-25", "JSONRPCErrorResponse", &m);
    }
}

fn result_def(method: &str) -> &'static str {
    match method {
        "initialize" => "InitializeResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "resources/list" => "ListResourcesResult",
        "resources/templates/list" => "ListResourceTemplatesResult",
        "resources/read" => "ReadResourceResult",
        "prompts/list" => "ListPromptsResult",
        "prompts/get" => "GetPromptResult",
        "completion/complete" => "CompleteResult",
        "server/discover" => "DiscoverResult",
        "subscriptions/listen" => "SubscriptionsListenResult",
        _ => "EmptyResult",
    }
}

/// The 2026-07-28 definition of an error response, by its code.
pub fn error_def(m: &Value) -> &'static str {
    match m["error"]["code"].as_i64() {
        Some(-32020) => "HeaderMismatchError",
        Some(-32021) => "MissingRequiredClientCapabilityError",
        Some(-32022) => "UnsupportedProtocolVersionError",
        _ => "JSONRPCErrorResponse",
    }
}

/// A server child process spoken to over its stdin / stdout.
pub struct Peer {
    pub child: Child,
    stdin: Option<ChildStdin>,
    rx: crossbeam_channel::Receiver<Value>,
    /// The negotiated revision (for schema validation).
    pub version: String,
    sent: HashMap<String, String>,
    /// Messages received while waiting for something else.
    pub backlog: Vec<Value>,
}

impl Peer {
    /// Starts `examples/<name>` with `args`.
    pub fn spawn(name: &str, args: &[&str]) -> Peer {
        let mut child = Command::new(example(name))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn example");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("server wrote a non-JSON line ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Peer {
            child,
            stdin,
            rx,
            version: "2025-11-25".into(),
            sent: HashMap::new(),
            backlog: Vec::new(),
        }
    }

    /// Writes one raw line.
    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// Writes one message; requests are remembered for result validation.
    pub fn send(&mut self, message: Value) {
        if let (Some(id), Some(m)) = (
            message.get("id"),
            message.get("method").and_then(Value::as_str),
        ) {
            self.sent.insert(id.to_string(), m.to_owned());
        }
        self.send_line(&message.to_string());
    }

    /// Sends a request.
    pub fn request_async(&mut self, id: Value, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next message, validated; panics after [`WAIT`].
    pub fn recv(&mut self) -> Value {
        let m = self
            .rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("no message from the server within {WAIT:?}"));
        self.validate(&m);
        m
    }

    /// The next message or `None` at end of output.
    pub fn recv_or_eof(&mut self) -> Option<Value> {
        match self.rx.recv_timeout(WAIT) {
            Ok(m) => {
                self.validate(&m);
                Some(m)
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => None,
            Err(e) => panic!("server neither wrote nor closed stdout within {WAIT:?}: {e}"),
        }
    }

    fn validate(&self, m: &Value) {
        let v = self.version.as_str();
        if let Some(items) = m.as_array() {
            for item in items {
                self.validate(item);
            }
            return;
        }
        if m.get("method").is_some() {
            let def = if m.get("id").is_some() {
                "ServerRequest"
            } else {
                "ServerNotification"
            };
            assert_valid(v, def, m);
            return;
        }
        if let Some(result) = m.get("result") {
            assert_valid(
                v,
                if v >= "2025-11-25" {
                    "JSONRPCResultResponse"
                } else {
                    "JSONRPCResponse"
                },
                m,
            );
            let method = self
                .sent
                .get(&m["id"].to_string())
                .cloned()
                .unwrap_or_default();
            let def = if result["resultType"] == "input_required" {
                "InputRequiredResult"
            } else {
                result_def(&method)
            };
            assert_valid(v, def, result);
        } else if m.get("id") == Some(&Value::Null) {
            // JSON-RPC 2.0 (and our checklist) answer a request whose id
            // cannot be read, or used, with `"id": null`; no MCP schema can
            // express null ids, the newest let the id be absent. Validate
            // everything but the id.
            let mut without_id = m.clone();
            without_id.as_object_mut().unwrap().remove("id");
            if v >= "2026-07-28" {
                assert_valid(v, error_def(&without_id), &without_id);
            } else {
                assert_valid("2025-11-25", "JSONRPCErrorResponse", &without_id);
            }
        } else if v >= "2026-07-28" {
            assert_valid(v, error_def(m), m);
        } else {
            assert_valid(
                v,
                if v == "2025-11-25" {
                    "JSONRPCErrorResponse"
                } else {
                    "JSONRPCError"
                },
                m,
            );
        }
    }

    /// Waits for the response with `id`, keeping other messages in `backlog`.
    pub fn response(&mut self, id: &Value) -> Value {
        loop {
            let m = self.recv();
            if m.get("id") == Some(id) && m.get("method").is_none() {
                return m;
            }
            self.backlog.push(m);
        }
    }

    /// Sends a request and waits for its response.
    pub fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.request_async(id.clone(), method, params);
        self.response(&id)
    }

    /// `initialize` + `notifications/initialized`; returns the initialize result.
    pub fn initialize(&mut self, version: &str, capabilities: Value) -> Value {
        let r = self.request(
            json!("init"),
            "initialize",
            json!({"protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "mcpvisor-tests", "version": "0"}}),
        );
        self.version = r["result"]["protocolVersion"]
            .as_str()
            .expect("protocolVersion")
            .to_owned();
        self.notify("notifications/initialized", json!({}));
        r["result"].clone()
    }

    /// Closes the server's stdin (EOF).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the process to exit (bounded by [`WAIT`]).
    pub fn wait_exit(&mut self) -> ExitStatus {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let pid = self.child.id();
        let mut child = std::mem::replace(&mut self.child, Command::new("true").spawn().unwrap());
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(WAIT) {
            Ok(status) => status.unwrap(),
            Err(_) => {
                let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
                panic!("server did not exit within {WAIT:?} after EOF");
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Calls `tool` asking for progress: waits for the first progress
/// notification (the fact that it runs), then for the result.
#[cfg(feature = "client")]
pub fn call_with_progress(c: &mcpvisor::client::Client, tool: &str) -> Value {
    let (tx, progress) = crossbeam_channel::unbounded();
    let options = mcpvisor::client::CallOptions {
        progress: Some(Arc::new(move |p: f64, _: Option<f64>, _: Option<&str>| {
            let _ = tx.send(p);
        })),
        ..Default::default()
    };
    std::thread::scope(|s| {
        let call = s.spawn(|| c.call_tool_with(tool, json!({}), options));
        progress
            .recv_timeout(Duration::from_secs(30))
            .expect("progress while it runs");
        call.join().unwrap().unwrap()
    })
}

/// Waits until `file` holds a pid, and returns it.
pub fn pid_in(file: &std::path::Path) -> i32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(p) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return p;
        }
        assert!(std::time::Instant::now() < deadline, "no pid in {file:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until process `pid` (`what`) is gone.
pub fn gone(pid: i32, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} ({pid}) survived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Calls `tool`, whose command writes its pid to `pidfile`, cancels the
/// call once it runs, and waits for that process to be killed.
#[cfg(feature = "client")]
pub fn cancel_and_see_it_killed(
    c: &mcpvisor::client::Client,
    tool: &str,
    pidfile: &std::path::Path,
) {
    let token = mcpvisor::protocol::CancelToken::new();
    let options = mcpvisor::client::CallOptions {
        cancel: Some(token.clone()),
        ..Default::default()
    };
    std::thread::scope(|s| {
        let call = s.spawn(|| c.call_tool_with(tool, json!({}), options));
        let pid = pid_in(pidfile);
        token.cancel();
        assert!(call.join().unwrap().is_err(), "cancelled");
        gone(pid, "the command after the cancellation");
    });
}

/// The names `tools/list` gives, in order.
#[cfg(feature = "client")]
pub fn tool_names(c: &mcpvisor::client::Client) -> Vec<String> {
    c.list_tools()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls `probe` every 20 ms until it gives `Ok`, for at most 30 s (then
/// fails with `what` and the last `Err`).
pub fn eventually<T>(what: &str, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match probe() {
            Ok(t) => return t,
            Err(last) => assert!(std::time::Instant::now() < deadline, "{what}: {last}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A server named `name` with one tool, `ask`: it elicits a name and
/// answers `"<revision of the request> <name>"` (which generation reached
/// it, and that the question was answered).
pub fn asking_server(name: &str) -> mcpvisor::Server {
    let q = json!({"message": "name?", "requestedSchema": {"type": "object",
        "properties": {"name": {"type": "string"}}}});
    mcpvisor::Server::builder(name, "1.0")
        .tool(mcpvisor::Tool::new(
            "ask",
            json!({"type": "object"}),
            move |_, ctx| {
                let answer = ctx.elicit(q.clone(), Duration::from_secs(20))?;
                Ok(mcpvisor::ToolResult::text(format!(
                    "{} {}",
                    ctx.protocol().version.as_str(),
                    answer["content"]["name"].as_str().unwrap_or("?")
                )))
            },
        ))
        .build()
        .expect("the asking server")
}

/// `server` over Streamable HTTP on a free loopback port, and its URL
/// (it serves until the handle is dropped).
#[cfg(feature = "http")]
pub fn serve_http(server: &mcpvisor::Server) -> (mcpvisor::transport::http::HttpServer, String) {
    let http = server
        .start_http(
            mcpvisor::transport::http::HttpOptions::default()
                .with_bind("127.0.0.1:0".parse().unwrap()),
        )
        .unwrap();
    let url = format!("http://{}/mcp", http.local_addr());
    (http, url)
}

/// Client options that reconnect quickly (first retry after 10 ms), and
/// what tells each reconnection.
#[cfg(feature = "client")]
pub fn reconnecting() -> (
    mcpvisor::client::ClientOptions,
    crossbeam_channel::Receiver<()>,
) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut reconnect = mcpvisor::client::Reconnect::default();
    reconnect.backoff.initial = Duration::from_millis(10);
    let options = mcpvisor::client::ClientOptions {
        reconnect: Some(reconnect),
        on_reconnected: Some(Arc::new(move || {
            let _ = tx.send(());
        })),
        ..Default::default()
    };
    (options, rx)
}
