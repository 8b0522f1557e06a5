//! The module graph points one way: wire <- data types <- engine <-
//! transports <- server / client <- serve. A file may name its own layer
//! and those below it, never one above; this test reads the sources and
//! fails on the first file that does (in code, `use`, or a doc link).

use std::path::{Path, PathBuf};

/// Each top-level module of the crate, lowest layer first, with the layer
/// it belongs to; a module may name modules of its own layer or lower.
const LAYERS: &[(&str, u8)] = &[
    ("sync", 0),
    ("wait", 0),
    ("jsonrpc", 0),
    ("model", 1),
    ("protocol", 2),
    ("transport", 3),
    ("server", 4),
    ("client", 4),
    ("serve", 5),
];

fn layer_of(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a line names through `crate::` or `super::super::`.
fn named_modules(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    for prefix in ["crate::", "super::super::"] {
        let mut rest = line;
        while let Some(at) = rest.find(prefix) {
            rest = &rest[at + prefix.len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
        }
    }
    found
}

#[test]
fn no_module_names_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_str()
            .unwrap()
            .trim_end_matches(".rs");
        // The crate root and the daemon's entry point sit above everything.
        let Some(own) = layer_of(top) else {
            assert!(
                ["lib", "main"].contains(&top),
                "src/{top}: a top-level module missing from LAYERS in tests/layers.rs"
            );
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for named in named_modules(line) {
                if layer_of(&named).is_some_and(|l| l > own) {
                    violations.push(format!(
                        "src/{}:{}: {top} names {named}: {}",
                        relative.display(),
                        n + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "lower layers name higher ones:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_top_level_module_has_a_layer() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    for line in lib.lines() {
        let line = line.trim();
        let Some(decl) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
            .or_else(|| line.strip_prefix("pub(crate) mod "))
        else {
            continue;
        };
        let name = decl.trim_end_matches(';');
        assert!(
            layer_of(name).is_some(),
            "src/lib.rs declares {name}, which tests/layers.rs does not place"
        );
    }
}

#[test]
fn the_check_itself_catches_a_violation() {
    assert_eq!(
        named_modules("use crate::server::Tool; // crate::jsonrpc"),
        ["server", "jsonrpc"]
    );
    assert_eq!(named_modules("super::super::client::Client"), ["client"]);
    assert!(layer_of("client") > layer_of("transport"));
}
