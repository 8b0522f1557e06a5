//! Installing: `make install` honours DESTDIR, PREFIX and an existing
//! configuration; `cargo deb` builds a package with the binary, both
//! units, the man pages and the example configuration as a conffile, and
//! lintian finds no error in it (`.ci/run` installs cargo-deb and lintian).

mod common;

use common::scratch;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}:\n{text}");
    text
}

fn make_install(dest: &Path, prefix: &str) {
    run(Command::new("make")
        .current_dir(ROOT)
        .arg("--no-print-directory")
        .arg("install")
        .arg(format!("DESTDIR={}", dest.display()))
        .arg(format!("PREFIX={prefix}"))
        .arg(format!("BIN={BIN}")));
}

#[test]
fn make_install_honours_destdir_and_prefix_and_keeps_the_configuration() {
    let dest = scratch("install");
    make_install(&dest, "/usr/local");
    for f in [
        "usr/local/bin/mcpvisor",
        "usr/local/share/man/man8/mcpvisor.8",
        "usr/local/share/man/man5/mcpvisor.json.5",
        "usr/local/share/man/man7/mcpvisor-amqp.7",
        "usr/local/lib/systemd/system/mcpvisor.socket",
        "usr/local/share/doc/mcpvisor/examples/mcpvisor.json",
        "etc/mcpvisor/mcpvisor.json",
    ] {
        assert!(dest.join(f).is_file(), "{f}");
    }
    let unit = std::fs::read_to_string(dest.join("usr/local/lib/systemd/system/mcpvisor.service"))
        .unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/mcpvisor --config /etc/mcpvisor/mcpvisor.json"),
        "{unit}"
    );
    // A second install keeps the administrator's configuration.
    let config = dest.join("etc/mcpvisor/mcpvisor.json");
    std::fs::write(&config, "{\"commands\": {}}").unwrap();
    make_install(&dest, "/usr/local");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "{\"commands\": {}}"
    );
    // The installed binary is the one built.
    let out = run(Command::new(dest.join("usr/local/bin/mcpvisor")).arg("--version"));
    assert!(out.starts_with("mcpvisor "), "{out}");
    let _ = std::fs::remove_dir_all(&dest);
}

#[test]
fn the_debian_package_holds_everything_and_lintian_finds_no_error() {
    let out = scratch("deb");
    // This test build's binary (a release is `cargo deb`, which builds one).
    run(Command::new("cargo")
        .current_dir(ROOT)
        .args([
            "deb",
            "--quiet",
            "--no-build",
            "--profile",
            "dev",
            "--output",
        ])
        .arg(&out));
    let deb = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .expect("a .deb");
    let listing = run(Command::new("dpkg-deb").arg("--contents").arg(&deb));
    let files: BTreeSet<&str> = listing
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    for f in [
        "./usr/bin/mcpvisor",
        "./usr/lib/systemd/system/mcpvisor.service",
        "./usr/lib/systemd/system/mcpvisor.socket",
        "./usr/share/man/man8/mcpvisor.8.gz",
        "./usr/share/man/man5/mcpvisor.json.5.gz",
        "./usr/share/man/man7/mcpvisor-amqp.7.gz",
        "./etc/mcpvisor/mcpvisor.json",
        "./usr/share/doc/mcpvisor/copyright",
        "./usr/share/doc/mcpvisor/changelog.Debian.gz",
        "./usr/share/lintian/overrides/mcpvisor",
    ] {
        assert!(files.contains(f), "{f} missing from:\n{listing}");
    }
    let conffiles = run(Command::new("dpkg-deb")
        .arg("--info")
        .arg(&deb)
        .arg("conffiles"));
    assert_eq!(conffiles.trim(), "/etc/mcpvisor/mcpvisor.json");
    let lint = Command::new("lintian")
        .arg(&deb)
        .output()
        .expect("lintian (Debian package lintian; .ci/run installs it)");
    let text = String::from_utf8_lossy(&lint.stdout);
    assert!(
        lint.status.success() && !text.lines().any(|l| l.starts_with("E:")),
        "{text}{}",
        String::from_utf8_lossy(&lint.stderr)
    );
    let _ = std::fs::remove_dir_all(&out);
}
