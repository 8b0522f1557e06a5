//! `skills/list`, `skills/get` and `resources/directory/read` (the skills
//! extension, SEP-2640): answered from the catalog's skills on the
//! transport's thread. A skill's files are ordinary resources of the same
//! source, read with `resources/read`.

use super::dispatch::{cursor, params, required_str};
use super::pagination::{page, paged};
use super::session::Session;
use crate::jsonrpc::{excerpt, ErrorObject, Request};
use crate::model::skill::DIRECTORY_MIME_TYPE;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

fn uri(req: &Request) -> Result<&str, ErrorObject> {
    required_str(params(req), "uri")
}

/// Skills are offered only by a server that serves some.
fn offered(session: &Session, req: &Request) -> Result<Arc<super::catalog::View>, ErrorObject> {
    let view = session.engine.catalog.view();
    if view.skills.is_empty() {
        return Err(ErrorObject::method_not_found(req.method()));
    }
    Ok(view)
}

/// `skills/list`: every skill's entry, a page at a time.
pub(crate) fn list(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let view = offered(session, req)?;
    let (items, next) = page(&view.skills, cursor(req)?, session.engine.options.page_size)?;
    let items = items.into_iter().map(|s| s.to_value()).collect();
    Ok(paged("skills", items, next))
}

/// `skills/get`: the entry of the skill whose `SKILL.md` is `uri`.
pub(crate) fn get(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let view = offered(session, req)?;
    let uri = uri(req)?;
    let skill = view.skills.get(uri).ok_or_else(|| {
        ErrorObject::invalid_params(format!("No skill is served at {}", excerpt(uri)))
            .with_data(json!({"uri": uri}))
    })?;
    Ok(json!({"skill": skill.to_value()}))
}

/// `resources/directory/read`: the direct children of a directory of a
/// skill (its root or a folder in it); subdirectories are
/// `inode/directory`. Anything else is -32602.
pub(crate) fn read_directory(session: &Arc<Session>, req: &Request) -> Result<Value, ErrorObject> {
    let view = offered(session, req)?;
    let dir = uri(req)?.trim_end_matches('/');
    let inside =
        |root: &str| dir == root || dir.strip_prefix(root).is_some_and(|r| r.starts_with('/'));
    let mut children: BTreeMap<String, Value> = BTreeMap::new();
    let mut is_root = false;
    for skill in view.skills.values().filter(|s| inside(s.root())) {
        is_root |= skill.root() == dir;
        for f in skill.files.iter().flatten() {
            let Some(rest) = f.uri.strip_prefix(dir).and_then(|r| r.strip_prefix('/')) else {
                continue;
            };
            let child = match rest.split_once('/') {
                Some((folder, _)) => {
                    let uri = format!("{dir}/{folder}");
                    json!({"uri": uri, "name": folder, "mimeType": DIRECTORY_MIME_TYPE})
                }
                None => match view.resources.get(&f.uri) {
                    Some(r) => r.definition.clone(),
                    None => json!({"uri": f.uri, "name": rest}),
                },
            };
            if let Some(u) = child.get("uri").and_then(Value::as_str) {
                children.entry(u.to_owned()).or_insert(child);
            }
        }
    }
    if children.is_empty() && !is_root {
        return Err(ErrorObject::invalid_params(format!(
            "{} is not a directory of a served skill",
            excerpt(dir)
        ))
        .with_data(json!({"uri": dir})));
    }
    let (items, next) = page(&children, cursor(req)?, session.engine.options.page_size)?;
    Ok(paged(
        "resources",
        items.into_iter().cloned().collect(),
        next,
    ))
}
