//! The `mcpvisor` daemon: the configuration and its flags, the
//! supervision tree (root → listeners, control socket, metrics), reload on
//! SIGHUP, a draining stop on SIGTERM, sd_notify(3) and exit status
//! (sysexits(3)).

use super::command::Runs;
use super::config::{Config, DEFAULT_CONFIG_PATH, DEFAULT_LISTEN};
use super::flags::{Flags, USAGE};
use super::listeners::{self, Active, Planned};
use super::metrics::Metrics;
use super::notify::Notifier;
use super::state::{State, COMMANDS_SOURCE};
use crate::protocol::{EngineOptions, Source};
use crate::serve::ListenOptions;
use crate::server::{Server, SkillsDir, DEFAULT_SKILLS_POLL_INTERVAL};
use crate::sync::lock;
use crate::transport::listen::redact;
use crossbeam_channel::{Receiver, Sender};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use supervisor::{ChildSpec, Strategy, Supervisor, SupervisorError, SupervisorSpec};

/// Exit status: clean.
pub const EXIT_OK: u8 = 0;
/// Exit status: bad flags (EX_USAGE).
pub const EXIT_USAGE: u8 = 64;
/// Exit status: the supervision tree gave up (EX_SOFTWARE).
pub const EXIT_SOFTWARE: u8 = 70;
/// Exit status: a listener could not be started, e.g. its address is in use (EX_OSERR).
pub const EXIT_LISTENER: u8 = 71;
/// Exit status: the configuration is invalid (EX_CONFIG).
pub const EXIT_CONFIG: u8 = 78;

/// How long READY waits for the `required` upstreams to serve.
pub const REQUIRED_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Runs the daemon (or `mcpvisor status`); returns its exit status.
pub fn run(args: impl IntoIterator<Item = String>) -> u8 {
    let flags = match Flags::parse(args) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mcpvisor: {e}\n{USAGE}");
            return EXIT_USAGE;
        }
    };
    if flags.version {
        println!("mcpvisor {}", env!("CARGO_PKG_VERSION"));
        return EXIT_OK;
    }
    if flags.help {
        println!("{USAGE}");
        return EXIT_OK;
    }
    if let Some(json) = flags.status {
        // --control, else the control key of the file the daemon would
        // read, else the default.
        let file = match config_path(&flags) {
            Some(p) if flags.control.is_none() => match Config::control_of(&p) {
                Ok(c) => c,
                Err(e) => {
                    fatal(&e);
                    return EXIT_CONFIG;
                }
            },
            _ => None,
        };
        let path = super::control::client_path(flags.control.as_deref().or(file.as_deref()));
        return super::control::status(&path, json);
    }
    // Before any thread starts: the variables are removed, and an
    // inherited socket must not leak into a command's process.
    let inherited = match super::activation::take() {
        Ok(i) => i,
        Err(e) => {
            fatal(&format!("socket activation: {e}"));
            return EXIT_CONFIG;
        }
    };
    let path = config_path(&flags);
    let activated = !inherited.is_empty();
    let config = match effective(&path, &flags, activated) {
        Ok(c) => c,
        Err(e) => {
            fatal(&e);
            return EXIT_CONFIG;
        }
    };
    // Blocked signals are inherited, so only the signal thread gets them:
    // block them before any other thread (handler pool, AMQP) starts.
    let signals = match super::signals::Signals::block() {
        Ok(s) => s,
        Err(e) => {
            fatal(&format!("cannot handle signals: {e}"));
            return EXIT_SOFTWARE;
        }
    };
    // Its warnings (skills left out, say) are seen with --check-config too.
    super::journal::init(level(&flags, &config));
    // Everything the file implies (tool schemas, the token file) is checked
    // here, for --check-config too.
    let runs = Arc::new(Runs::default());
    let prepared = prepare(&config, &runs).and_then(|(server, options)| {
        let planned = listeners::plan(&config.listen, inherited)?;
        Ok((server, options, planned))
    });
    let (server, options, planned) = match prepared {
        Ok(p) => p,
        Err(e) => {
            match &path {
                Some(p) => fatal(&format!("{}: {e}", p.display())),
                None => fatal(&e),
            }
            return EXIT_CONFIG;
        }
    };
    if flags.check {
        println!(
            "{}: valid ({} listener(s), {} command tool(s))",
            path.as_deref()
                .map_or("(no file)".into(), |p| p.display().to_string()),
            planned.len(),
            config.commands.len(),
        );
        return EXIT_OK;
    }
    let notifier = match Notifier::from_env() {
        Ok(n) => n,
        Err(e) => {
            fatal(&format!("NOTIFY_SOCKET: {e}"));
            return EXIT_SOFTWARE;
        }
    };
    let metrics = Arc::new(Metrics::default());
    server.engine().observe(metrics.clone());
    let state = Arc::new(State::new(server, runs, metrics));
    let daemon = Daemon {
        flags,
        file: path,
        config,
        options,
        state,
        notifier,
        stdin_done: crossbeam_channel::bounded(1),
        metrics_url: None,
        #[cfg(feature = "client")]
        sources: Arc::default(),
    };
    daemon.serve(planned, signals)
}

/// `--config`, else the default file unless it surely does not exist
/// (one that cannot be looked at is read, to fail with why).
fn config_path(flags: &Flags) -> Option<PathBuf> {
    flags.config.clone().or_else(|| {
        let default = PathBuf::from(DEFAULT_CONFIG_PATH);
        (default.try_exists().ok() != Some(false)).then_some(default)
    })
}

/// Reports a fatal error on stderr: with its syslog priority when
/// stderr is the journal (the logger may not run yet).
fn fatal(message: &str) {
    eprintln!("{}mcpvisor: {message}", super::journal::error_prefix());
}

/// The file (if any) with the flags over it and the defaults filled in;
/// with sockets from the service manager (`activated`) no listener is
/// added by default.
fn effective(path: &Option<PathBuf>, flags: &Flags, activated: bool) -> Result<Config, String> {
    let mut config = match path {
        Some(p) => Config::load(p).map_err(|e| e.to_string())?,
        None => Config::default(),
    };
    if !flags.listen.is_empty() {
        config.listen = flags.listen.clone();
    }
    if config.listen.is_empty() && !activated {
        config.listen = vec![DEFAULT_LISTEN.to_owned()];
    }
    config.control =
        super::control::daemon_path(flags.control.as_deref(), config.control.as_deref());
    if flags.metrics.is_some() {
        config.metrics = flags.metrics.clone();
    }
    listeners::clash(&config.listen).map_err(|e| match path {
        Some(p) => format!("{}: {e}", p.display()),
        None => e,
    })?;
    Ok(config)
}

fn level<'a>(flags: &'a Flags, config: &'a Config) -> &'a str {
    flags
        .log_level
        .as_deref()
        .or(config.log_level.as_deref())
        .unwrap_or("info")
}

/// The server, with the command tools as the [`COMMANDS_SOURCE`], and the
/// listeners' options.
fn prepare(config: &Config, runs: &Arc<Runs>) -> Result<(Server, ListenOptions), String> {
    let mut engine = EngineOptions::default();
    if let Some(n) = config.handler_threads {
        engine.pool_threads = n;
    }
    if let Some(n) = config.max_inflight_per_session {
        engine.max_inflight_per_session = n;
    }
    engine.tasks = config.tasks.clone();
    let options = listen_options(config)?;
    let source = commands(config, runs)?;
    // Upstreams come and go after a session began (a reload may add the
    // first), and a session is told only of changes to what its
    // initialize declared: the daemon declares every kind an upstream may
    // bring, so that their list_changed reach every session.
    let mut builder = Server::builder("mcpvisor", env!("CARGO_PKG_VERSION"))
        .options(engine)
        .enable_tools()
        .enable_resources()
        .enable_prompts()
        .enable_completions();
    for dir in &config.skills {
        builder = builder.skills_dir(dir);
    }
    let server = builder.build().map_err(|e| e.to_string())?;
    server
        .replace_source(COMMANDS_SOURCE, source)
        .map_err(|e| e.to_string())?;
    Ok((server, options))
}

/// The command tools as one catalog source (their schemas compiled).
fn commands(config: &Config, runs: &Arc<Runs>) -> Result<Source, String> {
    let mut source = Source::new();
    for (name, tool) in &config.commands {
        let entry = tool
            .clone()
            .into_tool(runs.clone())
            .into_entry()
            .map_err(|e| format!("commands.{name}: {e}"))?;
        source = source.tool(entry);
    }
    Ok(source)
}

struct Daemon {
    flags: Flags,
    // The configuration file read at the start, if any: a reload reads it
    // again (and is refused if it is gone), never falls back to defaults.
    file: Option<PathBuf>,
    // As applied: what a reload does not change keeps its running value.
    config: Config,
    options: ListenOptions,
    state: Arc<State>,
    notifier: Notifier,
    // Told when a stdio listener's input ends: the daemon then stops.
    stdin_done: (Sender<()>, Receiver<()>),
    metrics_url: Option<String>,
    // Who may change each upstream's catalog source.
    #[cfg(feature = "client")]
    sources: Arc<super::gateway::upstream::Sources>,
}

/// Tells the user where the daemon serves: on stdout, unless a stdio
/// listener carries MCP there (then on stderr). A reader that went away
/// is no reason to stop.
fn say(line: &str, urls: &[String]) {
    use std::io::Write;
    if urls.iter().any(|u| u == "stdio") {
        let _ = writeln!(std::io::stderr(), "{line}");
    } else {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
    }
}

impl Daemon {
    fn serve(mut self, planned: Vec<Planned>, signals: super::signals::Signals) -> u8 {
        let state = self.state.clone();
        let r = self.config.supervision.root;
        let watched = state.clone();
        let mut root = SupervisorSpec::new("mcpvisor", Strategy::OneForOne)
            .intensity(r.intensity, r.period)
            .on_event(move |e| watched.event(e))
            .child(self.state.server.engine().task_sweeper());
        for dir in &self.config.skills {
            let engine = self.state.server.engine();
            root = root.child(SkillsDir::new(dir).watcher(engine, DEFAULT_SKILLS_POLL_INTERVAL));
        }
        // Upstreams first: they stop after the listeners that reach them.
        match self.upstreams(&self.config) {
            Ok(children) => root = children.into_iter().fold(root, SupervisorSpec::child),
            Err(e) => {
                fatal(&e);
                return EXIT_CONFIG;
            }
        }
        let mut active = Vec::new();
        for p in planned {
            match self.listener(p, &self.config, &self.options) {
                Ok((spec, a)) => {
                    root = root.child(spec);
                    active.push(a);
                }
                Err(e) => {
                    fatal(&e);
                    return EXIT_LISTENER;
                }
            }
        }
        match self.services() {
            Ok(children) => root = children.into_iter().fold(root, SupervisorSpec::child),
            Err(e) => {
                fatal(&e);
                return EXIT_LISTENER;
            }
        }
        let urls: Vec<String> = active.iter().map(Active::url).collect();
        *lock(&state.listeners) = active;
        let tools = state.tool_count();
        if tools == 0 {
            log::info!("no command tools configured: serving an empty catalog");
        } else {
            log::info!("serving {tools} command tool(s)");
        }
        let root = match Supervisor::start(root) {
            Ok(r) => r,
            Err(e) => {
                fatal(&e.to_string());
                return EXIT_LISTENER;
            }
        };
        let handle = root.handle();
        let _ = state.root.set(handle.clone());
        let (ended_tx, ended) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let _ = ended_tx.send(root.wait());
        });
        let received = signals.receiver().clone();
        // READY waits for the required upstreams to serve; a stop asked
        // meanwhile stops, a reload asked meanwhile follows READY.
        let mut reload_after_ready = false;
        match self.await_required(&received, &mut reload_after_ready) {
            Ok(false) => {}
            Ok(true) => return self.stop("asked to stop while starting", &ended),
            Err(e) => {
                log::error!("{e}");
                let _ = handle.shutdown();
                let _ = ended.recv();
                self.state.runs.kill_all();
                return EXIT_SOFTWARE;
            }
        }
        for url in urls.iter().filter(|u| *u != "stdio") {
            say(&format!("listening on {url}"), &urls);
        }
        if let Some(m) = &self.metrics_url {
            say(&format!("metrics at {m}"), &urls);
        }
        // Every listener is bound (its socket accepts) and the tree runs.
        let _ = self.notifier.notify(&format!(
            "READY=1\nSTATUS={}\nMAINPID={}",
            self.status_line(),
            std::process::id()
        ));
        let _watchdog = super::notify::watchdog(handle.clone());
        if reload_after_ready {
            self.reload();
        }
        let stdin_ended = self.stdin_done.1.clone();
        loop {
            crossbeam_channel::select! {
                recv(ended) -> result => {
                    let status = gave_up(result);
                    self.state.runs.kill_all();
                    return status;
                }
                recv(stdin_ended) -> _ => return self.stop("stdin ended", &ended),
                recv(self.state.fatal.1) -> why => {
                    log::error!("{}; stopping", why.unwrap_or_default());
                    self.stop("a required upstream failed", &ended);
                    return EXIT_SOFTWARE;
                }
                recv(received) -> signal => match signal {
                    Ok(libc::SIGHUP) => self.reload(),
                    _ => return self.stop("asked to stop", &ended),
                },
            }
        }
    }

    /// One listener's child spec, with `config`'s intensity and `options`.
    fn listener(
        &self,
        p: Planned,
        config: &Config,
        options: &ListenOptions,
    ) -> Result<(ChildSpec, Active), String> {
        listeners::start(
            &self.state.server,
            p,
            options,
            config.supervision.listeners,
            &self.stdin_done.0,
        )
    }

    /// Waits until every required upstream serves; an error when one
    /// fails for good first, or one is not served within
    /// [`REQUIRED_START_TIMEOUT`]. `Ok(true)` when a signal asked to stop
    /// meanwhile; a `SIGHUP` meanwhile sets `reload_later`.
    fn await_required(
        &self,
        signals: &Receiver<libc::c_int>,
        reload_later: &mut bool,
    ) -> Result<bool, String> {
        let required: Vec<String> = self
            .config
            .upstreams
            .values()
            .filter(|u| u.enabled && u.required)
            .map(|u| u.name.clone())
            .collect();
        *lock(&self.state.required) = required.iter().cloned().collect();
        *lock(&self.state.upstreams) = enabled_upstreams(&self.config);
        #[cfg(feature = "client")]
        {
            let deadline = std::time::Instant::now() + REQUIRED_START_TIMEOUT;
            let engine = self.state.server.engine();
            loop {
                let waiting: Vec<&String> = required
                    .iter()
                    .filter(|n| {
                        engine
                            .source(&super::gateway::upstream::source_id(n))
                            .is_none()
                    })
                    .collect();
                if waiting.is_empty() {
                    return Ok(false);
                }
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(format!(
                        "required upstream(s) not serving after {REQUIRED_START_TIMEOUT:?}: {waiting:?}"
                    ));
                }
                // A failure or a signal wakes this at once; serving is
                // looked at again soon.
                crossbeam_channel::select! {
                    recv(self.state.fatal.1) -> why => return Err(why.unwrap_or_default()),
                    recv(signals) -> signal => match signal {
                        Ok(libc::SIGHUP) => *reload_later = true,
                        _ => return Ok(true),
                    },
                    default(left.min(std::time::Duration::from_millis(20))) => {}
                }
            }
        }
        #[cfg(not(feature = "client"))]
        {
            let _ = (signals, reload_later);
            Ok(false)
        }
    }

    /// A subtree per enabled upstream of `config`.
    fn upstreams(&self, config: &Config) -> Result<Vec<ChildSpec>, String> {
        let enabled = config.upstreams.values().filter(|u| u.enabled);
        #[cfg(feature = "client")]
        {
            Ok(enabled
                .map(|u| {
                    super::gateway::upstream::child(
                        u,
                        &self.state.server,
                        &self.sources,
                        config.max_name_length,
                    )
                })
                .collect())
        }
        #[cfg(not(feature = "client"))]
        match enabled.count() {
            0 => Ok(Vec::new()),
            _ => Err("mcpServers: this build has no client (the gateway needs it)".into()),
        }
    }

    /// The control socket and the metrics listener, as configured.
    fn services(&mut self) -> Result<Vec<ChildSpec>, String> {
        let mut out = Vec::new();
        if let Some(path) = &self.config.control {
            let socket = super::control::bind(path)?;
            log::info!("control socket at {}", path.display());
            out.push(super::control::child(
                socket,
                path.clone(),
                self.state.clone(),
            ));
        }
        if let Some(addr) = &self.config.metrics {
            let addr = super::config::metrics_addr(addr)?;
            let socket = std::net::TcpListener::bind(addr)
                .map_err(|e| format!("metrics listener {addr}: {e}"))?;
            let bound = socket.local_addr().map_err(|e| e.to_string())?;
            self.metrics_url = Some(format!("http://{bound}/metrics"));
            out.push(super::metrics::child(socket, self.state.clone()));
        }
        Ok(out)
    }

    /// What `STATUS=` says: listeners, tools and sessions.
    fn status_line(&self) -> String {
        let listeners = lock(&self.state.listeners);
        let urls: Vec<String> = listeners.iter().map(Active::url).collect();
        let sessions: usize = listeners
            .iter()
            .filter_map(|l| l.listener.session_count())
            .sum();
        let upstreams = self.state.upstream_states();
        let serving = upstreams.iter().filter(|u| u.1 == "serving").count();
        let failed = upstreams.iter().filter(|u| u.1 == "failed").count();
        let gateway = match upstreams.len() {
            0 => String::new(),
            n => format!("; {serving} of {n} upstream(s) serving, {failed} failed"),
        };
        format!(
            "serving {} command tool(s) on {}; {sessions} session(s){gateway}",
            self.state.tool_count(),
            urls.join(", ")
        )
    }

    /// SIGHUP: read the file again and apply what changed, or keep
    /// everything as it is and say why.
    fn reload(&mut self) {
        let _ = self.notifier.notify(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}\nSTATUS=reloading",
            super::notify::monotonic_usec()
        ));
        match self.apply_reload() {
            Ok(summary) => {
                lock(&self.state.reloads).0 += 1;
                log::info!("reloaded: {summary}");
            }
            Err(e) => {
                lock(&self.state.reloads).1 += 1;
                log::error!("reload refused, still running on the previous configuration: {e}");
            }
        }
        let _ = self
            .notifier
            .notify(&format!("READY=1\nSTATUS={}", self.status_line()));
    }

    fn apply_reload(&mut self) -> Result<String, String> {
        let activated = lock(&self.state.listeners).iter().any(|a| a.inherited);
        // The file read at the start, or the default one if it has been
        // created since a start without one.
        let file = self.file.clone().or_else(|| config_path(&self.flags));
        let mut config = effective(&file, &self.flags, activated)?;
        self.file = file;
        let source = commands(&config, &self.state.runs)?;
        let options = listen_options(&config)?;
        let root = self
            .state
            .root
            .get()
            .ok_or("the supervision tree is not running")?
            .clone();
        // New listeners start first: if one cannot, those started are
        // stopped again and nothing else changes.
        let running: Vec<String> = lock(&self.state.listeners)
            .iter()
            .map(|a| a.key.clone())
            .collect();
        // stdio is the process's own input: a read of it cannot be stopped,
        // and one started now would end the daemon at once under a service
        // manager (its input is /dev/null). It changes at the next start.
        let stdio = "stdio".to_owned();
        if running.contains(&stdio) != config.listen.contains(&stdio) {
            log::warn!("changed listen (stdio): applies at the next start");
            if running.contains(&stdio) {
                config.listen.push(stdio);
            } else {
                config.listen.retain(|k| *k != stdio);
            }
        }
        // One that goes but holds the socket a new one needs (its path or
        // scheme changed; or it was configured with port 0 and the new one
        // names the port it got) stops before it, and is started again if
        // the new ones cannot be. A new one on an inherited socket's
        // address takes that socket over (it could not bind it).
        // An inherited socket only to a listener on exactly its address, as
        // at the start (one on [::] is no loopback listener).
        let on_socket_of = |k: &str, a: &Active| match &a.socket {
            Some(socket) => listeners::bound_to(k, socket),
            None => listeners::same_socket(k, &a.key) || listeners::same_socket(k, &a.url()),
        };
        let displaced: Vec<Active> = {
            let mut listeners = lock(&self.state.listeners);
            let (going, staying): (Vec<Active>, Vec<Active>) =
                std::mem::take(&mut *listeners).into_iter().partition(|a| {
                    !config.listen.contains(&a.key)
                        && config
                            .listen
                            .iter()
                            .any(|k| !running.contains(k) && on_socket_of(k, a))
                });
            *listeners = staying;
            going
        };
        for a in &displaced {
            let _ = root.terminate_child(&a.id);
            let _ = root.delete_child(&a.id);
            log::info!("stopped {} to start a listener on its address", a.id);
        }
        let mut added: Vec<Active> = Vec::new();
        let undo = |added: &[Active]| {
            for a in added {
                let _ = root.terminate_child(&a.id);
                let _ = root.delete_child(&a.id);
            }
            self.restore(&root, &displaced);
        };
        for key in config.listen.iter().filter(|k| !running.contains(k)) {
            let socket = displaced
                .iter()
                .find(|a| on_socket_of(key, a))
                .and_then(Active::take_over);
            match self.start_listener(&root, key, socket, &config, &options) {
                Ok(a) => added.push(a),
                Err(e) => {
                    undo(&added);
                    return Err(e);
                }
            }
        }
        // Then the catalog, in one swap (one list_changed).
        let changes = match self.state.server.replace_source(COMMANDS_SOURCE, source) {
            Ok(c) => c,
            Err(e) => {
                undo(&added);
                return Err(e.to_string());
            }
        };
        // Then the listeners that are no longer configured stop.
        let mut removed: Vec<String> = displaced.iter().map(|a| a.id.clone()).collect();
        lock(&self.state.listeners).retain(|a| {
            let keep = a.inherited || config.listen.contains(&a.key);
            if !keep {
                removed.push(a.id.clone());
            }
            keep
        });
        for id in &removed[displaced.len()..] {
            let _ = root.terminate_child(id);
            let _ = root.delete_child(id);
            log::info!("stopped {id}");
        }
        // Those that run on take the new allow lists and tokens (a token
        // revoked in the token file stops working now).
        for a in lock(&self.state.listeners).iter() {
            a.listener.set_access(&options);
        }
        let urls: Vec<String> = added.iter().map(Active::url).collect();
        lock(&self.state.listeners).extend(added);
        // Upstreams last (nothing after can fail): unchanged ones run on
        // untouched; changed ones restart, removed ones stop, new ones and
        // failed ones start.
        let upstreams = self.reload_upstreams(&root, &config);
        *lock(&self.state.upstreams) = enabled_upstreams(&config);
        *lock(&self.state.required) = config
            .upstreams
            .values()
            .filter(|u| u.enabled && u.required)
            .map(|u| u.name.clone())
            .collect();
        super::journal::set_level(level(&self.flags, &config));
        let later = restart_only(&self.config, &config);
        if !later.is_empty() {
            log::warn!(
                "changed {}: applies at the next start; running on the previous value",
                later.join(", ")
            );
        }
        // What was not applied keeps its running value, so the next
        // reload compares against what runs.
        config.handler_threads = self.config.handler_threads;
        config.max_inflight_per_session = self.config.max_inflight_per_session;
        config.supervision.root = self.config.supervision.root;
        config.control = self.config.control.clone();
        config.skills = self.config.skills.clone();
        config.tasks = self.config.tasks.clone();
        config.metrics = self.config.metrics.clone();
        self.options = options;
        self.config = config;
        Ok(format!(
            "{upstreams}; {} command tool(s){}; {} listener(s) started{}, {} stopped",
            self.state.tool_count(),
            if changes.tools { ", list changed" } else { "" },
            urls.len(),
            if urls.is_empty() {
                String::new()
            } else {
                format!(" ({})", urls.join(", "))
            },
            removed.len()
        ))
    }

    /// Starts the listener `key` (a `listen` string) under `root`, on
    /// `socket` (an inherited one it takes over) or binding its address,
    /// with `config`'s intensity and `options`.
    fn start_listener(
        &self,
        root: &supervisor::SupervisorRef,
        key: &str,
        socket: Option<std::net::TcpListener>,
        config: &Config,
        options: &ListenOptions,
    ) -> Result<Active, String> {
        let mut planned = listeners::plan(&[key.to_owned()], Vec::new())?
            .pop()
            .ok_or_else(|| format!("{}: nothing to serve", redact(key)))?;
        planned.socket = socket;
        let (spec, active) = self.listener(planned, config, options)?;
        root.start_child(spec)
            .map(|()| active)
            .map_err(|e| format!("{}: cannot start: {e}", redact(key)))
    }

    /// Starts again the listeners a failed reload stopped to make room
    /// (with the configuration that runs on).
    fn restore(&self, root: &supervisor::SupervisorRef, stopped: &[Active]) {
        for old in stopped {
            let socket = old.take_over();
            match self.start_listener(root, &old.rebound(), socket, &self.config, &self.options) {
                // Still the configured listener it was.
                Ok(a) => lock(&self.state.listeners).push(Active {
                    key: old.key.clone(),
                    ..a
                }),
                Err(e) => log::error!("{} is not served any more: {e}", redact(&old.key)),
            }
        }
    }

    /// Applies the difference between the running upstreams and
    /// `config`'s; says what changed. An upstream that failed for good is
    /// started again.
    fn reload_upstreams(&self, root: &supervisor::SupervisorRef, config: &Config) -> String {
        let (old, new) = (&self.config.upstreams, &config.upstreams);
        let same_names = config.max_name_length == self.config.max_name_length;
        let failed: Vec<String> = lock(&self.state.failed).keys().cloned().collect();
        // Runs on as it is: enabled before and now, unchanged, not failed.
        let keeps = |name: &str| {
            let unchanged = matches!((old.get(name), new.get(name)),
                (Some(o), Some(n)) if o.enabled && n.enabled && o == n);
            unchanged && same_names && !failed.iter().any(|f| f == name)
        };
        let mut stopped = 0;
        for name in old.iter().filter(|(_, u)| u.enabled).map(|(n, _)| n) {
            if keeps(name) {
                continue;
            }
            let id = format!("upstream {name}");
            let _ = root.terminate_child(&id);
            let _ = root.delete_child(&id);
            #[cfg(feature = "client")]
            self.sources.retire(name, &self.state.server);
            stopped += 1;
        }
        // Failed upstreams no longer configured are forgotten.
        lock(&self.state.failed).retain(|n, _| new.get(n).is_some_and(|u| u.enabled));
        let wanted: BTreeMap<_, _> = new
            .iter()
            .filter(|(name, u)| u.enabled && !keeps(name))
            .map(|(n, u)| (n.clone(), u.clone()))
            .collect();
        let probe = Config {
            upstreams: wanted,
            ..config.clone()
        };
        let mut started = 0;
        match self.upstreams(&probe) {
            Ok(specs) => {
                for spec in specs {
                    let id = spec.id().to_owned();
                    // Restarting a failed one: its old spec may linger.
                    let _ = root.delete_child(&id);
                    match root.start_child(spec) {
                        Ok(()) => started += 1,
                        Err(e) => log::error!("{id}: cannot start: {e}"),
                    }
                }
            }
            Err(e) => log::error!("{e}"),
        }
        format!("{started} upstream(s) started, {stopped} stopped")
    }

    /// SIGTERM, SIGINT or the end of stdin: refuse new requests, give
    /// those in flight `shutdownTimeoutMs`, then stop the tree (which
    /// cancels the rest) and kill what commands are left.
    fn stop(&self, why: &str, ended: &Receiver<Result<(), SupervisorError>>) -> u8 {
        log::info!("{why}; stopping");
        let _ = self.notifier.notify("STOPPING=1\nSTATUS=stopping");
        // New connections wait in the backlog (under socket activation,
        // for the next instance); open ones are served.
        for l in lock(&self.state.listeners).iter() {
            l.listener.stop_accepting();
        }
        let timeout = self.config.shutdown_timeout;
        let left = self.state.server.engine().drain(timeout);
        if left > 0 {
            log::warn!("{left} request(s) still in flight after {timeout:?}; cancelling them");
        }
        if let Some(root) = self.state.root.get() {
            // The listeners first, newest first: an upstream a reload
            // started again comes after them in the root's order, and
            // would otherwise stop while sessions still use it.
            let ids: Vec<String> = lock(&self.state.listeners)
                .iter()
                .map(|a| a.id.clone())
                .collect();
            for id in ids.iter().rev() {
                let _ = root.terminate_child(id);
            }
            let _ = root.shutdown();
        }
        let _ = ended.recv();
        let killed = self.state.runs.kill_all();
        if killed > 0 {
            log::warn!("killed {killed} command(s) still running");
        }
        EXIT_OK
    }
}

/// The keys of the enabled upstreams.
fn enabled_upstreams(config: &Config) -> Vec<String> {
    config
        .upstreams
        .values()
        .filter(|u| u.enabled)
        .map(|u| u.name.clone())
        .collect()
}

fn gave_up(result: Result<Result<(), SupervisorError>, crossbeam_channel::RecvError>) -> u8 {
    match result {
        Ok(Ok(())) => EXIT_OK,
        Ok(Err(e)) => {
            log::error!("the supervision tree gave up: {e}");
            EXIT_SOFTWARE
        }
        Err(_) => EXIT_SOFTWARE,
    }
}

/// The settings a reload cannot apply: they take effect at the next
/// start. (`http`, `amqp` and `supervision.listeners` apply to the
/// listeners a reload starts; `http`'s allow lists and tokens to those
/// that run on too.)
fn restart_only(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut out = Vec::new();
    if old.handler_threads != new.handler_threads {
        out.push("handlerThreads");
    }
    if old.max_inflight_per_session != new.max_inflight_per_session {
        out.push("maxInflightPerSession");
    }
    if old.supervision.root != new.supervision.root {
        out.push("supervision.root");
    }
    if old.control != new.control {
        out.push("control");
    }
    if old.metrics != new.metrics {
        out.push("metrics");
    }
    if old.skills != new.skills {
        out.push("skills");
    }
    if old.tasks != new.tasks {
        out.push("tasks");
    }
    out
}

/// The listeners' options from the file's `http` and `amqp` settings.
fn listen_options(config: &Config) -> Result<ListenOptions, String> {
    #[allow(unused_mut)]
    let mut options = ListenOptions::default();
    #[cfg(feature = "http")]
    {
        use crate::transport::http::AllowList;
        let http = &config.http;
        let mut h = options.http.clone();
        if let Some(list) = &http.allowed_origins {
            h = h.with_allowed_origins(AllowList::List(list.clone()));
        }
        if let Some(list) = &http.allowed_hosts {
            h = h.with_allowed_hosts(AllowList::List(list.clone()));
        }
        if let Some(file) = &http.bearer_token_file {
            h = h
                .with_bearer_token_file(file)
                .map_err(|e| format!("http.bearerTokenFile {}: {e}", file.display()))?;
        }
        if let Some(idle) = http.session_idle_timeout {
            h = h.with_session_idle_timeout(idle);
        }
        if let Some(n) = http.max_sessions {
            h = h.with_max_sessions(n);
        }
        options.http = h;
    }
    #[cfg(feature = "amqp")]
    {
        let a = &config.amqp;
        if *a != super::config::AmqpSettings::default() {
            // Every field but the URL and the name, which each listener sets.
            let mut t = crate::transport::amqp::AmqpConfig::new("amqp://localhost", "template")
                .map_err(|e| e.to_string())?;
            if let Some(e) = &a.exchange {
                t.exchange = e.clone();
            }
            if let Some(n) = a.prefetch {
                t.prefetch = n;
            }
            if let Some(n) = a.max_message_bytes {
                t.max_message_bytes = n;
            }
            if let Some(n) = a.max_publish_bytes {
                t.max_publish_bytes = n;
            }
            if let Some(d) = a.session_idle_timeout {
                t.session_idle = d;
            }
            if let Some(n) = a.max_sessions {
                t.max_sessions = n;
            }
            if let Some(n) = a.heartbeat_secs {
                t.heartbeat_secs = n;
            }
            options.amqp = Some(t);
        }
    }
    #[cfg(not(any(feature = "http", feature = "amqp")))]
    let _ = config;
    Ok(options)
}
