//! The AMQP transport against the real RabbitMQ at 127.0.0.1:5672
//! (`.ci/run` starts it). Every test uses its own logical server name,
//! exchange and dead-letter objects, so tests run in parallel without
//! seeing each other's messages. One test per finding of
//! `shared/seeds/000` (an audit of another AMQP MCP transport) shows that
//! finding cannot happen here.

use amiquip::{
    AmqpProperties, AmqpValue, Channel, Connection as Broker, ConsumerMessage, ConsumerOptions,
    Delivery, ExchangeDeclareOptions, ExchangeType, FieldTable, Publish, QueueDeclareOptions,
};
use mcpvisor::client::{Client, ClientOptions, Connection, Reconnect};
use mcpvisor::transport::amqp::{open, AmqpConfig, AmqpEvent, AmqpServer, AmqpUrl};
use mcpvisor::{Server, Tool, ToolResult};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::amqp::{config, Cleanup, Proxy, BROKER};
use common::WAIT;

fn fast_reconnect(attempts: u32) -> Reconnect {
    let mut r = Reconnect::default();
    r.backoff.initial = Duration::from_millis(20);
    r.backoff.max = Duration::from_millis(200);
    r.max_attempts = attempts;
    r
}

/// A server with `echo`, `whoami` (names the instance) and `count`
/// (counts its executions).
fn server(instance: &str, executions: Arc<AtomicUsize>) -> Server {
    let me = instance.to_owned();
    Server::builder("amqp-test", "1.0")
        .tool(Tool::new(
            "echo",
            json!({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]}),
            |args, _| Ok(ToolResult::text(args["message"].as_str().unwrap_or_default())),
        ))
        .tool(Tool::new(
            "whoami",
            json!({"type":"object"}),
            move |_, _| Ok(ToolResult::text(me.clone())),
        ))
        .tool(Tool::new("count", json!({"type":"object"}), move |_, _| {
            executions.fetch_add(1, Ordering::SeqCst);
            Ok(ToolResult::text("counted"))
        }))
        .build()
        .unwrap()
}

fn start(instance: &str, config: &AmqpConfig) -> AmqpServer {
    server(instance, Arc::new(AtomicUsize::new(0)))
        .start_amqp(config.clone())
        .expect("the local RabbitMQ (see .ci/run)")
}

fn client(config: &AmqpConfig) -> Client {
    Client::connect(Connection::amqp(config).unwrap(), ClientOptions::default()).unwrap()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// A raw broker peer: its own exclusive queue, publishing whatever it is told.
struct Raw {
    _conn: Broker,
    channel: Channel,
    queue: String,
    rx: crossbeam_channel::Receiver<ConsumerMessage>,
}

impl Raw {
    fn new() -> Raw {
        let mut conn = open(&AmqpUrl::parse(BROKER).unwrap(), 10).unwrap();
        let channel = conn.open_channel(None).unwrap();
        let queue = channel
            .queue_declare(
                "",
                QueueDeclareOptions {
                    exclusive: true,
                    ..Default::default()
                },
            )
            .unwrap();
        let name = queue.name().to_owned();
        let rx = consume(&queue);
        Raw {
            _conn: conn,
            channel,
            queue: name,
            rx,
        }
    }
    fn publish(&self, exchange: &str, key: &str, body: &[u8], props: AmqpProperties) {
        self.channel
            .basic_publish(
                exchange,
                Publish::with_properties(body, key.to_owned(), props),
            )
            .unwrap();
    }
    fn props(&self, message_id: &str) -> AmqpProperties {
        AmqpProperties::default()
            .with_content_type("application/json".into())
            .with_message_id(message_id.into())
            .with_reply_to(self.queue.clone())
    }
    fn recv(&self) -> Delivery {
        match self.rx.recv_timeout(WAIT).expect("a message") {
            ConsumerMessage::Delivery(d) => d,
            other => panic!("{other:?}"),
        }
    }
}

/// Properties addressing the logical server of `config` through its exchange.
fn to_server(props: AmqpProperties, config: &AmqpConfig) -> AmqpProperties {
    let mut h = FieldTable::new();
    h.insert(
        "mcp-server".into(),
        AmqpValue::LongString(config.server_name.clone()),
    );
    props.with_headers(h)
}

fn header(d: &Delivery, name: &str) -> Option<String> {
    match d.properties.headers().as_ref()?.get(name)? {
        AmqpValue::LongString(s) => Some(s.clone()),
        _ => None,
    }
}

#[test]
fn a_client_calls_tools_through_the_broker() {
    let config = config("basic");
    let _cleanup = Cleanup(config.clone());
    let server = start("a", &config);
    let c = client(&config);
    assert_eq!(c.protocol_version().as_str(), "2025-11-25");
    let tools = c.list_tools().unwrap();
    assert_eq!(tools.len(), 3);
    for i in 0..50 {
        let r = c
            .call_tool("echo", json!({"message": format!("m{i}")}))
            .unwrap();
        assert_eq!(text(&r), format!("m{i}"));
    }
    assert_eq!(server.session_count(), 1);
    c.close();
    server.shutdown().unwrap();
}

/// Declares a queue bound to `exchange` with `key` and returns its receiver.
fn observe(raw: &Raw, exchange: &str, key: &str) -> crossbeam_channel::Receiver<ConsumerMessage> {
    let q = raw
        .channel
        .queue_declare(
            "",
            QueueDeclareOptions {
                exclusive: true,
                ..Default::default()
            },
        )
        .unwrap();
    let ex = raw
        .channel
        .exchange_declare(
            ExchangeType::Topic,
            exchange,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
        )
        .unwrap();
    q.bind(&ex, key, FieldTable::new()).unwrap();
    consume(&q)
}

/// Consumes `queue` for as long as its channel lives.
fn consume(queue: &amiquip::Queue) -> crossbeam_channel::Receiver<ConsumerMessage> {
    let consumer = queue
        .consume(ConsumerOptions {
            no_ack: true,
            ..Default::default()
        })
        .unwrap();
    let rx = consumer.receiver().clone();
    // Dropping a consumer cancels it; it borrows the channel, so it cannot
    // be kept beside it in `Raw`: it ends with the channel instead.
    std::mem::forget(consumer);
    rx
}

/// More calls running than `prefetch` stall nothing: the instance queue's
/// consumer takes what the engine lets the sessions run, so the session's
/// ping (and any other message of its instance's sessions) still comes
/// through, and every held call is answered once let go.
#[test]
fn calls_running_past_the_prefetch_stall_no_message_of_the_instance() {
    let mut config = config("prefetch");
    let _cleanup = Cleanup(config.clone());
    config.prefetch = 2;
    let (release_tx, release) = crossbeam_channel::unbounded::<()>();
    let server = Server::builder("held", "1.0")
        .tool(Tool::new("held", json!({"type":"object"}), move |_, _| {
            let _ = release.recv_timeout(WAIT);
            Ok(ToolResult::text("let go"))
        }))
        .build()
        .unwrap();
    let _amqp = server.start_amqp(config.clone()).unwrap();
    let raw = Raw::new();
    let (session, queue) = raw_initialize(&raw, &config);
    let send = |body: Value, id: &str| {
        raw.publish(
            "",
            &queue,
            body.to_string().as_bytes(),
            raw.props(id).with_headers(session_headers(&session)),
        );
    };
    for i in 0..4 {
        let call = json!({"jsonrpc":"2.0","id":format!("c{i}"),"method":"tools/call",
            "params":{"name":"held","arguments":{}}});
        send(call, &format!("m-c{i}"));
    }
    send(json!({"jsonrpc":"2.0","id":"p","method":"ping"}), "m-p");
    let first = body(&raw.recv());
    assert_eq!(
        first["id"], "p",
        "the ping is answered while four calls run: {first}"
    );
    for _ in 0..4 {
        release_tx.send(()).unwrap();
    }
    let mut answered: Vec<String> = (0..4)
        .map(|_| {
            let d = body(&raw.recv());
            assert_eq!(d["result"]["content"][0]["text"], "let go", "{d}");
            d["id"].as_str().unwrap_or_default().to_owned()
        })
        .collect();
    answered.sort();
    assert_eq!(answered, ["c0", "c1", "c2", "c3"]);
}

/// Initializes a session by hand; returns (session id, instance queue).
fn raw_initialize(raw: &Raw, config: &AmqpConfig) -> (String, String) {
    let init = json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}});
    raw.publish(
        &config.exchange,
        "mcp.request.initialize",
        init.to_string().as_bytes(),
        to_server(raw.props("m-init"), config),
    );
    let d = raw.recv();
    let session = header(&d, "mcp-session-id").expect("session header");
    let queue = d.properties.reply_to().clone().expect("instance queue");
    raw.publish(
        "",
        &queue,
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        raw.props("m-inited")
            .with_headers(session_headers(&session)),
    );
    (session, queue)
}

fn session_headers(session: &str) -> FieldTable {
    let mut h = FieldTable::new();
    h.insert(
        "mcp-session-id".into(),
        AmqpValue::LongString(session.to_owned()),
    );
    h
}

fn body(d: &Delivery) -> Value {
    serde_json::from_slice(&d.body).expect("the body is JSON")
}

/// Seed C1, M6, M7: the body is the raw JSON-RPC message (no envelope);
/// correlation id, reply queue, message id, timestamp, app id and content
/// type are AMQP properties; session id and protocol version are headers;
/// the session id is 128 random bits.
#[test]
fn c1_m6_m7_the_body_is_raw_json_rpc_and_transport_data_travels_in_properties() {
    let config = config("c1");
    let _cleanup = Cleanup(config.clone());
    let server = start("a", &config);
    let raw = Raw::new();
    let init = json!({"jsonrpc":"2.0","id":7,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}});
    raw.publish(
        &config.exchange,
        "mcp.request.initialize",
        init.to_string().as_bytes(),
        to_server(raw.props("request-77"), &config),
    );
    let d = raw.recv();
    let m = body(&d);
    assert_eq!(m["jsonrpc"], "2.0");
    assert_eq!(m["id"], 7);
    assert_eq!(m["result"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        m.as_object().unwrap().len(),
        3,
        "nothing but the JSON-RPC response: {m}"
    );
    common::validate_server_message("2025-11-25", &m, "initialize");
    let p = &d.properties;
    assert_eq!(p.content_type().as_deref(), Some("application/json"));
    assert_eq!(p.correlation_id().as_deref(), Some("request-77"));
    assert_eq!(p.reply_to().as_deref(), Some(server.instance_queue()));
    assert_eq!(p.app_id().as_deref(), Some(config.server_name.as_str()));
    assert!(p.message_id().is_some() && p.timestamp().is_some());
    assert_eq!(
        header(&d, "mcp-protocol-version").as_deref(),
        Some("2025-11-25")
    );
    let a = header(&d, "mcp-session-id").unwrap();
    let (b, _) = raw_initialize(&raw, &config);
    assert_ne!(a, b);
    for id in [&a, &b] {
        assert_eq!(id.len(), 32, "128 bits as hex: {id}");
        assert!(id.bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(!id.contains("amqp") && !id.contains("server"));
    }
    server.shutdown().unwrap();
}

/// The next dead letter from `dead` (a consumer of this test's own
/// dead-letter queue).
fn dead_letter(dead: &crossbeam_channel::Receiver<ConsumerMessage>) -> Delivery {
    match dead.recv_timeout(WAIT) {
        Ok(ConsumerMessage::Delivery(d)) => d,
        other => panic!("no dead letter arrived: {other:?}"),
    }
}

/// Seed C3, M1, S1, S2 (and M7 on input): a message that is not JSON, not
/// JSON-RPC, lacks `jsonrpc: "2.0"`, is wrapped in an envelope, is too big
/// or has another content type is never repaired or unwrapped: it is
/// rejected to the dead-letter exchange, its sender gets the error, and the
/// server goes on serving.
#[test]
fn c3_m1_s1_s2_malformed_messages_are_answered_and_dead_lettered() {
    let mut config = config("malformed");
    let _cleanup = Cleanup(config.clone());
    config.max_message_bytes = 4096;
    let server = start("a", &config);
    let raw = Raw::new();
    let dead = consume(
        &raw.channel
            .queue_declare_passive(config.dead_letter_queue.clone())
            .unwrap(),
    );
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(5000)
    );
    let cases: Vec<(&str, Vec<u8>, &str, i64)> = vec![
        ("not json", b"{not json".to_vec(), "application/json", -32700),
        (
            "missing jsonrpc",
            br#"{"id":1,"method":"ping"}"#.to_vec(),
            "application/json",
            -32600,
        ),
        (
            "jsonrpc 1.0",
            br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.to_vec(),
            "application/json",
            -32600,
        ),
        (
            "envelope",
            br#"{"message":{"jsonrpc":"2.0","id":1,"method":"ping"},"timestamp":1,"type":"request","correlationId":"x"}"#
                .to_vec(),
            "application/json",
            -32600,
        ),
        ("too large", big.into_bytes(), "application/json", -32600),
        (
            "content type",
            br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec(),
            "text/plain",
            -32600,
        ),
    ];
    for (what, payload, ct, code) in &cases {
        let props = to_server(raw.props(what).with_content_type((*ct).into()), &config);
        raw.publish(&config.exchange, "mcp.request.ping", payload, props);
        let d = raw.recv();
        let m = body(&d);
        assert_eq!(m["error"]["code"], *code, "{what}: {m}");
        if *what == "too large" {
            // Its first bytes show a request: answered with its id.
            assert_eq!(m["id"], 1, "{what}: {m}");
        }
        assert_eq!(d.properties.correlation_id().as_deref(), Some(*what));
        assert_eq!(
            &dead_letter(&dead).body,
            payload,
            "{what}: the original lands in the dead-letter queue"
        );
    }
    // Without a reply address: dead-lettered, nobody answered.
    raw.publish(
        &config.exchange,
        "mcp.request.ping",
        b"[]]",
        to_server(AmqpProperties::default(), &config),
    );
    assert_eq!(dead_letter(&dead).body, b"[]]");
    // A valid request with nowhere to answer is not run: dead-lettered.
    let ping = br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    raw.publish(
        &config.exchange,
        "mcp.request.ping",
        ping,
        to_server(AmqpProperties::default(), &config),
    );
    assert_eq!(dead_letter(&dead).body, ping);
    // The server is unharmed.
    raw.publish(
        &config.exchange,
        "mcp.request.ping",
        br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        to_server(raw.props("ok"), &config),
    );
    assert_eq!(
        body(&raw.recv()),
        json!({"jsonrpc":"2.0","id":"p","result":{}})
    );
    server.shutdown().unwrap();
}

/// Seed C2, M4, M2: answers follow the request they answer, not a lookup
/// by JSON-RPC id: two sessions use the same id at once and each gets its
/// own answer, correlated by its message id. With two instances on one
/// request queue every request is executed once (no duplicate consumers).
#[test]
fn c2_m2_m4_answers_follow_their_request_and_run_once() {
    let config = config("c2");
    let _cleanup = Cleanup(config.clone());
    let count = Arc::new(AtomicUsize::new(0));
    let a = server("a", count.clone())
        .start_amqp(config.clone())
        .unwrap();
    let b = server("b", count.clone())
        .start_amqp(config.clone())
        .unwrap();
    let (r1, r2) = (Raw::new(), Raw::new());
    let (s1, q1) = raw_initialize(&r1, &config);
    let (s2, q2) = raw_initialize(&r2, &config);
    for (raw, s, q, msg) in [(&r1, &s1, &q1, "one"), (&r2, &s2, &q2, "two")] {
        let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call",
            "params":{"name":"echo","arguments":{"message":msg}}});
        raw.publish(
            "",
            q,
            call.to_string().as_bytes(),
            raw.props(&format!("call-{msg}"))
                .with_headers(session_headers(s)),
        );
    }
    for (raw, msg) in [(&r1, "one"), (&r2, "two")] {
        let d = raw.recv();
        assert_eq!(body(&d)["result"]["content"][0]["text"], msg);
        assert_eq!(
            d.properties.correlation_id().as_deref(),
            Some(format!("call-{msg}").as_str())
        );
    }
    let clients: Vec<Client> = (0..4).map(|_| client(&config)).collect();
    for i in 0..100 {
        clients[i % 4].call_tool("count", json!({})).unwrap();
    }
    assert_eq!(
        count.load(Ordering::SeqCst),
        100,
        "each request ran exactly once"
    );
    assert_eq!(a.session_count() + b.session_count(), 2 + 4);
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}

/// A request is acknowledged once the broker confirmed its response, also
/// when nothing else happens on the link (confirms are taken between other
/// events, or after `ACK_DELAY`): with a prefetch of 1, the broker delivers
/// a session's next request only after the last one was acknowledged.
#[test]
fn a_confirmed_request_is_acknowledged_while_the_link_is_idle() {
    let mut config = config("ack-idle");
    let _cleanup = Cleanup(config.clone());
    config.prefetch = 1;
    let server = start("a", &config);
    let options = ClientOptions {
        request_timeout: WAIT,
        ..ClientOptions::default()
    };
    let c = Client::connect(Connection::amqp(&config).unwrap(), options).unwrap();
    for i in 0..20 {
        let message = i.to_string();
        let r = c
            .call_tool("echo", json!({ "message": message }))
            .expect("delivered once the call before it was acknowledged");
        assert_eq!(text(&r), message);
    }
    c.close();
    server.shutdown().unwrap();
}

/// Seed C4: after an intentional close nothing reconnects: the link's last
/// event is `Closed` and its thread ends (the event sender is dropped).
#[test]
fn c4_an_intentional_close_never_reconnects() {
    let mut config = config("c4");
    let _cleanup = Cleanup(config.clone());
    let server = start("a", &config);
    let (tx, rx) = crossbeam_channel::unbounded();
    config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = tx.send(e.clone());
    }));
    let c = client(&config);
    drop(config);
    c.call_tool("echo", json!({"message": "x"})).unwrap();
    c.close();
    let events: Vec<AmqpEvent> = rx.iter().collect();
    assert_eq!(
        events,
        vec![AmqpEvent::Connected { generation: 1 }, AmqpEvent::Closed]
    );
    server.shutdown().unwrap();
}

/// Seed C5 again: a broker that takes the connection and then refuses
/// what the link needs (here its exchange, declared before as another
/// type) counts each such connection as a failed attempt: the link gives
/// up after its attempts instead of reconnecting for ever.
#[test]
fn c5_a_broker_that_refuses_the_topology_is_given_up_on() {
    let mut config = config("c5-topology");
    let _cleanup = Cleanup(config.clone());
    let raw = Raw::new();
    raw.channel
        .exchange_declare(
            ExchangeType::Fanout,
            config.exchange.clone(),
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
        )
        .unwrap();
    config.reconnect = fast_reconnect(3);
    let (tx, rx) = crossbeam_channel::unbounded();
    config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = tx.send(e.clone());
    }));
    let connection = Connection::amqp(&config).unwrap();
    drop(config);
    // Without a limit it would connect and be refused for ever.
    let deadline = std::time::Instant::now() + WAIT;
    let gave_up = loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left).expect("the link gave up") {
            AmqpEvent::GaveUp(why) => break why,
            _ => continue,
        }
    };
    assert!(
        gave_up.contains("3 reconnection attempts failed"),
        "{gave_up}"
    );
    drop(connection);
}

/// Seed C5: when every reconnection attempt fails the link reports
/// `GaveUp` and the client's `on_closed` fires, failing nothing silently.
#[test]
fn c5_giving_up_emits_a_close_event() {
    let proxy = Proxy::start();
    let mut config = config("c5");
    let _cleanup = Cleanup(config.clone());
    let server = start("a", &config);
    config.url = AmqpUrl::parse(&proxy.url()).unwrap();
    config.reconnect = fast_reconnect(3);
    let (tx, rx) = crossbeam_channel::unbounded();
    config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = tx.send(e.clone());
    }));
    let (closed_tx, closed_rx) = crossbeam_channel::bounded(1);
    let options = ClientOptions {
        on_closed: Some(Arc::new(move |e| {
            let _ = closed_tx.send(e.to_string());
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::amqp(&config).unwrap(), options).unwrap();
    drop(config);
    proxy.close();
    let why = closed_rx.recv_timeout(WAIT).expect("on_closed fired");
    assert!(why.contains("3 reconnection attempts failed"), "{why}");
    let events: Vec<AmqpEvent> = rx.iter().collect();
    assert!(
        matches!(events.last(), Some(AmqpEvent::GaveUp(_))),
        "{events:?}"
    );
    assert!(c.ping().is_err());
    server.shutdown().unwrap();
}

/// Seed C7, M8: routing keys come from the method alone (never from tool
/// names), in one format for both sides; a user strategy replaces it on
/// both sides at once.
#[test]
fn c7_m8_routing_keys_come_from_the_method_alone() {
    let config = config("c7");
    let _cleanup = Cleanup(config.clone());
    let server = start("a", &config);
    let raw = Raw::new();
    let seen = observe(&raw, &config.exchange, "#");
    let c = client(&config);
    c.call_tool("whoami", json!({})).unwrap();
    match seen.recv_timeout(WAIT).unwrap() {
        ConsumerMessage::Delivery(d) => {
            assert_eq!(d.routing_key, "mcp.request.initialize");
            assert_eq!(body(&d)["method"], "initialize");
        }
        other => panic!("{other:?}"),
    }
    c.close();
    server.shutdown().unwrap();

    struct Custom;
    impl mcpvisor::transport::amqp::RoutingStrategy for Custom {
        fn routing_key(&self, m: &Value) -> String {
            format!(
                "custom.{}",
                m["method"].as_str().unwrap_or("reply").replace('/', ".")
            )
        }
        fn binding_keys(&self) -> Vec<String> {
            vec!["custom.#".into()]
        }
    }
    let mut custom = self::config("c7custom");
    let _cleanup = Cleanup(custom.clone());
    custom.routing = Arc::new(Custom);
    let server = start("a", &custom);
    let seen = observe(&raw, &custom.exchange, "#");
    let c = client(&custom);
    assert_eq!(text(&c.call_tool("whoami", json!({})).unwrap()), "a");
    match seen.recv_timeout(WAIT).unwrap() {
        ConsumerMessage::Delivery(d) => assert_eq!(d.routing_key, "custom.initialize"),
        other => panic!("{other:?}"),
    }
    server.shutdown().unwrap();
}

/// Seed M5: state is bounded. Sessions expire when idle (then a message for
/// one is answered with -32001 and the `mcp-session-status: not-found`
/// header, and a reconnecting client initializes again); an instance owns
/// at most `max_sessions`.
#[test]
fn m5_sessions_expire_and_are_capped() {
    let clock = supervisor::ManualClock::new();
    let mut config = config("m5");
    let _cleanup = Cleanup(config.clone());
    config.clock = Arc::new(clock.clone());
    config.max_sessions = 3;
    let server = start("a", &config);
    let raw = Raw::new();
    let (session, queue) = raw_initialize(&raw, &config);
    let (reconnected_tx, reconnected_rx) = crossbeam_channel::bounded(4);
    let cfg = config.clone();
    let c = Client::connect_with(
        move || Connection::amqp(&cfg),
        ClientOptions {
            reconnect: Some(fast_reconnect(5)),
            on_reconnected: Some(Arc::new(move || {
                let _ = reconnected_tx.send(());
            })),
            ..Default::default()
        },
    )
    .unwrap();
    let _third = client(&config);
    // Full: a fourth initialize is refused with an error, not a session.
    let refused = Raw::new();
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}});
    refused.publish(
        &config.exchange,
        "mcp.request.initialize",
        init.to_string().as_bytes(),
        to_server(refused.props("full"), &config),
    );
    let d = refused.recv();
    assert!(body(&d)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("session limit"));
    assert_eq!(server.session_count(), 3);
    clock.advance(config.session_idle + Duration::from_secs(1));
    // The background sweeper (on the same clock) may take some first.
    assert!(server.sweep_sessions() <= 3);
    assert_eq!(server.session_count(), 0);
    raw.publish(
        "",
        &queue,
        br#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
        raw.props("late").with_headers(session_headers(&session)),
    );
    let d = raw.recv();
    assert_eq!(body(&d)["error"]["code"], -32001);
    assert_eq!(
        header(&d, "mcp-session-status").as_deref(),
        Some("not-found")
    );
    // A batch (2025-03-26) is answered too: each of its requests.
    raw.publish(
        "",
        &queue,
        br#"[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":11,"method":"ping"}]"#,
        raw.props("late batch").with_headers(session_headers(&session)),
    );
    let answers = body(&raw.recv());
    assert_eq!(answers.as_array().map(Vec::len), Some(2), "{answers}");
    for (answer, id) in answers.as_array().into_iter().flatten().zip([10, 11]) {
        assert_eq!(
            (&answer["id"], &answer["error"]["code"]),
            (&json!(id), &json!(-32001))
        );
    }
    // The client learns its session is gone and initializes again.
    assert!(c.ping().is_err());
    reconnected_rx.recv_timeout(WAIT).expect("re-initialized");
    c.ping().unwrap();
    assert_eq!(server.session_count(), 1);
    server.shutdown().unwrap();
}

/// Two instances consume one request queue: new sessions are split between
/// them, and each session stays with the instance that accepted it.
#[test]
fn two_instances_split_new_sessions_and_keep_them() {
    let config = config("split");
    let _cleanup = Cleanup(config.clone());
    let a = start("a", &config);
    let b = start("b", &config);
    let clients: Vec<Client> = (0..20).map(|_| client(&config)).collect();
    let owners: Vec<String> = clients
        .iter()
        .map(|c| text(&c.call_tool("whoami", json!({})).unwrap()).to_owned())
        .collect();
    let on_a = owners.iter().filter(|o| *o == "a").count();
    assert!(
        on_a > 0 && on_a < 20,
        "both instances took sessions: {owners:?}"
    );
    assert_eq!((a.session_count(), b.session_count()), (on_a, 20 - on_a));
    for _ in 0..5 {
        for (c, owner) in clients.iter().zip(&owners) {
            assert_eq!(text(&c.call_tool("whoami", json!({})).unwrap()), owner);
        }
    }
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}

/// A draining instance (SIGTERM of the daemon) takes no new sessions: they
/// go to the other instance, while the sessions it has go on.
#[test]
fn a_draining_instance_leaves_new_sessions_to_the_others() {
    let config = config("drain");
    let _cleanup = Cleanup(config.clone());
    let a = start("a", &config);
    let kept = client(&config);
    assert_eq!(text(&kept.call_tool("whoami", json!({})).unwrap()), "a");
    let b = start("b", &config);
    a.stop_accepting();
    // Once the broker counts one consumer of the shared queue (b's), a
    // has cancelled its own.
    let mut conn = open(&AmqpUrl::parse(BROKER).unwrap(), 10).unwrap();
    let probe = conn.open_channel(None).unwrap();
    common::eventually("a stops consuming the shared queue", || {
        let q = probe
            .queue_declare_passive(config.request_queue())
            .map_err(|e| e.to_string())?;
        match q.declared_consumer_count() {
            Some(1) => Ok(()),
            n => Err(format!("{n:?} consumers")),
        }
    });
    for _ in 0..10 {
        let c = client(&config);
        assert_eq!(text(&c.call_tool("whoami", json!({})).unwrap()), "b");
        c.close();
    }
    // a's own session is still served.
    assert_eq!(text(&kept.call_tool("whoami", json!({})).unwrap()), "a");
    assert_eq!(a.session_count(), 1);
    a.shutdown().unwrap();
    b.shutdown().unwrap();
}

/// Killing an instance (SIGKILL of a real server process) makes its clients
/// initialize again, on the instance that is left.
#[test]
fn killing_an_instance_moves_its_clients_to_another() {
    let mut config = config("kill");
    // The example serves on the default exchange.
    config.exchange = mcpvisor::transport::amqp::config::DEFAULT_EXCHANGE.into();
    let _cleanup = Cleanup(config.clone());
    let listen = format!("{BROKER}?name={}", config.server_name);
    let args = ["--listen", listen.as_str()];
    let mut doomed = KillOnDrop(common::spawn_listening("echo", &args).0);
    let cfg = config.clone();
    let (reconnected_tx, reconnected_rx) = crossbeam_channel::bounded(4);
    let c = Client::connect_with(
        move || Connection::amqp(&cfg),
        ClientOptions {
            reconnect: Some(fast_reconnect(20)),
            on_reconnected: Some(Arc::new(move || {
                let _ = reconnected_tx.send(());
            })),
            ..Default::default()
        },
    )
    .unwrap();
    c.call_tool("echo", json!({"message": "before"})).unwrap();
    let _survivor = KillOnDrop(common::spawn_listening("echo", &args).0);
    doomed.0.kill().unwrap();
    doomed.0.wait().unwrap();
    // The first message after the kill is returned by the broker (the
    // instance's queue died with it): that call fails, the client
    // initializes again through the shared queue.
    let _ = c.call_tool("echo", json!({"message": "during"}));
    reconnected_rx.recv_timeout(WAIT).expect("re-initialized");
    let r = c.call_tool("echo", json!({"message": "after"})).unwrap();
    assert_eq!(text(&r), "after");
}

/// Seed S3: nothing reads the environment: the library has no
/// `std::env::var` anywhere below the daemon's service layer (whose
/// configuration expands `${VAR}` by design, and whose command tools pass
/// an allow-list on), and a server process started with every variable a
/// broker library might look at pointing at a dead broker serves on the URL
/// it was given.
#[test]
fn s3_the_environment_is_never_read() {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let service = std::path::Path::new(src).join("service");
    let mut dirs = vec![std::path::PathBuf::from(src)];
    let mut files = 0;
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path == service || path.ends_with("main.rs") {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                for needle in ["env::var", "env::vars", "option_env!"] {
                    assert!(!text.contains(needle), "{} uses {needle}", path.display());
                }
            }
        }
    }
    assert!(files > 10, "the source tree was walked");
    let mut config = config("env");
    config.exchange = mcpvisor::transport::amqp::config::DEFAULT_EXCHANGE.into();
    let _cleanup = Cleanup(config.clone());
    let dead = "amqp://nobody:nothing@127.0.0.1:1";
    let env = [
        ("AMQP_URL", dead),
        ("AMQP_URI", dead),
        ("RABBITMQ_URL", dead),
        ("MCP_AMQP_URL", dead),
        ("AMQP_EXCHANGE", "elsewhere"),
        ("AMQP_PREFETCH", "not a number"),
    ];
    let listen = format!("{BROKER}?name={}", config.server_name);
    let args = ["--listen", listen.as_str()];
    let _server = KillOnDrop(common::spawn_listening_with_env("echo", &args, &env).0);
    let c = client(&config);
    let r = c
        .call_tool("echo", json!({"message": "configured"}))
        .unwrap();
    assert_eq!(text(&r), "configured");
}

/// A server process that cannot outlive its test, even a failed one.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A network failure (every connection of both sides cut, more than once)
/// in the middle of a load: both reconnect, the session survives, and every
/// call is answered — possibly after its request was published again.
#[test]
fn a_network_cut_is_ridden_out_without_losing_requests() {
    let proxy = Proxy::start();
    let mut config = config("cut");
    let _cleanup = Cleanup(config.clone());
    config.url = AmqpUrl::parse(&proxy.url()).unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let server = server("a", count.clone())
        .start_amqp(config.clone())
        .unwrap();
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut client_config = config.clone();
    client_config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = tx.send(e.clone());
    }));
    let reinitialized = Arc::new(AtomicUsize::new(0));
    let clients: Vec<Client> = (0..4)
        .map(|_| {
            let r = reinitialized.clone();
            let options = ClientOptions {
                on_reconnected: Some(Arc::new(move || {
                    r.fetch_add(1, Ordering::SeqCst);
                })),
                ..Default::default()
            };
            Client::connect(Connection::amqp(&client_config).unwrap(), options).unwrap()
        })
        .collect();
    for _ in 0..clients.len() {
        assert_eq!(rx.recv().unwrap(), AmqpEvent::Connected { generation: 1 });
    }
    std::thread::scope(|s| {
        for c in &clients {
            s.spawn(move || {
                for i in 0..300 {
                    let r = c
                        .call_tool("count", json!({}))
                        .unwrap_or_else(|e| panic!("call {i}: {e}"));
                    assert_eq!(text(&r), "counted");
                }
            });
        }
        for _ in 0..3 {
            proxy.cut();
            // The next cut comes once every client is connected again.
            let mut connected = 0;
            while connected < clients.len() {
                if let AmqpEvent::Connected { .. } = rx.recv_timeout(WAIT).unwrap() {
                    connected += 1;
                }
            }
        }
    });
    assert!(count.load(Ordering::SeqCst) >= 1200);
    assert_eq!(
        reinitialized.load(Ordering::SeqCst),
        0,
        "the sessions survived"
    );
    // An `initialize` whose acknowledgement a cut swallowed is delivered
    // again and opens a session nobody uses; it expires when idle.
    assert!(server.session_count() >= 4);
    server.shutdown().unwrap();
}

/// #11 item 2: connection numbers only grow, also when the supervisor
/// restarts the link. A handler still running when the link was restarted
/// answers with its delivery's tag from the old connection; it must not be
/// taken for a tag of the new one (which acknowledged another delivery, or
/// closed the channel with PRECONDITION_FAILED: unknown delivery tag).
#[test]
fn a_link_restart_with_handlers_in_flight_acknowledges_nothing_twice() {
    let proxy = Proxy::start();
    let mut config = config("restart");
    let _cleanup = Cleanup(config.clone());
    let direct = config.clone();
    config.url = AmqpUrl::parse(&proxy.url()).unwrap();
    config.reconnect = fast_reconnect(1);
    let (events_tx, events) = crossbeam_channel::unbounded();
    let refusing = proxy.refusing.clone();
    config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        // The link gave up: let the restarted one connect.
        if matches!(e, AmqpEvent::GaveUp(_)) {
            refusing.store(false, Ordering::SeqCst);
        }
        let _ = events_tx.send(e.clone());
    }));
    let (started_tx, started) = crossbeam_channel::unbounded();
    let (release_tx, release) = crossbeam_channel::unbounded::<()>();
    let server = server("a", Arc::new(AtomicUsize::new(0)));
    server
        .add_tool(Tool::new("gated", json!({"type":"object"}), move |_, _| {
            let _ = started_tx.send(());
            let _ = release.recv_timeout(WAIT);
            Ok(ToolResult::text("released"))
        }))
        .unwrap();
    let amqp = server.start_amqp(config).unwrap();
    assert_eq!(
        events.recv().unwrap(),
        AmqpEvent::Connected { generation: 1 }
    );
    let c = client(&direct);
    std::thread::scope(|s| {
        let call = s.spawn(|| c.call_tool("gated", json!({})));
        started.recv_timeout(WAIT).expect("the handler runs");
        // Cut the server's link and refuse it until it gave up; the
        // supervisor restarts it and it connects again.
        proxy.refusing.store(true, Ordering::SeqCst);
        proxy.cut();
        loop {
            match events.recv_timeout(WAIT).expect("the link comes back") {
                AmqpEvent::Connected { generation } => {
                    assert!(generation > 1, "numbering started again at {generation}");
                    break;
                }
                _ => continue,
            }
        }
        release_tx.send(()).unwrap();
        let r = call.join().unwrap().expect("the call is answered");
        assert_eq!(text(&r), "released");
    });
    // One more round trip on the same channel: had the old tag been
    // acknowledged on it, the broker would have closed it by now.
    assert_eq!(
        text(&c.call_tool("echo", json!({"message": "after"})).unwrap()),
        "after"
    );
    let late: Vec<AmqpEvent> = events.try_iter().collect();
    assert!(late.is_empty(), "the link failed again: {late:?}");
    c.close();
    amqp.shutdown().unwrap();
}

/// A call that runs for seconds with nothing from the server meanwhile
/// makes the client check that the instance's queue still exists; the
/// queue is exclusive to the instance's connection, so the broker answers
/// RESOURCE_LOCKED (405), which means it does. Before, the client took that
/// for a failure and reconnected every second of such a call.
#[test]
fn a_long_call_keeps_the_client_connected() {
    let config = config("long-call");
    let _cleanup = Cleanup(config.clone());
    let server = server("a", Arc::new(AtomicUsize::new(0)));
    server
        .add_tool(Tool::new("slow", json!({"type":"object"}), |_, _| {
            // The handler's own work: long enough for the client's checks.
            std::thread::sleep(Duration::from_millis(3500));
            Ok(ToolResult::text("done"))
        }))
        .unwrap();
    let running = server.start_amqp(config.clone()).unwrap();
    let (events_tx, events) = crossbeam_channel::unbounded();
    let mut client_config = config.clone();
    client_config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = events_tx.send(e.clone());
    }));
    let c = client(&client_config);
    assert_eq!(text(&c.call_tool("slow", json!({})).unwrap()), "done");
    let seen: Vec<AmqpEvent> = events.try_iter().collect();
    assert_eq!(seen, [AmqpEvent::Connected { generation: 1 }]);
    c.close();
    running.shutdown().unwrap();
}

/// An instance that loses its connection loses what its queue held or was
/// delivering (the queue is exclusive to that connection). Connected
/// again, it tells its sessions' clients, and they publish again what they
/// have had no answer to. Before, such a request waited for its timeout.
#[test]
fn a_request_the_instance_lost_with_its_connection_is_published_again() {
    let proxy = Proxy::start();
    let mut config = config("resumed");
    let _cleanup = Cleanup(config.clone());
    let direct = config.clone();
    config.url = AmqpUrl::parse(&proxy.url()).unwrap();
    let (events_tx, events) = crossbeam_channel::unbounded();
    config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = events_tx.send(e.clone());
    }));
    let server = start("a", &config);
    assert_eq!(
        events.recv_timeout(WAIT).unwrap(),
        AmqpEvent::Connected { generation: 1 }
    );
    let c = client(&direct);
    assert_eq!(
        text(&c.call_tool("echo", json!({"message": "before"})).unwrap()),
        "before"
    );
    std::thread::scope(|s| {
        // The instance's connection takes the request from its queue, but
        // the proxy holds it back; then the connection is cut.
        proxy.hold();
        let call = s.spawn(|| {
            let with = mcpvisor::client::CallOptions {
                timeout: Some(WAIT),
                ..Default::default()
            };
            c.call_tool_with("echo", json!({"message": "in transit"}), with)
        });
        common::eventually("the request on its way to the instance", || {
            if proxy.withheld("in transit") {
                Ok(())
            } else {
                Err("not yet".to_owned())
            }
        });
        proxy.cut();
        proxy.release();
        let r = call.join().unwrap().expect("the call is answered");
        assert_eq!(text(&r), "in transit");
    });
    assert!(
        events
            .try_iter()
            .any(|e| matches!(e, AmqpEvent::Connected { generation } if generation > 1)),
        "the instance connected again"
    );
    c.close();
    server.shutdown().unwrap();
}

/// Polls `fact` (a sweep) while the manual clock moves on a second per
/// round: for effects of broker events the test cannot wait on directly.
fn eventually(clock: &supervisor::ManualClock, what: &str, mut fact: impl FnMut() -> bool) {
    common::eventually(what, || {
        if fact() {
            return Ok(());
        }
        clock.advance(Duration::from_secs(1));
        Err("not yet".to_owned())
    })
}

/// #11 items 7 and 19: sending to a session is not activity (notifications
/// kept sessions of dead clients alive forever); a message returned by the
/// broker ends its session after `client_gone_grace`; and the reply queue
/// is the one of `initialize`, whatever later messages say.
#[test]
fn sessions_of_gone_clients_expire_and_their_replies_stay_pinned() {
    let clock = supervisor::ManualClock::new();
    let mut config = config("gone");
    let _cleanup = Cleanup(config.clone());
    config.clock = Arc::new(clock.clone());
    config.session_idle = Duration::from_secs(10 * 24 * 3600);
    config.client_gone_grace = Duration::from_secs(5);
    let server = server("a", Arc::new(AtomicUsize::new(0)));
    let amqp = server.start_amqp(config.clone()).unwrap();
    let ping = |raw: &Raw, queue: &str, session: &str, id: &str| {
        let body = json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string();
        raw.publish(
            "",
            queue,
            body.as_bytes(),
            raw.props(id).with_headers(session_headers(session)),
        );
    };
    let tool = |name: &str| {
        Tool::new(name, json!({"type":"object"}), |_, _| {
            Ok(ToolResult::text(""))
        })
    };

    // Item 7: a notification to a silent client does not push expiry back.
    let raw = Raw::new();
    let (session, queue) = raw_initialize(&raw, &config);
    ping(&raw, &queue, &session, "p1");
    assert_eq!(body(&raw.recv())["id"], "p1");
    clock.advance(config.session_idle / 2);
    server.add_tool(tool("one")).unwrap();
    assert_eq!(
        body(&raw.recv())["method"],
        "notifications/tools/list_changed"
    );
    clock.advance(config.session_idle / 2 + Duration::from_secs(1));
    // The background sweeper (on the same clock) may take it first.
    assert!(amqp.sweep_sessions() <= 1);
    assert_eq!(amqp.session_count(), 0, "idle since its last message");

    // Item 19: another queue naming the session gets nothing of it.
    let owner = Raw::new();
    let (session, queue) = raw_initialize(&owner, &config);
    let other = Raw::new();
    ping(&other, &queue, &session, "p2");
    server.add_tool(tool("two")).unwrap();
    let mut got: Vec<Value> = vec![body(&owner.recv()), body(&owner.recv())];
    got.sort_by_key(|m| m["id"].is_null());
    assert_eq!(got[0]["id"], "p2", "{got:?}");
    assert_eq!(got[1]["method"], "notifications/tools/list_changed");
    assert!(other.rx.try_recv().is_err(), "redirected to another queue");

    // Item 7: the owner leaves (its queue goes with its connection); the
    // next notification comes back from the broker, and the session ends
    // after the grace time.
    drop(owner);
    drop(other);
    assert_eq!(amqp.session_count(), 1);
    server.add_tool(tool("three")).unwrap();
    eventually(
        &clock,
        "the session of a client whose queue is gone never ended",
        || amqp.sweep_sessions() == 1,
    );
    amqp.shutdown().unwrap();
}

#[test]
fn a_stateless_client_calls_and_answers_questions_through_the_broker() {
    use mcpvisor::client::Generation;
    let config = config("stateless");
    let _cleanup = Cleanup(config.clone());
    let asking = common::asking_server("amqp-stateless");
    let running = asking
        .start_amqp(config.clone())
        .expect("the local RabbitMQ");
    let options = ClientOptions {
        generation: Generation::Stateless,
        elicitation: Some(Arc::new(|_: Value| {
            Ok(json!({"action": "accept", "content": {"name": "Alice"}}))
        })),
        ..Default::default()
    };
    let c = Client::connect(Connection::amqp(&config).unwrap(), options).unwrap();
    assert_eq!(c.protocol_version().as_str(), "2026-07-28");
    let r = c.call_tool("ask", json!({})).unwrap();
    assert_eq!(text(&r), "2026-07-28 Alice");
    // No session is kept for a stateless client.
    assert_eq!(running.session_count(), 0);
    // A listen stream has no connection to stay open on: refused, said.
    let e = c
        .request(
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        )
        .unwrap_err();
    assert!(e.to_string().contains("not served over AMQP"), "{e}");
    // Subscribing opens one too: once it is refused, subscribing fails
    // with the refusal (nothing would ever arrive).
    c.subscribe("test://a").unwrap();
    let e = common::eventually("the refusal", || match c.subscribe("test://b") {
        Err(e) => Ok(e),
        Ok(()) => Err("subscribing still succeeds".into()),
    });
    assert!(e.to_string().contains("not served over AMQP"), "{e}");
    c.close();
    running.shutdown().unwrap();
}

/// A client that closes, or is dropped, ends its session on the server at
/// once (the AMQP form of an HTTP `DELETE`): before, its session stayed
/// until the idle expiry, holding one of the instance's `max_sessions`.
#[test]
fn a_client_that_closes_ends_its_session_at_once() {
    let mut config = config("goodbye");
    let _cleanup = Cleanup(config.clone());
    config.session_idle = Duration::from_secs(10 * 24 * 3600);
    let server = start("a", &config);
    for round in 0..4 {
        let c = client(&config);
        let r = c.call_tool("echo", json!({"message": "hi"})).unwrap();
        assert_eq!(text(&r), "hi");
        assert_eq!(server.session_count(), 1, "round {round}");
        if round % 2 == 0 {
            c.close();
        } else {
            drop(c);
        }
        common::eventually("the session outlived its client's close", || {
            match server.session_count() {
                0 => Ok(()),
                n => Err(format!("round {round}: {n} session(s)")),
            }
        });
    }
    server.shutdown().unwrap();
}

/// The message that ends a session is taken only from the session's own
/// client (its reply queue), with no body and naming the session; anything
/// else is dead-lettered and the session goes on. Ending a session that
/// is already gone is nothing.
#[test]
fn only_a_sessions_client_ends_it() {
    let config = config("goodbye-raw");
    let _cleanup = Cleanup(config.clone());
    let server = start("a", &config);
    let owner = Raw::new();
    let dead = consume(
        &owner
            .channel
            .queue_declare_passive(config.dead_letter_queue.clone())
            .unwrap(),
    );
    let (session, queue) = raw_initialize(&owner, &config);
    let ended = |raw: &Raw, id: &str, session: Option<&str>| {
        let mut h = session.map(session_headers).unwrap_or_default();
        h.insert(
            "mcp-session-status".into(),
            AmqpValue::LongString("ended".into()),
        );
        raw.props(id).with_headers(h)
    };
    let ping = |id: &str| {
        let request = json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string();
        let props = owner.props(id).with_headers(session_headers(&session));
        owner.publish("", &queue, request.as_bytes(), props);
        body(&owner.recv())
    };

    let other = Raw::new();
    let refused: [(&Raw, &str, &[u8], Option<&str>); 3] = [
        (&other, "from another queue", b"", Some(&session)),
        (&owner, "with a body", b"{}", Some(&session)),
        (&owner, "naming no session", b"", None),
    ];
    for (raw, what, payload, named) in refused {
        raw.publish("", &queue, payload, ended(raw, what, named));
        let d = dead_letter(&dead);
        assert_eq!(d.properties.message_id().as_deref(), Some(what));
        assert_eq!(server.session_count(), 1, "{what}: the session ended");
        assert_eq!(ping(what)["result"], json!({}), "{what}");
    }
    // Without a reply queue (it cannot be the session's).
    let props = ended(&owner, "no reply queue", Some(&session));
    let anonymous = AmqpProperties::default()
        .with_message_id("no reply queue".into())
        .with_headers(props.headers().clone().unwrap_or_default());
    owner.publish("", &queue, b"", anonymous);
    let d = dead_letter(&dead);
    assert_eq!(d.properties.message_id().as_deref(), Some("no reply queue"));
    assert_eq!(ping("no reply queue")["result"], json!({}));
    // No refusal was answered: a ping of `other`'s own comes back first.
    let request = br#"{"jsonrpc":"2.0","id":"o","method":"ping"}"#;
    other.publish("", &queue, request, other.props("o"));
    assert_eq!(body(&other.recv())["id"], "o", "a refusal was answered");

    owner.publish("", &queue, b"", ended(&owner, "bye", Some(&session)));
    // The same queue delivers in order: the ping comes after the goodbye.
    let after = ping("after");
    assert_eq!(after["error"]["code"], -32001, "{after}");
    assert_eq!(server.session_count(), 0);

    // Again, now for a session that is gone: acknowledged, not dead-lettered
    // (the next dead letter is the one refused after it).
    owner.publish("", &queue, b"", ended(&owner, "again", Some(&session)));
    owner.publish("", &queue, b"x", ended(&owner, "refused", Some(&session)));
    let d = dead_letter(&dead);
    assert_eq!(d.properties.message_id().as_deref(), Some("refused"));
    server.shutdown().unwrap();
}

/// Answers given while the broker was unreachable are published before the
/// instance tells its clients it is back (`mcp-session-status: resumed`):
/// the client has read them when it publishes again what is unanswered,
/// so a call answered meanwhile does not run twice. Before, the resume went
/// first and the call ran again. One pool thread runs the server's jobs in
/// order: a copy of the call would run before the call that follows it.
#[test]
fn answers_given_during_an_outage_go_out_before_the_resume() {
    let proxy = Proxy::start();
    let mut config = config("outage-answers");
    let _cleanup = Cleanup(config.clone());
    let direct = config.clone();
    config.url = AmqpUrl::parse(&proxy.url()).unwrap();
    config.reconnect = fast_reconnect(1000);
    let (events_tx, events) = crossbeam_channel::unbounded();
    config.on_event = Some(Arc::new(move |e: &AmqpEvent| {
        let _ = events_tx.send(e.clone());
    }));
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let (started_tx, started) = crossbeam_channel::unbounded();
    let (release_tx, release) = crossbeam_channel::unbounded::<()>();
    let server = Server::builder("amqp-outage-test", "1.0")
        .options(mcpvisor::protocol::EngineOptions {
            pool_threads: 1,
            ..Default::default()
        })
        .tool(Tool::new("gated", json!({"type":"object"}), move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = started_tx.send(());
            // The first run waits for the test; a copy would not.
            let _ = release.recv_timeout(WAIT);
            Ok(ToolResult::text("released"))
        }))
        .tool(Tool::new("after", json!({"type":"object"}), |_, _| {
            Ok(ToolResult::text("after"))
        }))
        .build()
        .unwrap();
    let amqp = server.start_amqp(config).unwrap();
    assert_eq!(
        events.recv().unwrap(),
        AmqpEvent::Connected { generation: 1 }
    );
    let c = client(&direct);
    std::thread::scope(|s| {
        let call = s.spawn(|| c.call_tool("gated", json!({})));
        started.recv_timeout(WAIT).expect("the handler runs");
        proxy.refusing.store(true, Ordering::SeqCst);
        proxy.cut();
        loop {
            match events.recv_timeout(WAIT).expect("the link notices the cut") {
                AmqpEvent::Disconnected(_) => break,
                _ => continue,
            }
        }
        // The answer waits for the link.
        release_tx.send(()).unwrap();
        drop(release_tx);
        common::eventually("the answer waits in the backlog", || match amqp.backlog() {
            0 => Err("nothing waits yet".to_owned()),
            _ => Ok(()),
        });
        proxy.refusing.store(false, Ordering::SeqCst);
        let r = call.join().unwrap().expect("the call is answered");
        assert_eq!(text(&r), "released");
    });
    // A copy of `gated` published after the resume would have run by now.
    assert_eq!(text(&c.call_tool("after", json!({})).unwrap()), "after");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the answered call ran again"
    );
    c.close();
    amqp.shutdown().unwrap();
}

/// A request of the server's to the client that the link cannot take (its
/// publish backlog is full; here it holds nothing) fails its handler at
/// once, saying why, rather than at its timeout.
#[test]
fn a_server_request_past_the_backlog_fails_at_once() {
    let mut config = config("backlog-request");
    let _cleanup = Cleanup(config.clone());
    let client_config = config.clone();
    config.max_backlog = 0;
    let server = server("a", Arc::new(AtomicUsize::new(0)));
    server
        .add_tool(Tool::new("roots", json!({"type":"object"}), |_, ctx| {
            let text = match ctx.list_roots(Duration::from_secs(600)) {
                Ok(_) => "answered".to_owned(),
                Err(e) => e.to_string(),
            };
            Ok(ToolResult::text(text))
        }))
        .unwrap();
    let amqp = server.start_amqp(config).unwrap();
    let options = ClientOptions {
        roots: Some(Arc::new(|_| Ok(json!({"roots": []})))),
        ..ClientOptions::default()
    };
    let c = Client::connect(Connection::amqp(&client_config).unwrap(), options).unwrap();
    let r = c.call_tool("roots", json!({})).unwrap();
    assert!(
        text(&r).contains("cannot send roots/list to the client: the publish backlog is full"),
        "{r}"
    );
    c.close();
    amqp.shutdown().unwrap();
}

/// A request of the server's to a client whose queue is gone comes back
/// from the broker (it is published `mandatory`): the handler that asked
/// learns it at once, not at its timeout.
#[test]
fn a_server_request_the_broker_returns_fails_at_once() {
    let config = config("returned-request");
    let _cleanup = Cleanup(config.clone());
    let server = server("a", Arc::new(AtomicUsize::new(0)));
    let (started_tx, started) = crossbeam_channel::unbounded();
    let (go_tx, go) = crossbeam_channel::unbounded::<()>();
    let (asked_tx, asked) = crossbeam_channel::unbounded();
    server
        .add_tool(Tool::new(
            "roots",
            json!({"type":"object"}),
            move |_, ctx| {
                let _ = started_tx.send(());
                let _ = go.recv_timeout(WAIT);
                let text = match ctx.list_roots(Duration::from_secs(600)) {
                    Ok(_) => "answered".to_owned(),
                    Err(e) => e.to_string(),
                };
                let _ = asked_tx.send(text);
                Ok(ToolResult::text(""))
            },
        ))
        .unwrap();
    let amqp = server.start_amqp(config.clone()).unwrap();
    let raw = Raw::new();
    let init = json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{"roots":{}},"clientInfo":{"name":"raw","version":"1"}}});
    raw.publish(
        &config.exchange,
        "mcp.request.initialize",
        init.to_string().as_bytes(),
        to_server(raw.props("m-init"), &config),
    );
    let d = raw.recv();
    let session = header(&d, "mcp-session-id").expect("session header");
    let queue = d.properties.reply_to().clone().expect("instance queue");
    let headers = || raw.props("m").with_headers(session_headers(&session));
    raw.publish(
        "",
        &queue,
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        headers(),
    );
    let call = json!({"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"roots","arguments":{}}});
    raw.publish("", &queue, call.to_string().as_bytes(), headers());
    started.recv_timeout(WAIT).expect("the handler runs");
    raw.channel
        .queue_delete(raw.queue.clone(), amiquip::QueueDeleteOptions::default())
        .unwrap();
    go_tx.send(()).unwrap();
    let text = asked
        .recv_timeout(WAIT)
        .expect("the handler learns at once");
    assert!(
        text.contains("cannot send roots/list to the client: its queue is gone"),
        "{text}"
    );
    amqp.shutdown().unwrap();
}
