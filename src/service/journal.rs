//! The daemon's log: env_logger on stderr. When stderr is the journal
//! (`JOURNAL_STREAM` names its device and inode, see systemd.exec(5)),
//! each line starts with its syslog priority (`<3>` error … `<7>` debug,
//! sd-daemon(3)) and carries no timestamp (the journal keeps its own), so
//! `journalctl -p err` selects by level.

use std::io::Write;
use std::os::unix::fs::MetadataExt;

/// The syslog priority of a log level (sd-daemon(3)).
pub fn priority(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    }
}

/// Whether `journal_stream` (`JOURNAL_STREAM`, "DEV:INODE") names the
/// file whose device and inode are `dev` and `ino`.
fn is_stream(journal_stream: &str, dev: u64, ino: u64) -> bool {
    journal_stream
        .split_once(':')
        .and_then(|(d, i)| Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?)))
        == Some((dev, ino))
}

/// Whether stderr goes to the journal.
fn stderr_is_journal() -> bool {
    let Ok(stream) = std::env::var("JOURNAL_STREAM") else {
        return false;
    };
    std::fs::metadata("/proc/self/fd/2")
        .or_else(|_| std::fs::metadata("/dev/stderr"))
        .is_ok_and(|m| is_stream(&stream, m.dev(), m.ino()))
}

/// What starts an error line written to stderr directly (before the
/// logger runs): `<3>` when stderr is the journal, else nothing.
pub fn error_prefix() -> &'static str {
    if stderr_is_journal() {
        "<3>"
    } else {
        ""
    }
}

/// Starts logging at `level` (one of the config's `LOG_LEVELS`), unless
/// `RUST_LOG` is set, which then decides (and [`set_level`] changes
/// nothing). Broker credentials are never logged (see
/// [`crate::SECRET_LOGGING_MODULE`]).
pub fn init(level: &str) {
    let mut b = env_logger::Builder::new();
    let by_env = std::env::var("RUST_LOG").ok().filter(|s| !s.is_empty());
    match &by_env {
        Some(filter) => b.parse_filters(filter),
        None => b.filter_level(log::LevelFilter::Trace),
    };
    b.filter_module(crate::SECRET_LOGGING_MODULE, log::LevelFilter::Info);
    if stderr_is_journal() {
        b.format(|buf, record| {
            let p = priority(record.level());
            let text = record.args().to_string();
            // The journal splits at newlines: every line gets the priority.
            let text = text.replace('\n', &format!("\n<{p}>"));
            writeln!(buf, "<{p}>{}: {text}", record.target())
        });
    }
    if b.try_init().is_ok() && by_env.is_none() {
        set_level(level);
    }
}

/// Changes the level at run time (a reload), unless `RUST_LOG` decides.
pub fn set_level(level: &str) {
    if std::env::var("RUST_LOG").is_ok_and(|s| !s.is_empty()) {
        return;
    }
    if let Ok(l) = level.parse::<log::LevelFilter>() {
        log::set_max_level(l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_and_priorities() {
        assert!(is_stream("8:12345", 8, 12345));
        assert!(!is_stream("8:12345", 8, 1));
        assert!(!is_stream("garbage", 8, 12345));
        assert_eq!(priority(log::Level::Error), 3);
        assert_eq!(priority(log::Level::Warn), 4);
        assert_eq!(priority(log::Level::Info), 6);
        assert_eq!(priority(log::Level::Trace), 7);
    }
}
