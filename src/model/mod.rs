//! Data types of the protocol, with no behaviour beyond their JSON form:
//! protocol revisions, log levels, content blocks and resource contents,
//! completions, the tool parameters mirrored into HTTP headers. Every
//! layer above may use them; they use only the wire layer's types.

pub mod adapt;
mod completion;
mod content;
mod logging;
mod param_header;
pub mod skill;
mod timestamp;
mod version;

pub use completion::{Completion, CompletionRef, CompletionRequest, MAX_COMPLETION_VALUES};
pub(crate) use content::insert_opt;
pub use content::{base64, base64_decode, Content, ResourceContents};
pub use logging::LogLevel;
pub use param_header::{param_headers, param_text, ParamHeader, PARAM_HEADER_PREFIX, X_MCP_HEADER};
pub use timestamp::iso8601;

/// Whether a `capabilities` object (a client's or a server's) declares
/// the extension `id` (in `extensions`).
pub fn declares_extension(capabilities: &serde_json::Value, id: &str) -> bool {
    capabilities
        .get("extensions")
        .and_then(|e| e.get(id))
        .is_some()
}
pub use version::ProtocolVersion;
