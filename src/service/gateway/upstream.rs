//! One upstream under supervision: a supervisor of its own (`upstream
//! NAME`, with the upstream's restart intensity) over a worker that
//! starts the server, initializes it, serves what it lists as the catalog
//! source `upstream:NAME`, and fetches the lists again on its
//! `list_changed`. When the upstream exits, its calls in flight fail
//! naming it, its source is withdrawn (clients get `list_changed`), and
//! the worker fails, to be restarted with backoff. Past its intensity the
//! upstream's supervisor gives up; the root does not restart it (it is
//! `Temporary`): it stays withdrawn and `status` shows it, while the rest
//! serves on.

use super::names;
use super::proxy::{self, Link, Route};
use crate::client::{Client, ClientError, ClientOptions, Generation};
use crate::jsonrpc::ErrorObject;
use crate::model::CompletionRef;
use crate::protocol::Source;
use crate::server::Server;
use crate::service::config::{UpstreamConfig, UpstreamProtocol, UpstreamTransport};
use crate::transport::connection::Connection;
use crossbeam_channel::select;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use supervisor::{Backoff, ChildSpec, Restart, Strategy, SupervisorSpec};

/// Longest wait for an upstream to start and answer `initialize`.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest restart delay of an upstream.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How long a stopping upstream's worker gets: closing the upstream takes
/// up to two grace periods of [`crate::transport::connection::DEFAULT_CHILD_GRACE`].
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);

pub use super::names::source_id;

/// Who may change each upstream's catalog source: only the newest life of
/// its worker. A worker that was left running past its stop (blocked on a
/// slow upstream) and a reload that replaced it both bump the epoch, so
/// the stale one can neither publish its lists nor withdraw its
/// successor's.
#[derive(Default)]
pub(crate) struct Sources {
    epochs: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl Sources {
    /// A new life of `name`'s worker; returns its epoch.
    fn begin(&self, name: &str) -> u64 {
        let mut e = crate::sync::lock(&self.epochs);
        let n = e.entry(name.to_owned()).or_default();
        *n += 1;
        *n
    }

    /// Runs `change` if `epoch` is still `name`'s newest (under the lock,
    /// so no newer life publishes in between).
    fn publish<T>(&self, name: &str, epoch: u64, change: impl FnOnce() -> T) -> Option<T> {
        let e = crate::sync::lock(&self.epochs);
        (e.get(name) == Some(&epoch)).then(change)
    }

    /// Ends every life of `name` (it is stopped or replaced) and withdraws
    /// its source.
    pub(crate) fn retire(&self, name: &str, server: &Server) {
        let mut e = crate::sync::lock(&self.epochs);
        *e.entry(name.to_owned()).or_default() += 1;
        server.engine().set_instructions(name, None);
        server.withdraw_source(&source_id(name));
    }
}

/// The upstream's subtree, as a child of the root.
pub(crate) fn child(
    config: &UpstreamConfig,
    server: &Server,
    sources: &Arc<Sources>,
    max_name: usize,
) -> ChildSpec {
    let id = format!("upstream {}", config.name);
    let (cfg, server, sources) = (Arc::new(config.clone()), server.clone(), sources.clone());
    let worker = ChildSpec::worker(format!("{id} connection"), move |ctx| {
        ctx.ready();
        run(&cfg, &server, &sources, max_name, ctx)
    })
    .restart(Restart::Permanent)
    .shutdown(supervisor::Shutdown::Timeout(STOP_TIMEOUT))
    .backoff(Backoff {
        initial: config.backoff,
        multiplier: 2.0,
        max: MAX_BACKOFF,
        jitter: 0.2,
        reset_after: config.restart.period,
    });
    ChildSpec::supervisor(
        SupervisorSpec::new(id, Strategy::OneForOne)
            .intensity(config.restart.intensity, config.restart.period)
            .child(worker),
    )
    .restart(Restart::Temporary)
}

/// What the upstream is answered when the downstream client's answer to
/// its request failed: the client's own error as it is, anything else
/// said in the gateway's name.
pub(crate) fn relayed_error(e: crate::protocol::PeerError) -> ErrorObject {
    match e {
        crate::protocol::PeerError::Rpc(e) => e,
        other => ErrorObject::internal(format!("the gateway's client: {other}")),
    }
}

/// A handler for a request of the upstream's that no one call can be said
/// to make (none in flight, several on a wire that does not say which, or
/// one given up moments ago): refused.
pub(crate) fn refuse(what: &'static str) -> crate::client::RequestHandler {
    Arc::new(move |_| {
        Err(ErrorObject::internal(format!(
            "{what}: the gateway cannot tell which call asks (none, or several, in flight, or one just given up), so it has no client to ask"
        )))
    })
}

/// The level, logger (headed by the upstream's name) and data of an
/// upstream's `notifications/message`.
pub(crate) fn log_message(name: &str, params: &Value) -> (crate::LogLevel, String, Value) {
    let level = params
        .get("level")
        .and_then(Value::as_str)
        .and_then(crate::LogLevel::parse)
        .unwrap_or(crate::LogLevel::Info);
    let logger = match params.get("logger").and_then(Value::as_str) {
        Some(l) => format!("{name}/{l}"),
        None => name.to_owned(),
    };
    (
        level,
        logger,
        params.get("data").cloned().unwrap_or(Value::Null),
    )
}

/// Threads (started as needed) that relay an upstream's sampling,
/// elicitation and roots requests to the sessions whose calls asked: 64.
/// Each waits for its user as long as the call allows, so the client's
/// default of 4 let four users thinking over a question hold every other
/// session's questions (and the refusals of questions outside a call).
pub const RELAY_THREADS: usize = 64;

/// How the gateway introduces itself to upstream `cfg`, in the protocol
/// generation its `protocol` names.
pub(crate) fn client_options(cfg: &UpstreamConfig) -> ClientOptions {
    ClientOptions {
        name: "mcpvisor".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        request_timeout: START_TIMEOUT,
        max_total_timeout: cfg.max_total_timeout,
        callback_threads: RELAY_THREADS,
        generation: match cfg.protocol {
            UpstreamProtocol::Auto => Generation::Auto,
            UpstreamProtocol::Sessions => Generation::Sessions,
            UpstreamProtocol::Stateless => Generation::Stateless,
        },
        ..Default::default()
    }
}

/// Starts the upstream (its stderr logged as `label`) and initializes it.
pub(crate) fn connect(
    cfg: &UpstreamConfig,
    label: &str,
    options: ClientOptions,
) -> Result<Client, String> {
    Client::connect(connection(cfg, label)?, options)
        .map_err(|e| format!("upstream {}: cannot start: {e}", cfg.name))
}

/// [`connect`] on a thread of its own, so that a stop asked while the
/// upstream starts (a child that never answers `initialize`) is not held
/// up by the start: `None` then, and the connection, if one comes, is
/// closed as it is dropped.
fn connect_unless_stopped(
    cfg: &Arc<UpstreamConfig>,
    options: ClientOptions,
    ctx: &supervisor::ChildContext,
) -> Option<Result<Client, String>> {
    let label = format!("upstream {}", cfg.name);
    let (tx, rx) = crossbeam_channel::bounded(1);
    let starting = cfg.clone();
    let options = Arc::new(std::sync::Mutex::new(Some(options)));
    let theirs = options.clone();
    let start_label = label.clone();
    let start = std::thread::Builder::new()
        .name("mcpvisor-upstream-start".into())
        .spawn(move || {
            if let Some(options) = crate::sync::lock(&theirs).take() {
                let _ = tx.send(connect(&starting, &start_label, options));
            }
        });
    if start.is_err() {
        let options = crate::sync::lock(&options).take().unwrap_or_default();
        return Some(connect(cfg, &label, options));
    }
    select! {
        recv(rx) -> started => Some(started.unwrap_or_else(|_| Err(format!("{label}: its start ended")))),
        recv(ctx.stop_signal()) -> _ => None,
    }
}

impl Link {
    /// The link over `client`, with `cfg`'s limits.
    pub(crate) fn new(cfg: &UpstreamConfig, client: Client) -> Link {
        Link {
            name: cfg.name.clone(),
            namespace: cfg.namespace.clone(),
            client,
            timeout: cfg.timeout,
            max_output_bytes: cfg.max_output_bytes,
            task: cfg.task,
        }
    }
}

/// The upstream until the worker is told to stop (`Ok`) or, for a
/// `command`, until it exits (an error: the supervisor restarts it with
/// backoff). A remote upstream (not `required`) that cannot be reached,
/// or ends our session (404), is connected to again here with backoff,
/// never giving up; it stays withdrawn meanwhile.
fn run(
    cfg: &Arc<UpstreamConfig>,
    server: &Server,
    sources: &Sources,
    max_name: usize,
    ctx: &supervisor::ChildContext,
) -> supervisor::WorkerResult {
    let epoch = sources.begin(&cfg.name);
    // The client of the life under way: a stop closes it (on a thread of
    // its own: the hook must not block), so that a request the upstream
    // does not answer (its tools/list, say) does not hold the stop up.
    let current: Arc<Mutex<Option<Client>>> = Arc::default();
    // That thread, joined before the worker returns: its close is the
    // first, the one that reaps the child and kills what is left of its
    // group and session (a later close returns at once), and the daemon
    // must not exit before it has.
    let closer: Arc<Mutex<Option<JoinHandle<()>>>> = Arc::default();
    {
        let (current, closer) = (current.clone(), closer.clone());
        ctx.on_stop(move || {
            // Held while the client is taken and its closer started, so
            // that the worker cannot look for the closer in between.
            let mut closer = crate::sync::lock(&closer);
            if let Some(client) = crate::sync::lock(&current).take() {
                let closing = std::thread::Builder::new()
                    .name("mcpvisor-upstream-stop".into())
                    .spawn(move || client.close());
                match closing {
                    Ok(handle) => *closer = Some(handle),
                    // The worker's own close is then the first.
                    Err(e) => {
                        log::warn!("cannot start a thread to close an upstream's client: {e}")
                    }
                }
            }
        });
    }
    let ran = lives(cfg, server, sources, epoch, max_name, ctx, &current);
    let closing = crate::sync::lock(&closer).take();
    if let Some(closing) = closing {
        if closing.join().is_err() {
            log::error!("upstream {}: closing its client panicked", cfg.name);
        }
    }
    ran
}

/// The lives of the upstream, one after another, as [`run`] describes.
fn lives(
    cfg: &Arc<UpstreamConfig>,
    server: &Server,
    sources: &Sources,
    epoch: u64,
    max_name: usize,
    ctx: &supervisor::ChildContext,
    current: &Mutex<Option<Client>>,
) -> supervisor::WorkerResult {
    // A required one fails as a command does: past its intensity, the
    // daemon with it.
    let remote = matches!(cfg.transport, UpstreamTransport::Http { .. }) && !cfg.required;
    // The first delay is capped as the doubling ones are.
    let first_delay = cfg.backoff.min(MAX_BACKOFF);
    let mut delay = first_delay;
    let mut told: Option<String> = None;
    loop {
        let mut served = false;
        let lived = life(
            cfg,
            server,
            sources,
            epoch,
            max_name,
            ctx,
            current,
            &mut served,
        );
        let why = match lived {
            Ok(()) => return Ok(()),
            Err(why) if !remote => return Err(why.into()),
            Err(why) => why,
        };
        // An outage after serving starts over: its first delay, said anew.
        if served {
            delay = first_delay;
            told = None;
        }
        // Said once while it stays the same.
        if told.as_deref() == Some(why.as_str()) {
            log::debug!("{why}; connecting again in {delay:?}");
        } else {
            log::warn!("{why}; connecting again in {delay:?} (and on, with backoff)");
            told = Some(why);
        }
        select! {
            recv(ctx.stop_signal()) -> _ => return Ok(()),
            default(delay) => {}
        }
        delay = (delay * 2).min(MAX_BACKOFF);
    }
}

/// One connection to the upstream: until it ends (an error) or the worker
/// is told to stop. Its client is in `current` while it lives.
#[allow(clippy::too_many_arguments)]
fn life(
    cfg: &Arc<UpstreamConfig>,
    server: &Server,
    sources: &Sources,
    epoch: u64,
    max_name: usize,
    ctx: &supervisor::ChildContext,
    current: &Mutex<Option<Client>>,
    served: &mut bool,
) -> Result<(), String> {
    let source = source_id(&cfg.name);
    let (closed_tx, closed) = crossbeam_channel::bounded::<String>(1);
    // A list changed: one wake-up stands for any number of changes (the
    // worker lists everything again), so nothing here grows however
    // often the upstream says so.
    let (changed_tx, changed) = crossbeam_channel::bounded::<()>(1);
    let name = cfg.name.clone();
    let namespace = cfg.namespace.clone();
    let logs = server.clone();
    let options = ClientOptions {
        // Declared so the upstream may ask during calls (those go to the
        // calling session); outside a call they are refused.
        sampling: Some(refuse("sampling")),
        elicitation: Some(refuse("elicitation")),
        roots: Some(refuse("roots")),
        on_notification: Some(Arc::new(move |method: &str, params: &Value| match method {
            "notifications/tools/list_changed"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed" => {
                let _ = changed_tx.try_send(());
            }
            // Passed on as it comes, under our name for the resource.
            "notifications/resources/updated" => {
                if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                    logs.notify_resource_updated(&names::public_uri(&namespace, uri));
                }
            }
            "notifications/message" => {
                // To each session at the level it set, named after the
                // upstream.
                let (level, logger, data) = log_message(&name, params);
                logs.engine().log(level, Some(&logger), data);
            }
            _ => {}
        })),
        on_closed: Some(Arc::new(move |e: &ClientError| {
            let _ = closed_tx.try_send(e.to_string());
        })),
        ..client_options(cfg)
    };
    let Some(client) = connect_unless_stopped(cfg, options, ctx) else {
        return Ok(());
    };
    let client = client?;
    *crate::sync::lock(current) = Some(client.clone());
    // Told to stop just before the client was there to be closed.
    if ctx.should_stop() {
        crate::sync::lock(current).take();
        client.close();
        return Ok(());
    }
    let route = Arc::new(Route {
        shared: Arc::new(Link::new(cfg, client.clone())),
        sessions: cfg
            .per_session
            .then(|| super::sessions::Sessions::new(cfg.clone(), server)),
    });
    let ended = serve_until_closed(
        cfg, server, sources, epoch, max_name, ctx, &route, &closed, &changed,
    );
    // It listed and was served (what follows is an outage, not a failed
    // attempt).
    *served = ended.is_ok();
    sources.publish(&cfg.name, epoch, || {
        server.engine().set_instructions(&cfg.name, None);
        server.withdraw_source(&source)
    });
    if let Some(s) = &route.sessions {
        s.stop_all();
    }
    crate::sync::lock(current).take();
    client.close();
    // Told to stop: whatever the upstream's requests ended with, it was that.
    if ctx.should_stop() {
        return Ok(());
    }
    match ended? {
        None => Ok(()),
        Some(why) => Err(format!("upstream {} exited: {why}", cfg.name)),
    }
}

/// Publishes what the upstream lists, then follows its changes until it
/// closes (`Some(why)`) or the worker is told to stop (`None`).
#[allow(clippy::too_many_arguments)]
fn serve_until_closed(
    cfg: &UpstreamConfig,
    server: &Server,
    sources: &Sources,
    epoch: u64,
    max_name: usize,
    ctx: &supervisor::ChildContext,
    route: &Arc<Route>,
    closed: &crossbeam_channel::Receiver<String>,
    changed: &crossbeam_channel::Receiver<()>,
) -> Result<Option<String>, String> {
    let source = source_id(&cfg.name);
    let client = &route.shared.client;
    // The resources subscribed to upstream: every listed one, when it
    // offers subscriptions, so that its updates reach our subscribers.
    let subscribes = client
        .server_capabilities()
        .pointer("/resources/subscribe")
        .and_then(Value::as_bool)
        == Some(true);
    let subscribed = std::cell::RefCell::new(BTreeSet::<String>::new());
    let serve = || -> Result<(), String> {
        let (listed, uris) = fetch(route, cfg, max_name)
            .map_err(|e| format!("upstream {}: cannot list: {e}", cfg.name))?;
        let instructions = client.instructions().map(str::to_owned);
        let published = sources.publish(&cfg.name, epoch, || {
            // Its instructions go with its lists, headed by its name.
            server
                .engine()
                .set_instructions(&cfg.name, instructions.as_deref());
            server.replace_source(&source, listed)
        });
        match published {
            Some(Err(e)) => return Err(format!("upstream {}: {e}", cfg.name)),
            // A newer life owns the source now.
            None => return Ok(()),
            Some(Ok(_)) => {}
        }
        if subscribes {
            let mut subscribed = subscribed.borrow_mut();
            for uri in uris.difference(&subscribed.clone()) {
                match client.subscribe(uri) {
                    Ok(()) => {
                        subscribed.insert(uri.clone());
                    }
                    Err(e) => log::warn!("upstream {}: resources/subscribe {uri}: {e}", cfg.name),
                }
            }
            for gone in subscribed.clone().difference(&uris) {
                let _ = client.unsubscribe(gone);
                subscribed.remove(gone);
            }
        }
        Ok(())
    };
    serve()?;
    // Everything it logs reaches us; each session gets what its level lets
    // through.
    if client.server_capabilities().get("logging").is_some() {
        if let Err(e) = client.set_log_level(crate::LogLevel::Debug) {
            log::warn!("upstream {}: logging/setLevel: {e}", cfg.name);
        }
    }
    log::info!("upstream {}: serving", cfg.name);
    Ok(loop {
        select! {
            recv(ctx.stop_signal()) -> _ => break None,
            recv(closed) -> why => break Some(why.unwrap_or_default()),
            recv(changed) -> event => match event {
                // One fetch for a burst of changes.
                Ok(()) => {
                    if let Err(e) = serve() {
                        log::warn!("{e}");
                    }
                }
                Err(_) => break None,
            },
        }
    })
}

/// Variables of the service manager's that a `command` upstream does not
/// inherit.
const SERVICE_MANAGER_ENV: [&str; 4] = [
    "NOTIFY_SOCKET",
    "WATCHDOG_USEC",
    "WATCHDOG_PID",
    "RUNTIME_DIRECTORY",
];

fn connection(cfg: &UpstreamConfig, label: &str) -> Result<Connection, String> {
    let what = |e: std::io::Error| format!("upstream {}: {e}", cfg.name);
    match &cfg.transport {
        UpstreamTransport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut cmd = std::process::Command::new(command);
            // What the service manager told this process is not the
            // upstream's: its sd_notify messages would be this service's,
            // and an upstream that is itself mcpvisor would take our
            // control socket's path. Its config's `env` may still set them.
            for inherited in SERVICE_MANAGER_ENV {
                cmd.env_remove(inherited);
            }
            cmd.args(args).envs(env);
            if let Some(dir) = cwd {
                cmd.current_dir(dir);
            }
            Connection::child_named(cmd, label).map_err(what)
        }
        #[cfg(feature = "http")]
        UpstreamTransport::Http { url, headers } => Connection::http_with_headers(
            url,
            headers
                .iter()
                .map(|(n, v)| (n.clone(), v.clone()))
                .collect(),
        )
        .map_err(what),
        #[cfg(not(feature = "http"))]
        UpstreamTransport::Http { .. } => Err(format!(
            "upstream {}: this build has no HTTP transport",
            cfg.name
        )),
    }
}

/// An upstream tool's definition as the gateway offers it, under
/// `public`: without the 2025-11-25 `execution.taskSupport` (the gateway's
/// client makes no task-augmented calls, and the gateway's own task
/// support is its `task` setting), and with the schemas a client checks
/// the whole list against: an `inputSchema` it lacks is `{"type":
/// "object"}` (any arguments), an `outputSchema` that is no object schema
/// is left out. Else why the tool is left out: it runs only as a task
/// (which cannot be called through the gateway), or its `inputSchema` is
/// no object schema (a client that checks it would refuse every tool of
/// every upstream with it).
fn offered_tool(def: &Value, public: &str) -> Result<Value, &'static str> {
    if def
        .pointer("/execution/taskSupport")
        .and_then(Value::as_str)
        == Some("required")
    {
        return Err("it runs only as a task-augmented call, which the gateway does not make");
    }
    let object_schema = |s: &Value| s.get("type").and_then(Value::as_str) == Some("object");
    let mut definition = def.clone();
    let d = definition
        .as_object_mut()
        .ok_or("its definition is no object")?;
    match d.get_mut("inputSchema") {
        None => {
            d.insert("inputSchema".into(), json!({"type": "object"}));
        }
        Some(s) if object_schema(s) => {}
        // An object schema that does not say so (`{}`, properties alone).
        Some(Value::Object(s)) if !s.contains_key("type") => {
            s.insert("type".into(), "object".into());
        }
        Some(_) => return Err("its inputSchema is not a JSON Schema of \"type\": \"object\""),
    }
    if d.get("outputSchema").is_some_and(|s| !object_schema(s)) {
        d.remove("outputSchema");
    }
    d.insert("name".into(), public.into());
    proxy::remove_within(d, "execution", "taskSupport");
    Ok(definition)
}

/// Whether the allow and deny lists let `tool` through.
fn allowed(cfg: &UpstreamConfig, tool: &str) -> bool {
    cfg.allow
        .as_ref()
        .is_none_or(|a| a.iter().any(|p| names::matches(p, tool)))
        && !cfg.deny.iter().any(|p| names::matches(p, tool))
}

/// What the upstream offers now, as a catalog source under our names, and
/// the (upstream's) URIs of its resources.
fn fetch(
    route: &Arc<Route>,
    cfg: &UpstreamConfig,
    max_name: usize,
) -> Result<(Source, BTreeSet<String>), ClientError> {
    let client = &route.shared.client;
    let caps = client.server_capabilities().clone();
    let has = |c: &str| caps.get(c).is_some_and(|v| !v.is_null());
    // Completions are asked of an upstream that declared them (2024-11-05
    // had no such capability: one on it is asked); for the rest the engine
    // answers its own empty completion.
    let completes = has("completions")
        || client.protocol_version() == crate::model::ProtocolVersion::V2024_11_05;
    let mut source = Source::new();
    let mut uris = BTreeSet::new();
    // Per kind (a tool and a prompt may share a name): a second original
    // that maps to an emitted name is reported, not served in its place.
    let unique = |emitted: &mut BTreeSet<String>, public: &str, original: &str| -> bool {
        let fresh = emitted.insert(public.to_owned());
        if !fresh {
            log::error!(
                "upstream {}: {original:?} would be listed as {public:?}, which is taken; left out",
                cfg.name
            );
        }
        fresh
    };
    let renamed = |def: &Value, key: &str, public: Value| -> Value {
        let mut d = def.clone();
        d[key] = public;
        d
    };
    // A list the upstream does not implement (-32601) is empty.
    let list = |r: Result<Vec<Value>, ClientError>| match r {
        Err(ClientError::Rpc(e)) if e.code == crate::jsonrpc::METHOD_NOT_FOUND => Ok(Vec::new()),
        other => other,
    };
    // The tools are what an upstream is served for: a failure to list them
    // fails the listing (the upstream is started again). Its other lists
    // answered with an error are left out, logged, until the next listing.
    let besides = |what: &str, r: Result<Vec<Value>, ClientError>| match list(r) {
        Ok(items) => Ok(items),
        // Its answer, an error: not the connection failing.
        Err(ClientError::Rpc(e)) => {
            log::warn!(
                "upstream {}: {what} failed: {e}; left out until its next listing",
                cfg.name
            );
            Ok(Vec::new())
        }
        Err(e) => Err(e),
    };
    if has("tools") {
        let mut emitted = BTreeSet::new();
        for def in list(client.list_tools())? {
            let Some(original) = def.get("name").and_then(Value::as_str) else {
                continue;
            };
            if !allowed(cfg, original) {
                continue;
            }
            let public = names::public_name(&cfg.namespace, original, max_name);
            let definition = match offered_tool(&def, &public) {
                Ok(d) => d,
                Err(why) => {
                    log::warn!("upstream {}: tool {original:?} left out: {why}", cfg.name);
                    continue;
                }
            };
            if unique(&mut emitted, &public, original) {
                source = source.tool(Arc::new(proxy::Tool {
                    definition,
                    original: original.to_owned(),
                    route: route.clone(),
                }));
            }
        }
    }
    if has("prompts") {
        let mut emitted = BTreeSet::new();
        for def in besides("prompts/list", client.list_prompts())? {
            let Some(original) = def.get("name").and_then(Value::as_str) else {
                continue;
            };
            let public = names::public_name(&cfg.namespace, original, max_name);
            if unique(&mut emitted, &public, original) {
                source = source.prompt(Arc::new(proxy::Prompt {
                    definition: renamed(&def, "name", public.clone().into()),
                    original: original.to_owned(),
                    route: route.clone(),
                }));
                if completes {
                    source = source.completion(
                        CompletionRef::Prompt(public),
                        proxy::Completions::of(CompletionRef::Prompt(original.to_owned()), route),
                    );
                }
            }
        }
    }
    if has("resources") {
        // What it does not list is read through it too: the links its
        // tools return, which the gateway makes ours.
        source = source.reader(Arc::new(proxy::Template {
            definition: Value::Null,
            route: route.clone(),
        }));
        for def in besides("resources/list", client.list_resources())? {
            let Some(original) = def.get("uri").and_then(Value::as_str) else {
                continue;
            };
            let public = names::public_uri(&cfg.namespace, original);
            uris.insert(original.to_owned());
            source = source.resource(Arc::new(proxy::Resource {
                definition: renamed(&def, "uri", public.into()),
                original: original.to_owned(),
                route: route.clone(),
            }));
        }
        for def in besides("resources/templates/list", client.list_resource_templates())? {
            let Some(original) = def.get("uriTemplate").and_then(Value::as_str) else {
                continue;
            };
            let public = names::public_uri(&cfg.namespace, original);
            source = source.template(Arc::new(proxy::Template {
                definition: renamed(&def, "uriTemplate", public.clone().into()),
                route: route.clone(),
            }));
            if completes {
                source = source.completion(
                    CompletionRef::Resource(public),
                    proxy::Completions::of(CompletionRef::Resource(original.to_owned()), route),
                );
            }
        }
    }
    Ok((source, uris))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_tool_is_offered_without_task_augmentation_and_never_when_it_needs_it() {
        let def = |execution: Value| {
            json!({"name": "t", "inputSchema": {"type": "object"},
            "execution": execution})
        };
        assert_eq!(
            offered_tool(&def(json!({"taskSupport": "optional"})), "up__t"),
            Ok(json!({"name": "up__t", "inputSchema": {"type": "object"}}))
        );
        assert_eq!(
            offered_tool(
                &def(json!({"taskSupport": "forbidden", "other": 1})),
                "up__t"
            ),
            Ok(json!({"name": "up__t", "inputSchema": {"type": "object"},
                "execution": {"other": 1}}))
        );
        assert!(offered_tool(&def(json!({"taskSupport": "required"})), "up__t").is_err());
    }

    /// What a client checks the whole list against is made to hold: a
    /// missing inputSchema takes any arguments, an outputSchema that is no
    /// object schema goes, and a tool whose inputSchema is no object
    /// schema is left out (the others of the list are offered).
    #[test]
    fn an_upstream_tool_s_schemas_are_what_a_client_accepts() {
        assert_eq!(
            offered_tool(&json!({"name": "t"}), "up__t"),
            Ok(json!({"name": "up__t", "inputSchema": {"type": "object"}}))
        );
        assert_eq!(
            offered_tool(
                &json!({"name": "t", "inputSchema": {"type": "object"}, "outputSchema": {"type": "string"}}),
                "up__t"
            ),
            Ok(json!({"name": "up__t", "inputSchema": {"type": "object"}}))
        );
        assert_eq!(
            offered_tool(
                &json!({"name": "t", "inputSchema": {"properties": {}}}),
                "up__t"
            ),
            Ok(json!({"name": "up__t", "inputSchema": {"type": "object", "properties": {}}}))
        );
        for bad in [
            json!({"type": "string"}),
            json!("object"),
            json!({"type": ["object", "null"]}),
        ] {
            assert!(
                offered_tool(&json!({"name": "t", "inputSchema": bad}), "up__t").is_err(),
                "{bad}"
            );
        }
    }
}
