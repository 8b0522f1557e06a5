//! Log levels of `logging/setLevel` and `notifications/message` (RFC 5424 order).

/// A log level, ordered from least to most severe.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    /// debug
    Debug,
    /// info
    Info,
    /// notice
    Notice,
    /// warning
    Warning,
    /// error
    Error,
    /// critical
    Critical,
    /// alert
    Alert,
    /// emergency
    Emergency,
}

impl LogLevel {
    const NAMES: [(&'static str, LogLevel); 8] = [
        ("debug", LogLevel::Debug),
        ("info", LogLevel::Info),
        ("notice", LogLevel::Notice),
        ("warning", LogLevel::Warning),
        ("error", LogLevel::Error),
        ("critical", LogLevel::Critical),
        ("alert", LogLevel::Alert),
        ("emergency", LogLevel::Emergency),
    ];

    /// Parses a level name as the spec spells it.
    pub fn parse(text: &str) -> Option<LogLevel> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == text)
            .map(|(_, l)| *l)
    }

    /// The level's name on the wire.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize].0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order() {
        for (name, level) in LogLevel::NAMES {
            assert_eq!(LogLevel::parse(name), Some(level));
            assert_eq!(level.as_str(), name);
        }
        assert!(LogLevel::Debug < LogLevel::Emergency);
        assert_eq!(LogLevel::parse("warn"), None);
    }
}
