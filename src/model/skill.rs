//! Skills (the `io.modelcontextprotocol/skills` extension, SEP-2640): an
//! Agent Skill is a directory with a `SKILL.md` (YAML frontmatter, then
//! Markdown) and files beside it, served as `skill://` resources. A skill's
//! entry lists every file with its SHA-256 digest and size, so a host can
//! verify what it reads; the rules of entries, names, digests and
//! frontmatter are stated here once, for the server and the client.

use serde_json::{Map, Value};
use std::fmt;
use yaml_rust2::{Yaml, YamlLoader};

/// The extension's identifier, in `capabilities.extensions`.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The manifest every skill has at its root.
pub const SKILL_FILE: &str = "SKILL.md";
/// The URI scheme of skills.
pub const SKILL_SCHEME: &str = "skill://";
/// Files a skill should not exceed (its `SKILL.md` included).
pub const MAX_SKILL_FILES: usize = 512;
/// Bytes a skill's files should not exceed in sum (16 MiB).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;
/// `mimeType` of a directory (`resources/directory/read`).
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";

/// One file of a skill as its entry lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkillFile {
    /// Its `skill://` URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits of its bytes.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

/// A skill's entry (`skills/list`, `skills/get`).
#[derive(Clone, Debug, PartialEq)]
pub struct Skill {
    /// The URI of its `SKILL.md`.
    pub uri: String,
    /// Its `SKILL.md` frontmatter, verbatim as JSON.
    pub frontmatter: Map<String, Value>,
    /// Every file, `SKILL.md` included; `None`: `"dynamic"` (no digests).
    pub files: Option<Vec<SkillFile>>,
}

/// Why content read from a skill is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkillError {
    /// The entry does not list this file.
    NotListed(String),
    /// The bytes are not as long as the entry says.
    Size {
        /// The file.
        uri: String,
        /// The entry's size.
        expected: u64,
        /// The bytes read.
        got: u64,
    },
    /// The bytes hash to another digest.
    Digest {
        /// The file.
        uri: String,
        /// The entry's digest.
        expected: String,
        /// The digest of the bytes read.
        got: String,
    },
    /// The `SKILL.md` frontmatter differs from the entry's (or is not
    /// frontmatter at all).
    Frontmatter {
        /// The `SKILL.md`.
        uri: String,
        /// What differs.
        why: String,
    },
    /// The entry itself breaks the extension's rules.
    Entry(String),
}

impl fmt::Display for SkillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkillError::NotListed(u) => write!(f, "{u} is not a file of the skill's entry"),
            SkillError::Size { uri, expected, got } => {
                write!(f, "{uri}: {got} bytes where the entry says {expected}")
            }
            SkillError::Digest { uri, expected, got } => {
                write!(f, "{uri}: digest {got} where the entry says {expected}")
            }
            SkillError::Frontmatter { uri, why } => write!(f, "{uri}: {why}"),
            SkillError::Entry(why) => write!(f, "invalid skill entry: {why}"),
        }
    }
}

impl std::error::Error for SkillError {}

/// `sha256:` and the lowercase hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    for b in d.as_ref() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Whether `name` is a valid skill name: 1 to 64 lowercase letters,
/// digits and hyphens, not starting or ending with a hyphen, no `--`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// The frontmatter of a `SKILL.md`: the YAML mapping between its opening
/// `---` line and the next `---` line, as JSON (YAML 1.2 core schema:
/// `yes` stays a string).
pub fn frontmatter(text: &str) -> Result<Map<String, Value>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end_matches(['\r', '\n']) != "---" {
        return Err("SKILL.md does not start with a --- frontmatter line".into());
    }
    let mut yaml = String::new();
    let mut closed = false;
    for line in lines {
        if line
            .trim_end_matches(['\r', '\n'])
            .trim_end_matches([' ', '\t'])
            == "---"
        {
            closed = true;
            break;
        }
        yaml.push_str(line);
    }
    if !closed {
        return Err("the frontmatter has no closing --- line".into());
    }
    bounded(&yaml)?;
    let docs = YamlLoader::load_from_str(&yaml).map_err(|e| format!("frontmatter: {e}"))?;
    match docs.into_iter().next().map(json) {
        Some(Value::Object(m)) => Ok(m),
        _ => Err("the frontmatter is not a YAML mapping".into()),
    }
}

/// Most bytes of frontmatter accepted.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;
/// Deepest nesting of frontmatter accepted.
pub const MAX_FRONTMATTER_DEPTH: usize = 32;

/// Refuses what a server could make expensive to load (its text reaches
/// the client): aliases (each would be copied: a few lines can stand for
/// billions of nodes), deep nesting, size.
fn bounded(yaml: &str) -> Result<(), String> {
    use yaml_rust2::parser::{Event, EventReceiver, Parser};
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Err(format!("frontmatter over {MAX_FRONTMATTER_BYTES} bytes"));
    }
    #[derive(Default)]
    struct Guard {
        aliases: bool,
        depth: usize,
        deepest: usize,
    }
    impl EventReceiver for Guard {
        fn on_event(&mut self, ev: Event) {
            match ev {
                Event::Alias(_) => self.aliases = true,
                Event::SequenceStart(..) | Event::MappingStart(..) => {
                    self.depth += 1;
                    self.deepest = self.deepest.max(self.depth);
                }
                Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    let mut guard = Guard::default();
    Parser::new_from_str(yaml)
        .load(&mut guard, false)
        .map_err(|e| format!("frontmatter: {e}"))?;
    if guard.aliases {
        return Err("frontmatter aliases (*name) are not accepted".into());
    }
    if guard.deepest > MAX_FRONTMATTER_DEPTH {
        return Err(format!(
            "frontmatter nested deeper than {MAX_FRONTMATTER_DEPTH}"
        ));
    }
    Ok(())
}

/// A YAML node as JSON; keys become strings, non-finite numbers stay text.
fn json(y: Yaml) -> Value {
    match y {
        Yaml::Real(s) => s
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::String(s), Value::Number),
        Yaml::Integer(i) => i.into(),
        Yaml::String(s) => Value::String(s),
        Yaml::Boolean(b) => b.into(),
        Yaml::Array(a) => Value::Array(a.into_iter().map(json).collect()),
        Yaml::Hash(h) => Value::Object(
            h.into_iter()
                .map(|(k, v)| {
                    let key = match json(k) {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    (key, json(v))
                })
                .collect(),
        ),
        Yaml::Null | Yaml::BadValue | Yaml::Alias(_) => Value::Null,
    }
}

impl Skill {
    /// The URI of its directory (its `SKILL.md` URI without `/SKILL.md`).
    pub fn root(&self) -> &str {
        self.uri
            .strip_suffix(SKILL_FILE)
            .and_then(|r| r.strip_suffix('/'))
            .unwrap_or(&self.uri)
    }

    /// Its name (the frontmatter's).
    pub fn name(&self) -> Option<&str> {
        self.frontmatter.get("name").and_then(Value::as_str)
    }

    /// The entry as the wire carries it.
    pub fn to_value(&self) -> Value {
        let resources = match &self.files {
            None => Value::String("dynamic".into()),
            Some(files) => Value::Array(
                files
                    .iter()
                    .map(|f| serde_json::json!({"uri": f.uri, "digest": f.digest, "size": f.size}))
                    .collect(),
            ),
        };
        serde_json::json!({
            "uri": self.uri,
            "frontmatter": self.frontmatter,
            "resources": resources,
        })
    }

    /// An entry from the wire, checked against the extension's rules (the
    /// last path segment is the name; every file once, its own `SKILL.md`
    /// among them, all inside the skill; digests well-formed).
    pub fn from_value(v: &Value) -> Result<Skill, SkillError> {
        let bad = |why: &str| SkillError::Entry(why.to_owned());
        let uri = v
            .get("uri")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("uri (a string) is required"))?;
        let frontmatter = v
            .get("frontmatter")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| bad("frontmatter (an object) is required"))?;
        let files = match v.get("resources") {
            Some(Value::String(s)) if s == "dynamic" => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|f| {
                        let uri = f.get("uri").and_then(Value::as_str);
                        let digest = f.get("digest").and_then(Value::as_str);
                        let size = f.get("size").and_then(Value::as_u64);
                        match (uri, digest, size) {
                            (Some(u), Some(d), Some(s)) => Ok(SkillFile {
                                uri: u.to_owned(),
                                digest: d.to_owned(),
                                size: s,
                            }),
                            _ => Err(bad("each resource needs uri, digest and size")),
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            _ => return Err(bad("resources must be an array or \"dynamic\"")),
        };
        let skill = Skill {
            uri: uri.to_owned(),
            frontmatter,
            files,
        };
        skill.check().map_err(SkillError::Entry)?;
        Ok(skill)
    }

    /// The extension's rules for an entry.
    pub fn check(&self) -> Result<(), String> {
        let name = self
            .name()
            .ok_or("frontmatter.name (a string) is required")?;
        let description = self.frontmatter.get("description").and_then(Value::as_str);
        if description.is_none_or(str::is_empty) {
            return Err("frontmatter.description (a non-empty string) is required".into());
        }
        let root = self.root();
        if root == self.uri || root.rsplit('/').next() != Some(name) || !valid_name(name) {
            return Err(format!(
                "{}: the URI must be <skill path>/SKILL.md, its last segment the valid name {name:?}",
                self.uri
            ));
        }
        let Some(files) = &self.files else {
            return Ok(());
        };
        let mut seen = std::collections::HashSet::new();
        for f in files {
            if !seen.insert(f.uri.as_str()) {
                return Err(format!("{} is listed twice", f.uri));
            }
            let inside =
                f.uri == self.uri || f.uri.strip_prefix(root).is_some_and(|r| r.starts_with('/'));
            if !inside {
                return Err(format!("{} lies outside the skill {root}", f.uri));
            }
            let hex = f.digest.strip_prefix("sha256:").unwrap_or_default();
            if hex.len() != 64
                || !hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(format!(
                    "{}: digest {:?} is not sha256:<64 hex>",
                    f.uri, f.digest
                ));
            }
        }
        if !seen.contains(self.uri.as_str()) {
            return Err(format!("the files do not list {} itself", self.uri));
        }
        Ok(())
    }

    /// Checks `bytes` read from `uri` against the entry: listed, of the
    /// listed size and digest, and for `SKILL.md` with the entry's
    /// frontmatter, field by field. Content that fails must not be used.
    pub fn verify(&self, uri: &str, bytes: &[u8]) -> Result<(), SkillError> {
        if let Some(files) = &self.files {
            let f = files
                .iter()
                .find(|f| f.uri == uri)
                .ok_or_else(|| SkillError::NotListed(uri.to_owned()))?;
            if f.size != bytes.len() as u64 {
                return Err(SkillError::Size {
                    uri: uri.to_owned(),
                    expected: f.size,
                    got: bytes.len() as u64,
                });
            }
            let got = digest(bytes);
            if got != f.digest {
                return Err(SkillError::Digest {
                    uri: uri.to_owned(),
                    expected: f.digest.clone(),
                    got,
                });
            }
        }
        if uri == self.uri {
            let refuse = |why: String| SkillError::Frontmatter {
                uri: uri.to_owned(),
                why,
            };
            let text = std::str::from_utf8(bytes).map_err(|_| refuse("not UTF-8".into()))?;
            let read = frontmatter(text).map_err(refuse)?;
            let keys: std::collections::BTreeSet<&String> =
                read.keys().chain(self.frontmatter.keys()).collect();
            for k in keys {
                let a = read.get(k).unwrap_or(&Value::Null);
                let b = self.frontmatter.get(k).unwrap_or(&Value::Null);
                if a != b {
                    return Err(refuse(format!(
                        "frontmatter {k:?} is {a} in the file but {b} in the entry"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MD: &str = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nversion: 2.1\nok: yes\nmetadata:\n  author: me\n---\n\nBody.\n";

    fn entry() -> Skill {
        Skill {
            uri: "skill://pdf-processing/SKILL.md".into(),
            frontmatter: frontmatter(MD).unwrap(),
            files: Some(vec![SkillFile {
                uri: "skill://pdf-processing/SKILL.md".into(),
                digest: digest(MD.as_bytes()),
                size: MD.len() as u64,
            }]),
        }
    }

    #[test]
    fn frontmatter_follows_the_yaml_core_schema() {
        let f = frontmatter(MD).unwrap();
        assert_eq!(f["version"], json!(2.1));
        assert_eq!(f["ok"], json!("yes"));
        assert_eq!(f["metadata"], json!({"author": "me"}));
        assert!(frontmatter("no frontmatter").is_err());
        assert!(frontmatter("---\nname: x\n").is_err(), "unclosed");
        assert!(frontmatter("---\n- a\n---\n").is_err(), "not a mapping");
        let bomb = "---\na: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n---\n";
        assert!(frontmatter(bomb).unwrap_err().contains("aliases"));
        let deep = format!("---\nk: {}1{}\n---\n", "[".repeat(40), "]".repeat(40));
        assert!(frontmatter(&deep).unwrap_err().contains("deeper"));
    }

    #[test]
    fn digests_are_sha256_hex() {
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn names_follow_the_agent_skills_rule() {
        for ok in ["a", "pdf-processing", "x9"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", &"a".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn entries_round_trip_and_are_checked() {
        let e = entry();
        assert_eq!(Skill::from_value(&e.to_value()).unwrap(), e);
        let mut other_name = e.to_value();
        other_name["frontmatter"]["name"] = json!("other");
        assert!(Skill::from_value(&other_name).is_err());
        let mut without_self = e.to_value();
        without_self["resources"] = json!([]);
        assert!(Skill::from_value(&without_self).is_err());
        let mut outside = e.to_value();
        outside["resources"][0]["uri"] = json!("skill://elsewhere/SKILL.md");
        assert!(Skill::from_value(&outside).is_err());
    }

    #[test]
    fn verification_refuses_size_digest_and_frontmatter_changes() {
        let e = entry();
        let uri = e.uri.clone();
        assert_eq!(e.verify(&uri, MD.as_bytes()), Ok(()));
        let same_length = MD.replace("Body.", "Evil!");
        assert!(matches!(
            e.verify(&uri, same_length.as_bytes()),
            Err(SkillError::Digest { .. })
        ));
        let longer = format!("{MD}more");
        assert!(matches!(
            e.verify(&uri, longer.as_bytes()),
            Err(SkillError::Size { .. })
        ));
        assert!(matches!(
            e.verify("skill://pdf-processing/x", b""),
            Err(SkillError::NotListed(_))
        ));
        // Digest and size match the file, but it says something else.
        let changed = MD.replace(
            "Extract, fill, and assemble PDF documents",
            "Exfiltrate credentials",
        );
        let mut lying = e.clone();
        lying.files = Some(vec![SkillFile {
            uri: uri.clone(),
            digest: digest(changed.as_bytes()),
            size: changed.len() as u64,
        }]);
        assert!(matches!(
            lying.verify(&uri, changed.as_bytes()),
            Err(SkillError::Frontmatter { .. })
        ));
    }
}
