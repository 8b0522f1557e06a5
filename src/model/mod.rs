//! Data types of the protocol, with no behaviour beyond their JSON form:
//! protocol revisions, log levels, content blocks and resource contents,
//! completions, the tool parameters mirrored into HTTP headers. Every
//! layer above may use them; they use only the wire layer's types.

pub mod adapt;
mod completion;
mod content;
mod logging;
mod meta;
mod param_header;
pub(crate) mod schema;
pub mod skill;
mod timestamp;
mod tool_result;
mod version;

pub use completion::{Completion, CompletionRef, CompletionRequest, MAX_COMPLETION_VALUES};
pub(crate) use content::blocks_from;
pub use content::{base64, base64_decode, Content, ResourceContents};
pub use logging::LogLevel;
pub(crate) use meta::{
    decoration_builders, implementation, insert_meta, insert_opt, meta_of, string,
};
pub use meta::{is_reserved_meta_key, Annotations, Decorations, Icon, IconTheme, Role};
pub use param_header::{param_headers, param_text, ParamHeader, PARAM_HEADER_PREFIX, X_MCP_HEADER};
pub use timestamp::iso8601;
pub use tool_result::{Answer, ToolResult};

/// Whether a `capabilities` object (a client's or a server's) declares
/// the extension `id` (in `extensions`).
pub fn declares_extension(capabilities: &serde_json::Value, id: &str) -> bool {
    capabilities
        .get("extensions")
        .and_then(|e| e.get(id))
        .is_some()
}
pub use version::ProtocolVersion;

/// Longest tool name SEP-986 allows.
pub const MAX_TOOL_NAME_LEN: usize = 128;

/// Checks a tool name against SEP-986 (2025-11-25): 1 to
/// [`MAX_TOOL_NAME_LEN`] characters, each an ASCII letter, digit, `_`, `-`
/// or `.`. The error says what is wrong.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_TOOL_NAME_LEN {
        return Err(format!(
            "tool name {name:?} must be 1 to {MAX_TOOL_NAME_LEN} characters long"
        ));
    }
    match name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
    {
        Some(c) => Err(format!(
            "tool name {name:?} has {c:?}: only ASCII letters, digits, '_', '-' and '.' are allowed"
        )),
        None => Ok(()),
    }
}
