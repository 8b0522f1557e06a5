//! The module graph points one way: wire <- data types <- engine <-
//! transports <- server / client <- serve <- service. A file may name its own layer
//! and those below it, never one above; this test reads the sources and
//! fails on the first file that does (in code, `use`, or a doc link).

use std::path::{Path, PathBuf};

/// Each top-level module of the crate, lowest layer first, with the layer
/// it belongs to; a module may name modules of its own layer or lower.
const LAYERS: &[(&str, u8)] = &[
    ("sync", 0),
    ("wait", 0),
    ("throttle", 0),
    ("jsonrpc", 0),
    ("model", 1),
    ("protocol", 2),
    ("transport", 3),
    ("server", 4),
    ("client", 4),
    ("serve", 5),
    ("service", 6),
    // The fuzz targets' entry points reach into every layer.
    ("fuzzing", 7),
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

/// Items re-exported at the crate root, by the module they come from.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("init_logging", "sync"),
    ("SECRET_LOGGING_MODULE", "sync"),
    ("LogLevel", "model"),
    ("ProtocolVersion", "model"),
    ("Context", "protocol"),
    ("PeerError", "protocol"),
    ("ToolContext", "protocol"),
    ("Content", "server"),
    ("Prompt", "server"),
    ("Resource", "server"),
    ("ResourceTemplate", "server"),
    ("Server", "server"),
    ("Tool", "server"),
    ("ToolError", "server"),
    ("ToolResult", "server"),
];

/// The first path segment after `at` in `text`: a name, or each name of a
/// `{a, b::c}` group.
fn segments(text: &str) -> Vec<String> {
    let name = |t: &str| -> String {
        t.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    match text.strip_prefix('{') {
        Some(group) => {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(name)
                .filter(|n| !n.is_empty())
                .collect()
        }
        None => [name(text)].into_iter().filter(|n| !n.is_empty()).collect(),
    }
}

/// The top-level modules a line names: through `crate::` (a root item
/// counts as its module), or through as many `super::` as climb out of
/// the file's own module path (`depth` modules deep).
fn named_modules(line: &str, depth: usize) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        for seg in segments(rest) {
            match ROOT_ITEMS.iter().find(|(item, _)| *item == seg) {
                Some((_, module)) => found.push((*module).to_owned()),
                None => found.push(seg),
            }
        }
    }
    let mut rest = line;
    while let Some(at) = rest.find("super::") {
        let mut tail = &rest[at..];
        let mut climbs = 0;
        while let Some(t) = tail.strip_prefix("super::") {
            climbs += 1;
            tail = t;
        }
        if climbs >= depth {
            found.extend(segments(tail));
        }
        rest = tail;
    }
    found
}

/// How many modules deep a file's module is: `src/protocol/mod.rs` is 1,
/// `src/protocol/session.rs` 2, `src/transport/http/wire.rs` 3.
fn depth(relative: &Path) -> usize {
    let parts = relative.components().count();
    if relative.file_name().is_some_and(|f| f == "mod.rs") {
        parts - 1
    } else {
        parts
    }
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
            for named in named_modules(line, depth(relative)) {
                let Some(layer) = layer_of(&named) else {
                    violations.push(format!(
                        "src/{}:{}: names crate::{named}, which tests/layers.rs does not place",
                        relative.display(),
                        n + 1
                    ));
                    continue;
                };
                if layer > own {
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
        named_modules("use crate::server::Tool; // crate::jsonrpc", 2),
        ["server", "jsonrpc"]
    );
    assert_eq!(
        named_modules("use crate::{client, model::Content};", 2),
        ["client", "model"]
    );
    assert_eq!(named_modules("crate::Server::builder", 2), ["server"]);
    // From src/protocol/session.rs (depth 2) two `super` reach the root.
    assert_eq!(named_modules("super::super::client::Client", 2), ["client"]);
    assert!(named_modules("super::super::client::Client", 3).is_empty());
    assert_eq!(named_modules("use super::{server, x};", 1), ["server", "x"]);
    assert_eq!(depth(Path::new("protocol/mod.rs")), 1);
    assert_eq!(depth(Path::new("transport/http/wire.rs")), 3);
    assert!(layer_of("client") > layer_of("transport"));
}
