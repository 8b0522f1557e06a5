//! The reader thread never waits for the writer.

use super::*;
use crate::transport::connection::{MessageReader, MessageWriter};
use crossbeam_channel::{Receiver, Sender};
use std::io;

const WAIT: Duration = Duration::from_secs(10);

/// Hands what the client writes to the test; a `tools/call` waits for the
/// gate to open, holding the client's writer meanwhile.
struct GatedWriter {
    written: Sender<Value>,
    gate: Receiver<()>,
}

impl MessageWriter for GatedWriter {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        let _ = self.written.send(message.clone());
        if message["method"] == "tools/call" {
            // Longer than the test waits for the reader: without the
            // change, the reader is still held when the test gives up.
            let _ = self.gate.recv_timeout(3 * WAIT);
        }
        Ok(())
    }
    fn close(&mut self) {}
}

struct Incoming(Receiver<Value>);

impl MessageReader for Incoming {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        Ok(self.0.recv().ok().map(|m| m.to_string().into_bytes()))
    }
}

/// The next message the client wrote whose method (or id) is `what`.
fn next_written(written: &Receiver<Value>, what: &str) -> Value {
    loop {
        let m = written.recv_timeout(WAIT).expect("the client writes");
        if m["method"] == what || m["id"] == what {
            return m;
        }
    }
}

#[test]
fn a_ping_answered_while_a_call_holds_the_writer_does_not_stop_the_reader() {
    let (written_tx, written) = crossbeam_channel::unbounded();
    let (gate_tx, gate) = crossbeam_channel::bounded(1);
    let (server, incoming) = crossbeam_channel::unbounded();
    let (note_tx, notes) = crossbeam_channel::unbounded();
    let options = ClientOptions {
        on_notification: Some(Arc::new(move |method: &str, _: &Value| {
            let _ = note_tx.send(method.to_owned());
        })),
        ..Default::default()
    };
    let connection = Connection::new(
        Box::new(GatedWriter {
            written: written_tx,
            gate,
        }),
        Box::new(Incoming(incoming)),
    );
    let client = std::thread::spawn(move || Client::connect(connection, options));
    let init = next_written(&written, "initialize");
    server
        .send(json!({"jsonrpc": "2.0", "id": init["id"], "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "s", "version": "1"}
        }}))
        .unwrap();
    let client = Arc::new(client.join().unwrap().expect("initialized"));
    // A call whose write holds the writer (as one blocked on a server that
    // stopped reading does).
    let caller = {
        let client = client.clone();
        std::thread::spawn(move || client.call_tool("slow", json!({})))
    };
    let call = next_written(&written, "tools/call");
    // The server pings, then notifies: the reader answers the ping without
    // waiting for the writer and reads on.
    server
        .send(json!({"jsonrpc": "2.0", "id": "p1", "method": "ping"}))
        .unwrap();
    server
        .send(json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"level": "info", "data": "after the ping"}}))
        .unwrap();
    assert_eq!(
        notes.recv_timeout(WAIT).as_deref(),
        Ok("notifications/message"),
        "the reader read on while the writer was held"
    );
    gate_tx.send(()).unwrap();
    assert_eq!(
        next_written(&written, "p1")["result"],
        json!({}),
        "ping answered"
    );
    server
        .send(json!({"jsonrpc": "2.0", "id": call["id"], "result": {"content": []}}))
        .unwrap();
    assert_eq!(caller.join().unwrap().unwrap()["content"], json!([]));
}

#[test]
fn a_broken_answer_fails_its_call_at_once() {
    let (written_tx, written) = crossbeam_channel::unbounded();
    let (_gate_tx, gate) = crossbeam_channel::bounded(1);
    let (server, incoming) = crossbeam_channel::unbounded();
    let connection = Connection::new(
        Box::new(GatedWriter {
            written: written_tx,
            gate,
        }),
        Box::new(Incoming(incoming)),
    );
    let options = ClientOptions {
        request_timeout: 3 * WAIT,
        ..Default::default()
    };
    let client = std::thread::spawn(move || Client::connect(connection, options));
    let init = next_written(&written, "initialize");
    server
        .send(json!({"jsonrpc": "2.0", "id": init["id"], "result": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"}
        }}))
        .unwrap();
    let client = client.join().unwrap().expect("initialized");
    let pinging = std::thread::spawn(move || client.ping());
    let ping = next_written(&written, "ping");
    // Both result and error: no answer, but its id can be read.
    server
        .send(json!({"jsonrpc": "2.0", "id": ping["id"], "result": {},
            "error": {"code": 1, "message": "x"}}))
        .unwrap();
    match pinging.join().unwrap() {
        Err(ClientError::Rpc(e)) => assert!(e.message.contains("malformed"), "{e:?}"),
        other => panic!("{other:?}"),
    }
}
