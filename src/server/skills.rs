//! Serving a directory of Agent Skills (the skills extension, SEP-2640).
//!
//! Every folder under the directory that holds a `SKILL.md` is a skill,
//! addressed `skill://<its path>/SKILL.md`; the folder's name must be the
//! frontmatter's `name`. Its files (dot-files and symbolic links aside)
//! are served as resources, each read into memory with its SHA-256 digest
//! and size at load, so what a host verifies is exactly what it reads. A
//! skill that breaks the extension's rules (name, frontmatter, more than
//! [`MAX_SKILL_FILES`] files or [`MAX_SKILL_BYTES`] bytes) is left out
//! with a warning naming why. [`SkillsDir::watcher`] reloads the directory
//! when a file in it changes.

use crate::jsonrpc::ErrorObject;
use crate::model::skill::{
    digest, frontmatter, Skill, SkillFile, MAX_SKILL_BYTES, MAX_SKILL_FILES, SKILL_FILE,
    SKILL_SCHEME,
};
use crate::model::{base64, ResourceContents};
use crate::protocol::catalog::{ResourceEntry, Source};
use crate::protocol::{Context, Engine};
use serde_json::{json, Value};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How often [`SkillsDir::watcher`] looks for changed files by default.
pub const DEFAULT_SKILLS_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// A directory of skills.
#[derive(Clone, Debug)]
pub struct SkillsDir {
    root: PathBuf,
}

/// One file as served: its listing and its bytes.
struct SkillResource {
    definition: Value,
    mime_type: &'static str,
    bytes: Vec<u8>,
}

impl ResourceEntry for SkillResource {
    fn definition(&self) -> &Value {
        &self.definition
    }
    fn read(&self, uri: &str, _: &Context) -> Result<Value, ErrorObject> {
        let contents = match std::str::from_utf8(&self.bytes) {
            Ok(text) => ResourceContents::text(uri, self.mime_type, text),
            Err(_) => ResourceContents::Blob {
                uri: uri.to_owned(),
                mime_type: Some(self.mime_type.to_owned()),
                blob: base64(&self.bytes),
            },
        };
        Ok(json!({"contents": [contents.to_value()]}))
    }
}

/// What a file's name says of its content.
fn mime_type(path: &Path) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    match ext.to_ascii_lowercase().as_str() {
        "md" | "markdown" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "yaml" | "yml" => "application/yaml",
        "html" | "htm" => "text/html",
        "csv" => "text/csv",
        "py" => "text/x-python",
        "sh" => "text/x-shellscript",
        "js" => "text/javascript",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        _ => "application/octet-stream",
    }
}

/// A URI path segment as a folder or file name gives it: characters a URI
/// path carries as they are, or `None`.
fn segment(name: &std::ffi::OsStr) -> Option<&str> {
    let s = name.to_str()?;
    let ok = !s.is_empty()
        && !s.starts_with('.')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    ok.then_some(s)
}

impl SkillsDir {
    /// The skills under `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        SkillsDir { root: root.into() }
    }

    /// The catalog source id the directory is served as.
    pub fn source_id(&self) -> String {
        format!("skills:{}", self.root.display())
    }

    /// Reads every skill: their entries and files as one catalog source.
    /// An unreadable directory is an error; a skill that breaks the rules
    /// is left out (logged).
    pub fn load(&self) -> io::Result<Source> {
        let mut source = Source::new();
        let mut folders = Vec::new();
        walk_dirs(&self.root, &mut Vec::new(), &mut folders)?;
        for (dir, path) in folders {
            let md = fs::symlink_metadata(dir.join(SKILL_FILE));
            if !md.is_ok_and(|m| m.is_file()) {
                continue;
            }
            match load_skill(&dir, &path) {
                Ok((skill, files)) => {
                    for f in files {
                        source = source.resource(Arc::new(f));
                    }
                    source = source.skill(Arc::new(skill));
                }
                Err(why) => log::warn!("skill {}: left out: {why}", dir.display()),
            }
        }
        Ok(source)
    }

    /// Loads the directory into `engine`'s catalog, replacing what it
    /// served before (list changes are announced).
    pub fn serve(&self, engine: &Engine) -> io::Result<()> {
        let source = self.load()?;
        engine
            .replace_source(&self.source_id(), source)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        Ok(())
    }

    /// What the directory serves: every file's URI (`skill://` and its
    /// path under the directory), size and modification time, in order (a
    /// change of any is a change of the skills).
    pub fn fingerprint(&self) -> Vec<(String, u64, Option<SystemTime>)> {
        let mut files = Vec::new();
        walk_files(&self.root, &mut Vec::new(), &mut files);
        files
            .into_iter()
            .filter_map(|(path, rel)| {
                let meta = fs::metadata(&path).ok()?;
                let uri = format!("{SKILL_SCHEME}{}", rel.join("/"));
                Some((uri, meta.len(), meta.modified().ok()))
            })
            .collect()
    }

    /// A supervised worker named `skills-watcher <dir>` that reloads the
    /// directory into `engine` when its fingerprint changes, looking every
    /// `every` ([`DEFAULT_SKILLS_POLL_INTERVAL`]).
    pub fn watcher(&self, engine: &Arc<Engine>, every: Duration) -> supervisor::ChildSpec {
        let dir = self.clone();
        let engine = Arc::downgrade(engine);
        let name = format!("skills-watcher {}", self.root.display());
        supervisor::ChildSpec::worker(name, move |ctx| {
            // Nothing seen yet: the first look reloads (a change between
            // the first load and this worker's start is not missed; an
            // unchanged catalog announces nothing).
            let mut seen = Vec::new();
            // What the last reload that worked served (none yet: the
            // first has nothing to compare).
            let mut served: Option<Vec<_>> = None;
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                ctx.stop_signal().recv_timeout(every)
            {
                let now = dir.fingerprint();
                if now == seen {
                    continue;
                }
                let Some(engine) = engine.upgrade() else {
                    break;
                };
                match dir.serve(&engine) {
                    Ok(()) => {
                        log::info!("skills in {} reloaded", dir.root.display());
                        // Subscribers to a file that changed or went since
                        // the last reload are told.
                        for uri in served
                            .as_deref()
                            .map_or_else(Vec::new, |s| changed(s, &now))
                        {
                            engine.notify_resource_updated(&uri);
                        }
                        served = Some(now.clone());
                    }
                    // Tried again at the next change.
                    Err(e) => log::warn!("skills in {}: {e}", dir.root.display()),
                }
                seen = now;
            }
            Ok(())
        })
    }
}

/// The URIs of files that changed or went between two fingerprints.
fn changed(
    before: &[(String, u64, Option<SystemTime>)],
    after: &[(String, u64, Option<SystemTime>)],
) -> Vec<String> {
    let now: std::collections::HashMap<&str, _> = after
        .iter()
        .map(|(u, len, at)| (u.as_str(), (len, at)))
        .collect();
    let then: std::collections::HashMap<&str, _> = before
        .iter()
        .map(|(u, len, at)| (u.as_str(), (len, at)))
        .collect();
    let differ = after
        .iter()
        .filter(|(u, len, at)| then.get(u.as_str()) != Some(&(len, at)));
    let gone = before
        .iter()
        .filter(|(u, ..)| !now.contains_key(u.as_str()));
    differ.chain(gone).map(|(u, ..)| u.clone()).collect()
}

/// Every folder under `dir` (itself included) with its URI path.
fn walk_dirs(
    dir: &Path,
    path: &mut Vec<String>,
    out: &mut Vec<(PathBuf, Vec<String>)>,
) -> io::Result<()> {
    if !path.is_empty() {
        out.push((dir.to_path_buf(), path.clone()));
    } else if let Some(name) = dir.canonicalize()?.file_name().and_then(segment) {
        // The directory itself is a skill when it holds a SKILL.md.
        out.push((dir.to_path_buf(), vec![name.to_owned()]));
    }
    let mut entries: Vec<_> = fs::read_dir(dir)?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let Ok(kind) = e.file_type() else { continue };
        if !kind.is_dir() {
            continue;
        }
        let Some(name) = segment(&e.file_name()).map(str::to_owned) else {
            continue;
        };
        path.push(name);
        let _ = walk_dirs(&e.path(), path, out);
        path.pop();
    }
    Ok(())
}

/// A skill's entry and its files.
fn load_skill(dir: &Path, path: &[String]) -> Result<(Skill, Vec<SkillResource>), String> {
    let root = format!("{SKILL_SCHEME}{}", path.join("/"));
    let uri = format!("{root}/{SKILL_FILE}");
    let mut files = Vec::new();
    let mut resources = Vec::new();
    let mut total = 0u64;
    let mut paths = Vec::new();
    walk_files(dir, &mut Vec::new(), &mut paths);
    let too_big = |files: usize, total: u64| {
        format!("more than {MAX_SKILL_FILES} files or {MAX_SKILL_BYTES} bytes ({files} files, {total} bytes)")
    };
    if paths.len() > MAX_SKILL_FILES {
        return Err(too_big(paths.len(), 0));
    }
    for (file, rel) in paths {
        // The size first: a huge file is never read.
        let len = fs::metadata(&file)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .len();
        if total + len > MAX_SKILL_BYTES {
            return Err(too_big(files.len() + 1, total + len));
        }
        let bytes = fs::read(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        total += bytes.len() as u64;
        let file_uri = format!("{root}/{}", rel.join("/"));
        let mime = mime_type(&file);
        let definition = json!({
            "uri": file_uri,
            "name": rel.join("/"),
            "mimeType": mime,
            "size": bytes.len(),
        });
        files.push(SkillFile {
            uri: file_uri,
            digest: digest(&bytes),
            size: bytes.len() as u64,
        });
        resources.push(SkillResource {
            definition,
            mime_type: mime,
            bytes,
        });
    }
    if total > MAX_SKILL_BYTES {
        // A file grew between its size and its read.
        return Err(too_big(files.len(), total));
    }
    // The frontmatter from the bytes served (and digested): read once.
    let md = resources
        .iter_mut()
        .find(|r| r.definition["uri"] == uri.as_str())
        .ok_or("SKILL.md must be a regular file")?;
    let text = std::str::from_utf8(&md.bytes).map_err(|_| "SKILL.md is not UTF-8")?;
    let front = frontmatter(text)?;
    // Listed under the skill's name and description.
    md.definition["name"] = front.get("name").cloned().unwrap_or(Value::Null);
    if let Some(d) = front.get("description") {
        md.definition["description"] = d.clone();
    }
    let skill = Skill {
        uri,
        frontmatter: front,
        files: Some(files),
    };
    skill.check()?;
    Ok((skill, resources))
}

/// Every regular file under `dir` with its path segments (dot-files,
/// unaddressable names and symbolic links left out).
fn walk_files(dir: &Path, path: &mut Vec<String>, out: &mut Vec<(PathBuf, Vec<String>)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let (Ok(kind), Some(name)) = (e.file_type(), segment(&e.file_name()).map(str::to_owned))
        else {
            continue;
        };
        path.push(name);
        if kind.is_dir() {
            walk_files(&e.path(), path, out);
        } else if kind.is_file() {
            out.push((e.path(), path.clone()));
        }
        path.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn loads_skills_with_digests_and_leaves_out_broken_ones() {
        let dir = std::env::temp_dir().join(format!("mcpvisor-skills-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        write(
            &dir,
            "pdf/SKILL.md",
            "---\nname: pdf\ndescription: PDFs\n---\nUse it.\n",
        );
        write(&dir, "pdf/references/FORMS.md", "forms");
        write(&dir, "pdf/.hidden", "x");
        write(
            &dir,
            "acme/billing/SKILL.md",
            "---\nname: billing\ndescription: Bills\n---\n",
        );
        write(
            &dir,
            "wrong/SKILL.md",
            "---\nname: other\ndescription: d\n---\n",
        );
        write(&dir, "nofront/SKILL.md", "no frontmatter");
        // A link back up is neither followed nor served (no loop).
        std::os::unix::fs::symlink(&dir, dir.join("pdf/loop")).unwrap();
        let source = SkillsDir::new(&dir).load().unwrap();
        let uris: Vec<_> = source.skills.iter().map(|s| s.uri.as_str()).collect();
        assert_eq!(
            uris,
            ["skill://acme/billing/SKILL.md", "skill://pdf/SKILL.md"]
        );
        let pdf = &source.skills[1];
        let files = pdf.files.as_ref().unwrap();
        assert_eq!(files.len(), 2, "{files:?}");
        assert_eq!(files[1].uri, "skill://pdf/references/FORMS.md");
        assert_eq!(files[1].digest, digest(b"forms"));
        assert_eq!(files[1].size, 5);
        let md = source
            .resources
            .iter()
            .find(|r| r.definition()["uri"] == "skill://pdf/SKILL.md")
            .unwrap();
        assert_eq!(md.definition()["name"], "pdf");
        assert_eq!(md.definition()["description"], "PDFs");
        assert_eq!(md.definition()["mimeType"], "text/markdown");
        let before = SkillsDir::new(&dir).fingerprint();
        assert!(before
            .iter()
            .any(|(uri, ..)| uri == "skill://pdf/references/FORMS.md"));
        write(&dir, "pdf/references/FORMS.md", "forms, changed");
        fs::remove_file(dir.join("acme/billing/SKILL.md")).unwrap();
        let after = SkillsDir::new(&dir).fingerprint();
        assert_ne!(after, before);
        // The subscribers told: of the file changed and of the one gone.
        assert_eq!(
            changed(&before, &after),
            [
                "skill://pdf/references/FORMS.md",
                "skill://acme/billing/SKILL.md"
            ]
        );
        assert!(changed(&after, &after).is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
