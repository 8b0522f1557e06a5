//! Protocol revisions and version negotiation.

use std::fmt;

/// An MCP protocol revision this crate speaks, ordered oldest to newest.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProtocolVersion {
    /// 2024-11-05.
    V2024_11_05,
    /// 2025-03-26.
    V2025_03_26,
    /// 2025-06-18.
    V2025_06_18,
    /// 2025-11-25.
    V2025_11_25,
}

impl ProtocolVersion {
    /// The newest supported revision: the answer to a client asking for an unknown one.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// Every supported revision, newest first.
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2024_11_05,
    ];

    /// The revision's date string.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
        }
    }

    /// Parses a supported revision; `None` for anything else.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// Negotiation: echo a supported revision, else answer with the newest.
    pub fn negotiate(requested: &str) -> ProtocolVersion {
        Self::parse(requested).unwrap_or(Self::LATEST)
    }

    /// Since 2025-11-25 (SEP-1303) arguments that break a tool's input
    /// schema are a tool execution error (`isError: true`, so the model can
    /// correct itself); before, a protocol error (-32602).
    pub fn input_errors_are_tool_errors(self) -> bool {
        self >= ProtocolVersion::V2025_11_25
    }

    /// JSON-RPC batches exist only before 2025-06-18.
    pub fn allows_batches(self) -> bool {
        self < ProtocolVersion::V2025_06_18
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_supported_and_falls_back_to_latest() {
        for v in ProtocolVersion::ALL {
            assert_eq!(ProtocolVersion::negotiate(v.as_str()), v);
        }
        assert_eq!(
            ProtocolVersion::negotiate("2099-01-01"),
            ProtocolVersion::V2025_11_25
        );
        assert_eq!(ProtocolVersion::negotiate(""), ProtocolVersion::LATEST);
    }

    #[test]
    fn batches_only_before_2025_06_18() {
        assert!(ProtocolVersion::V2025_03_26.allows_batches());
        assert!(ProtocolVersion::V2024_11_05.allows_batches());
        assert!(!ProtocolVersion::V2025_06_18.allows_batches());
        assert!(!ProtocolVersion::V2025_11_25.allows_batches());
    }
}
