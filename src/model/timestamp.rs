//! ISO 8601 timestamps (UTC, milliseconds) for the wire, without a date
//! library: the civil date of a day count is a few lines of arithmetic.

use std::time::{SystemTime, UNIX_EPOCH};

/// `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ`. Times before 1970 print as the epoch.
pub fn iso8601(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (the days-to-civil
/// algorithm over 400-year eras).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_instants() {
        let at = |s: u64, ms: u64| {
            iso8601(UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms))
        };
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_795_467_105, 120), "2026-11-23T20:51:45.120Z");
        assert_eq!(at(4_107_542_399, 999), "2100-02-28T23:59:59.999Z");
    }
}
