//! AMQP tests that take the whole broker (a restart) or the process's
//! logger; they run one at a time, apart from `tests/amqp.rs` (cargo runs
//! test binaries one after another).

use mcpvisor::client::{Client, ClientOptions, Connection, Generation, Reconnect};
use mcpvisor::transport::amqp::{open, AmqpConfig, AmqpEvent, AmqpUrl};
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::json;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::amqp::{config, Cleanup, Proxy};

static SERIAL: Mutex<()> = Mutex::new(());

/// Every log record of this process, for the credential check.
static RECORDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, m: &log::Metadata) -> bool {
        // The cap `mcpvisor::init_logging` applies: amiquip logs the SASL
        // login frame at debug in this one module.
        !(m.target().starts_with(mcpvisor::SECRET_LOGGING_MODULE) && m.level() > log::Level::Info)
    }
    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) {
            let line = format!("{} {} {}", r.level(), r.target(), r.args());
            RECORDS.lock().unwrap_or_else(|p| p.into_inner()).push(line);
        }
    }
    fn flush(&self) {}
}

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_boxed_logger(Box::new(Capture)).unwrap();
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn rabbitmqctl(args: &[&str]) {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl (see .ci/run)");
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn server(count: Arc<AtomicUsize>) -> Server {
    Server::builder("amqp-broker-test", "1.0")
        .tool(Tool::new("count", json!({"type":"object"}), move |_, _| {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(ToolResult::text("counted"))
        }))
        .build()
        .unwrap()
}

/// `rabbitmqctl stop_app` / `start_app` in the middle of a load: both sides
/// reconnect, sessions live on, and every call is answered — some after
/// their request was delivered or published again (so a handler may run
/// twice for one call: handlers must tolerate redelivery).
#[test]
fn a_broker_restart_in_the_middle_of_a_load_loses_no_request() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    capture_logs();
    let mut config = config("restart");
    let _cleanup = Cleanup(config.clone());
    let mut patient = Reconnect::default();
    patient.backoff.initial = Duration::from_millis(50);
    patient.backoff.max = Duration::from_millis(500);
    patient.max_attempts = 200;
    config.reconnect = patient;
    let count = Arc::new(AtomicUsize::new(0));
    let server = server(count.clone()).start_amqp(config.clone()).unwrap();
    let (events_tx, events) = crossbeam_channel::unbounded();
    let mut client_config = config.clone();
    client_config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = events_tx.send(e.clone());
    }));
    const CLIENTS: usize = 4;
    const CALLS: usize = 150;
    let clients: Vec<Client> = (0..CLIENTS)
        .map(|_| {
            Client::connect(
                Connection::amqp(&client_config).unwrap(),
                ClientOptions::default(),
            )
            .unwrap()
        })
        .collect();
    let (done_tx, done) = crossbeam_channel::unbounded();
    std::thread::scope(|s| {
        for c in &clients {
            let done_tx = done_tx.clone();
            s.spawn(move || {
                for i in 0..CALLS {
                    c.call_tool("count", json!({}))
                        .unwrap_or_else(|e| panic!("call {i} was lost: {e}"));
                    let _ = done_tx.send(());
                }
            });
        }
        for _ in 0..CALLS {
            done.recv().unwrap();
        }
        rabbitmqctl(&["stop_app"]);
        rabbitmqctl(&["start_app"]);
        rabbitmqctl(&["await_startup"]);
    });
    let answered = CLIENTS * CALLS;
    let executed = count.load(Ordering::SeqCst);
    assert!(executed >= answered, "{executed} < {answered}");
    // A client whose calls all ended before the broker stopped reconnects
    // in the background, maybe after the others' calls ended: wait for it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut reconnections = 0;
    while reconnections < CLIENTS {
        match events.recv_deadline(deadline) {
            Ok(AmqpEvent::Connected { generation }) if generation > 1 => reconnections += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert_eq!(reconnections, CLIENTS, "each client reconnected once");
    eprintln!(
        "broker restart: {answered} calls answered, {} executed twice",
        executed - answered
    );
    assert_eq!(server.session_count(), CLIENTS, "the sessions survived");
    server.shutdown().unwrap();
}

/// Seed S3, S4, S5: the configuration is a value (another scheme is refused
/// with a clear error), and the password never reaches the log or an error
/// text — at trace level, through a session, a refused login and a give-up.
#[test]
fn credentials_never_reach_the_log() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    capture_logs();
    let e = AmqpConfig::new("http://guest:guest@127.0.0.1:5672", "x").unwrap_err();
    assert!(e.to_string().contains("amqp:// or amqps://"), "{e}");
    let secret = format!("pw-{}", &mcpvisor::protocol::new_session_id()[..12]);
    let user = "mcpvisor-secret-test";
    let _ = Command::new("rabbitmqctl")
        .args(["delete_user", user])
        .output();
    rabbitmqctl(&["add_user", user, &secret]);
    rabbitmqctl(&["set_permissions", "-p", "/", user, ".*", ".*", ".*"]);
    let url = format!("amqp://{user}:{secret}@127.0.0.1:5672");
    let mut config = config("secret");
    let _cleanup = Cleanup(config.clone());
    config.url = AmqpUrl::parse(&url).unwrap();
    config.reconnect.max_attempts = 2;
    config.reconnect.backoff.initial = Duration::from_millis(10);
    let count = Arc::new(AtomicUsize::new(0));
    let server = server(count).start_amqp(config.clone()).unwrap();
    let client =
        Client::connect(Connection::amqp(&config).unwrap(), ClientOptions::default()).unwrap();
    client.call_tool("count", json!({})).unwrap();
    let mut errors = vec![format!("{config:?}"), config.url.to_string()];
    let wrong = AmqpConfig::new(&url.replace(&secret, &format!("{secret}x")), "x").unwrap();
    errors.push(Connection::amqp(&wrong).err().expect("refused").to_string());
    client.close();
    server.shutdown().unwrap();
    rabbitmqctl(&["delete_user", user]);
    let records = RECORDS.lock().unwrap_or_else(|p| p.into_inner());
    assert!(
        records.iter().any(|r| r.contains(&format!("{user}:***@"))),
        "the URL is logged, redacted"
    );
    for line in records.iter().chain(&errors) {
        assert!(!line.contains(&secret), "leaked: {line}");
    }
}

/// Starts the record afresh (what earlier tests logged is gone).
fn forget_logs() {
    RECORDS.lock().unwrap_or_else(|p| p.into_inner()).clear();
}

/// Whether a log record of this process contains `text`.
fn logged(text: &str) -> Result<(), String> {
    let records = RECORDS.lock().unwrap_or_else(|p| p.into_inner());
    match records.iter().any(|r| r.contains(text)) {
        true => Ok(()),
        false => Err(format!("not logged: {text}")),
    }
}

/// A server started through `proxy` with one tool, `hold`, that holds in
/// the proxy what the broker sends from then on (the confirm of its own
/// answer included) and forgets what was logged before.
fn holding_server(
    proxy: &Arc<Proxy>,
    config: &AmqpConfig,
) -> mcpvisor::transport::amqp::AmqpServer {
    let mut through_proxy = config.clone();
    through_proxy.url = AmqpUrl::parse(&proxy.url()).unwrap();
    let holding = proxy.clone();
    Server::builder("amqp-hold-test", "1.0")
        .tool(Tool::new("hold", json!({"type":"object"}), move |_, _| {
            // What is logged from now on is about what the proxy holds.
            forget_logs();
            holding.hold();
            Ok(ToolResult::text("held"))
        }))
        .build()
        .unwrap()
        .start_amqp(through_proxy)
        .unwrap()
}

/// A confirm that comes after `ACK_DELAY` (a broker slow to confirm) is
/// waited for: it wakes the idle link, which acknowledges the request. With
/// a prefetch of 1 nothing else is delivered until then, so the next call
/// is answered only if that happened.
#[test]
fn an_overdue_confirm_is_acknowledged_when_it_comes() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    capture_logs();
    forget_logs();
    let proxy = Arc::new(Proxy::start());
    let mut config = config("overdue");
    let _cleanup = Cleanup(config.clone());
    config.prefetch = 1;
    let server = holding_server(&proxy, &config);
    let options = ClientOptions {
        request_timeout: common::WAIT,
        ..ClientOptions::default()
    };
    let client = Client::connect(Connection::amqp(&config).unwrap(), options).unwrap();
    let r = client.call_tool("hold", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "held");
    common::eventually("the link finds the confirm overdue", || {
        logged("confirms overdue; waiting for them")
    });
    proxy.release();
    let r = client.call_tool("hold", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "held");
    proxy.release();
    client.close();
    server.shutdown().unwrap();
}

/// An intentional stop publishes what the handlers answered, then waits for
/// the broker to confirm it and acknowledges the requests: a request that
/// was answered is not delivered again (to run a second time) when the
/// server's channel closes. The broker's confirm of the answer waits in a
/// proxy until the stopping server says it waits for it.
#[test]
fn a_stopping_server_acknowledges_the_requests_it_answered() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    capture_logs();
    forget_logs();
    let proxy = Arc::new(Proxy::start());
    let config = config("stop-confirms");
    let _cleanup = Cleanup(config.clone());
    let server = holding_server(&proxy, &config);
    // A stateless call travels through the shared request queue, which
    // outlives the server.
    let options = ClientOptions {
        generation: Generation::Stateless,
        ..ClientOptions::default()
    };
    let client = Client::connect(Connection::amqp(&config).unwrap(), options).unwrap();
    let r = client.call_tool("hold", json!({})).unwrap();
    assert_eq!(r["content"][0]["text"], "held");
    let stopping = std::thread::spawn(move || server.shutdown());
    common::eventually("the stopping server waits for the confirm", || {
        logged("waiting for the broker to confirm")
    });
    proxy.release();
    stopping.join().unwrap().unwrap();
    let mut conn = open(&config.url, 0).unwrap();
    let channel = conn.open_channel(None).unwrap();
    let queue = channel
        .queue_declare_passive(config.request_queue())
        .unwrap();
    assert_eq!(
        queue.declared_message_count(),
        Some(0),
        "the answered request was delivered again"
    );
    client.close();
    let _ = conn.close();
}

/// A client whose connection is lost for a moment while its instance sends
/// it a notification (which the broker returns: its queue is gone) tells
/// the instance it is back once it connects again: the session lives on
/// past `client_gone_grace`, although the client had nothing else to
/// publish. Before, the instance ended it after the grace.
#[test]
fn a_client_back_from_a_short_outage_keeps_its_session() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    capture_logs();
    forget_logs();
    let clock = supervisor::ManualClock::new();
    let mut config = config("back");
    let _cleanup = Cleanup(config.clone());
    config.clock = Arc::new(clock.clone());
    config.client_gone_grace = Duration::from_secs(5);
    let server = server(Arc::new(AtomicUsize::new(0)));
    let amqp = server.start_amqp(config.clone()).unwrap();
    let proxy = Proxy::start();
    let mut client_config = config.clone();
    client_config.url = AmqpUrl::parse(&proxy.url()).unwrap();
    client_config.reconnect.backoff.initial = Duration::from_millis(20);
    client_config.reconnect.backoff.max = Duration::from_millis(200);
    client_config.reconnect.max_attempts = 1000;
    let (events_tx, events) = crossbeam_channel::unbounded();
    client_config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = events_tx.send(e.clone());
    }));
    let client = Client::connect(
        Connection::amqp(&client_config).unwrap(),
        ClientOptions::default(),
    )
    .unwrap();
    client.call_tool("count", json!({})).unwrap();
    proxy.refusing.store(true, Ordering::SeqCst);
    proxy.cut();
    let until = |what: &str, wanted: fn(&AmqpEvent) -> bool| loop {
        let e = events
            .recv_timeout(common::WAIT)
            .unwrap_or_else(|_| panic!("{what}"));
        if wanted(&e) {
            break;
        }
    };
    until("the client notices the cut", |e| {
        matches!(e, AmqpEvent::Disconnected(_))
    });
    // A list change for the session comes back from the broker once the
    // client's queue has gone with its connection.
    let mut n = 0;
    common::eventually("a notification to the client comes back", || {
        n += 1;
        let tool = Tool::new(format!("t{n}"), json!({"type":"object"}), |_, _| {
            Ok(ToolResult::text(""))
        });
        server.add_tool(tool).unwrap();
        logged("; its client is gone")
    });
    proxy.refusing.store(false, Ordering::SeqCst);
    until(
        "the client connects again",
        |e| matches!(e, AmqpEvent::Connected { generation } if *generation > 1),
    );
    common::eventually("the instance hears the client is back", || {
        logged("its client is back")
    });
    clock.advance(config.client_gone_grace * 2);
    assert_eq!(amqp.sweep_sessions(), 0, "the session ended");
    assert_eq!(amqp.session_count(), 1);
    client.call_tool("count", json!({})).unwrap();
    client.close();
    amqp.shutdown().unwrap();
}
