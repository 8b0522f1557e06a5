//! The manual pages: `mandoc -Tlint` finds nothing (Debian package
//! `mandoc`; `.ci/run` installs it), every flag of `--help` is an item of
//! mcpvisor(8)'s OPTIONS and nothing else is, and every key of the
//! configuration file is an item of mcpvisor.json(5) and nothing else is.

use mcpvisor::service::config::KEYS;
use mcpvisor::service::flags::USAGE;
use std::collections::BTreeSet;
use std::process::Command;

const MAN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/man");

fn page(name: &str) -> String {
    std::fs::read_to_string(format!("{MAN}/{name}")).unwrap()
}

/// The argument of every `.It <macro> ` line, up to its first space.
fn items(text: &str, mac: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(&format!(".It {mac} ")))
        .map(|rest| {
            rest.split_whitespace()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[test]
fn every_page_is_lint_clean() {
    for name in ["mcpvisor.8", "mcpvisor.json.5", "mcpvisor-amqp.7"] {
        let out = Command::new("mandoc")
            .args(["-Tlint", "-W", "warning", &format!("{MAN}/{name}")])
            .output()
            .expect("mandoc (Debian package mandoc; .ci/run installs it)");
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.is_empty(), "{name}:\n{text}");
    }
}

#[test]
fn the_flags_of_help_are_the_options_of_the_page() {
    // `--help` lists each flag at the start of a line, indented two spaces.
    let help: BTreeSet<String> = USAGE
        .lines()
        .filter_map(|l| l.strip_prefix("  --"))
        .map(|rest| format!("-{}", rest.split_whitespace().next().unwrap()))
        .collect();
    assert!(help.len() >= 12, "{help:?}");
    let options: BTreeSet<String> = items(&page("mcpvisor.8"), "Fl");
    assert_eq!(help, options, "--help against mcpvisor(8)");
    assert!(
        page("mcpvisor.8").contains(".It Cm status"),
        "the status command"
    );
}

#[test]
fn the_keys_of_the_file_are_the_items_of_its_page() {
    let keys: BTreeSet<String> = KEYS.iter().map(|k| k.to_string()).collect();
    let documented = items(&page("mcpvisor.json.5"), "Ic");
    assert_eq!(keys, documented, "config keys against mcpvisor.json(5)");
}
