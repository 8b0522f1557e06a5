//! The client against a scripted server: what a reconnection leaves
//! behind (answers meant for the old session, a new connection that ends
//! as it starts), and a server that would page for ever.

use super::*;
use crate::transport::connection::{MessageReader, MessageWriter};
use crossbeam_channel::{Receiver, Sender};
use std::io;

const WAIT: Duration = Duration::from_secs(10);

/// Hands what the client writes to the test; on `notifications/initialized`
/// first waits for `hold`, when given, to say go (or close).
struct Written(Sender<Value>, Option<Receiver<()>>);

impl MessageWriter for Written {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        if message["method"] == "notifications/initialized" {
            if let Some(hold) = &self.1 {
                let _ = hold.recv_timeout(WAIT);
            }
        }
        let _ = self.0.send(message.clone());
        Ok(())
    }
    fn close(&mut self) {}
}

/// What the test sends as the server; ends when the test drops its side,
/// telling `ended` first.
struct Incoming(Receiver<Value>, Option<Sender<()>>);

impl MessageReader for Incoming {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        match self.0.recv() {
            Ok(m) => Ok(Some(m.to_string().into_bytes())),
            Err(_) => {
                if let Some(ended) = self.1.take() {
                    let _ = ended.send(());
                }
                Ok(None)
            }
        }
    }
}

/// One connection as the test's server sees it.
struct Peer {
    to_client: Sender<Value>,
    written: Receiver<Value>,
}

impl Peer {
    /// The next message the client wrote whose method is `method`.
    fn next(&self, method: &str) -> Value {
        loop {
            let m = self.written.recv_timeout(WAIT).expect("the client writes");
            if m["method"] == method {
                return m;
            }
        }
    }

    fn send(&self, message: Value) {
        self.to_client.send(message).unwrap();
    }

    /// Answers the client's `initialize` and waits for `initialized`.
    fn initialize(&self) {
        let init = self.next("initialize");
        self.send(json!({"jsonrpc": "2.0", "id": init["id"], "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"}
        }}));
    }
}

/// A connection, its server's side, and what the client's reader tells
/// when it reaches its end.
fn connection(hold: Option<Receiver<()>>) -> (Connection, Peer, Receiver<()>) {
    let (to_client, incoming) = crossbeam_channel::unbounded();
    let (written_tx, written) = crossbeam_channel::unbounded();
    let (ended_tx, ended) = crossbeam_channel::unbounded();
    let conn = Connection::new(
        Box::new(Written(written_tx, hold)),
        Box::new(Incoming(incoming, Some(ended_tx))),
    );
    (conn, Peer { to_client, written }, ended)
}

/// Options that reconnect at once, from the connections `conns` hands out.
fn reconnecting(options: ClientOptions) -> ClientOptions {
    ClientOptions {
        reconnect: Some(crate::transport::reconnect::Reconnect {
            backoff: supervisor::Backoff {
                initial: Duration::from_millis(1),
                multiplier: 1.0,
                max: Duration::from_millis(1),
                jitter: 0.0,
                reset_after: Duration::from_secs(60),
            },
            max_attempts: 5,
        }),
        ..options
    }
}

/// A client connected over a first scripted connection (its server's side
/// returned), reconnecting to the connections the test sends next, and
/// what tells each of its reconnections.
fn connected_reconnecting() -> (Sender<Connection>, Peer, Client, Receiver<()>) {
    let (conns_tx, conns) = crossbeam_channel::unbounded();
    let (first, old, _) = connection(None);
    conns_tx.send(first).unwrap();
    let (reconnected_tx, reconnected) = crossbeam_channel::unbounded();
    let options = reconnecting(ClientOptions {
        on_reconnected: Some(Arc::new(move || {
            let _ = reconnected_tx.send(());
        })),
        ..Default::default()
    });
    let client = std::thread::spawn(move || Client::connect_with(connector(conns), options));
    old.initialize();
    let client = client.join().unwrap().expect("initialized");
    (conns_tx, old, client, reconnected)
}

fn connector(conns: Receiver<Connection>) -> impl Fn() -> io::Result<Connection> + Send + Sync {
    move || {
        conns
            .recv_timeout(WAIT)
            .map_err(|_| io::Error::other("no connection"))
    }
}

#[test]
fn a_callback_s_answer_never_reaches_the_session_after_a_reconnection() {
    let (conns_tx, conns) = crossbeam_channel::unbounded();
    let (asked_tx, asked) = crossbeam_channel::unbounded();
    let (release_tx, release) = crossbeam_channel::bounded::<()>(1);
    let options = reconnecting(ClientOptions {
        // One callback thread: the second request's callback runs after
        // the first one's answer was written, or not.
        callback_threads: 1,
        elicitation: Some(Arc::new(move |_: Value| {
            let _ = asked_tx.send(());
            let _ = release.recv_timeout(WAIT);
            Ok(json!({"action": "decline"}))
        })),
        roots: Some(Arc::new(|_: Value| Ok(json!({"roots": []})))),
        ..Default::default()
    });
    let (first, old, _) = connection(None);
    conns_tx.send(first).unwrap();
    let client = std::thread::spawn(move || Client::connect_with(connector(conns), options));
    old.initialize();
    let client = client.join().unwrap().expect("initialized");
    // The old session asks (id 1); its user is still deciding when the
    // connection ends and the client reconnects.
    old.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "elicitation/create",
        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}}}),
    );
    asked.recv_timeout(WAIT).unwrap();
    let (second, new, _) = connection(None);
    conns_tx.send(second).unwrap();
    drop(old);
    new.initialize();
    new.next("notifications/initialized");
    // The user answers the old question; the new session's own request 1
    // is then answered with its roots, and only so.
    release_tx.send(()).unwrap();
    new.send(json!({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}));
    let answer = loop {
        let m = new.written.recv_timeout(WAIT).expect("an answer");
        if m["id"] == 1 {
            break m;
        }
    };
    assert_eq!(answer["result"], json!({"roots": []}), "{answer}");
    drop(client);
}

#[test]
fn a_new_connection_that_ends_as_it_starts_is_made_again() {
    let (conns_tx, old, client, reconnected) = connected_reconnecting();
    // The next server answers `initialize` and hangs up; the client's
    // `initialized` is written only once its reader has seen the end.
    let (hold_tx, hold) = crossbeam_channel::bounded(1);
    let (second, short, ended) = connection(Some(hold));
    conns_tx.send(second).unwrap();
    let (third, last, _) = connection(None);
    conns_tx.send(third).unwrap();
    drop(old);
    short.initialize();
    drop(short.to_client);
    ended.recv_timeout(WAIT).unwrap();
    hold_tx.send(()).unwrap();
    // The client goes on to the third connection and works there.
    last.initialize();
    last.next("notifications/initialized");
    // The server sees `initialized` a moment before the client has done
    // reconnecting, and until then a request fails with `Closed`: each
    // such failure is followed by a reconnection's end (the second
    // connection's may come too, first).
    let pinged = std::thread::spawn(move || loop {
        match client.ping() {
            Err(ClientError::Closed) => reconnected.recv_timeout(WAIT).expect("reconnected"),
            other => return other,
        }
    });
    let ping = last.next("ping");
    last.send(json!({"jsonrpc": "2.0", "id": ping["id"], "result": {}}));
    pinged.join().unwrap().expect("the ping is answered");
}

#[test]
fn a_new_session_is_asked_again_for_the_subscriptions_and_log_level() {
    let (conns_tx, old, client, reconnected) = connected_reconnecting();
    let asked = {
        let client = client.clone();
        std::thread::spawn(move || {
            client.subscribe("file:///a")?;
            client.subscribe("file:///b")?;
            client.unsubscribe("file:///b")?;
            client.set_log_level(crate::LogLevel::Debug)
        })
    };
    for method in [
        "resources/subscribe",
        "resources/subscribe",
        "resources/unsubscribe",
        "logging/setLevel",
    ] {
        let m = old.next(method);
        old.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": {}}));
    }
    asked.join().unwrap().expect("kept");
    let (second, new, _) = connection(None);
    conns_tx.send(second).unwrap();
    drop(old);
    new.initialize();
    let subscribe = new.next("resources/subscribe");
    assert_eq!(subscribe["params"], json!({"uri": "file:///a"}));
    new.send(json!({"jsonrpc": "2.0", "id": subscribe["id"], "result": {}}));
    // Only what is still kept (not the one unsubscribed), then the level.
    let level = new.written.recv_timeout(WAIT).expect("the level");
    assert_eq!(level["method"], "logging/setLevel", "{level}");
    assert_eq!(level["params"], json!({"level": "debug"}));
    new.send(json!({"jsonrpc": "2.0", "id": level["id"], "result": {}}));
    reconnected.recv_timeout(WAIT).expect("reconnected");
    drop(client);
}

#[test]
fn a_listing_whose_cursor_comes_again_fails_instead_of_paging_for_ever() {
    let (conn, server, _) = connection(None);
    let client = std::thread::spawn(move || Client::connect(conn, ClientOptions::default()));
    server.initialize();
    let client = client.join().unwrap().expect("initialized");
    let listed = std::thread::spawn(move || client.list_tools());
    for cursor in ["a", "b", "a"] {
        let list = server.next("tools/list");
        server.send(json!({"jsonrpc": "2.0", "id": list["id"],
            "result": {"tools": [], "nextCursor": cursor}}));
    }
    let e = listed.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("\"a\" again"), "{e}");
}

/// The heartbeat takes any answer for a sign of life: a server that
/// answers its ping with an error is there (before, the client closed).
#[test]
fn a_heartbeat_answered_with_an_error_keeps_the_client() {
    let (conn, peer, _) = connection(None);
    let options = ClientOptions {
        heartbeat: Some(Duration::from_millis(500)),
        ..Default::default()
    };
    let client = std::thread::spawn(move || Client::connect(conn, options));
    peer.initialize();
    let client = client.join().unwrap().expect("initialized");
    // The server: each ping answered with an error at once, as it comes.
    let (pinged_tx, pinged) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        while let Ok(m) = peer.written.recv() {
            let answer = match m["method"].as_str() {
                Some("ping") => {
                    let _ = pinged_tx.send(());
                    json!({"jsonrpc": "2.0", "id": m["id"],
                        "error": {"code": -32601, "message": "Method not found"}})
                }
                Some("tools/list") => {
                    json!({"jsonrpc": "2.0", "id": m["id"], "result": {"tools": []}})
                }
                _ => continue,
            };
            if peer.to_client.send(answer).is_err() {
                return;
            }
        }
    });
    for _ in 0..2 {
        pinged.recv_timeout(WAIT).expect("a heartbeat");
    }
    // The second error answer has been handled once the next ping comes.
    pinged.recv_timeout(WAIT).expect("the heartbeat goes on");
    assert_eq!(
        client.request("tools/list", json!({})).unwrap(),
        json!({"tools": []})
    );
    drop(client);
}

/// A task that asks a new question at every poll still ends the wait, at
/// its time limit or its cap on questions (before, answering skipped the
/// limit and the cancellation checks: the wait never ended).
#[test]
fn a_task_that_keeps_asking_is_given_up_at_its_limit() {
    let (conn, peer, _) = connection(None);
    let options = ClientOptions {
        elicitation: Some(Arc::new(|_: Value| {
            Ok(json!({"action": "accept", "content": {}}))
        })),
        ..Default::default()
    };
    let client = std::thread::spawn(move || Client::connect(conn, options));
    peer.initialize();
    let client = client.join().unwrap().expect("initialized");
    let task = client.task("t1");
    let waiting = std::thread::spawn(move || task.wait(Some(Duration::from_millis(200))));
    let mut asked = 0;
    loop {
        let m = peer.written.recv_timeout(WAIT).expect("the client writes");
        let result = match m["method"].as_str() {
            Some("tasks/get") => {
                asked += 1;
                assert!(asked < 100_000, "the wait never ends");
                json!({"taskId": "t1", "status": "input_required", "inputRequests": {
                    format!("q{asked}"): {"method": "elicitation/create",
                        "params": {"message": "?", "requestedSchema": {"type": "object", "properties": {}}}}}})
            }
            Some("tasks/update") => json!({}),
            Some("tasks/cancel") => {
                peer.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": {}}));
                break;
            }
            _ => continue,
        };
        peer.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": result}));
    }
    // At the time limit, or at the cap on questions, whichever is first.
    let e = waiting.join().unwrap().unwrap_err().to_string();
    assert!(
        e.contains("did not end within") || e.contains("more than 1024 questions"),
        "{e}"
    );
}

#[test]
fn servers_that_drop_each_new_connection_use_up_the_attempts() {
    let (conns_tx, old, client, _reconnected) = connected_reconnecting();
    // The first connection, then four more, each lost as soon as it is up
    // (far sooner than `reset_after`): five in a row, the attempts allowed.
    drop(old);
    for _ in 0..4 {
        let (conn, peer, ended) = connection(None);
        conns_tx.send(conn).unwrap();
        peer.initialize();
        peer.next("notifications/initialized");
        drop(peer);
        ended.recv_timeout(WAIT).unwrap();
    }
    gives_up_asking_for_no_sixth(&client);
}

/// The client gives up, asking for no sixth connection (a sixth would
/// wait for the connector's `WAIT`).
fn gives_up_asking_for_no_sixth(client: &Client) {
    let deadline = Instant::now() + WAIT / 2;
    while !client.is_closed() {
        assert!(Instant::now() < deadline, "still reconnecting");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn connections_that_end_while_initializing_use_up_the_attempts_too() {
    // Each new connection ends while the client is still writing its
    // `initialized`: its reader sees the end while the reconnection is
    // under way and leaves it to that thread, which must count it as a
    // lost connection like one its reader reports (it took an attempt
    // and asked for a sixth connection).
    let (conns_tx, old, client, _reconnected) = connected_reconnecting();
    drop(old);
    for _ in 0..4 {
        let (release, hold) = crossbeam_channel::bounded(1);
        let (conn, peer, ended) = connection(Some(hold));
        conns_tx.send(conn).unwrap();
        peer.initialize();
        drop(peer);
        ended.recv_timeout(WAIT).unwrap();
        release.send(()).unwrap();
    }
    gives_up_asking_for_no_sixth(&client);
}
