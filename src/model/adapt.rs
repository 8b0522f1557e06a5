//! Results shaped for the revision a session negotiated: what an older
//! revision does not define is removed or, for content a client must not
//! lose silently, turned into text it can read. Newest clients get results
//! untouched (and for free: nothing is walked). A tool's result kept
//! typed ([`Answer::Tool`]) stays typed: its text and image blocks are the
//! same in every revision, and only its other blocks are adapted as JSON.
//!
//! | field or content                 | since      | for older clients        |
//! |----------------------------------|------------|--------------------------|
//! | `audio` content                  | 2025-03-26 | text naming what it was  |
//! | tool `annotations`               | 2025-03-26 | removed                  |
//! | `resource_link` content          | 2025-06-18 | text with its URI        |
//! | `structuredContent`              | 2025-06-18 | removed (content stays)  |
//! | `title`, tool `outputSchema`     | 2025-06-18 | removed                  |
//! | `icons`                          | 2025-11-25 | removed                  |
//! | `serverInfo` `description`, `websiteUrl` | 2025-11-25 | removed          |
//! | `annotations.lastModified`, prompt arguments' `title` | 2025-06-18 | removed |
//! | capability `completions`         | 2025-03-26 | removed (still served)   |
//! | capability `extensions`          | 2025-11-25 | removed                  |

use super::{Answer, Content, ProtocolVersion, ToolResult};
use serde_json::{json, Value};

use ProtocolVersion::{V2025_03_26, V2025_06_18, V2025_11_25};

/// The first revision with a tool result's `structuredContent`.
const STRUCTURED_CONTENT_SINCE: ProtocolVersion = V2025_06_18;

/// Adapts the result of `method` for a client speaking `version`, as
/// [`result`] does; a typed tool result stays typed.
pub fn answer(method: &str, version: ProtocolVersion, answer: Answer) -> Answer {
    match answer {
        Answer::Json(v) => Answer::Json(result(method, version, v)),
        Answer::Tool(t) if version >= ProtocolVersion::LATEST_SESSION => Answer::Tool(t),
        Answer::Tool(t) => Answer::Tool(tool_result(version, t)),
    }
}

/// A typed `tools/call` result for an older revision.
fn tool_result(version: ProtocolVersion, mut t: ToolResult) -> ToolResult {
    if version < STRUCTURED_CONTENT_SINCE {
        t.structured_content = None;
    }
    for c in &mut t.content {
        if !matches!(c, Content::Text(_) | Content::Image { .. }) {
            let mut v = c.to_value();
            block(&mut v, version);
            *c = Content::Raw(v);
        }
    }
    t
}

/// Adapts the result of `method` for a client speaking `version`.
pub fn result(method: &str, version: ProtocolVersion, mut result: Value) -> Value {
    if version >= ProtocolVersion::LATEST_SESSION {
        return result;
    }
    let list = |r: &mut Value, key: &str, tool: bool| {
        if let Some(items) = r.get_mut(key).and_then(Value::as_array_mut) {
            for item in items {
                definition(item, version, tool);
            }
        }
    };
    match method {
        "tools/list" => list(&mut result, "tools", true),
        "prompts/list" => list(&mut result, "prompts", false),
        "resources/list" => list(&mut result, "resources", false),
        "resources/templates/list" => list(&mut result, "resourceTemplates", false),
        "tools/call" => {
            if version < STRUCTURED_CONTENT_SINCE {
                remove(&mut result, "structuredContent");
            }
            blocks(result.get_mut("content"), version);
        }
        "prompts/get" => {
            if let Some(messages) = result.get_mut("messages").and_then(Value::as_array_mut) {
                for m in messages {
                    if let Some(c) = m.get_mut("content") {
                        block(c, version);
                    }
                }
            }
        }
        _ => {}
    }
    result
}

/// A `serverInfo` (`Implementation`) for a client speaking `version`:
/// `icons`, `description` and `websiteUrl` are 2025-11-25's, `title`
/// 2025-06-18's.
pub fn implementation(version: ProtocolVersion, mut info: Value) -> Value {
    if version < V2025_11_25 {
        for key in ["icons", "description", "websiteUrl"] {
            remove(&mut info, key);
        }
    }
    if version < V2025_06_18 {
        remove(&mut info, "title");
    }
    info
}

/// The server's `capabilities` for a client speaking `version`:
/// `completions` is 2025-03-26's (a 2024-11-05 client may still ask:
/// that revision had no capability for it), `extensions` 2025-11-25's.
pub fn capabilities(version: ProtocolVersion, mut caps: Value) -> Value {
    if version < V2025_03_26 {
        remove(&mut caps, "completions");
    }
    if version < V2025_11_25 {
        remove(&mut caps, "extensions");
    }
    caps
}

/// `annotations.lastModified` (2025-06-18) of `v`, for older clients.
fn last_modified(v: &mut Value, version: ProtocolVersion) {
    if version < V2025_06_18 {
        if let Some(a) = v.get_mut("annotations") {
            remove(a, "lastModified");
        }
    }
}

fn remove(v: &mut Value, key: &str) {
    if let Some(o) = v.as_object_mut() {
        o.remove(key);
    }
}

/// A listed tool, prompt, resource or template.
fn definition(item: &mut Value, version: ProtocolVersion, tool: bool) {
    if version < V2025_11_25 {
        remove(item, "icons");
    }
    if version < V2025_06_18 {
        remove(item, "title");
        if tool {
            remove(item, "outputSchema");
        } else {
            last_modified(item, version);
        }
        if let Some(args) = item.get_mut("arguments").and_then(Value::as_array_mut) {
            for a in args {
                remove(a, "title");
            }
        }
    }
    if version < V2025_03_26 && tool {
        remove(item, "annotations");
    }
}

fn blocks(content: Option<&mut Value>, version: ProtocolVersion) {
    if let Some(items) = content.and_then(Value::as_array_mut) {
        for c in items {
            block(c, version);
        }
    }
}

/// One content block: kinds the revision lacks become text.
fn block(c: &mut Value, version: ProtocolVersion) {
    let text = match c.get("type").and_then(Value::as_str) {
        Some("audio") if version < V2025_03_26 => format!(
            "[audio content ({}) omitted: not supported by protocol {version}]",
            c["mimeType"].as_str().unwrap_or("unknown type")
        ),
        Some("resource_link") if version < V2025_06_18 => format!(
            "[resource: {}{}]",
            c["uri"].as_str().unwrap_or(""),
            c["name"]
                .as_str()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        ),
        _ => {
            if version < V2025_11_25 {
                // A resource link, embedded resources and other blocks may
                // carry icons too.
                remove(c, "icons");
                if let Some(r) = c.get_mut("resource") {
                    remove(r, "icons");
                }
            }
            last_modified(c, version);
            if let Some(r) = c.get_mut("resource") {
                last_modified(r, version);
            }
            return;
        }
    };
    *c = json!({"type": "text", "text": text});
}

#[cfg(test)]
mod tests {
    use super::*;
    use ProtocolVersion::V2024_11_05;

    #[test]
    fn each_revision_gets_only_what_it_defines() {
        // #11 item 17: audio, resource_link, structuredContent, title and
        // icons reached 2024-11-05 clients.
        let call = json!({
            "content": [
                {"type": "text", "text": "t"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a", "name": "a"}
            ],
            "structuredContent": {"x": 1},
            "isError": false
        });
        assert_eq!(
            result("tools/call", ProtocolVersion::LATEST_SESSION, call.clone()),
            call
        );
        let old = result("tools/call", V2024_11_05, call.clone());
        assert!(old.get("structuredContent").is_none());
        assert_eq!(old["content"][0], call["content"][0]);
        assert_eq!(old["content"][1]["type"], "text");
        assert!(old["content"][1]["text"]
            .as_str()
            .unwrap()
            .contains("audio/wav"));
        assert_eq!(old["content"][2]["text"], "[resource: file:///a (a)]");
        let mid = result("tools/call", V2025_03_26, call.clone());
        assert_eq!(
            mid["content"][1], call["content"][1],
            "audio exists in 2025-03-26"
        );
        assert_eq!(mid["content"][2]["type"], "text");
        let june = result("tools/call", V2025_06_18, call.clone());
        assert_eq!(june["content"], call["content"]);
        assert_eq!(june["structuredContent"], call["structuredContent"]);

        let tools = json!({"tools": [{
            "name": "t", "title": "T", "icons": [{"src": "https://i"}],
            "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        }]});
        let old = result("tools/list", V2024_11_05, tools.clone());
        assert_eq!(
            old,
            json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}}]})
        );
        let june = result("tools/list", V2025_06_18, tools.clone());
        assert!(june["tools"][0].get("icons").is_none());
        assert_eq!(june["tools"][0]["title"], "T");
        let prompts = json!({"prompts": [{"name": "p", "title": "P", "icons": []}]});
        assert_eq!(
            result("prompts/list", V2025_03_26, prompts),
            json!({"prompts": [{"name": "p"}]})
        );
        let get = json!({"messages": [{"role": "user", "content": {"type": "audio", "data": "", "mimeType": "audio/ogg"}}]});
        let old = result("prompts/get", V2024_11_05, get);
        assert_eq!(old["messages"][0]["content"]["type"], "text");
    }

    #[test]
    fn server_info_keeps_only_what_the_revision_has() {
        let info = json!({"name": "s", "version": "1", "title": "S", "websiteUrl": "https://s"});
        let old = implementation(ProtocolVersion::V2025_03_26, info.clone());
        assert_eq!(old, json!({"name": "s", "version": "1"}));
        let mid = implementation(ProtocolVersion::V2025_06_18, info.clone());
        assert_eq!(mid, json!({"name": "s", "version": "1", "title": "S"}));
        assert_eq!(
            implementation(ProtocolVersion::V2025_11_25, info.clone()),
            info
        );
    }

    #[test]
    fn a_typed_tool_result_is_adapted_as_its_json_is() {
        let typed = ToolResult {
            content: vec![
                Content::text("t"),
                Content::image(b"i", "image/png"),
                Content::audio(b"a", "audio/wav"),
                Content::link("file:///a", "a"),
                Content::Raw(json!({"type": "resource", "resource": {
                    "uri": "file:///r", "text": "r", "icons": [{"src": "https://i"}]
                }})),
            ],
            structured_content: Some(json!({"x": 1})),
            ..Default::default()
        };
        for version in ProtocolVersion::ALL {
            let shaped = answer("tools/call", version, Answer::Tool(typed.clone()));
            assert!(matches!(shaped, Answer::Tool(_)), "{version}: still typed");
            assert_eq!(
                shaped.into_value(),
                result("tools/call", version, typed.to_value()),
                "{version}"
            );
        }
    }

    #[test]
    fn later_fields_of_annotations_arguments_links_and_capabilities_are_removed() {
        let annotations = json!({"audience": ["user"], "lastModified": "2025-01-01T00:00:00Z"});
        let listed =
            json!({"resources": [{"uri": "r://a", "name": "a", "annotations": annotations}]});
        let old = result("resources/list", V2025_03_26, listed.clone());
        assert_eq!(
            old["resources"][0]["annotations"],
            json!({"audience": ["user"]})
        );
        assert_eq!(
            result("resources/list", V2025_06_18, listed.clone()),
            listed
        );
        let prompts =
            json!({"prompts": [{"name": "p", "arguments": [{"name": "x", "title": "X"}]}]});
        let old = result("prompts/list", V2025_03_26, prompts);
        assert_eq!(old["prompts"][0]["arguments"][0], json!({"name": "x"}));
        let call = json!({"content": [
            {"type": "resource_link", "uri": "r://a", "name": "a", "icons": [{"src": "https://i"}]},
            {"type": "text", "text": "t", "annotations": annotations}
        ]});
        let june = result("tools/call", V2025_06_18, call.clone());
        assert!(june["content"][0].get("icons").is_none());
        assert_eq!(june["content"][1], call["content"][1]);
        let march = result("tools/call", V2025_03_26, call);
        assert_eq!(
            march["content"][1]["annotations"],
            json!({"audience": ["user"]})
        );
        let caps = json!({"tools": {}, "completions": {}, "extensions": {"x": {}}});
        assert_eq!(
            capabilities(V2024_11_05, caps.clone()),
            json!({"tools": {}})
        );
        assert_eq!(
            capabilities(V2025_06_18, caps.clone()),
            json!({"tools": {}, "completions": {}})
        );
        assert_eq!(capabilities(V2025_11_25, caps.clone()), caps);
    }
}
