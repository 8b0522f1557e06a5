//! The daemon's configuration file (`mcpvisor.json(5)`): one JSON object
//! with camelCase keys, validated whole before anything starts. Unknown
//! keys are errors; every error names the file, line, column and key path.
//! `${VAR}` and `${VAR:-default}` expand in string values; secrets are read
//! from files (relative paths under `$CREDENTIALS_DIRECTORY` when systemd
//! set it), never written in the JSON.

use super::command::{CommandTool, DEFAULT_COMMAND_TIMEOUT, DEFAULT_MAX_OUTPUT_BYTES};
use crate::protocol::tasks::{TaskOptions, TaskSupport};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

mod locate;

use locate::{duplicate_key, locate, position, KeyPath};

/// Where the daemon looks for its configuration by default.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/mcpvisor/mcpvisor.json";
/// The log levels `logLevel` and `--log-level` accept.
pub const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];
/// Listeners when the file names none: HTTP on loopback.
pub const DEFAULT_LISTEN: &str = "http://127.0.0.1:8808/mcp";
/// How long calls in flight get to finish on SIGTERM (`shutdownTimeoutMs`).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(10);
/// Restarts the root supervisor tolerates within [`DEFAULT_ROOT_PERIOD`].
pub const DEFAULT_ROOT_INTENSITY: u32 = 5;
/// The period of [`DEFAULT_ROOT_INTENSITY`].
pub const DEFAULT_ROOT_PERIOD: Duration = Duration::from_secs(30);

/// The keys of the file, as dotted paths (`NAME` stands for a command
/// tool's name): what `mcpvisor.json(5)` documents.
pub const KEYS: &[&str] = &[
    "listen",
    "commands",
    "commands.NAME.description",
    "commands.NAME.inputSchema",
    "commands.NAME.outputSchema",
    "commands.NAME.argv",
    "commands.NAME.cwd",
    "commands.NAME.envAllow",
    "commands.NAME.env",
    "commands.NAME.timeoutMs",
    "commands.NAME.maxOutputBytes",
    "commands.NAME.task",
    "http",
    "http.allowedOrigins",
    "http.allowedHosts",
    "http.bearerTokenFile",
    "http.sessionIdleTimeoutMs",
    "http.maxSessions",
    "amqp",
    "amqp.exchange",
    "amqp.prefetch",
    "amqp.maxMessageBytes",
    "amqp.maxPublishBytes",
    "amqp.sessionIdleTimeoutMs",
    "amqp.maxSessions",
    "amqp.heartbeatSecs",
    "supervision",
    "supervision.root",
    "supervision.root.intensity",
    "supervision.root.periodMs",
    "supervision.listeners",
    "supervision.listeners.intensity",
    "supervision.listeners.periodMs",
    "handlerThreads",
    "maxInflightPerSession",
    "logLevel",
    "shutdownTimeoutMs",
    "control",
    "metrics",
    "mcpServers",
    "mcpServers.NAME.command",
    "mcpServers.NAME.args",
    "mcpServers.NAME.env",
    "mcpServers.NAME.cwd",
    "mcpServers.NAME.url",
    "mcpServers.NAME.headers",
    "mcpServers.NAME.type",
    "mcpServers.NAME.enabled",
    "mcpServers.NAME.required",
    "mcpServers.NAME.namespace",
    "mcpServers.NAME.tools",
    "mcpServers.NAME.tools.allow",
    "mcpServers.NAME.tools.deny",
    "mcpServers.NAME.timeoutMs",
    "mcpServers.NAME.maxTotalTimeoutMs",
    "mcpServers.NAME.maxOutputBytes",
    "mcpServers.NAME.perSession",
    "mcpServers.NAME.maxSessions",
    "mcpServers.NAME.protocol",
    "mcpServers.NAME.task",
    "mcpServers.NAME.restart",
    "mcpServers.NAME.restart.intensity",
    "mcpServers.NAME.restart.periodMs",
    "mcpServers.NAME.restart.backoffMs",
    "maxNameLength",
    "skills",
    "tasks",
    "tasks.ttlMs",
    "tasks.pollIntervalMs",
    "tasks.maxTasks",
    "tasks.maxRunning",
    "tasks.maxPerClient",
];

/// Default time limit of a call relayed to an upstream (`timeoutMs`); its
/// progress notifications restart it.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// Default restarts of an upstream within [`DEFAULT_UPSTREAM_PERIOD`]
/// before it is marked failed.
pub const DEFAULT_UPSTREAM_INTENSITY: u32 = 5;
/// The period of [`DEFAULT_UPSTREAM_INTENSITY`].
pub const DEFAULT_UPSTREAM_PERIOD: Duration = Duration::from_secs(60);
/// Default first delay before an upstream is restarted (it doubles per
/// failure, up to 30 s).
pub const DEFAULT_UPSTREAM_BACKOFF: Duration = Duration::from_millis(500);
/// Default longest tool or prompt name the gateway emits (`maxNameLength`):
/// leaves room for a client's own prefix within 64.
pub const DEFAULT_MAX_NAME_LENGTH: usize = 48;

/// How an upstream is reached.
#[derive(Clone, Debug, PartialEq)]
pub enum UpstreamTransport {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio {
        /// `command`: the program (looked up in `PATH`; never a shell).
        command: String,
        /// `args`.
        args: Vec<String>,
        /// `env`: variables added to the daemon's environment.
        env: BTreeMap<String, String>,
        /// `cwd`.
        cwd: Option<PathBuf>,
    },
    /// A Streamable HTTP server (`url`).
    Http {
        /// `url`.
        url: String,
        /// `headers`: sent with every request (`${VAR}` keeps secrets out
        /// of the file).
        headers: BTreeMap<String, String>,
    },
}

/// One entry of `mcpServers`: an upstream MCP server the gateway hosts.
#[derive(Clone, Debug, PartialEq)]
pub struct UpstreamConfig {
    /// Its key.
    pub name: String,
    /// `command` … or `url`.
    pub transport: UpstreamTransport,
    /// `enabled` (default true).
    pub enabled: bool,
    /// `required` (default false): READY waits until it serves, and when
    /// it fails for good the daemon exits 70.
    pub required: bool,
    /// `namespace` (default: the key): tool and prompt names are
    /// `namespace__name`.
    pub namespace: String,
    /// `tools.allow`: only these tools (`*` matches any run of characters).
    pub allow: Option<Vec<String>>,
    /// `tools.deny`: never these.
    pub deny: Vec<String>,
    /// `timeoutMs` (default [`DEFAULT_UPSTREAM_TIMEOUT`]).
    pub timeout: Duration,
    /// `maxTotalTimeoutMs` (default none): a limit on a relayed call that
    /// neither progress nor the upstream's questions extend.
    pub max_total_timeout: Option<Duration>,
    /// `maxOutputBytes`: a tool result larger than this (as JSON) is cut
    /// (default [`DEFAULT_MAX_OUTPUT_BYTES`]).
    pub max_output_bytes: usize,
    /// `restart.intensity`, `restart.periodMs`.
    pub restart: Intensity,
    /// `restart.backoffMs`.
    pub backoff: Duration,
    /// `perSession` (default false): one connection (for `command`, one
    /// child) per client session, started at the session's first call
    /// and stopped when it ends; the lists come from one more, shared
    /// connection that is never called. A stateless (2026-07-28) request
    /// has no session: its calls are refused (a tool error saying so).
    pub per_session: bool,
    /// `maxSessions`: most per-session connections at once (default
    /// [`DEFAULT_MAX_SESSIONS`]); a call from one more session is a tool
    /// error.
    pub max_sessions: usize,
    /// `protocol` (default [`UpstreamProtocol::Auto`]): the generation
    /// the gateway speaks to it.
    pub protocol: UpstreamProtocol,
    /// `task`: whether calls of its tools run as tasks for clients that
    /// follow tasks (default forbidden).
    pub task: TaskSupport,
}

/// `mcpServers.NAME.protocol`: which protocol generation the gateway
/// speaks to an upstream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// `"auto"`: `server/discover` first, stateless (2026-07-28) if the
    /// upstream answers it, else `initialize` and a session.
    #[default]
    Auto,
    /// `"sessions"`: `initialize` and a session (2024-11-05 … 2025-11-25).
    Sessions,
    /// `"stateless"`: 2026-07-28 only; an upstream that does not answer
    /// `server/discover` fails to start.
    Stateless,
}

/// Default `mcpServers.NAME.maxSessions`.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// The keys directly under `prefix` (`""` for the top level).
fn keys_under(prefix: &str) -> Vec<&'static str> {
    KEYS.iter()
        .filter_map(|k| match prefix {
            "" => Some(*k),
            p => k.strip_prefix(p)?.strip_prefix('.'),
        })
        .filter(|k| !k.contains('.'))
        .collect()
}

/// HTTP settings (`http`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HttpSettings {
    /// `allowedOrigins`: the browser origins allowed (replacing the
    /// default, loopback origins only).
    pub allowed_origins: Option<Vec<String>>,
    /// `allowedHosts`: `Host` names allowed.
    pub allowed_hosts: Option<Vec<String>>,
    /// `bearerTokenFile`: tokens, one per line.
    pub bearer_token_file: Option<PathBuf>,
    /// `sessionIdleTimeoutMs`.
    pub session_idle_timeout: Option<Duration>,
    /// `maxSessions`.
    pub max_sessions: Option<usize>,
}

/// AMQP settings (`amqp`), for every `amqp://` listener.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AmqpSettings {
    /// `exchange`.
    pub exchange: Option<String>,
    /// `prefetch`.
    pub prefetch: Option<u16>,
    /// `maxMessageBytes`.
    pub max_message_bytes: Option<usize>,
    /// `maxPublishBytes`.
    pub max_publish_bytes: Option<usize>,
    /// `sessionIdleTimeoutMs`.
    pub session_idle_timeout: Option<Duration>,
    /// `maxSessions`.
    pub max_sessions: Option<usize>,
    /// `heartbeatSecs`.
    pub heartbeat_secs: Option<u16>,
}

/// Restart intensity of one supervisor level: more than `intensity`
/// restarts within `period` and it gives up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Intensity {
    /// `intensity`.
    pub intensity: u32,
    /// `periodMs`.
    pub period: Duration,
}

/// `supervision`: the restart intensity of each supervisor level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Supervision {
    /// `root`: the daemon's root; when it gives up the daemon exits 70.
    pub root: Intensity,
    /// `listeners`: each listener's own supervisor (default: the
    /// transport's own, 10 restarts in 10 s for HTTP and TCP, 3 in 60 s
    /// for AMQP).
    pub listeners: Option<Intensity>,
}

impl Default for Supervision {
    fn default() -> Self {
        Supervision {
            root: Intensity {
                intensity: DEFAULT_ROOT_INTENSITY,
                period: DEFAULT_ROOT_PERIOD,
            },
            listeners: None,
        }
    }
}

/// The whole configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// `listen`: where to serve ([`crate::transport::listen::Listen`] strings).
    pub listen: Vec<String>,
    /// `commands`: command tools by name.
    pub commands: BTreeMap<String, CommandTool>,
    /// `http`.
    pub http: HttpSettings,
    /// `handlerThreads`: threads running tool handlers.
    pub handler_threads: Option<usize>,
    /// `maxInflightPerSession`: requests one session may have in flight.
    pub max_inflight_per_session: Option<usize>,
    /// `logLevel`: `error`, `warn`, `info`, `debug` or `trace`.
    pub log_level: Option<String>,
    /// `amqp`.
    pub amqp: AmqpSettings,
    /// `supervision`.
    pub supervision: Supervision,
    /// `shutdownTimeoutMs` (default [`DEFAULT_SHUTDOWN_TIMEOUT`]).
    pub shutdown_timeout: Duration,
    /// `control`: the control socket's path.
    pub control: Option<PathBuf>,
    /// `metrics`: the address of the `/metrics` listener.
    pub metrics: Option<String>,
    /// `mcpServers`: the upstream MCP servers, by key.
    pub upstreams: BTreeMap<String, UpstreamConfig>,
    /// `maxNameLength` (default [`DEFAULT_MAX_NAME_LENGTH`]).
    pub max_name_length: usize,
    /// `skills`: directories of Agent Skills to serve (the skills extension).
    pub skills: Vec<PathBuf>,
    /// `tasks`: how tasks are kept (default [`TaskOptions::default`]).
    pub tasks: TaskOptions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: Vec::new(),
            commands: BTreeMap::new(),
            http: HttpSettings::default(),
            handler_threads: None,
            max_inflight_per_session: None,
            log_level: None,
            amqp: AmqpSettings::default(),
            supervision: Supervision::default(),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            control: None,
            metrics: None,
            upstreams: BTreeMap::new(),
            max_name_length: DEFAULT_MAX_NAME_LENGTH,
            skills: Vec::new(),
            tasks: TaskOptions::default(),
        }
    }
}

/// A configuration that cannot be used: where, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// The file.
    pub file: PathBuf,
    /// 1-based line and column (0 when unknown).
    pub line: usize,
    /// Column.
    pub column: usize,
    /// The key path, like `commands.disk.timeoutMs` (empty: the file).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file.display(), self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_owned(),
            line: 0,
            column: 0,
            path: String::new(),
            message: format!("cannot read: {e}"),
        })?;
        Config::parse(path, &text, &|name| std::env::var(name).ok())
    }

    /// Only the `control` key of the file at `path`, expanded, for
    /// `mcpvisor status`: nothing else in the file is checked or expanded
    /// (its variables may be set in the daemon's environment only).
    pub fn control_of(path: &Path) -> Result<Option<PathBuf>, String> {
        let what = |e: String| format!("{}: {e}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| what(format!("cannot read: {e}")))?;
        let value: Value =
            serde_json::from_str(&text).map_err(|e| what(format!("not valid JSON: {e}")))?;
        match value.get("control") {
            None => Ok(None),
            Some(Value::String(c)) => expand(c, &|name| std::env::var(name).ok())
                .map(|c| Some(PathBuf::from(c)))
                .map_err(|e| what(format!("control: {e}"))),
            Some(_) => Err(what("control: expected a string".into())),
        }
    }

    /// Validates `text` (named `file` in errors), expanding variables with `env`.
    pub fn parse(
        file: &Path,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let value: Value = serde_json::from_str(text).map_err(|e| ConfigError {
            file: file.to_owned(),
            line: e.line(),
            column: e.column(),
            path: String::new(),
            message: format!("not valid JSON: {e}"),
        })?;
        if let Some((offset, path)) = duplicate_key(text) {
            let (line, column) = position(text, offset);
            return Err(ConfigError {
                file: file.to_owned(),
                line,
                column,
                path: path.to_string(),
                message: "duplicate key (only one may be given)".into(),
            });
        }
        let reader = Reader { file, text, env };
        reader.config(&value)
    }
}

struct Reader<'a> {
    file: &'a Path,
    text: &'a str,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Reader<'_> {
    fn error(&self, path: &KeyPath, message: impl Into<String>) -> ConfigError {
        let (line, column) = locate(self.text, path).unwrap_or((0, 0));
        ConfigError {
            file: self.file.to_owned(),
            line,
            column,
            path: path.to_string(),
            message: message.into(),
        }
    }

    /// The object at `path`, whose keys must be those [`KEYS`] lists under
    /// `schema` (the path with a command tool's name as `NAME`).
    fn object<'v>(
        &self,
        v: &'v Value,
        path: &KeyPath,
        schema: &str,
    ) -> Result<&'v Map<String, Value>, ConfigError> {
        let known = keys_under(schema);
        let o = v
            .as_object()
            .ok_or_else(|| self.error(path, "expected an object"))?;
        if let Some(k) = o.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(self.error(
                &path.key(k),
                format!("unknown key (known here: {})", known.join(", ")),
            ));
        }
        Ok(o)
    }

    fn string(&self, v: &Value, path: &KeyPath) -> Result<String, ConfigError> {
        let s = v
            .as_str()
            .ok_or_else(|| self.error(path, "expected a string"))?;
        expand(s, self.env).map_err(|m| self.error(path, m))
    }

    /// A string that reaches the system (a program, an argument, a path,
    /// an environment variable's name): no NUL, which it cannot hold.
    fn os_string(&self, v: &Value, path: &KeyPath) -> Result<String, ConfigError> {
        let s = self.string(v, path)?;
        match s.contains('\0') {
            true => Err(self.error(path, HOLDS_NUL)),
            false => Ok(s),
        }
    }

    /// A list of [`os_string`](Self::os_string)s.
    fn os_strings(&self, v: &Value, path: &KeyPath) -> Result<Vec<String>, ConfigError> {
        self.list_of(v, path, Self::os_string)
    }

    fn strings(&self, v: &Value, path: &KeyPath) -> Result<Vec<String>, ConfigError> {
        self.list_of(v, path, Self::string)
    }

    /// A list of strings, each read by `item` at its index.
    fn list_of(
        &self,
        v: &Value,
        path: &KeyPath,
        item: fn(&Self, &Value, &KeyPath) -> Result<String, ConfigError>,
    ) -> Result<Vec<String>, ConfigError> {
        let items = v
            .as_array()
            .ok_or_else(|| self.error(path, "expected a list of strings"))?;
        items
            .iter()
            .enumerate()
            .map(|(i, s)| item(self, s, &path.index(i)))
            .collect()
    }

    /// An object of strings (variables expanded), like `env`.
    fn string_map(
        &self,
        v: &Value,
        path: &KeyPath,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let o = v
            .as_object()
            .ok_or_else(|| self.error(path, "expected an object of strings"))?;
        o.iter()
            .map(|(k, v)| Ok((k.clone(), self.string(v, &path.key(k))?)))
            .collect()
    }

    /// An environment (`env`): names neither empty nor holding `=` or NUL
    /// (a process could not be given them), values without NUL.
    fn environment(
        &self,
        v: &Value,
        path: &KeyPath,
    ) -> Result<BTreeMap<String, String>, ConfigError> {
        let env = self.string_map(v, path)?;
        for (name, value) in &env {
            if !is_env_name(name) {
                return Err(self.error(&path.key(name), NOT_AN_ENV_NAME));
            }
            if value.contains('\0') {
                return Err(self.error(&path.key(name), "a value holding NUL"));
            }
        }
        Ok(env)
    }

    /// `key` of `o` (at `path`) as positive milliseconds, if given.
    fn millis(
        &self,
        o: &Map<String, Value>,
        path: &KeyPath,
        key: &str,
    ) -> Result<Option<Duration>, ConfigError> {
        o.get(key)
            .map(|v| Ok(Duration::from_millis(self.positive(v, &path.key(key))?)))
            .transpose()
    }

    /// `key` of `o` (at `path`) as a positive count, if given.
    fn count(
        &self,
        o: &Map<String, Value>,
        path: &KeyPath,
        key: &str,
    ) -> Result<Option<usize>, ConfigError> {
        o.get(key)
            .map(|v| Ok(self.positive(v, &path.key(key))? as usize))
            .transpose()
    }

    fn positive(&self, v: &Value, path: &KeyPath) -> Result<u64, ConfigError> {
        v.as_u64()
            .filter(|n| *n > 0)
            .ok_or_else(|| self.error(path, "expected a positive integer"))
    }

    fn config(&self, v: &Value) -> Result<Config, ConfigError> {
        let root = KeyPath::default();
        let o = self.object(v, &root, "")?;
        let mut c = Config::default();
        if let Some(l) = o.get("listen") {
            c.listen = self.strings(l, &root.key("listen"))?;
            for (i, l) in c.listen.iter().enumerate() {
                if let Err(e) = l.parse::<crate::transport::listen::Listen>() {
                    return Err(self.error(&root.key("listen").index(i), e.to_string()));
                }
            }
        }
        if let Some(cmds) = o.get("commands") {
            let cmds = cmds.as_object().ok_or_else(|| {
                self.error(&root.key("commands"), "expected an object of command tools")
            })?;
            for (name, spec) in cmds {
                let tool = self.command(name, spec, &root.key("commands").key(name))?;
                c.commands.insert(name.clone(), tool);
            }
        }
        if let Some(h) = o.get("http") {
            c.http = self.http(h)?;
        }
        if let Some(n) = o.get("handlerThreads") {
            c.handler_threads = Some(self.positive(n, &root.key("handlerThreads"))? as usize);
        }
        if let Some(n) = o.get("maxInflightPerSession") {
            c.max_inflight_per_session =
                Some(self.positive(n, &root.key("maxInflightPerSession"))? as usize);
        }
        if let Some(l) = o.get("logLevel") {
            let level = self.string(l, &root.key("logLevel"))?;
            if !LOG_LEVELS.contains(&level.as_str()) {
                return Err(self.error(
                    &root.key("logLevel"),
                    "expected one of error, warn, info, debug, trace",
                ));
            }
            c.log_level = Some(level);
        }
        if let Some(a) = o.get("amqp") {
            c.amqp = self.amqp(a)?;
        }
        if let Some(s) = o.get("supervision") {
            let so = self.object(s, &root.key("supervision"), "supervision")?;
            if let Some(r) = so.get("root") {
                c.supervision.root = self.intensity(
                    r,
                    &root.key("supervision").key("root"),
                    "supervision.root",
                    c.supervision.root,
                )?;
            }
            if let Some(l) = so.get("listeners") {
                // Unset fields: HTTP's and TCP's own defaults.
                let base = Intensity {
                    intensity: 10,
                    period: Duration::from_secs(10),
                };
                c.supervision.listeners = Some(self.intensity(
                    l,
                    &root.key("supervision").key("listeners"),
                    "supervision.listeners",
                    base,
                )?);
            }
        }
        if let Some(ms) = o.get("shutdownTimeoutMs") {
            c.shutdown_timeout =
                Duration::from_millis(self.positive(ms, &root.key("shutdownTimeoutMs"))?);
        }
        if let Some(p) = o.get("control") {
            c.control = Some(PathBuf::from(self.string(p, &root.key("control"))?));
        }
        if let Some(n) = o.get("maxNameLength") {
            let n = self.positive(n, &root.key("maxNameLength"))? as usize;
            if !(16..=64).contains(&n) {
                return Err(self.error(
                    &root.key("maxNameLength"),
                    "expected an integer from 16 to 64",
                ));
            }
            c.max_name_length = n;
        }
        if let Some(servers) = o.get("mcpServers") {
            let servers = servers.as_object().ok_or_else(|| {
                self.error(&root.key("mcpServers"), "expected an object of servers")
            })?;
            for (name, spec) in servers {
                let u = self.upstream(name, spec, &root.key("mcpServers").key(name))?;
                c.upstreams.insert(name.clone(), u);
            }
            self.check_namespaces(&c)?;
        }
        if let Some(s) = o.get("skills") {
            c.skills = self
                .strings(s, &root.key("skills"))?
                .into_iter()
                .map(PathBuf::from)
                .collect();
            // Each directory is watched by a child named after it.
            for (i, dir) in c.skills.iter().enumerate() {
                if c.skills[..i].contains(dir) {
                    return Err(self.error(
                        &root.key("skills").index(i),
                        format!("{} is named twice", dir.display()),
                    ));
                }
            }
        }
        if let Some(t) = o.get("tasks") {
            c.tasks = self.tasks(t)?;
        }
        if let Some(m) = o.get("metrics") {
            let addr = self.string(m, &root.key("metrics"))?;
            metrics_addr(&addr).map_err(|e| self.error(&root.key("metrics"), e))?;
            c.metrics = Some(addr);
        }
        Ok(c)
    }

    fn intensity(
        &self,
        v: &Value,
        path: &KeyPath,
        schema: &str,
        default: Intensity,
    ) -> Result<Intensity, ConfigError> {
        let o = self.object(v, path, schema)?;
        let mut i = default;
        if let Some(n) = o.get("intensity") {
            let p = path.key("intensity");
            i.intensity = n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| self.error(&p, "expected a non-negative integer"))?;
        }
        if let Some(ms) = o.get("periodMs") {
            i.period = Duration::from_millis(self.positive(ms, &path.key("periodMs"))?);
        }
        Ok(i)
    }

    fn upstream(
        &self,
        name: &str,
        v: &Value,
        path: &KeyPath,
    ) -> Result<UpstreamConfig, ConfigError> {
        let o = self.object(v, path, "mcpServers.NAME")?;
        let text = |key: &str| -> Result<Option<String>, ConfigError> {
            o.get(key)
                .map(|v| self.string(v, &path.key(key)))
                .transpose()
        };
        let kind = text("type")?;
        let transport = match (text("command")?, text("url")?) {
            (Some(command), None) => {
                if kind.as_deref().is_some_and(|k| k != "stdio") {
                    return Err(self.error(&path.key("type"), "a server with command is stdio"));
                }
                if command.contains('\0') {
                    return Err(self.error(&path.key("command"), HOLDS_NUL));
                }
                let args = match o.get("args") {
                    Some(a) => self.os_strings(a, &path.key("args"))?,
                    None => Vec::new(),
                };
                let env = match o.get("env") {
                    Some(e) => self.environment(e, &path.key("env"))?,
                    None => BTreeMap::new(),
                };
                let cwd = o
                    .get("cwd")
                    .map(|v| self.os_string(v, &path.key("cwd")))
                    .transpose()?
                    .map(PathBuf::from);
                if o.contains_key("headers") {
                    return Err(self.error(&path.key("headers"), "only for a server with url"));
                }
                UpstreamTransport::Stdio {
                    command,
                    args,
                    env,
                    cwd,
                }
            }
            (None, Some(url)) => {
                match kind.as_deref() {
                    None | Some("http") | Some("streamable-http") | Some("streamableHttp") => {}
                    Some(other) => {
                        return Err(self.error(
                            &path.key("type"),
                            format!(
                                "{other:?}: a url is served as Streamable HTTP (\"http\") only"
                            ),
                        ))
                    }
                }
                let tls = url.starts_with("https://");
                if !url.starts_with("http://") && !tls {
                    return Err(self.error(&path.key("url"), "expected an http:// or https:// URL"));
                }
                if tls && !cfg!(feature = "https") {
                    return Err(self.error(&path.key("url"), "this build has no TLS (https)"));
                }
                for key in ["args", "env", "cwd"] {
                    if o.contains_key(key) {
                        return Err(self.error(&path.key(key), "only for a server with command"));
                    }
                }
                let headers = match o.get("headers") {
                    Some(h) => self.string_map(h, &path.key("headers"))?,
                    None => BTreeMap::new(),
                };
                // Each checked alone, so that the error is at its name.
                #[cfg(all(feature = "http", feature = "client"))]
                for (n, v) in &headers {
                    crate::transport::http::client::check_headers(&[(n.clone(), v.clone())])
                        .map_err(|e| self.error(&path.key("headers").key(n), e.to_string()))?;
                }
                UpstreamTransport::Http { url, headers }
            }
            (Some(_), Some(_)) => {
                return Err(self.error(path, "either command (stdio) or url (HTTP), not both"))
            }
            (None, None) => {
                return Err(self.error(path, "command (stdio) or url (HTTP) is required"))
            }
        };
        let enabled = match o.get("enabled") {
            Some(b) => b
                .as_bool()
                .ok_or_else(|| self.error(&path.key("enabled"), "expected true or false"))?,
            None => true,
        };
        let flag = |key: &str| match o.get(key) {
            Some(b) => b
                .as_bool()
                .ok_or_else(|| self.error(&path.key(key), "expected true or false")),
            None => Ok(false),
        };
        let required = flag("required")?;
        let per_session = flag("perSession")?;
        let max_sessions = match o.get("maxSessions") {
            Some(_) if !per_session => {
                return Err(self.error(&path.key("maxSessions"), "only with \"perSession\": true"))
            }
            Some(n) => self.positive(n, &path.key("maxSessions"))? as usize,
            None => DEFAULT_MAX_SESSIONS,
        };
        let protocol = match text("protocol")?.as_deref() {
            None | Some("auto") => UpstreamProtocol::Auto,
            Some("sessions") => UpstreamProtocol::Sessions,
            Some("stateless") => UpstreamProtocol::Stateless,
            Some(other) => {
                return Err(self.error(
                    &path.key("protocol"),
                    format!("{other:?}: expected \"auto\", \"sessions\" or \"stateless\""),
                ))
            }
        };
        let namespace = text("namespace")?.unwrap_or_else(|| name.to_owned());
        if !super::gateway::names::valid_namespace(&namespace) {
            let at = if o.contains_key("namespace") {
                path.key("namespace")
            } else {
                path.clone()
            };
            return Err(self.error(
                &at,
                format!(
                    "{namespace:?} is not a namespace: letters, digits and single - or _, \
                     starting with a letter, at most {} characters (set namespace)",
                    super::gateway::names::MAX_NAMESPACE
                ),
            ));
        }
        let (mut allow, mut deny) = (None, Vec::new());
        if let Some(t) = o.get("tools") {
            let tp = path.key("tools");
            let to = self.object(t, &tp, "mcpServers.NAME.tools")?;
            if let Some(a) = to.get("allow") {
                allow = Some(self.strings(a, &tp.key("allow"))?);
            }
            if let Some(d) = to.get("deny") {
                deny = self.strings(d, &tp.key("deny"))?;
            }
        }
        let timeout = match o.get("timeoutMs") {
            Some(ms) => Duration::from_millis(self.positive(ms, &path.key("timeoutMs"))?),
            None => DEFAULT_UPSTREAM_TIMEOUT,
        };
        let max_total_timeout = self.millis(o, path, "maxTotalTimeoutMs")?;
        let max_output_bytes = match o.get("maxOutputBytes") {
            Some(n) => self.positive(n, &path.key("maxOutputBytes"))? as usize,
            None => DEFAULT_MAX_OUTPUT_BYTES,
        };
        let mut restart = Intensity {
            intensity: DEFAULT_UPSTREAM_INTENSITY,
            period: DEFAULT_UPSTREAM_PERIOD,
        };
        let mut backoff = DEFAULT_UPSTREAM_BACKOFF;
        if let Some(r) = o.get("restart") {
            let rp = path.key("restart");
            restart = self.intensity(r, &rp, "mcpServers.NAME.restart", restart)?;
            if let Some(ms) = r.get("backoffMs") {
                backoff = Duration::from_millis(self.positive(ms, &rp.key("backoffMs"))?);
            }
        }
        Ok(UpstreamConfig {
            name: name.to_owned(),
            transport,
            enabled,
            required,
            namespace,
            allow,
            deny,
            timeout,
            max_total_timeout,
            max_output_bytes,
            restart,
            backoff,
            per_session,
            max_sessions,
            protocol,
            task: match self.task_support(o, path)? {
                // Its connection ends with the client's session, and a
                // task outlives that: the two cannot go together.
                t if per_session && t != TaskSupport::Forbidden => {
                    return Err(self.error(
                        &path.key("task"),
                        "a perSession upstream's calls cannot run as tasks (its connection ends with the client's session)",
                    ))
                }
                t => t,
            },
        })
    }

    /// Two upstreams with one namespace, or a command tool named like an
    /// upstream's tool, would collide: an error now, never a silent rename.
    fn check_namespaces(&self, c: &Config) -> Result<(), ConfigError> {
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for u in c.upstreams.values() {
            // Room for `__`, one character of a name, `_` and the hash.
            let longest = c.max_name_length.saturating_sub(10);
            if u.namespace.len() > longest {
                return Err(self.error(
                    &self.namespace_at(&u.name),
                    format!(
                        "namespace {:?} is longer than {longest} characters, which leaves no room for names within maxNameLength {} (set namespace)",
                        u.namespace, c.max_name_length
                    ),
                ));
            }
        }
        for u in c.upstreams.values().filter(|u| u.enabled) {
            if let Some(other) = seen.insert(&u.namespace, &u.name) {
                return Err(self.error(
                    &self.namespace_at(&u.name),
                    format!(
                        "namespace {:?} is also {other:?}'s: set namespace",
                        u.namespace
                    ),
                ));
            }
        }
        for tool in c.commands.keys() {
            if let Some((ns, _)) = tool.split_once("__") {
                if let Some(owner) = seen.get(ns) {
                    return Err(self.error(
                        &KeyPath::default().key("commands").key(tool),
                        format!("named like a tool of upstream {owner:?} (namespace {ns:?})"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Where upstream `name`'s namespace is given: its `namespace` key
    /// when the file has one, else the upstream (named after it).
    fn namespace_at(&self, name: &str) -> KeyPath {
        let upstream = KeyPath::default().key("mcpServers").key(name);
        let set = upstream.key("namespace");
        if locate(self.text, &set).is_some() {
            set
        } else {
            upstream
        }
    }

    fn amqp(&self, v: &Value) -> Result<AmqpSettings, ConfigError> {
        let path = &KeyPath::default().key("amqp");
        let o = self.object(v, path, "amqp")?;
        let mut a = AmqpSettings::default();
        if let Some(e) = o.get("exchange") {
            a.exchange = Some(self.string(e, &path.key("exchange"))?);
        }
        let small = |key: &str| -> Result<Option<u16>, ConfigError> {
            let path = path.key(key);
            o.get(key)
                .map(|n| {
                    u16::try_from(self.positive(n, &path)?)
                        .map_err(|_| self.error(&path, "expected an integer from 1 to 65535"))
                })
                .transpose()
        };
        a.prefetch = small("prefetch")?;
        a.heartbeat_secs = small("heartbeatSecs")?;
        a.max_message_bytes = self.count(o, path, "maxMessageBytes")?;
        a.max_publish_bytes = self.count(o, path, "maxPublishBytes")?;
        a.session_idle_timeout = self.millis(o, path, "sessionIdleTimeoutMs")?;
        a.max_sessions = self.count(o, path, "maxSessions")?;
        Ok(a)
    }

    /// Every `{name}` placeholder of `t`'s argv (at `argv_path`) names an
    /// argument its `inputSchema` lists under `required`: a call without
    /// it could not run, and a model reads the schema, not the argv.
    fn placeholders_required(
        &self,
        t: &CommandTool,
        argv_path: &KeyPath,
    ) -> Result<(), ConfigError> {
        let required: Vec<&str> = t
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        for (i, template) in t.argv.iter().enumerate() {
            for name in super::command::placeholders(template) {
                let why = if name.is_empty() {
                    "an empty placeholder {} (write {{}} for literal braces)".to_owned()
                } else if !required.contains(&name.as_str()) {
                    format!(
                        "the placeholder {{{name}}} needs {name:?} under inputSchema.required \
                         (with a property that describes it)"
                    )
                } else {
                    continue;
                };
                return Err(self.error(&argv_path.index(i), why));
            }
        }
        Ok(())
    }

    fn command(&self, name: &str, v: &Value, path: &KeyPath) -> Result<CommandTool, ConfigError> {
        let o = self.object(v, path, "commands.NAME")?;
        let argv_path = path.key("argv");
        let argv = self.os_strings(
            o.get("argv").ok_or_else(|| {
                self.error(path, "argv (the program and its arguments) is required")
            })?,
            &argv_path,
        )?;
        if argv.is_empty() || argv[0].is_empty() {
            return Err(self.error(&argv_path, "expected the program and its arguments"));
        }
        super::command::check_argv(&argv).map_err(|e| self.error(&argv_path, e))?;
        let mut t = CommandTool::new(name, argv);
        if let Some(d) = o.get("description") {
            t.description = self.string(d, &path.key("description"))?;
        }
        if let Some(s) = o.get("inputSchema") {
            if s.get("type").and_then(Value::as_str) != Some("object") {
                return Err(self.error(
                    &path.key("inputSchema"),
                    "expected a JSON Schema with \"type\": \"object\"",
                ));
            }
            t.input_schema = s.clone();
        }
        self.placeholders_required(&t, &argv_path)?;
        if let Some(s) = o.get("outputSchema") {
            if !s.is_object() {
                return Err(self.error(&path.key("outputSchema"), "expected a JSON Schema"));
            }
            t.output_schema = Some(s.clone());
        }
        if let Some(d) = o.get("cwd") {
            t.cwd = Some(PathBuf::from(self.os_string(d, &path.key("cwd"))?));
        }
        if let Some(a) = o.get("envAllow") {
            let allow_path = path.key("envAllow");
            t.env_allow = self.strings(a, &allow_path)?;
            if let Some(i) = t.env_allow.iter().position(|n| !is_env_name(n)) {
                return Err(self.error(&allow_path.index(i), NOT_AN_ENV_NAME));
            }
        }
        if let Some(e) = o.get("env") {
            t.env = self.environment(e, &path.key("env"))?;
        }
        t.timeout = match o.get("timeoutMs") {
            Some(ms) => Duration::from_millis(self.positive(ms, &path.key("timeoutMs"))?),
            None => DEFAULT_COMMAND_TIMEOUT,
        };
        t.max_output_bytes = match o.get("maxOutputBytes") {
            Some(n) => self.positive(n, &path.key("maxOutputBytes"))? as usize,
            None => DEFAULT_MAX_OUTPUT_BYTES,
        };
        t.task = self.task_support(o, path)?;
        Ok(t)
    }

    /// `task`: `forbidden` (default), `optional` or `required`.
    fn task_support(
        &self,
        o: &Map<String, Value>,
        path: &KeyPath,
    ) -> Result<TaskSupport, ConfigError> {
        let at = path.key("task");
        match o.get("task") {
            None => Ok(TaskSupport::Forbidden),
            Some(v) => match self.string(v, &at)?.as_str() {
                "forbidden" => Ok(TaskSupport::Forbidden),
                "optional" => Ok(TaskSupport::Optional),
                "required" => Ok(TaskSupport::Required),
                other => Err(self.error(
                    &at,
                    format!("{other:?}: expected \"forbidden\", \"optional\" or \"required\""),
                )),
            },
        }
    }

    /// `tasks`: how the daemon keeps tasks.
    fn tasks(&self, v: &Value) -> Result<TaskOptions, ConfigError> {
        let path = &KeyPath::default().key("tasks");
        let o = self.object(v, path, "tasks")?;
        let mut t = TaskOptions::default();
        if let Some(ms) = o.get("ttlMs") {
            t.ttl = Duration::from_millis(self.positive(ms, &path.key("ttlMs"))?);
        }
        if let Some(ms) = o.get("pollIntervalMs") {
            t.poll_interval =
                Duration::from_millis(self.positive(ms, &path.key("pollIntervalMs"))?);
        }
        if let Some(n) = o.get("maxTasks") {
            t.max_tasks = self.positive(n, &path.key("maxTasks"))? as usize;
        }
        if let Some(n) = o.get("maxRunning") {
            t.max_running = self.positive(n, &path.key("maxRunning"))? as usize;
        }
        if let Some(n) = self.count(o, path, "maxPerClient")? {
            t.max_per_owner = n;
        }
        Ok(t)
    }

    fn http(&self, v: &Value) -> Result<HttpSettings, ConfigError> {
        let path = &KeyPath::default().key("http");
        let o = self.object(v, path, "http")?;
        let mut h = HttpSettings::default();
        if let Some(l) = o.get("allowedOrigins") {
            let origins = self.strings(l, &path.key("allowedOrigins"))?;
            if let Some((i, bad)) = origins.iter().enumerate().find(|(_, o)| !is_origin(o)) {
                return Err(self.error(
                    &path.key("allowedOrigins").index(i),
                    format!(
                        "{bad:?} is not an origin: scheme://host[:port], with no path (there is no wildcard)"
                    ),
                ));
            }
            h.allowed_origins = Some(origins);
        }
        if let Some(l) = o.get("allowedHosts") {
            let hosts = self.strings(l, &path.key("allowedHosts"))?;
            if let Some((i, bad)) = hosts.iter().enumerate().find(|(_, h)| !is_host_entry(h)) {
                return Err(self.error(
                    &path.key("allowedHosts").index(i),
                    format!(
                        "{bad:?} is not a host: a name or address with or without a port \
                         (example.com, example.com:8808, [::1]:8808), no scheme, path or wildcard"
                    ),
                ));
            }
            h.allowed_hosts = Some(hosts);
        }
        if let Some(f) = o.get("bearerTokenFile") {
            h.bearer_token_file = Some(credential(&self.string(f, &path.key("bearerTokenFile"))?));
        }
        h.session_idle_timeout = self.millis(o, path, "sessionIdleTimeoutMs")?;
        h.max_sessions = self.count(o, path, "maxSessions")?;
        Ok(h)
    }
}

/// The address of the `/metrics` listener: `HOST:PORT`, or a bare port
/// on loopback.
pub fn metrics_addr(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    s.to_socket_addrs()
        .map_err(|e| format!("expected HOST:PORT or a port: {e}"))?
        .next()
        .ok_or_else(|| format!("{s} resolves to no address"))
}

/// A secret file: relative paths are under `$CREDENTIALS_DIRECTORY` when
/// systemd's `LoadCredential=` set it.
fn credential(path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    match std::env::var_os("CREDENTIALS_DIRECTORY") {
        Some(dir) if p.is_relative() => PathBuf::from(dir).join(p),
        _ => p,
    }
}

/// Expands `${VAR}` and `${VAR:-default}`; `$$` is a literal `$`. An unset
/// variable without a default is an error.
pub fn expand(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("$$") {
            out.push('$');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let end = after
                .find('}')
                .ok_or_else(|| format!("unclosed ${{ in {s:?}"))?;
            let inner = &after[..end];
            let (name, default) = match inner.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (inner, None),
            };
            match (env(name).filter(|v| !v.is_empty()), default) {
                (Some(v), _) => out.push_str(&v),
                (None, Some(d)) => out.push_str(d),
                (None, None) => return Err(format!("environment variable {name} is not set")),
            }
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Whether `name` can name an environment variable: not empty, no `=`,
/// no NUL.
fn is_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains(['=', '\0'])
}

const HOLDS_NUL: &str = "holds NUL, which no program, argument or path can";

const NOT_AN_ENV_NAME: &str = "not an environment variable name (empty, or holding = or NUL)";

/// Whether `h` is what `http.allowedHosts` takes: a host name or address,
/// with or without a port (`example.com`, `example.com:8808`, `[::1]`,
/// `[::1]:8808`), as a `Host` header carries it.
fn is_host_entry(h: &str) -> bool {
    // Matched trimmed (see `host_matches`).
    let h = h.trim();
    let (host, port) = match h.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((v6, after)) if v6.parse::<std::net::Ipv6Addr>().is_ok() => match after {
                "" => return true,
                _ => match after.strip_prefix(':') {
                    Some(port) => ("v6", Some(port)),
                    None => return false,
                },
            },
            _ => return false,
        },
        None => match h.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (h, None),
        },
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.parse::<u16>().is_ok());
    host_ok && port_ok
}

/// Whether `o` is an origin as a browser sends it (RFC 6454):
/// `scheme://host[:port]`, no path, no trailing slash.
fn is_origin(o: &str) -> bool {
    let Some((scheme, authority)) = o.split_once("://") else {
        return false;
    };
    !scheme.is_empty()
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && !authority.is_empty()
        && !authority.contains(['/', '?', '#', '*', '@', ' '])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let env = |name: &str| (name == "HOME_DIR").then(|| "/home/u".to_owned());
        Config::parse(Path::new("t.json"), text, &env)
    }

    #[test]
    fn an_error_under_a_name_with_dots_has_its_position() {
        let e = parse("{\"commands\": {\"a.b\": {\"argv\": [\"x\"],\n \"timeoutMs\": \"soon\"}}}")
            .unwrap_err();
        assert_eq!(e.path, "commands.a.b.timeoutMs", "{e}");
        assert_eq!((e.line, e.column), (2, 2), "{e}");
    }

    #[test]
    fn a_key_with_brackets_is_located_as_one_key_at_once() {
        // Found by the config fuzz target: a key read as `listen` and a
        // huge index made the locator step over the array's end for ever.
        let e = parse("{\"listen\": [],\n \"listen[99999999999][8[e\": 1}").unwrap_err();
        assert_eq!(e.path, "listen[99999999999][8[e", "{e}");
        assert_eq!((e.line, e.column), (2, 2), "{e}");
        assert!(e.message.contains("unknown key"), "{e}");
        // A key spelled as a path to an element is found as the key.
        let e = parse("{\"listen\": [\"stdio\", \"stdio\"],\n \"listen[1]\": 1}").unwrap_err();
        assert!(e.message.contains("unknown key"), "{e}");
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("listen[1]", 2, 2),
            "{e}"
        );
        // A tool named like an element of another is found under its name.
        let e = parse(
            "{\"commands\": {\"x\": {\"argv\": [\"a\"]}, \"x[1]\": {\"argv\": [\"b\"],\n \"timeoutMs\": 0}}}",
        )
        .unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("commands.x[1].timeoutMs", 2, 2),
            "{e}"
        );
    }

    #[test]
    fn environment_names_and_origins_are_checked() {
        for env in [
            r#"{"": "x"}"#,
            r#"{"A=B": "x"}"#,
            r#"{"A\u0000": "x"}"#,
            r#"{"A": "\u0000"}"#,
        ] {
            let text = format!(r#"{{"commands": {{"t": {{"argv": ["x"], "env": {env}}}}}}}"#);
            let e = parse(&text).unwrap_err();
            assert!(e.path.starts_with("commands.t.env"), "{env}: {e}");
        }
        assert!(parse(r#"{"commands": {"t": {"argv": ["x"], "env": {"LANG": "C"}}}}"#).is_ok());
        for origin in [
            "https://app.example.com/",
            "*",
            "app.example.com",
            "https://a/b",
        ] {
            let text = format!(r#"{{"http": {{"allowedOrigins": ["{origin}"]}}}}"#);
            let e = parse(&text).unwrap_err();
            assert_eq!(e.path, "http.allowedOrigins[0]", "{origin}: {e}");
        }
        let ok = parse(r#"{"http": {"allowedOrigins": ["https://app.example.com:8443"]}}"#);
        assert!(ok.is_ok());
    }

    #[test]
    fn allowed_hosts_are_host_names_or_addresses_with_or_without_a_port() {
        for bad in [
            "https://mcp.example.com",
            "*.example.com",
            "::1",
            "mcp.example.com/mcp",
            "example.com:",
            "example.com:99999",
            "[::1",
            "[nope]:80",
            "[::1]junk",
            "",
        ] {
            let text = format!(r#"{{"http": {{"allowedHosts": ["localhost", "{bad}"]}}}}"#);
            let e = parse(&text).unwrap_err();
            assert_eq!(e.path, "http.allowedHosts[1]", "{bad}: {e}");
        }
        for good in [
            "mcp.example.com",
            "mcp.example.com:8808",
            "[::1]",
            "[::1]:8808",
            "10.0.0.1:80",
            " localhost ",
        ] {
            let text = format!(r#"{{"http": {{"allowedHosts": ["{good}"]}}}}"#);
            assert!(parse(&text).is_ok(), "{good}");
        }
    }

    /// What reaches the system holds no NUL, `envAllow` takes names as
    /// `env` does, and every placeholder is a required argument: each is
    /// refused at its entry when the file is read, not at a call.
    #[test]
    fn what_a_command_runs_with_is_checked_when_the_file_is_read() {
        let schema =
            r#"{"type": "object", "properties": {"p": {"type": "string"}}, "required": ["p"]}"#;
        for (tool, at, says) in [
            (r#"{"argv": ["x", "a\u0000"]}"#, "commands.t.argv[1]", "NUL"),
            (
                r#"{"argv": ["x"], "cwd": "/tmp\u0000"}"#,
                "commands.t.cwd",
                "NUL",
            ),
            (
                r#"{"argv": ["x"], "envAllow": ["HOME", "LC_ALL=C"]}"#,
                "commands.t.envAllow[1]",
                "environment variable name",
            ),
            (
                r#"{"argv": ["x"], "envAllow": [""]}"#,
                "commands.t.envAllow[0]",
                "environment variable name",
            ),
            (
                r#"{"argv": ["find", ".", "-exec", "ls", "{}", ";"]}"#,
                "commands.t.argv[4]",
                "{{}}",
            ),
            (
                r#"{"argv": ["du", "--", "{path}"]}"#,
                "commands.t.argv[2]",
                "inputSchema.required",
            ),
            (
                &format!(r#"{{"argv": ["x", "--p={{p}}", "{{q}}"], "inputSchema": {schema}}}"#),
                "commands.t.argv[2]",
                "\"q\"",
            ),
        ] {
            let text = format!(r#"{{"commands": {{"t": {tool}}}}}"#);
            let e = parse(&text).unwrap_err();
            assert_eq!(e.path, at, "{tool}: {e}");
            assert!(e.message.contains(says), "{tool}: {e}");
        }
        let ok = format!(
            r#"{{"commands": {{"t": {{"argv": ["x", "--p={{p}}", "{{{{lit}}}}"], "envAllow": ["HOME"], "inputSchema": {schema}}}}}}}"#
        );
        assert!(parse(&ok).is_ok(), "{ok}");
        #[cfg(feature = "client")]
        for (server, at) in [
            (r#"{"command": "a\u0000"}"#, "mcpServers.s.command"),
            (
                r#"{"command": "a", "args": ["-y", "b\u0000"]}"#,
                "mcpServers.s.args[1]",
            ),
            (r#"{"command": "a", "cwd": "\u0000"}"#, "mcpServers.s.cwd"),
        ] {
            let text = format!(r#"{{"mcpServers": {{"s": {server}}}}}"#);
            let e = parse(&text).unwrap_err();
            assert_eq!(e.path, at, "{server}: {e}");
        }
    }

    #[test]
    fn an_origin_a_header_and_a_namespace_are_located_at_their_entry() {
        let e =
            parse("{\"http\": {\"allowedOrigins\": [\"https://a.example\",\n \"https://b/\"]}}")
                .unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("http.allowedOrigins[1]", 2, 2),
            "{e}"
        );
        #[cfg(all(feature = "http", feature = "client"))]
        {
            let e = parse(
                "{\"mcpServers\": {\"a\": {\"url\": \"http://h/\", \"headers\": {\"A\": \"1\",\n \"Host\": \"v\"}}}}",
            )
            .unwrap_err();
            assert_eq!(
                (e.path.as_str(), e.line, e.column),
                ("mcpServers.a.headers.Host", 2, 2),
                "{e}"
            );
        }
        // Too long for maxNameLength 16 (at most 6): at the namespace
        // when it is set, else at the upstream it is named after.
        let e = parse(
            "{\"maxNameLength\": 16, \"mcpServers\": {\"a\": {\"command\": \"x\",\n \"namespace\": \"abcdefgh\"}}}",
        )
        .unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("mcpServers.a.namespace", 2, 2),
            "{e}"
        );
        let e = parse(
            "{\"maxNameLength\": 16, \"mcpServers\": {\n \"abcdefgh\": {\"command\": \"x\"}}}",
        )
        .unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("mcpServers.abcdefgh", 2, 2),
            "{e}"
        );
    }

    #[test]
    fn a_skills_directory_named_twice_is_refused() {
        let e = parse(r#"{"skills": ["/srv/skills", "/srv/other", "/srv/skills"]}"#).unwrap_err();
        assert_eq!(e.path, "skills[2]", "{e}");
        assert!(e.to_string().contains("named twice"), "{e}");
    }

    #[test]
    fn status_reads_only_the_control_key() {
        let dir = std::env::temp_dir().join(format!("mcpvisor-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.json");
        let write = |text: &str| std::fs::write(&file, text).unwrap();
        // The rest is neither checked nor expanded: an unknown key, a
        // variable set only where the daemon runs.
        write(
            r#"{"control": "/run/x/ctl", "bogus": 1, "commands": {"a": {"argv": ["${NOT_SET_HERE_4711}"]}}}"#,
        );
        assert_eq!(
            Config::control_of(&file).unwrap(),
            Some(PathBuf::from("/run/x/ctl"))
        );
        write(r#"{"listen": []}"#);
        assert_eq!(Config::control_of(&file).unwrap(), None);
        write(r#"{"control": 5}"#);
        assert!(Config::control_of(&file)
            .unwrap_err()
            .contains("control: expected a string"));
        write(r#"{"control": "${NOT_SET_HERE_4711}/ctl"}"#);
        assert!(Config::control_of(&file)
            .unwrap_err()
            .contains("NOT_SET_HERE_4711"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_full_file_reads_with_defaults_and_variables() {
        let c = parse(
            r#"{
  "listen": ["http://127.0.0.1:0/mcp", "stdio"],
  "commands": {
    "disk": {"description": "usage", "argv": ["du", "-sh", "{path}"], "cwd": "${HOME_DIR}",
             "env": {"LANG": "${LANG:-C}"}, "timeoutMs": 5000,
             "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                             "required": ["path"]}}
  },
  "http": {"maxSessions": 10, "allowedOrigins": ["https://app.example"]},
  "logLevel": "debug"
}"#,
        )
        .unwrap();
        assert_eq!(c.listen.len(), 2);
        let disk = &c.commands["disk"];
        assert_eq!(disk.cwd.as_deref(), Some(Path::new("/home/u")));
        assert_eq!(disk.env["LANG"], "C");
        assert_eq!(disk.timeout, Duration::from_secs(5));
        assert_eq!(disk.max_output_bytes, DEFAULT_MAX_OUTPUT_BYTES);
        assert_eq!(c.http.max_sessions, Some(10));
        assert_eq!(c.log_level.as_deref(), Some("debug"));
        assert!(
            parse("{}").unwrap().commands.is_empty(),
            "nothing configured is fine"
        );
    }

    #[test]
    fn errors_name_the_line_column_and_key_path() {
        let e = parse(
            "{\n  \"commands\": {\n    \"disk\": {\"argv\": [\"du\"], \"timeoutMs\": -1}\n  }\n}",
        )
        .unwrap_err();
        assert_eq!(e.path, "commands.disk.timeoutMs");
        assert_eq!((e.line, e.column), (3, 30), "{e}");
        assert_eq!(
            e.to_string(),
            "t.json:3:30: commands.disk.timeoutMs: expected a positive integer"
        );
        let e = parse("{\"listne\": []}").unwrap_err();
        assert_eq!((e.path.as_str(), e.line, e.column), ("listne", 1, 2));
        assert!(e.message.contains("unknown key"), "{e}");
        let e = parse("{\"listen\": [\"stdio\", \"ftp://x\"]}").unwrap_err();
        assert_eq!((e.path.as_str(), e.column), ("listen[1]", 22), "{e}");
        let e =
            parse("{\"commands\": {\"x\": {\"argv\": [\"a\"], \"env\": {\"K\": \"${NOPE}\"}}}}")
                .unwrap_err();
        assert!(e.message.contains("NOPE is not set"), "{e}");
        let e = parse("{\n  \"listen\": [,]\n}").unwrap_err();
        assert_eq!((e.line, e.path.as_str()), (2, ""), "{e}");
        assert!(e.message.starts_with("not valid JSON"), "{e}");
        let e = parse("{\"commands\": {\"x\": {}}}").unwrap_err();
        assert!(e.message.contains("argv"), "{e}");
        let e = parse("{\"listen\": [{\"a\": 1}, {\"b\": [1, {\"c\": 2, \"c\": 3}]}],\n \"x\": 1}")
            .unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("listen[1].b[1].c", 1, 42),
            "{e}"
        );
        assert!(e.message.contains("duplicate key"), "{e}");
        let e = parse("{\"logLevel\": \"info\",\n  \"log\\u004cevel\": \"debug\"}").unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.line, e.column),
            ("logLevel", 2, 3),
            "{e}"
        );
    }

    #[test]
    fn tasks_keys() {
        let c = parse(
            r#"{"tasks": {"ttlMs": 1000, "pollIntervalMs": 100, "maxTasks": 8, "maxRunning": 2, "maxPerClient": 3}}"#,
        )
        .unwrap();
        let t = c.tasks;
        assert_eq!(
            (t.ttl, t.poll_interval),
            (Duration::from_secs(1), Duration::from_millis(100))
        );
        assert_eq!((t.max_tasks, t.max_running, t.max_per_owner), (8, 2, 3));
        assert!(parse(r#"{"tasks": {"maxPerClient": 0}}"#).is_err());
    }

    #[test]
    fn amqp_supervision_and_the_daemon_s_own_keys() {
        let c = parse(
            r#"{
  "amqp": {"exchange": "tools", "prefetch": 8, "heartbeatSecs": 30, "maxSessions": 5,
           "maxMessageBytes": 4096, "maxPublishBytes": 8192, "sessionIdleTimeoutMs": 1000},
  "supervision": {"root": {"intensity": 0}, "listeners": {"periodMs": 60000}},
  "shutdownTimeoutMs": 2500, "control": "${HOME_DIR}/ctl", "metrics": "9100"
}"#,
        )
        .unwrap();
        assert_eq!(c.amqp.exchange.as_deref(), Some("tools"));
        assert_eq!(
            (c.amqp.prefetch, c.amqp.heartbeat_secs),
            (Some(8), Some(30))
        );
        assert_eq!(c.amqp.session_idle_timeout, Some(Duration::from_secs(1)));
        assert_eq!(
            (c.amqp.max_message_bytes, c.amqp.max_publish_bytes),
            (Some(4096), Some(8192))
        );
        assert_eq!(c.supervision.root.intensity, 0);
        assert_eq!(c.supervision.root.period, DEFAULT_ROOT_PERIOD);
        let l = c.supervision.listeners.unwrap();
        assert_eq!((l.intensity, l.period), (10, Duration::from_secs(60)));
        assert_eq!(c.shutdown_timeout, Duration::from_millis(2500));
        assert_eq!(c.control.as_deref(), Some(Path::new("/home/u/ctl")));
        assert_eq!(c.metrics.as_deref(), Some("9100"));
        let d = parse("{}").unwrap();
        assert_eq!(d.shutdown_timeout, DEFAULT_SHUTDOWN_TIMEOUT);
        assert_eq!(d.supervision.listeners, None);
        for (text, path) in [
            (r#"{"amqp": {"prefetch": 70000}}"#, "amqp.prefetch"),
            (r#"{"amqp": {"exchnage": "x"}}"#, "amqp.exchnage"),
            (
                r#"{"supervision": {"root": {"intensity": -1}}}"#,
                "supervision.root.intensity",
            ),
            (r#"{"supervision": {"leaves": {}}}"#, "supervision.leaves"),
            (r#"{"metrics": "no where"}"#, "metrics"),
            (r#"{"shutdownTimeoutMs": 0}"#, "shutdownTimeoutMs"),
        ] {
            assert_eq!(parse(text).unwrap_err().path, path, "{text}");
        }
    }

    #[test]
    fn upstreams_in_the_shape_clients_keep_them() {
        let c = parse(
            r#"{"mcpServers": {
  "files": {"command": "npx", "args": ["-y", "server-fs", "${HOME_DIR}"], "env": {"A": "1"}},
  "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "enabled": false},
  "odd.name": {"command": "x", "namespace": "odd", "tools": {"allow": ["read_*"], "deny": ["read_secret"]},
               "timeoutMs": 5000, "maxTotalTimeoutMs": 60000, "restart": {"intensity": 2, "backoffMs": 100}}
}}"#,
        )
        .unwrap();
        let f = &c.upstreams["files"];
        assert_eq!(f.namespace, "files");
        assert!(
            matches!(&f.transport, UpstreamTransport::Stdio { args, env, .. }
            if args[2] == "/home/u" && env["A"] == "1")
        );
        assert!(!c.upstreams["web"].enabled);
        let o = &c.upstreams["odd.name"];
        assert_eq!(o.namespace, "odd");
        assert_eq!(o.allow.as_deref(), Some(&["read_*".to_owned()][..]));
        assert_eq!(
            (o.restart.intensity, o.restart.period),
            (2, DEFAULT_UPSTREAM_PERIOD)
        );
        assert_eq!(o.backoff, Duration::from_millis(100));
        assert_eq!(o.timeout, Duration::from_secs(5));
        assert_eq!(o.max_total_timeout, Some(Duration::from_secs(60)));
        assert_eq!(f.max_total_timeout, None);
        let p = parse(
            r#"{"mcpServers": {"b": {"command": "x", "perSession": true, "maxSessions": 3}}}"#,
        )
        .unwrap();
        assert!(p.upstreams["b"].per_session && p.upstreams["b"].max_sessions == 3);
        assert!(!f.per_session && f.max_sessions == DEFAULT_MAX_SESSIONS);
        assert_eq!(f.protocol, UpstreamProtocol::Auto);
        let p =
            parse(r#"{"mcpServers": {"s": {"command": "x", "protocol": "stateless"}}}"#).unwrap();
        assert_eq!(p.upstreams["s"].protocol, UpstreamProtocol::Stateless);
        for (text, path) in [
            (
                r#"{"mcpServers": {"a": {"command": "x", "protocol": "2026-07-28"}}}"#,
                "mcpServers.a.protocol",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "maxSessions": 2}}}"#,
                "mcpServers.a.maxSessions",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "perSession": 1}}}"#,
                "mcpServers.a.perSession",
            ),
            (r#"{"mcpServers": {"a": {}}}"#, "mcpServers.a"),
            (
                r#"{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}"#,
                "mcpServers.a",
            ),
            (
                r#"{"mcpServers": {"a.b": {"command": "x"}}}"#,
                "mcpServers.a.b",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "ftp://h/"}}}"#,
                "mcpServers.a.url",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "http://h/", "type": "sse"}}}"#,
                "mcpServers.a.type",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "comand": "y"}}}"#,
                "mcpServers.a.comand",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "headers": {}}}}"#,
                "mcpServers.a.headers",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x"}, "b": {"command": "y", "namespace": "a"}}}"#,
                "mcpServers.b.namespace",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "namespace": "b"}, "b": {"command": "y"}}}"#,
                "mcpServers.b",
            ),
            (
                r#"{"commands": {"a__x": {"argv": ["x"]}}, "mcpServers": {"a": {"command": "x"}}}"#,
                "commands.a__x",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err().path, path, "{text}");
        }
        // Header names are checked where the HTTP client is built in.
        #[cfg(all(feature = "http", feature = "client"))]
        assert_eq!(
            parse(r#"{"mcpServers": {"a": {"url": "http://h/", "headers": {"Bad Name": "v"}}}}"#)
                .unwrap_err()
                .path,
            "mcpServers.a.headers.Bad Name"
        );
    }

    #[test]
    fn expansion_rules() {
        let env = |n: &str| match n {
            "A" => Some("1".to_owned()),
            "EMPTY" => Some(String::new()),
            _ => None,
        };
        assert_eq!(expand("x${A}y", &env).unwrap(), "x1y");
        assert_eq!(expand("${B:-d}", &env).unwrap(), "d");
        assert_eq!(expand("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand("$$A $5", &env).unwrap(), "$A $5");
        assert!(expand("${B}", &env).is_err());
        assert!(expand("${A", &env).is_err());
    }
}
