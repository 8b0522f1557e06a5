//! The names the gateway emits. A tool or prompt of an upstream is
//! `namespace__name`; every emitted name matches `^[A-Za-z][A-Za-z0-9_-]*$`
//! (what Claude and OpenAI accept) and is at most `maxNameLength` long. A
//! name that is not already so is shortened or cleaned deterministically:
//! the valid part, then `_` and six hex digits of the SHA-256 of the
//! namespace and the original name, so two originals never meet.
//!
//! A resource URI of an upstream is `mcpvisor://namespace/` followed by
//! the upstream's URI unchanged (templates likewise), which
//! [`split_uri`] takes apart again.

/// Longest namespace at all; the configuration also keeps it at most
/// `maxNameLength - 10`, so that `__`, one character of a name, `_` and
/// the hash suffix fit.
pub const MAX_NAMESPACE: usize = 24;
/// What separates the namespace from the upstream's name.
pub const SEPARATOR: &str = "__";
/// The scheme and authority prefix of a rewritten resource URI.
pub const URI_PREFIX: &str = "mcpvisor://";
/// Hex digits of the hash suffix of a shortened name.
const HASH_DIGITS: usize = 6;

/// The catalog source an upstream is served as.
pub fn source_id(name: &str) -> String {
    format!("upstream:{name}")
}

fn name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// A namespace: starts with a letter, then letters, digits, `-` and `_`,
/// never `__` (which separates it from the name) nor a trailing `_`.
pub fn valid_namespace(ns: &str) -> bool {
    ns.len() <= MAX_NAMESPACE
        && ns.starts_with(|c: char| c.is_ascii_alphabetic())
        && ns.chars().all(name_char)
        && !ns.contains(SEPARATOR)
        && !ns.ends_with('_')
}

/// The emitted name of `name` of the upstream in namespace `ns`.
pub fn public_name(ns: &str, name: &str, max: usize) -> String {
    let whole = format!("{ns}{SEPARATOR}{name}");
    if whole.len() <= max && name.chars().all(name_char) {
        return whole;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{ns}\0{name}").as_bytes());
    let hash: String = digest.as_ref()[..HASH_DIGITS / 2]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cleaned: String = name
        .chars()
        .map(|c| if name_char(c) { c } else { '_' })
        .collect();
    let room = max.saturating_sub(ns.len() + SEPARATOR.len() + 1 + HASH_DIGITS);
    let kept: String = cleaned.chars().take(room).collect();
    format!("{ns}{SEPARATOR}{kept}_{hash}")
}

/// The emitted URI (or URI template) of an upstream's `uri`.
pub fn public_uri(ns: &str, uri: &str) -> String {
    format!("{URI_PREFIX}{ns}/{uri}")
}

/// The namespace and the upstream's URI of an emitted URI.
pub fn split_uri(uri: &str) -> Option<(&str, &str)> {
    uri.strip_prefix(URI_PREFIX)?.split_once('/')
}

/// Whether `name` matches `pattern`, where `*` matches any run of
/// characters (the allow and deny lists). In time proportional to the two
/// lengths' product at worst, whatever the stars: a star's match is only
/// ever lengthened, never tried afresh (a name from an upstream may be long).
pub fn matches(pattern: &str, name: &str) -> bool {
    // Bytes will do: a star is ASCII, and a literal run of a `str` never
    // starts in the middle of a character, so it only matches at a
    // character's start.
    let (p, n) = (pattern.as_bytes(), name.as_bytes());
    let (mut i, mut j) = (0, 0);
    // After the last star seen: where the pattern goes on, and where in
    // the name that star's match ends so far.
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if p.get(i) == Some(&b'*') {
            i += 1;
            star = Some((i, j));
        } else if p.get(i) == Some(&n[j]) {
            i += 1;
            j += 1;
        } else if let Some((after, end)) = star {
            // The last star takes one more byte; the rest is tried again.
            star = Some((after, end + 1));
            i = after;
            j = end + 1;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emitted_ok(n: &str, max: usize) -> bool {
        n.len() <= max
            && n.starts_with(|c: char| c.is_ascii_alphabetic())
            && n.chars().all(name_char)
    }

    #[test]
    fn names_are_kept_when_they_fit_and_shortened_or_cleaned_with_a_hash_otherwise() {
        assert_eq!(public_name("fs", "read_file", 48), "fs__read_file");
        let long = "a".repeat(80);
        let short = public_name("fs", &long, 48);
        assert_eq!(short.len(), 48, "{short}");
        assert!(emitted_ok(&short, 48));
        assert_eq!(short, public_name("fs", &long, 48), "deterministic");
        assert_ne!(short, public_name("fs", &"a".repeat(81), 48), "distinct");
        let dotted = public_name("gh", "repo.list", 48);
        assert!(
            emitted_ok(&dotted, 48) && dotted.starts_with("gh__repo_list_"),
            "{dotted}"
        );
        assert_ne!(dotted, public_name("gh", "repo_list", 48));
        assert!(emitted_ok(&public_name("x", "ü", 16), 16));
    }

    #[test]
    fn namespaces_uris_and_patterns() {
        assert!(valid_namespace("github"));
        assert!(valid_namespace("my-server_2"));
        for bad in ["", "2fa", "a__b", "a_", "a.b", &"a".repeat(25)] {
            assert!(!valid_namespace(bad), "{bad}");
        }
        let u = public_uri("fs", "file:///etc/hosts");
        assert_eq!(u, "mcpvisor://fs/file:///etc/hosts");
        assert_eq!(split_uri(&u), Some(("fs", "file:///etc/hosts")));
        assert_eq!(split_uri("file:///x"), None);
        assert!(matches("read_*", "read_file"));
        assert!(matches("*", "x"));
        assert!(matches("a*c*e", "abcde"));
        assert!(!matches("read_*", "write_file"));
        assert!(!matches("exact", "exactly"));
        assert!(matches("", ""));
        assert!(!matches("", "x"));
        assert!(matches("**", ""));
        assert!(matches("*_file", "read_file_file"));
        assert!(matches("a*b*", "axxbyy"));
        assert!(!matches("a*b", "axxbyy"));
        assert!(matches("é*ü", "éxü"));
        assert!(!matches("*é", "xe"));
    }

    #[test]
    fn many_stars_against_a_long_name_are_quick_to_refuse() {
        // Backtracking over every split is about n^5 steps here: it would
        // not end within the test run.
        let name = "a".repeat(20_000);
        assert!(!matches("*a*a*a*a*a*b", &name));
        assert!(matches("*a*a*a*a*a*", &name));
    }
}
