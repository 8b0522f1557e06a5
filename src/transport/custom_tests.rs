use super::*;
use crate::protocol::Engine;
use crate::transport::flow::tests::until;
use std::collections::BTreeSet;

fn engine() -> Arc<Engine> {
    Engine::new(Default::default(), Default::default(), Default::default()).unwrap()
}

/// `initialize`, `notifications/initialized`, then `pings` pings (ids 1…).
fn lines(pings: usize) -> Vec<u8> {
    let mut text = String::from(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
"#,
    );
    for id in 1..=pings {
        text.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
        text.push('\n');
    }
    text.into_bytes()
}

const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The ids of the answers `outbox` holds until it ends (on a thread of
/// its own, 10 s at most), and whether it overflowed.
fn answered(outbox: Outbox) -> (BTreeSet<u64>, bool) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let ids = std::iter::from_fn(|| outbox.recv())
            .map(|m| {
                let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
                assert!(v.get("result").is_some(), "an answer: {v}");
                v["id"].as_u64().unwrap()
            })
            .collect();
        let _ = tx.send((ids, outbox.overflowed()));
    });
    rx.recv_timeout(WAIT).expect("the outbox ends")
}

/// A connection reading `input` on a thread of its own (closed at the end
/// of the input): how its reading ended, its outbox, and whether its
/// reader waits for room.
fn reading(
    capacity: usize,
    input: Vec<u8>,
) -> (Receiver<io::Result<()>>, Outbox, impl Fn() -> bool) {
    let options = ConnectionOptions {
        outbox_capacity: capacity,
        ..Default::default()
    };
    let (conn, outbox) = ServerConnection::open(&engine(), options);
    let waiting = conn.room.as_ref().unwrap().probe();
    let (done_tx, done) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let read = conn.read_lines(&input[..]);
        conn.close();
        let _ = done_tx.send(read);
    });
    (done, outbox, waiting)
}

#[test]
fn a_peer_that_reads_late_is_slowed_down_and_loses_no_answer() {
    const PINGS: usize = 200;
    let (done, outbox, waiting) = reading(16, lines(PINGS));
    // Nobody writes yet: the reader stops once half the outbox is queued
    // (without the wait it would read on and the outbox overflow).
    until("the reader waits for the writer", &waiting);
    assert!(done.is_empty(), "still reading");
    assert!(!outbox.overflowed());
    assert!(outbox.rx.len() >= 8, "half the outbox (8 of 16) is queued");
    // The peer reads now: everything is answered.
    let (ids, overflowed) = answered(outbox);
    assert!(done.recv_timeout(WAIT).unwrap().is_ok());
    assert_eq!(ids, (0..=PINGS as u64).collect::<BTreeSet<_>>());
    assert!(!overflowed);
}

#[test]
fn written_lines_hold_each_answer_whole_and_in_order() {
    // The answers' buffers go back to the sink as they are written and
    // are filled again (the initialize answer's, the longest, among them):
    // each line must be exactly one answer, none carrying another's bytes.
    // A small outbox makes the reader wait for the writer, so that the
    // later answers are written into buffers given back.
    const PINGS: usize = 200;
    let (done, outbox, _) = reading(4, lines(PINGS));
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let written = outbox.write_lines(&mut out);
        let _ = tx.send(written.map(|()| out));
    });
    let out = rx.recv_timeout(WAIT).expect("the outbox ends").unwrap();
    assert!(done.recv_timeout(WAIT).unwrap().is_ok());
    let text = String::from_utf8(out).unwrap();
    let answers: Vec<serde_json::Value> = text
        .strip_suffix('\n')
        .expect("every line ends")
        .split('\n')
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert_eq!(answers.len(), PINGS + 1);
    assert_eq!(answers[0]["id"], 0);
    assert!(answers[0]["result"]["serverInfo"].is_object());
    for (id, answer) in answers.iter().enumerate().skip(1) {
        assert_eq!(
            answer,
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {}})
        );
    }
}

#[test]
fn a_reader_waiting_for_room_stops_when_the_writer_is_gone() {
    let (done, outbox, waiting) = reading(4, lines(100));
    until("the reader waits for room", &waiting);
    drop(outbox);
    assert!(done.recv_timeout(WAIT).unwrap().is_ok());
}

#[test]
fn a_batch_gives_back_what_a_large_message_made_it_take() {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    batch.resize(4 * 1024 * 1024, b'x');
    empty_batch(&mut batch);
    assert!(batch.is_empty());
    assert!(
        (WRITE_BATCH..2 * WRITE_BATCH).contains(&batch.capacity()),
        "{} bytes kept",
        batch.capacity()
    );
    // A batch within the bound keeps its memory.
    batch.extend_from_slice(b"{}\n");
    let at = batch.as_ptr();
    empty_batch(&mut batch);
    assert_eq!(batch.as_ptr(), at);
}

/// A connection taking messages of `max` bytes at most, past its
/// handshake (the `initialize` answer taken from its outbox).
fn opened(max: usize) -> (ServerConnection, Outbox) {
    let options = ConnectionOptions::default().with_max_message_bytes(max);
    let (conn, outbox) = ServerConnection::open(&engine(), options);
    conn.read_lines(&lines(0)[..]).unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&outbox.try_recv().unwrap()).unwrap();
    assert_eq!(answer["id"], 0);
    (conn, outbox)
}

/// The id and the error code of the next message in `outbox`.
fn next_error(outbox: &Outbox) -> (serde_json::Value, serde_json::Value) {
    let m = outbox.try_recv().expect("an answer");
    let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
    (v["id"].clone(), v["error"]["code"].clone())
}

#[test]
fn a_request_too_large_or_refused_is_answered_with_its_id() {
    use crate::jsonrpc::{INTERNAL_ERROR, INVALID_REQUEST};
    use serde_json::json;
    let ping = |id: u64, bytes: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"x":"{}"}}}}"#,
            "x".repeat(bytes)
        )
    };
    let (conn, outbox) = opened(100 * 1024);
    // Too long for the line framing: discarded as it is read.
    conn.read_lines(format!("{}\n", ping(5, 200 * 1024)).as_bytes())
        .unwrap();
    assert_eq!(next_error(&outbox), (json!(5), json!(INVALID_REQUEST)));
    // Too large, handed in whole.
    conn.receive(ping(6, 200 * 1024).as_bytes());
    assert_eq!(next_error(&outbox), (json!(6), json!(INVALID_REQUEST)));
    // Within the limit, but the shared memory for partial lines has no
    // room for it: the client may send it again, if it knows which.
    let input = format!("{}\n", ping(7, 80 * 1024));
    conn.read_lines_within(input.as_bytes(), Some(LineBudget::new(0)), None)
        .unwrap();
    assert_eq!(next_error(&outbox), (json!(7), json!(INTERNAL_ERROR)));
    assert!(outbox.try_recv().is_none());
}

/// The server pings its client, with a timeout far beyond the tests'
/// waits (only an answer failing the call ends it in time): how the call
/// ends, and the ping's id.
fn ping_the_client(
    conn: &ServerConnection,
    outbox: &Outbox,
) -> (
    crossbeam_channel::Receiver<Result<(), crate::protocol::PeerError>>,
    serde_json::Value,
) {
    let handle = crate::protocol::SessionHandle::new(&conn.session);
    let (tx, called) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(handle.ping(Duration::from_secs(3600)));
    });
    let m = outbox.recv().expect("the server's ping");
    let request: serde_json::Value = serde_json::from_slice(&m).unwrap();
    assert_eq!(request["method"], "ping");
    (called, request["id"].clone())
}

#[test]
fn a_response_too_large_fails_its_call_at_once_and_is_not_answered() {
    let (conn, outbox) = opened(1024);
    let (called, id) = ping_the_client(&conn, &outbox);
    let answer = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"x":"{}"}}}}"#,
        "x".repeat(4096)
    );
    // Too long for the line framing.
    conn.read_lines(format!("{answer}\n").as_bytes()).unwrap();
    let failed = called.recv_timeout(WAIT).expect("the call fails now");
    assert!(failed.is_err(), "{failed:?}");
    assert!(outbox.try_recv().is_none(), "a response is not answered");
}

#[test]
fn a_whole_response_too_large_fails_its_call_and_is_not_answered() {
    let (conn, outbox) = opened(1024);
    let (called, id) = ping_the_client(&conn, &outbox);
    let answer = format!(
        r#"{{"jsonrpc":"2.0","result":{{"x":"{}"}},"id":{id}}}"#,
        "x".repeat(4096)
    );
    // The id after the result: only the whole message tells.
    conn.receive(answer.as_bytes());
    let failed = called.recv_timeout(WAIT).expect("the call fails now");
    assert!(failed.is_err(), "{failed:?}");
    assert!(outbox.try_recv().is_none(), "a response is not answered");
}

#[test]
fn a_reader_with_room_stops_once_the_writer_is_gone() {
    let (conn, outbox) = ServerConnection::open(&engine(), ConnectionOptions::default());
    // The writer died (a failed write of stdout) before anything came in:
    // the outbox has all the room it had, but no request is run any more.
    drop(outbox);
    assert!(conn.read_lines(&lines(10)[..]).is_ok());
    assert_eq!(
        conn.session.phase(),
        crate::protocol::Phase::AwaitingInitialize,
        "not even initialize was taken in"
    );
}

#[test]
fn what_to_do_on_overflow_runs_once_whoever_comes_to_it() {
    use std::sync::atomic::AtomicUsize;
    let (conn, _outbox) = ServerConnection::open(&engine(), ConnectionOptions::default());
    let overflow = conn.overflow.clone().unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    // The race, one step at a time: a handler finds the outbox full…
    overflow.happened.store(true, Ordering::SeqCst);
    // …the transport says what to do, sees the overflow and does it…
    conn.on_overflow(move || {
        counted.fetch_add(1, Ordering::SeqCst);
    });
    // …and the handler, going on, finds what to do said.
    overflow.then_once();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // A second overflow, or a second word, does nothing more.
    overflow.trip(1);
    conn.on_overflow(|| panic!("only the first is kept"));
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
