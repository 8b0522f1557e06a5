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
    /// 2026-07-28: stateless (SEP-2575). No `initialize`, no sessions: every
    /// request carries its version, client capabilities and client info
    /// in `_meta`.
    V2026_07_28,
}

impl ProtocolVersion {
    /// The newest supported revision.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2026_07_28;
    /// The newest revision with sessions: the answer to an `initialize`
    /// asking for one this crate does not speak.
    pub const LATEST_SESSION: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// Every supported revision, newest first.
    pub const ALL: [ProtocolVersion; 5] = [
        ProtocolVersion::V2026_07_28,
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
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parses a supported revision; `None` for anything else.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// `initialize` negotiation: echo a supported revision with sessions,
    /// else answer with the newest one.
    pub fn negotiate(requested: &str) -> ProtocolVersion {
        Self::parse(requested)
            .filter(|v| !v.is_stateless())
            .unwrap_or(Self::LATEST_SESSION)
    }

    /// Whether the revision is stateless (2026-07-28 on): no handshake, no
    /// session; each request stands alone.
    pub fn is_stateless(self) -> bool {
        self >= ProtocolVersion::V2026_07_28
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
        for v in ProtocolVersion::ALL
            .into_iter()
            .filter(|v| !v.is_stateless())
        {
            assert_eq!(ProtocolVersion::negotiate(v.as_str()), v);
        }
        assert_eq!(
            ProtocolVersion::negotiate("2099-01-01"),
            ProtocolVersion::V2025_11_25
        );
        // 2026-07-28 has no initialize: a session gets the newest with sessions.
        assert_eq!(
            ProtocolVersion::negotiate("2026-07-28"),
            ProtocolVersion::LATEST_SESSION
        );
        assert_eq!(
            ProtocolVersion::negotiate(""),
            ProtocolVersion::LATEST_SESSION
        );
    }

    #[test]
    fn batches_only_before_2025_06_18() {
        assert!(ProtocolVersion::V2025_03_26.allows_batches());
        assert!(ProtocolVersion::V2024_11_05.allows_batches());
        assert!(!ProtocolVersion::V2025_06_18.allows_batches());
        assert!(!ProtocolVersion::V2025_11_25.allows_batches());
    }
}
