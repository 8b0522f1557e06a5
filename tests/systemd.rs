//! The systemd units (`systemd/mcpvisor.service`, `mcpvisor.socket`)
//! against systemd's own checks: `systemd-analyze verify` is clean for
//! both and the exposure level of
//! `systemd-analyze security` is at most 1.5 (`.ci/run` installs systemd's
//! tools where they are missing).

use std::process::Command;

const UNIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/mcpvisor.service");

fn analyze(args: &[&str]) -> (bool, String) {
    let out = Command::new("systemd-analyze")
        .args(args)
        .output()
        .expect("systemd-analyze (Debian package systemd; .ci/run installs it)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn the_unit_is_hardened_to_an_exposure_of_at_most_1_5() {
    let (_, text) = analyze(&["security", "--offline=true", UNIT]);
    let level: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for mcpvisor.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{text}"));
    assert!(level <= 1.5, "exposure {level}:\n{text}");
}

#[test]
fn the_units_verify_clean_against_the_built_binary() {
    // The unit as installed, pointing at this build's binary.
    let dir = std::env::temp_dir().join(format!("mcpvisor-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unit = std::fs::read_to_string(UNIT)
        .unwrap()
        .replace("/usr/bin/mcpvisor", env!("CARGO_BIN_EXE_mcpvisor"));
    let path = dir.join("mcpvisor.service");
    std::fs::write(&path, unit).unwrap();
    let socket = dir.join("mcpvisor.socket");
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/systemd/mcpvisor.socket"),
        &socket,
    )
    .unwrap();
    let (ok, text) = analyze(&[
        "verify",
        "--man=no",
        path.to_str().unwrap(),
        socket.to_str().unwrap(),
    ]);
    assert!(ok && text.trim().is_empty(), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The value of `key=` in the unit (the last one, as systemd reads it).
fn setting(unit: &str, key: &str) -> Option<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .next_back()
        .map(str::to_owned)
}

#[test]
fn restarts_never_reach_the_start_limit_and_filtered_calls_fail_with_eperm() {
    let unit = std::fs::read_to_string(UNIT).unwrap();
    // systemd's defaults where the unit sets none: 5 starts in 10 s.
    let burst: u32 = setting(&unit, "StartLimitBurst").map_or(5, |v| v.parse().unwrap());
    let interval: f64 =
        setting(&unit, "StartLimitIntervalSec").map_or(10.0, |v| v.parse().unwrap());
    let pause: f64 = setting(&unit, "RestartSec")
        .expect("RestartSec")
        .parse()
        .unwrap();
    assert!(
        pause * f64::from(burst - 1) > interval,
        "{burst} restarts {pause} s apart fit in {interval} s: the unit would stay failed"
    );
    // Without it, a filtered call kills the process (SIGSYS).
    assert_eq!(
        setting(&unit, "SystemCallErrorNumber").as_deref(),
        Some("EPERM")
    );
}
