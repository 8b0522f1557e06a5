//! A short run of every fuzz target (fuzz/run.sh --smoke: about 8 s each,
//! after building them with coverage instrumentation on the stable
//! toolchain). A crash, a hang past 10 s or an allocation past 512 MiB
//! leaves an input in fuzz/target/artifacts and fails the test. The long
//! runs are `fuzz/run.sh TARGET -runs=10000000` (see fuzz/README.md).

use std::process::Command;

#[test]
fn every_fuzz_target_survives_a_short_run() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut cmd = Command::new(format!("{root}/fuzz/run.sh"));
    cmd.args(["--smoke", "8"]);
    // What cargo set for this test is not the fuzz project's business.
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("CARGO_") && name != "CARGO_HOME" {
            cmd.env_remove(name);
        }
    }
    let out = cmd.output().expect("fuzz/run.sh");
    let report = String::from_utf8_lossy(&out.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "a fuzz target failed");
    for target in [
        "jsonrpc",
        "http_request",
        "sse",
        "lines",
        "amqp_delivery",
        "config",
        "uri_template",
    ] {
        let runs = report
            .split(&format!("== {target}\n"))
            .nth(1)
            .and_then(|r| {
                r.lines()
                    .find_map(|l| l.strip_prefix("stat::number_of_executed_units: "))
            })
            .and_then(|n| n.trim().parse::<u64>().ok())
            .unwrap_or(0);
        assert!(runs > 1000, "{target} ran {runs} inputs");
    }
}
