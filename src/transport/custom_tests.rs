use super::*;
use crate::protocol::Engine;
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

/// The ids of the answers `outbox` holds until it ends.
fn answered(outbox: &Outbox) -> BTreeSet<u64> {
    std::iter::from_fn(|| outbox.recv())
        .map(|m| {
            let v: serde_json::Value = serde_json::from_slice(&m).unwrap();
            assert!(v.get("result").is_some(), "an answer: {v}");
            v["id"].as_u64().unwrap()
        })
        .collect()
}

/// A connection reading `input` on a thread of its own (closed at the end
/// of the input), its outbox, and whether its reader waits for room.
fn reading(
    capacity: usize,
    input: Vec<u8>,
) -> (
    std::thread::JoinHandle<io::Result<()>>,
    Outbox,
    impl Fn() -> bool,
) {
    let options = ConnectionOptions {
        outbox_capacity: capacity,
        ..Default::default()
    };
    let (conn, outbox) = ServerConnection::open(&engine(), options);
    let waiting = conn.room.as_ref().unwrap().probe();
    let reader = std::thread::spawn(move || {
        let read = conn.read_lines(&input[..]);
        conn.close();
        read
    });
    (reader, outbox, waiting)
}

#[test]
fn a_peer_that_reads_late_is_slowed_down_and_loses_no_answer() {
    const PINGS: usize = 200;
    let (reader, outbox, waiting) = reading(16, lines(PINGS));
    // Nobody writes yet: the reader stops once half the outbox is queued
    // (without the wait it would read on and the outbox overflow).
    while !waiting() && !reader.is_finished() {
        std::thread::yield_now();
    }
    assert!(waiting(), "the reader waits for the writer");
    assert!(!outbox.overflowed());
    assert!(outbox.rx.len() >= 8, "half the outbox (8 of 16) is queued");
    // The peer reads now: everything is answered.
    let ids = answered(&outbox);
    reader.join().unwrap().unwrap();
    assert_eq!(ids, (0..=PINGS as u64).collect::<BTreeSet<_>>());
    assert!(!outbox.overflowed());
}

#[test]
fn a_reader_waiting_for_room_stops_when_the_writer_is_gone() {
    let (reader, outbox, waiting) = reading(4, lines(100));
    while !waiting() {
        assert!(!reader.is_finished(), "the reader waits for room");
        std::thread::yield_now();
    }
    drop(outbox);
    reader.join().unwrap().unwrap();
}
