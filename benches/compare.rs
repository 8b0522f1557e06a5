//! The comparison bench: `tools/call echo` against mcpvisor
//! (`examples/echo`), rmcp 3.x and the machine's ceiling (a std-only canned
//! responder), all built and measured in the same run, over stdio (1, 2, 4
//! … 64 requests in flight on one pipe) and Streamable HTTP (1, 2, 4 … 64
//! sessions, each a keep-alive connection calling back to back). Each point
//! runs `--runs` times (default 3) on a fresh server process, interleaved
//! across servers; prints min / median / max calls/s, p50 latency, calls
//! per server CPU-second and peak RSS, then the CPU each server burns in
//! 10 s without traffic.
//!
//! ```text
//! cargo bench --bench compare -- [--runs N] [--secs S] [--levels 1,32] [--idle-secs S]
//!     [--transports stdio,http] [--echo-features LIST] [--echo PATH] [--out DIR]
//! ```
//! `--idle-secs 0` skips the idle measurement; `--transports stdio` measures
//! stdio only. `--echo-features LIST` builds our server with only those
//! features of the crate (`--no-default-features --features LIST`, `""` for
//! none: stdio alone), as an embedder that needs no more would, in a target
//! directory of its own (`target/echo-features`); by default it has every
//! default feature (every transport, TLS, JSON Schema). HTTP needs `http`
//! in LIST; without it, measure `--transports stdio`. `--echo PATH`
//! measures that binary of `examples/echo` instead of building one (not
//! with `--echo-features`): to compare two builds, copy each binary
//! elsewhere (a build overwrites `target/release/examples/echo`) and run
//! once with each.
//! With `--out DIR` it also writes `DIR/compare.md` (the tables) and
//! `DIR/throughput.svg` (throughput against concurrency). The baselines
//! are cargo projects of their own under `benches/baselines/`.

mod common;

use common::keepalive::{parse_url, Conn};
use common::{INIT, INITIALIZED};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// Our server's binary: built by [`build`], or given with `--echo`.
static ECHO: std::sync::OnceLock<String> = std::sync::OnceLock::new();
const ECHO_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello world"}}}"#;

/// A server under test.
#[derive(Clone, Copy, PartialEq)]
enum Server {
    Mcpvisor,
    Rmcp,
    Raw,
}

const SERVERS: [Server; 3] = [Server::Mcpvisor, Server::Rmcp, Server::Raw];

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Mcpvisor => "mcpvisor",
            Server::Rmcp => "rmcp",
            Server::Raw => "raw",
        }
    }

    /// The command serving stdio, or HTTP on a free port.
    fn command(self, http: bool) -> Command {
        let (bin, stdio, http_args): (String, &[&str], &[&str]) = match self {
            Server::Mcpvisor => (
                ECHO.get().expect("built").clone(),
                &[],
                &["--listen", "http://127.0.0.1:0/mcp"],
            ),
            Server::Rmcp => (
                format!("{ROOT}/target/baselines/release/rmcp-echo"),
                &["stdio"],
                &["http", "127.0.0.1:0"],
            ),
            Server::Raw => (
                format!("{ROOT}/target/baselines/release/raw-echo"),
                &["stdio"],
                &["http", "127.0.0.1:0"],
            ),
        };
        let mut c = Command::new(bin);
        c.args(if http { http_args } else { stdio })
            .env("RUST_LOG", "error")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    }
}

/// Builds `examples/echo` (with only `features` if given); its path.
fn build_echo(features: Option<&str>) -> String {
    let mut ours = common::cargo();
    ours.args(["build", "--release", "--quiet", "--example", "echo"]);
    let target = match features {
        Some(list) => {
            ours.args(["--no-default-features", "--features", list])
                .arg("--target-dir")
                .arg(format!("{ROOT}/target/echo-features"));
            format!("{ROOT}/target/echo-features")
        }
        None => format!("{ROOT}/target"),
    };
    assert!(
        ours.status().expect("cargo").success(),
        "building examples/echo failed"
    );
    format!("{target}/release/examples/echo")
}

/// Builds `examples/echo` (with only `features` if given) unless `echo`
/// names a binary to measure instead, and both baselines (release).
fn build(features: Option<&str>, echo: Option<&str>) {
    let ours = echo.map_or_else(|| build_echo(features), str::to_owned);
    let _ = ECHO.set(ours);
    for project in ["rmcp-echo", "raw-echo"] {
        let status = common::cargo()
            .args(["build", "--release", "--quiet", "--manifest-path"])
            .arg(format!("{ROOT}/benches/baselines/{project}/Cargo.toml"))
            .arg("--target-dir")
            .arg(format!("{ROOT}/target/baselines"))
            .status()
            .expect("cargo");
        assert!(
            status.success(),
            "building benches/baselines/{project} failed"
        );
    }
}

/// What one run measured.
#[derive(Clone, Copy, Default)]
struct Sample {
    calls_per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    /// Calls per second of server CPU time.
    calls_per_cpu_sec: f64,
    rss_kib: u64,
}

/// Measures `window` of `load` against `child`: `load` runs until told to
/// stop and returns the latencies (ns) of the calls it timed after warm-up.
fn measure(
    child: &Child,
    warmup: Duration,
    window: Duration,
    load: impl FnOnce(&Window) -> Vec<u64>,
) -> Sample {
    let now = Instant::now();
    let w = Window {
        warmup,
        window,
        marks: std::sync::Mutex::new([(Duration::ZERO, now); 2]),
        pid: child.id(),
    };
    let lat = load(&w);
    let [(cpu_from, from), (cpu_to, to)] = *w.marks.lock().unwrap();
    let calls = lat.len() as f64;
    let cpu_secs = (cpu_to - cpu_from).as_secs_f64().max(1e-3);
    // The window as it passed (a late wake-up makes it longer than asked).
    let elapsed = to.duration_since(from);
    let stats = common::stats(lat, elapsed);
    Sample {
        calls_per_sec: stats.calls_per_sec,
        p50_us: stats.p50_us,
        p99_us: stats.p99_us,
        calls_per_cpu_sec: calls / cpu_secs,
        rss_kib: common::proc_status(child.id(), "VmHWM:"),
    }
}

/// The timing of one run: warm-up, then the measured window, whose start
/// and end read the clock and the server's CPU time.
struct Window {
    warmup: Duration,
    window: Duration,
    // (CPU, clock) at the start and at the end.
    marks: std::sync::Mutex<[(Duration, Instant); 2]>,
    pid: u32,
}

impl Window {
    fn mark(&self, i: usize) {
        self.marks.lock().unwrap()[i] = (common::cpu_time(self.pid), Instant::now());
    }
    fn start(&self) {
        self.mark(0);
    }
    fn end(&self) {
        self.mark(1);
    }
}

/// One client on the server's stdin / stdout with `inflight` requests
/// outstanding at all times: each response read sends the next request.
fn stdio_run(server: Server, inflight: usize, warmup: Duration, window: Duration) -> Sample {
    let mut child = server.command(false).spawn().expect("server");
    let stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::with_capacity(64 * 1024, child.stdout.take().unwrap());
    let mut w = std::io::BufWriter::with_capacity(64 * 1024, stdin);
    writeln!(w, "{INIT}").unwrap();
    w.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    writeln!(w, "{INITIALIZED}").unwrap();
    let sample = measure(&child, warmup, window, |t| {
        // The send time of request `id` is `sent_at[id - 1]` (answers may
        // come in any order).
        let mut sent_at = Vec::with_capacity(1 << 20);
        let mut next = 1usize;
        let send = |w: &mut std::io::BufWriter<_>, id: usize, sent_at: &mut Vec<Instant>| {
            debug_assert_eq!(sent_at.len(), id - 1);
            sent_at.push(Instant::now());
            writeln!(w, r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"hello world"}}}}}}"#).unwrap();
        };
        for _ in 0..inflight {
            send(&mut w, next, &mut sent_at);
            next += 1;
        }
        w.flush().unwrap();
        let begin = Instant::now();
        let (mut measuring, mut stop) = (false, false);
        let mut outstanding = inflight;
        let mut lat = Vec::new();
        while outstanding > 0 {
            line.clear();
            stdout.read_line(&mut line).unwrap();
            let id =
                common::response_id(&line).unwrap_or_else(|| panic!("unexpected line: {line}"));
            assert!(line.contains("hello world"), "not an echo: {line}");
            let now = Instant::now();
            if measuring && !stop {
                lat.push((now - sent_at[id - 1]).as_nanos() as u64);
            }
            let elapsed = now - begin;
            if !measuring && elapsed >= t.warmup {
                measuring = true;
                t.start();
            } else if measuring && !stop && elapsed >= t.warmup + t.window {
                stop = true;
                t.end();
            }
            if stop {
                outstanding -= 1;
            } else {
                send(&mut w, next, &mut sent_at);
                next += 1;
            }
            // Flush once nothing more is already read: requests go out in
            // batches when many responses arrived together.
            if stdout.buffer().is_empty() {
                w.flush().unwrap();
            }
        }
        lat
    });
    drop(w);
    let _ = child.kill();
    let _ = child.wait();
    sample
}

/// `sessions` HTTP sessions, each a thread on a keep-alive connection
/// calling back to back.
fn http_run(server: Server, sessions: usize, warmup: Duration, window: Duration) -> Sample {
    let mut child = server.command(true).spawn().expect("server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let (addr, path) = parse_url(line.trim().trim_start_matches("listening on "));
    let sample = measure(&child, warmup, window, |t| {
        let (measuring, stop) = (AtomicBool::new(false), AtomicBool::new(false));
        let barrier = std::sync::Barrier::new(sessions + 1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..sessions)
                .map(|_| {
                    let (measuring, stop, barrier, path) = (&measuring, &stop, &barrier, &path);
                    scope.spawn(move || {
                        let mut c = Conn::open(addr, path);
                        c.initialize();
                        barrier.wait();
                        let mut lat = Vec::new();
                        while !stop.load(Ordering::Relaxed) {
                            let started = Instant::now();
                            let counted = measuring.load(Ordering::Relaxed);
                            let answer = c.post(ECHO_CALL);
                            debug_assert!(answer.contains("hello world"), "{answer}");
                            if counted && !stop.load(Ordering::Relaxed) {
                                lat.push(started.elapsed().as_nanos() as u64);
                            }
                        }
                        lat
                    })
                })
                .collect();
            barrier.wait();
            std::thread::sleep(t.warmup);
            t.start();
            measuring.store(true, Ordering::Relaxed);
            std::thread::sleep(t.window);
            stop.store(true, Ordering::Relaxed);
            t.end();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        })
    });
    let _ = child.kill();
    let _ = child.wait();
    sample
}

/// min / median / max of `f` over the runs.
fn spread(runs: &[Sample], f: impl Fn(&Sample) -> f64) -> (f64, f64, f64) {
    common::spread(runs.iter().map(f))
}

/// Every run of one transport: `[level][server]` -> samples.
type Table = Vec<Vec<Vec<Sample>>>;

fn sweep(http: bool, levels: &[usize], runs: usize, warmup: Duration, window: Duration) -> Table {
    let mut table: Table = vec![vec![Vec::new(); SERVERS.len()]; levels.len()];
    for run in 0..runs {
        for (l, &level) in levels.iter().enumerate() {
            for (s, &server) in SERVERS.iter().enumerate() {
                let sample = if http {
                    http_run(server, level, warmup, window)
                } else {
                    stdio_run(server, level, warmup, window)
                };
                eprintln!(
                    "run {} {} {:<8} {level:>2}: {:>8.0} calls/s, p50 {:>6.1} µs, {:>8.0} calls/CPU-s",
                    run + 1,
                    if http { "http " } else { "stdio" },
                    server.name(),
                    sample.calls_per_sec,
                    sample.p50_us,
                    sample.calls_per_cpu_sec
                );
                table[l][s].push(sample);
            }
        }
    }
    table
}

/// The markdown table of one transport, with ratios against rmcp and raw.
fn report(title: &str, unit: &str, levels: &[usize], table: &Table) -> String {
    let mut out = format!(
        "### {title}\n\n| {unit} | server | calls/s min / median / max | p50 µs | p99 µs | calls per server CPU-s | peak RSS MiB | vs rmcp (calls/s, per CPU-s) | of raw |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    for (l, level) in levels.iter().enumerate() {
        let median = |s: usize, f: &dyn Fn(&Sample) -> f64| spread(&table[l][s], f).1;
        for (s, server) in SERVERS.iter().enumerate() {
            let (lo, mid, hi) = spread(&table[l][s], |x| x.calls_per_sec);
            let ratios = if *server == Server::Mcpvisor {
                let rmcp_cps = median(1, &|x| x.calls_per_sec);
                let rmcp_eff = median(1, &|x| x.calls_per_cpu_sec);
                format!(
                    "{:.2}x, {:.2}x | {:.0} %",
                    mid / rmcp_cps,
                    median(0, &|x| x.calls_per_cpu_sec) / rmcp_eff,
                    100.0 * mid / median(2, &|x| x.calls_per_sec)
                )
            } else {
                " | ".to_owned()
            };
            out += &format!(
                "| {level} | {} | {:.1}k / {:.1}k / {:.1}k | {:.0} | {:.0} | {:.0}k | {:.1} | {ratios} |\n",
                server.name(),
                lo / 1e3,
                mid / 1e3,
                hi / 1e3,
                median(s, &|x| x.p50_us),
                median(s, &|x| x.p99_us),
                median(s, &|x| x.calls_per_cpu_sec) / 1e3,
                median(s, &|x| x.rss_kib as f64) / 1024.0,
            );
        }
    }
    out
}

/// CPU each server uses in `secs` without traffic, after a short load (so
/// that every thread a load starts exists), all idling at once.
fn idle_report(secs: u64) -> String {
    let mut children = Vec::new();
    for server in SERVERS {
        for http in [false, true] {
            let mut child = server.command(http).spawn().expect("server");
            if http {
                let mut line = String::new();
                BufReader::new(child.stdout.take().unwrap())
                    .read_line(&mut line)
                    .unwrap();
                let (addr, path) = parse_url(line.trim().trim_start_matches("listening on "));
                let mut c = Conn::open(addr, &path);
                c.initialize();
                for _ in 0..2000 {
                    c.post(ECHO_CALL);
                }
                children.push((server, "HTTP, one idle session", child, None, Some(c)));
            } else {
                let mut w = child.stdin.take().unwrap();
                let mut r = BufReader::new(child.stdout.take().unwrap());
                let mut line = String::new();
                writeln!(w, "{INIT}\n{INITIALIZED}").unwrap();
                r.read_line(&mut line).unwrap();
                for _ in 0..2000 {
                    writeln!(w, "{ECHO_CALL}").unwrap();
                    line.clear();
                    r.read_line(&mut line).unwrap();
                }
                children.push((server, "stdio, initialized", child, Some((w, r)), None));
            }
        }
    }
    // Let the last call's wake-ups settle, then watch.
    std::thread::sleep(Duration::from_millis(500));
    let before: Vec<Duration> = children
        .iter()
        .map(|c| common::cpu_time(c.2.id()))
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    let mut out = format!("### Idle: server CPU in {secs} s without traffic\n\n| server | transport | CPU ms |\n|---|---|---|\n");
    for ((server, what, mut child, stdio, conn), before) in children.into_iter().zip(before) {
        let used = common::cpu_time(child.id()) - before;
        out += &format!("| {} | {what} | {} |\n", server.name(), used.as_millis());
        drop((stdio, conn));
        let _ = child.kill();
        let _ = child.wait();
    }
    out
}

/// Throughput (median) against concurrency, one panel per transport,
/// log-2 x axis, one line per server, min–max as a band of ticks.
fn svg(levels: &[usize], panels: &[(&str, &Table)]) -> String {
    let (pw, ph, ml, mt, gap) = (420.0, 300.0, 60.0, 40.0, 40.0);
    let width = ml + panels.len() as f64 * (pw + gap) + 20.0;
    let height = mt + ph + 70.0;
    let colors = ["#d62728", "#1f77b4", "#7f7f7f"];
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    );
    for (p, (title, table)) in panels.iter().enumerate() {
        let x0 = ml + p as f64 * (pw + gap);
        let max = table
            .iter()
            .flatten()
            .flatten()
            .map(|x| x.calls_per_sec)
            .fold(1.0, f64::max);
        let step = nice_step(max / 5.0);
        let top = (max / step).ceil() * step;
        let x = |i: usize| x0 + pw * i as f64 / (levels.len().max(2) - 1) as f64;
        let y = |v: f64| mt + ph - ph * v / top;
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"14\">{title}</text>\n",
            x0 + pw / 2.0,
            mt - 15.0
        );
        let mut v = 0.0;
        while v <= top + 1e-9 {
            s += &format!(
                "<line x1=\"{x0}\" x2=\"{x1}\" y1=\"{yv}\" y2=\"{yv}\" stroke=\"#ddd\"/><text x=\"{xt}\" y=\"{yt}\" text-anchor=\"end\">{k}k</text>\n",
                x1 = x0 + pw,
                yv = y(v),
                xt = x0 - 5.0,
                yt = y(v) + 4.0,
                k = v / 1e3
            );
            v += step;
        }
        for (i, level) in levels.iter().enumerate() {
            s += &format!(
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{level}</text>\n",
                x(i),
                mt + ph + 16.0
            );
        }
        s += &format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">requests in flight (stdio) / sessions (HTTP)</text>\n",
            x0 + pw / 2.0,
            mt + ph + 34.0
        );
        for (k, server) in SERVERS.iter().enumerate() {
            let mut points = String::new();
            for (i, runs) in table.iter().enumerate() {
                let (lo, mid, hi) = spread(&runs[k], |x| x.calls_per_sec);
                points += &format!("{:.1},{:.1} ", x(i), y(mid));
                s += &format!(
                    "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"{3}\" stroke-width=\"3\" opacity=\"0.4\"/>\n",
                    x(i),
                    y(lo),
                    y(hi),
                    colors[k]
                );
            }
            s += &format!(
                "<polyline points=\"{points}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                colors[k]
            );
            s += &format!(
                "<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n",
                x0 + 10.0 + 110.0 * k as f64,
                mt + ph + 56.0,
                colors[k],
                server.name()
            );
        }
        s += &format!("<text x=\"{}\" y=\"{}\" transform=\"rotate(-90 {0} {1})\" text-anchor=\"middle\">calls/s</text>\n", x0 - 45.0, mt + ph / 2.0);
    }
    s + "</svg>\n"
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let p = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * p)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * p)
}

fn main() {
    let mut runs = 3;
    let mut secs = 1.0;
    let mut idle_secs = 10;
    let mut levels = vec![1, 2, 4, 8, 16, 32, 64];
    let mut out: Option<String> = None;
    let mut transports = vec!["stdio".to_owned(), "http".to_owned()];
    let mut echo_features: Option<String> = None;
    let mut echo: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--runs" => runs = value().parse().expect("--runs N"),
            "--secs" => secs = value().parse().expect("--secs S"),
            "--idle-secs" => idle_secs = value().parse().expect("--idle-secs S"),
            "--levels" => {
                levels = value()
                    .split(',')
                    .map(|l| l.parse().expect("--levels 1,2,4"))
                    .collect()
            }
            "--out" => out = Some(value()),
            "--transports" => transports = value().split(',').map(str::to_owned).collect(),
            "--echo-features" => echo_features = Some(value()),
            "--echo" => {
                let path = value();
                let found =
                    std::fs::canonicalize(&path).unwrap_or_else(|e| panic!("--echo {path}: {e}"));
                echo = Some(found.display().to_string());
            }
            _ => {} // cargo bench passes --bench
        }
    }
    assert!(
        echo.is_none() || echo_features.is_none(),
        "--echo measures a binary as it was built: not with --echo-features"
    );
    build(echo_features.as_deref(), echo.as_deref());
    let window = Duration::from_secs_f64(secs);
    let warmup = Duration::from_secs_f64((secs / 3.0).max(0.2));
    let wanted = |t: &str| transports.iter().any(|w| w == t);
    let stdio = if wanted("stdio") {
        sweep(false, &levels, runs, warmup, window)
    } else {
        Vec::new()
    };
    let http = if wanted("http") {
        sweep(true, &levels, runs, warmup, window)
    } else {
        Vec::new()
    };
    let built = match (&echo, &echo_features) {
        (Some(path), _) => format!("mcpvisor as built at `{path}`"),
        (None, Some(list)) if list.is_empty() => {
            "mcpvisor built with no optional feature (stdio only)".to_owned()
        }
        (None, Some(list)) => format!("mcpvisor built with the features {list} only"),
        (None, None) => "mcpvisor built with its default features".to_owned(),
    };
    let mut md = format!(
        "Each point: {runs} runs of {secs} s after {:.1} s of warm-up, a fresh server process per run, servers interleaved; `tools/call echo`, client and server on the same {} cores; {built}.\n\n",
        warmup.as_secs_f64(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    // (chart label, table title, unit of concurrency, measurements)
    let panels: Vec<(&str, &str, &str, &Table)> = [
        (
            "stdio",
            "stdio: requests in flight on one pipe",
            "in flight",
            &stdio,
        ),
        (
            "Streamable HTTP",
            "Streamable HTTP: sessions, each a keep-alive connection calling back to back",
            "sessions",
            &http,
        ),
    ]
    .into_iter()
    .filter(|p| !p.3.is_empty())
    .collect();
    for (_, title, unit, table) in &panels {
        md += &report(title, unit, &levels, table);
        md += "\n";
    }
    if idle_secs > 0 {
        md += &idle_report(idle_secs);
    }
    println!("{md}");
    if let Some(dir) = out {
        std::fs::create_dir_all(&dir).expect("--out DIR");
        std::fs::write(format!("{dir}/compare.md"), &md).expect("write compare.md");
        let measured: Vec<(&str, &Table)> = panels.iter().map(|p| (p.0, p.3)).collect();
        let chart = svg(&levels, &measured);
        std::fs::write(format!("{dir}/throughput.svg"), chart).expect("write throughput.svg");
    }
}
