//! The daemon's startup and idle footprint: time from exec to `READY=1`
//! on a test NOTIFY_SOCKET (every listener bound), and the resident set
//! size once ready and after a second of idleness, with the example
//! configuration. `cargo bench --bench daemon_startup -- [--runs N]`.

mod common;

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");
const CONFIG: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/mcpvisor.json");

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(20);
    let dir = std::env::temp_dir().join(format!("mcpvisor-startup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("notify.sock");
    let manager = UnixDatagram::bind(&sock).unwrap();
    manager
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut ready = Vec::new();
    let (mut rss_ready, mut rss_idle, mut idle_ticks) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        let mut child = Command::new(BIN)
            .args(["--config", CONFIG, "--listen", "http://127.0.0.1:0/mcp"])
            .env("NOTIFY_SOCKET", &sock)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut buf = [0u8; 1024];
        loop {
            let n = manager.recv(&mut buf).expect("READY=1");
            if buf[..n].starts_with(b"READY=1") {
                break;
            }
        }
        ready.push(start.elapsed());
        rss_ready.push(common::proc_status(child.id(), "VmRSS:"));
        let before = common::cpu_ticks(child.id());
        std::thread::sleep(Duration::from_secs(1));
        idle_ticks.push(common::cpu_ticks(child.id()) - before);
        rss_idle.push(common::proc_status(child.id(), "VmRSS:"));
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        child.wait().unwrap();
    }
    ready.sort();
    rss_ready.sort();
    rss_idle.sort();
    idle_ticks.sort();
    let median = |v: &[Duration]| v[v.len() / 2];
    println!(
        "daemon startup, example config, {runs} runs: exec to READY=1 median {:.1} ms (min {:.1}, max {:.1})",
        median(&ready).as_secs_f64() * 1e3,
        ready[0].as_secs_f64() * 1e3,
        ready[ready.len() - 1].as_secs_f64() * 1e3
    );
    println!(
        "RSS at READY median {} KiB; after 1 s idle median {} KiB; CPU ticks (1/100 s) used in that idle second: median {}, max {}",
        rss_ready[runs / 2],
        rss_idle[runs / 2],
        idle_ticks[runs / 2],
        idle_ticks[runs - 1]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
