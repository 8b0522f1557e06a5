//! AMQP load bench: request-reply `tools/call echo` through the local
//! RabbitMQ, with 1 and 32 clients calling back to back (each its own
//! connection and reply queue), against `examples/echo --amqp` (release).
//! The ceilings, measured in the same run with the same driver: a raw
//! amiquip publish/consume ping-pong of a message of the same size, bare
//! (`raw`: no JSON-RPC, no acknowledgements, no confirms — what the broker
//! and amiquip allow at best) and with the delivery guarantees mcpvisor
//! gives (`raw+acks`: the responder acknowledges each request once the
//! broker confirmed its reply).
//!
//! ```text
//! cargo bench --bench amqp_load -- [--calls N] [--clients 1,32] [--no-ceiling] [--url amqp://guest:guest@127.0.0.1:5672]
//! ```

use amiquip::{
    AmqpProperties, Channel, Connection as Broker, ConsumerMessage, ConsumerOptions, Publish,
    QueueDeclareOptions,
};
use crossbeam_channel::Receiver;
use mcpvisor::client::{Client, ClientOptions, Connection};
use mcpvisor::transport::amqp::{open, AmqpConfig, AmqpUrl};
use serde_json::json;
mod common;

const REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}"#;

/// A raw peer: connection, channel and the receiver of its own queue.
struct RawPeer {
    _conn: Broker,
    channel: Channel,
    queue: String,
    rx: Receiver<ConsumerMessage>,
}

fn raw_peer(url: &AmqpUrl, name: &str, no_ack: bool) -> RawPeer {
    let mut conn = open(url, 0).expect("broker");
    let channel = conn.open_channel(None).unwrap();
    let queue = channel
        .queue_declare(
            name,
            QueueDeclareOptions {
                exclusive: true,
                auto_delete: true,
                ..Default::default()
            },
        )
        .unwrap();
    let consumer = queue
        .consume(ConsumerOptions {
            no_ack,
            ..Default::default()
        })
        .unwrap();
    let rx = consumer.receiver().clone();
    // The consumer borrows the channel; it lives as long as the channel.
    std::mem::forget(consumer);
    RawPeer {
        queue: queue.name().to_owned(),
        _conn: conn,
        channel,
        rx,
    }
}

fn recv(rx: &Receiver<ConsumerMessage>) -> amiquip::Delivery {
    match rx.recv().expect("delivery") {
        ConsumerMessage::Delivery(d) => d,
        other => panic!("{other:?}"),
    }
}

/// A ceiling: a responder that sends every message straight back; with
/// `acks`, it acknowledges each one after the broker confirmed the reply.
fn raw_ping_pong(url: &AmqpUrl, clients: usize, calls: usize, acks: bool) -> common::Stats {
    let service = format!("bench.raw.{}", &mcpvisor::protocol::new_session_id()[..8]);
    let responder = {
        let (url, service) = (url.clone(), service.clone());
        let (ready_tx, ready) = crossbeam_channel::bounded(1);
        let handle = std::thread::spawn(move || {
            let peer = raw_peer(&url, &service, !acks);
            let confirms = acks.then(|| {
                peer.channel.enable_publisher_confirms().unwrap();
                peer.channel.listen_for_publisher_confirms().unwrap()
            });
            ready_tx.send(()).unwrap();
            let mut waiting = std::collections::BTreeMap::<u64, amiquip::Delivery>::new();
            let mut seq = 0u64;
            let total = clients * (calls + 10);
            let mut replied = 0;
            while replied < total || !waiting.is_empty() {
                if let Some(confirms) = &confirms {
                    // Once every request is answered, block for the last confirms.
                    let last = (replied == total).then(|| confirms.recv().expect("confirm"));
                    for c in last.into_iter().chain(confirms.try_iter()) {
                        let amiquip::Confirm::Ack(p) = c else {
                            panic!("nack")
                        };
                        let done: Vec<u64> = if p.multiple {
                            waiting.range(..=p.delivery_tag).map(|(k, _)| *k).collect()
                        } else {
                            vec![p.delivery_tag]
                        };
                        for tag in done {
                            if let Some(d) = waiting.remove(&tag) {
                                d.ack(&peer.channel).unwrap();
                            }
                        }
                    }
                }
                if replied == total {
                    continue;
                }
                let d = recv(&peer.rx);
                let reply_to = d.properties.reply_to().clone().unwrap();
                let props = AmqpProperties::default()
                    .with_content_type("application/json".into())
                    .with_correlation_id(d.properties.message_id().clone().unwrap_or_default());
                peer.channel
                    .basic_publish("", Publish::with_properties(&d.body, reply_to, props))
                    .unwrap();
                replied += 1;
                if acks {
                    seq += 1;
                    waiting.insert(seq, d);
                }
            }
        });
        ready.recv().unwrap();
        handle
    };
    let stats = common::concurrent(
        clients,
        calls,
        || {
            let peer = raw_peer(url, "", true);
            for _ in 0..10 {
                raw_call(&peer, &service);
            }
            peer
        },
        |peer| raw_call(peer, &service),
    );
    responder.join().unwrap();
    stats
}

fn raw_call(peer: &RawPeer, service: &str) {
    let props = AmqpProperties::default()
        .with_content_type("application/json".into())
        .with_message_id("m".into())
        .with_reply_to(peer.queue.clone());
    peer.channel
        .basic_publish(
            "",
            Publish::with_properties(REQUEST.as_bytes(), service, props),
        )
        .unwrap();
    recv(&peer.rx);
}

fn mcpvisor_load(config: &AmqpConfig, clients: usize, calls: usize) -> common::Stats {
    common::concurrent(
        clients,
        calls,
        || {
            let c = Client::connect(Connection::amqp(config).unwrap(), ClientOptions::default())
                .unwrap();
            for _ in 0..10 {
                c.call_tool("echo", json!({"message": "hello"})).unwrap();
            }
            c
        },
        |c| {
            c.call_tool("echo", json!({"message": "hello"})).unwrap();
        },
    )
}

fn main() {
    let mut calls = 10_000;
    let mut url = "amqp://guest:guest@127.0.0.1:5672".to_owned();
    let mut client_counts = vec![1, 32];
    let mut ceilings = true;
    let mut only_ceiling = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--url" => url = args.next().expect("--url URL"),
            "--clients" => {
                client_counts = args
                    .next()
                    .and_then(|v| v.split(',').map(|n| n.parse().ok()).collect())
                    .expect("--clients N[,N...]")
            }
            "--no-ceiling" => ceilings = false,
            "--only-ceiling" => only_ceiling = true,
            _ => {}
        }
    }
    let name = format!("bench-{}", &mcpvisor::protocol::new_session_id()[..8]);
    let listen = format!("{url}?name={name}");
    let (mut child, _) = common::spawn_echo(&["--listen", &listen]);
    let config = AmqpConfig::new(&url, name.as_str()).expect("--url");
    common::header("clients");
    for clients in client_counts {
        let per = (calls / clients).max(100);
        let us = if only_ceiling {
            common::Stats::default()
        } else {
            mcpvisor_load(&config, clients, per)
        };
        common::row("mcpvisor", clients, &us);
        let kinds: &[(&str, bool)] = if ceilings {
            &[("raw", false), ("raw+acks", true)]
        } else {
            &[]
        };
        for &(label, acks) in kinds {
            let ceiling = raw_ping_pong(&config.url, clients, per, acks);
            common::row(label, clients, &ceiling);
            println!(
                "{:<10} {clients:>9} {:>11.0}% {:>8.2}x {:>8.2}x",
                format!("vs {label}"),
                100.0 * us.calls_per_sec / ceiling.calls_per_sec,
                us.p50_us / ceiling.p50_us,
                us.p99_us / ceiling.p99_us
            );
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    // The shared request queue is durable; this run's is not needed again.
    if let Ok(mut conn) = open(&config.url, 0) {
        if let Ok(ch) = conn.open_channel(None) {
            let _ = ch.queue_delete(config.request_queue(), Default::default());
        }
    }
}
