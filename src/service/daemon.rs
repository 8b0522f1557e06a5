//! The `mcpvisor` daemon: flags, the configuration file, the supervision
//! tree of its listeners, signals and exit status (sysexits(3)).

use super::config::{Config, DEFAULT_CONFIG_PATH, DEFAULT_LISTEN, LOG_LEVELS};
use crate::protocol::EngineOptions;
use crate::serve::ListenOptions;
use crate::server::Server;
use crate::transport::listen::Listen;
use std::path::PathBuf;
use std::time::Duration;
use supervisor::{Strategy, Supervisor, SupervisorSpec};

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

/// Restarts the root tolerates (within [`ROOT_PERIOD`]) before it gives up.
pub const ROOT_INTENSITY: u32 = 5;
/// The period of [`ROOT_INTENSITY`].
pub const ROOT_PERIOD: Duration = Duration::from_secs(30);

/// `--help`.
pub const USAGE: &str = "usage: mcpvisor [--config PATH] [--check-config] [--listen URL]... \
[--stdio] [--http ADDR] [--tcp ADDR] [--amqp URL] [--log-level LEVEL] [--version] [--help]

  --config PATH      the configuration file (default /etc/mcpvisor/mcpvisor.json, if present)
  --check-config     validate the configuration and exit (0: valid, 78: not)
  --listen URL       serve on URL: stdio, tcp://ADDR, http://ADDR/PATH, amqp://HOST?name=NAME
                     (repeatable; replaces the file's listen list)
  --stdio            the same as --listen stdio
  --http ADDR        the same as --listen http://ADDR/mcp
  --tcp ADDR         the same as --listen tcp://ADDR
  --amqp URL         the same as --listen URL (an amqp:// or amqps:// URL with ?name=NAME)
  --log-level LEVEL  error, warn, info, debug or trace (default: the file's logLevel, else info)
  --version          print the version and exit
  --help             print this and exit

Exit status: 0 clean, 64 usage, 70 the supervision tree gave up, 71 a listener
could not be started, 78 invalid configuration.";

/// What the flags say.
#[derive(Debug, Default, PartialEq)]
pub struct Flags {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--check-config`.
    pub check: bool,
    /// `--listen` and its shorthands, in order.
    pub listen: Vec<String>,
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--version`.
    pub version: bool,
    /// `--help`.
    pub help: bool,
}

impl Flags {
    /// Parses the arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Flags, String> {
        let mut f = Flags::default();
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let mut value = |flag: &str| args.next().ok_or_else(|| format!("{flag} needs a value"));
            match a.as_str() {
                "--config" => f.config = Some(PathBuf::from(value("--config")?)),
                "--check-config" => f.check = true,
                "--listen" | "--amqp" => f.listen.push(value(&a)?),
                "--stdio" => f.listen.push("stdio".into()),
                "--http" => f.listen.push(format!("http://{}/mcp", value("--http")?)),
                "--tcp" => f.listen.push(format!("tcp://{}", value("--tcp")?)),
                "--log-level" => {
                    let level = value("--log-level")?;
                    if !LOG_LEVELS.contains(&level.as_str()) {
                        return Err(format!(
                            "--log-level: expected one of {}",
                            LOG_LEVELS.join(", ")
                        ));
                    }
                    f.log_level = Some(level);
                }
                "--version" | "-V" => f.version = true,
                "--help" | "-h" => f.help = true,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(f)
    }
}

/// Runs the daemon; returns its exit status.
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
    let path = flags.config.clone().or_else(|| {
        let default = PathBuf::from(DEFAULT_CONFIG_PATH);
        default.exists().then_some(default)
    });
    let mut config = match &path {
        Some(p) => match Config::load(p) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("mcpvisor: {e}");
                return EXIT_CONFIG;
            }
        },
        None => Config::default(),
    };
    if !flags.listen.is_empty() {
        config.listen = flags.listen.clone();
    }
    if config.listen.is_empty() {
        config.listen = vec![DEFAULT_LISTEN.to_owned()];
    }
    let listens: Vec<Listen> = match config.listen.iter().map(|l| l.parse()).collect() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mcpvisor: {e}");
            return EXIT_USAGE;
        }
    };
    let level = flags
        .log_level
        .clone()
        .or(config.log_level.clone())
        .unwrap_or_else(|| "info".into());
    let tools = config.commands.len();
    // Before any thread starts (handler threads, an AMQP listener's
    // connection): blocked signals are inherited, so only the signal
    // thread gets them.
    let signals = match super::signals::Signals::block() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcpvisor: cannot handle signals: {e}");
            return EXIT_SOFTWARE;
        }
    };
    // Everything the file implies (tool schemas, the token file) is checked
    // here, for --check-config too.
    let (server, options) = match prepare(config) {
        Ok(prepared) => prepared,
        Err(e) => {
            match &path {
                Some(p) => eprintln!("mcpvisor: {}: {e}", p.display()),
                None => eprintln!("mcpvisor: {e}"),
            }
            return EXIT_CONFIG;
        }
    };
    if flags.check {
        println!(
            "{}: valid ({} listener(s), {tools} command tool(s))",
            path.as_deref()
                .map_or("(no file)".into(), |p| p.display().to_string()),
            listens.len(),
        );
        return EXIT_OK;
    }
    crate::init_logging(&level);
    serve(&server, &options, tools, &listens, signals)
}

/// The server with the file's command tools, and the listeners' options.
fn prepare(config: Config) -> Result<(Server, ListenOptions), String> {
    let mut engine = EngineOptions::default();
    if let Some(n) = config.handler_threads {
        engine.pool_threads = n;
    }
    if let Some(n) = config.max_inflight_per_session {
        engine.max_inflight_per_session = n;
    }
    let options = listen_options(&config.http)?;
    let mut builder = Server::builder("mcpvisor", env!("CARGO_PKG_VERSION")).options(engine);
    for tool in config.commands.into_values() {
        builder = builder.tool(tool.into_tool());
    }
    let server = builder.build().map_err(|e| e.to_string())?;
    Ok((server, options))
}

fn serve(
    server: &Server,
    options: &ListenOptions,
    tools: usize,
    listens: &[Listen],
    signals: super::signals::Signals,
) -> u8 {
    let notifier = match super::notify::Notifier::from_env() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("mcpvisor: NOTIFY_SOCKET: {e}");
            return EXIT_SOFTWARE;
        }
    };
    let mut root =
        SupervisorSpec::new("mcpvisor", Strategy::OneForOne).intensity(ROOT_INTENSITY, ROOT_PERIOD);
    let mut urls = Vec::new();
    // Ready when stdin ends (a `stdio` listener): the daemon then stops.
    let (stdin_done, stdin_ended) = crossbeam_channel::bounded::<()>(1);
    for listen in listens {
        if *listen == Listen::Stdio {
            // stdout carries MCP: nothing else may be written there.
            let done = Some(stdin_done.clone());
            root = root.child(crate::transport::stdio::worker(
                server.engine().clone(),
                options.stdio.clone(),
                done,
            ));
            urls.push("stdio".to_owned());
            continue;
        }
        match server.listener_with(listen, options) {
            Ok((spec, listener)) => {
                root = root.child(spec);
                let url = listener_url(listen, &listener);
                println!("listening on {url}");
                urls.push(url);
            }
            Err(e) => {
                eprintln!("mcpvisor: {listen}: {e}");
                return EXIT_LISTENER;
            }
        }
    }
    if tools == 0 {
        log::info!("no command tools configured: serving an empty catalog");
    } else {
        log::info!("serving {tools} command tool(s)");
    }
    let root = match Supervisor::start(root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mcpvisor: {e}");
            return EXIT_LISTENER;
        }
    };
    let handle = root.handle();
    // Every listener is bound (its socket accepts) and the tree runs.
    let _ = notifier.notify(&format!(
        "READY=1\nSTATUS=serving {tools} command tool(s) on {}\nMAINPID={}",
        urls.join(", "),
        std::process::id()
    ));
    // Dropped when this function returns: the watchdog thread ends.
    let (_stop_watchdog, watchdog_stopped) = crossbeam_channel::bounded::<()>(0);
    if let Some(every) = super::notify::watchdog_interval() {
        let (notifier, handle) = (super::notify::Notifier::from_env(), handle.clone());
        std::thread::Builder::new()
            .name("mcpvisor-watchdog".into())
            .spawn(move || {
                let Ok(notifier) = notifier else { return };
                // Pings only while the root supervisor answers.
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    watchdog_stopped.recv_timeout(every)
                {
                    if handle.count_children().is_ok() {
                        let _ = notifier.notify("WATCHDOG=1");
                    }
                }
            })
            .ok();
    }
    let (ended_tx, ended) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = ended_tx.send(root.wait());
    });
    let received = signals.receiver();
    loop {
        crossbeam_channel::select! {
            recv(ended) -> result => {
                return match result {
                    Ok(Ok(())) => EXIT_OK,
                    Ok(Err(e)) => {
                        log::error!("the supervision tree gave up: {e}");
                        EXIT_SOFTWARE
                    }
                    Err(_) => EXIT_SOFTWARE,
                };
            }
            recv(stdin_ended) -> _ => return stop("stdin ended", &notifier, &handle, &ended),
            recv(received) -> signal => match signal {
                Ok(libc::SIGHUP) => log::warn!("SIGHUP: reloading is not supported yet; ignored"),
                _ => return stop("asked to stop", &notifier, &handle, &ended),
            },
        }
    }
}

/// Stops the tree (its sessions end) and tells the service manager.
fn stop(
    why: &str,
    notifier: &super::notify::Notifier,
    handle: &supervisor::SupervisorRef,
    ended: &crossbeam_channel::Receiver<Result<(), supervisor::SupervisorError>>,
) -> u8 {
    log::info!("{why}; stopping");
    let _ = notifier.notify("STOPPING=1\nSTATUS=stopping");
    let _ = handle.shutdown();
    let _ = ended.recv();
    EXIT_OK
}

fn listener_url(listen: &Listen, listener: &crate::serve::Listener) -> String {
    match listener {
        #[cfg(feature = "http")]
        crate::serve::Listener::Http(h) => format!("http://{}{}", h.local_addr(), h.path()),
        #[cfg(feature = "tcp")]
        crate::serve::Listener::Tcp(h) => format!("tcp://{}", h.local_addr()),
        _ => listen.to_string(),
    }
}

#[cfg(feature = "http")]
fn listen_options(http: &super::config::HttpSettings) -> Result<ListenOptions, String> {
    use crate::transport::http::AllowList;
    let mut options = ListenOptions::default();
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
    Ok(options)
}

#[cfg(not(feature = "http"))]
fn listen_options(_: &super::config::HttpSettings) -> Result<ListenOptions, String> {
    Ok(ListenOptions::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_and_their_shorthands() {
        let f = Flags::parse(args(&[
            "--config",
            "c.json",
            "--http",
            "127.0.0.1:0",
            "--stdio",
            "--tcp",
            "[::1]:9",
            "--check-config",
        ]))
        .unwrap();
        assert_eq!(f.config, Some(PathBuf::from("c.json")));
        assert_eq!(
            f.listen,
            ["http://127.0.0.1:0/mcp", "stdio", "tcp://[::1]:9"]
        );
        assert!(f.check);
        assert!(Flags::parse(args(&["--listen"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(Flags::parse(args(&["--bogus"]))
            .unwrap_err()
            .contains("--bogus"));
    }

    #[test]
    fn every_flag_is_in_the_usage() {
        for flag in [
            "--config",
            "--check-config",
            "--listen",
            "--stdio",
            "--http",
            "--tcp",
            "--amqp",
            "--log-level",
            "--version",
            "--help",
        ] {
            assert_eq!(USAGE.matches(&format!("\n  {flag} ")).count(), 1, "{flag}");
        }
    }
}
