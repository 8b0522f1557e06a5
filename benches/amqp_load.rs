//! AMQP load bench: request-reply `tools/call echo` through the local
//! RabbitMQ, with 1 and 32 clients calling back to back (each its own
//! connection and reply queue), against `examples/echo --amqp` (release).
//! The ceilings, measured in the same run with the same driver: a raw
//! amiquip publish/consume ping-pong of a message of the same size, bare
//! (`raw`: no JSON-RPC, no acknowledgements, no confirms — what the broker
//! and amiquip allow at best) and with the delivery guarantees mcpvisor
//! gives (`raw+acks`: the responder acknowledges each request once the
//! broker confirmed its reply), and those guarantees with the properties
//! mcpvisor's messages carry besides (`raw+env`: its headers, a timestamp,
//! an app id and `mandatory`), which tells the broker's share of the
//! envelope from mcpvisor's own.
//!
//! Every row runs `--runs` times (default 3), alternated: each row once in
//! every run, the order turned by one from run to run (so the broker's
//! cleanup after a row does not always fall on the same next row). Each
//! row gives min, median and max calls/s, the median p50 and p99, and the
//! median CPU a call (µs) of the broker (its schedulers busy-wait, so its
//! CPU grows with a run's length: compare rows by calls/s),
//! of the bench's own process (the clients, and the raw responder) and of
//! mcpvisor's server. The shares compare the runs pair by pair.
//!
//! ```text
//! cargo bench --bench amqp_load -- [--calls N] [--runs N] [--clients 1,32] [--no-ceiling] [--url amqp://guest:guest@127.0.0.1:5672]
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
fn raw_ping_pong(
    url: &AmqpUrl,
    clients: usize,
    calls: usize,
    acks: bool,
    envelope: bool,
) -> common::Stats {
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
                let props = if envelope { enveloped(props) } else { props };
                let mut publish = Publish::with_properties(&d.body, reply_to, props);
                publish.mandatory = envelope;
                peer.channel.basic_publish("", publish).unwrap();
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
                raw_call(&peer, &service, envelope);
            }
            peer
        },
        |peer| raw_call(peer, &service, envelope),
    );
    responder.join().unwrap();
    stats
}

/// What mcpvisor's messages carry beyond the raw ones: its headers (the
/// session and the protocol revision), a timestamp, an app id, and the
/// `mandatory` flag (set by the caller).
fn enveloped(props: AmqpProperties) -> AmqpProperties {
    let mut headers = amiquip::FieldTable::new();
    let session = mcpvisor::protocol::new_session_id();
    headers.insert(
        "mcp-session-id".into(),
        amiquip::AmqpValue::LongString(session),
    );
    headers.insert(
        "mcp-protocol-version".into(),
        amiquip::AmqpValue::LongString("2025-11-25".into()),
    );
    props
        .with_timestamp(1)
        .with_app_id("mcpvisor-client".into())
        .with_headers(headers)
}

fn raw_call(peer: &RawPeer, service: &str, envelope: bool) {
    let props = AmqpProperties::default()
        .with_content_type("application/json".into())
        .with_message_id("m".into())
        .with_reply_to(peer.queue.clone());
    let props = if envelope { enveloped(props) } else { props };
    let mut publish = Publish::with_properties(REQUEST.as_bytes(), service, props);
    publish.mandatory = envelope;
    peer.channel.basic_publish("", publish).unwrap();
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

/// The broker's process, if it runs on this machine: of the Erlang VMs
/// (`beam.smp`; `rabbitmqctl` runs one too, briefly), the one that used
/// the most CPU.
fn broker_pid() -> Option<u32> {
    let beams = std::fs::read_dir("/proc").ok()?.flatten().filter_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        (comm.trim() == "beam.smp").then_some(pid)
    });
    beams.max_by_key(|&pid| common::cpu_ticks(pid))
}

/// One run of one server: its figures, and the CPU each process spent
/// on a call (µs; NaN where there is no such process): the broker's, this
/// process's (the clients, and the raw responder) and mcpvisor's server's.
struct Run {
    stats: common::Stats,
    cpu: [f64; 3],
}

/// Runs `f`, which makes `calls` calls in all (its clients' warm-up
/// included), reading the processes' CPU time around it.
fn measured(server: Option<u32>, calls: usize, f: impl FnOnce() -> common::Stats) -> Run {
    let pids = [broker_pid(), Some(std::process::id()), server];
    let before = pids.map(|p| p.map(common::cpu_time));
    let stats = f();
    let mut cpu = [f64::NAN; 3];
    for (i, c) in cpu.iter_mut().enumerate() {
        if let (Some(pid), Some(before)) = (pids[i], before[i]) {
            let used = common::cpu_time(pid).saturating_sub(before);
            *c = used.as_secs_f64() * 1e6 / calls.max(1) as f64;
        }
    }
    Run { stats, cpu }
}

fn median(v: impl IntoIterator<Item = f64>) -> f64 {
    common::spread(v).1
}

/// A CPU figure, or `-` where there was no such process.
fn micros(us: f64) -> String {
    if us.is_nan() {
        "-".to_owned()
    } else {
        format!("{us:.0}")
    }
}

/// A server's runs at one client count: min, median and max calls/s, the
/// median latencies and CPU a call.
fn report(server: &str, clients: usize, runs: &[Run]) {
    let of = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f));
    let (lo, mid, hi) = common::spread(runs.iter().map(|r| r.stats.calls_per_sec));
    println!(
        "{server:<10} {clients:>7} {lo:>8.0} {mid:>8.0} {hi:>8.0} {:>8.1} {:>8.1} {:>7} {:>7} {:>7}",
        of(&|r| r.stats.p50_us),
        of(&|r| r.stats.p99_us),
        micros(of(&|r| r.cpu[0])),
        micros(of(&|r| r.cpu[1])),
        // The raw ceilings run no server of their own.
        micros(of(&|r| r.cpu[2])),
    );
}

/// mcpvisor's calls/s as a share of a ceiling's, run by run (the runs
/// alternate, so each pair shared the machine's state of the moment).
fn shares(label: &str, clients: usize, us: &[Run], them: &[Run]) {
    let each: Vec<f64> = us
        .iter()
        .zip(them)
        .map(|(a, b)| 100.0 * a.stats.calls_per_sec / b.stats.calls_per_sec)
        .collect();
    let listed: Vec<String> = each.iter().map(|p| format!("{p:.0}%")).collect();
    println!(
        "{:<11} {clients:>6} median {:.0}% (runs: {})",
        format!("vs {label}"),
        median(each.iter().copied()),
        listed.join(" ")
    );
}

fn main() {
    let mut calls = 10_000;
    let mut runs = 3;
    let mut url = "amqp://guest:guest@127.0.0.1:5672".to_owned();
    let mut client_counts = vec![1, 32];
    let mut ceilings = true;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--calls" => calls = args.next().and_then(|v| v.parse().ok()).expect("--calls N"),
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs N"),
            "--url" => url = args.next().expect("--url URL"),
            "--clients" => {
                client_counts = args
                    .next()
                    .and_then(|v| v.split(',').map(|n| n.parse().ok()).collect())
                    .expect("--clients N[,N...]")
            }
            "--no-ceiling" => ceilings = false,
            _ => {}
        }
    }
    let runs = runs.max(1);
    let name = format!("bench-{}", &mcpvisor::protocol::new_session_id()[..8]);
    let listen = format!("{url}?name={name}");
    let (mut child, _) = common::spawn_echo(&["--listen", &listen]);
    let config = AmqpConfig::new(&url, name.as_str()).expect("--url");
    // (label, acknowledgements after confirms, mcpvisor's envelope)
    let kinds: &[(&str, bool, bool)] = if ceilings {
        &[
            ("raw", false, false),
            ("raw+acks", true, false),
            ("raw+env", true, true),
        ]
    } else {
        &[]
    };
    println!(
        "{runs} runs of each row, alternated (in every run each row once, \
         the order turned by one from run to run)"
    );
    println!(
        "{:<10} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>7}",
        "server",
        "clients",
        "min/s",
        "median/s",
        "max/s",
        "p50 µs",
        "p99 µs",
        "broker",
        "clients",
        "server"
    );
    println!("{:>59}CPU µs a call (medians)", "");
    for clients in client_counts {
        let per = (calls / clients).max(100);
        // Every client warms up with 10 calls before the timed ones.
        let all = clients * (per + 10);
        // Row 0 is mcpvisor, row i the ceiling kinds[i - 1].
        let rows = kinds.len() + 1;
        let mut results: Vec<Vec<Run>> = (0..rows).map(|_| Vec::new()).collect();
        for run in 0..runs {
            for row in (0..rows).map(|k| (k + run) % rows) {
                let measurement = match row {
                    0 => measured(Some(child.id()), all, || {
                        mcpvisor_load(&config, clients, per)
                    }),
                    _ => {
                        let (_, acks, envelope) = kinds[row - 1];
                        measured(None, all, || {
                            raw_ping_pong(&config.url, clients, per, acks, envelope)
                        })
                    }
                };
                results[row].push(measurement);
            }
        }
        let theirs = results.split_off(1);
        let ours = results.pop().unwrap_or_default();
        report("mcpvisor", clients, &ours);
        for (&(label, ..), runs) in kinds.iter().zip(&theirs) {
            report(label, clients, runs);
        }
        for (&(label, ..), runs) in kinds.iter().zip(&theirs) {
            shares(label, clients, &ours, runs);
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
