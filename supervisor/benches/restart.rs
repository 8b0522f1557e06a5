//! Time from a worker's panic to its replacement running (median, p99).
//!
//! ```text
//! cargo bench -p supervisor --bench restart -- [--iterations N]
//! ```
//! The worker stamps the instant just before it panics and again first
//! thing when its replacement runs; the difference is the restart latency
//! (panic unwinding + exit report + restart decision + thread spawn).

use std::time::{Duration, Instant};
use supervisor::{ChildSpec, Strategy, Supervisor, SupervisorSpec};

fn main() {
    let mut iterations = 20_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--iterations" {
            iterations = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--iterations N");
        }
    }
    // Silence the default panic message: 20,000 of them would dominate the run.
    std::panic::set_hook(Box::new(|_| {}));
    let (stamp_tx, stamp_rx) = crossbeam_channel::unbounded::<(&'static str, Instant)>();
    let (go_tx, go_rx) = crossbeam_channel::unbounded::<()>();
    let worker = ChildSpec::worker("victim", move |ctx| {
        stamp_tx.send(("up", Instant::now())).ok();
        crossbeam_channel::select! {
            recv(ctx.stop_signal()) -> _ => Ok(()),
            recv(go_rx) -> _ => {
                stamp_tx.send(("panic", Instant::now())).ok();
                panic!("bench");
            }
        }
    });
    let spec = SupervisorSpec::new("bench", Strategy::OneForOne)
        .intensity(u32::MAX, Duration::from_secs(1))
        .child(worker);
    let sup = Supervisor::start(spec).expect("start");
    let wait = |what: &str| {
        let (kind, at) = stamp_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("stamp");
        assert_eq!(kind, what);
        at
    };
    wait("up");
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        go_tx.send(()).unwrap();
        let panicked = wait("panic");
        let up = wait("up");
        samples.push(up - panicked);
    }
    sup.shutdown().expect("shutdown");
    samples.sort_unstable();
    let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    println!("panic -> replacement running, {iterations} restarts:");
    println!("  median {:>8.1} µs", pct(0.50).as_secs_f64() * 1e6);
    println!("  p99    {:>8.1} µs", pct(0.99).as_secs_f64() * 1e6);
    println!(
        "  max    {:>8.1} µs",
        samples[samples.len() - 1].as_secs_f64() * 1e6
    );
}
