//! The sd_notify(3) protocol, to its letter: newline-separated `KEY=VALUE`
//! assignments in one datagram to the Unix socket `$NOTIFY_SOCKET` names (a
//! path, or an abstract socket written with a leading `@`), and the
//! watchdog interval from `$WATCHDOG_USEC` (honoured only when
//! `$WATCHDOG_PID` is unset or names this process). Without
//! `$NOTIFY_SOCKET` every call does nothing.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

/// Where the service manager listens, if it does.
pub struct Notifier {
    target: Option<(UnixDatagram, std::os::unix::net::SocketAddr)>,
}

impl Notifier {
    /// From the environment the service manager set.
    pub fn from_env() -> io::Result<Notifier> {
        Notifier::to(std::env::var("NOTIFY_SOCKET").ok().as_deref())
    }

    /// To the socket `name` (as `$NOTIFY_SOCKET` would say it), or nowhere.
    pub fn to(name: Option<&str>) -> io::Result<Notifier> {
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            return Ok(Notifier { target: None });
        };
        let addr = match name.strip_prefix('@') {
            Some(abstract_name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes())?
            }
            None => std::os::unix::net::SocketAddr::from_pathname(name)?,
        };
        Ok(Notifier {
            target: Some((UnixDatagram::unbound()?, addr)),
        })
    }

    /// Sends `state` (`READY=1`, `STATUS=…`, …); nothing without a socket.
    pub fn notify(&self, state: &str) -> io::Result<()> {
        match &self.target {
            Some((socket, addr)) => socket.send_to_addr(state.as_bytes(), addr).map(drop),
            None => Ok(()),
        }
    }

    /// Whether a service manager listens.
    pub fn enabled(&self) -> bool {
        self.target.is_some()
    }
}

/// How often to send `WATCHDOG=1`: half the interval the service manager
/// set, if it set one for this process.
pub fn watchdog_interval() -> Option<Duration> {
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
            return None;
        }
    }
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.trim().parse().ok()?;
    (usec > 0).then(|| ping_interval(usec))
}

/// The shortest wait between two pings, whatever `$WATCHDOG_USEC` asks
/// (a `WatchdogSec=1us` would make it 0, and the pinging thread spin).
pub const MIN_WATCHDOG_PING: Duration = Duration::from_millis(1);

/// Half the watchdog's `usec`, at least [`MIN_WATCHDOG_PING`].
fn ping_interval(usec: u64) -> Duration {
    Duration::from_micros(usec / 2).max(MIN_WATCHDOG_PING)
}

/// `CLOCK_MONOTONIC` now in microseconds, as `MONOTONIC_USEC=` wants it
/// with `RELOADING=1`.
pub fn monotonic_usec() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime(2) into a timespec we own.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// How long the watchdog waits for the root to answer before it looks at
/// the tree's progress instead.
const WATCHDOG_ASK: Duration = Duration::from_secs(1);

/// Sends `WATCHDOG=1` every [`watchdog_interval`] while the root
/// supervisor is alive: it answers, or it made progress since the last
/// look (a root busy starting or stopping a child, during a reload say,
/// answers only when done; the supervisors below it, restarting a failing
/// upstream, count for nothing). A root stuck (no answer, no progress of
/// its own) stops the pings, and the service manager restarts the daemon.
/// Until the returned guard is dropped; `None` without a watchdog.
pub fn watchdog(root: supervisor::SupervisorRef) -> Option<crossbeam_channel::Sender<()>> {
    let every = watchdog_interval()?;
    let notifier = Notifier::from_env().ok()?;
    let (guard, dropped) = crossbeam_channel::bounded::<()>(0);
    std::thread::Builder::new()
        .name("mcpvisor-watchdog".into())
        .spawn(move || {
            let mut seen = root.progress();
            while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                dropped.recv_timeout(every)
            {
                let answered = root.count_children_within(WATCHDOG_ASK.min(every)).is_ok();
                let now = root.progress();
                if answered || now != seen {
                    let _ = notifier.notify("WATCHDOG=1");
                }
                seen = now;
            }
        })
        .ok()?;
    Some(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_is_pinged_at_half_its_interval_and_never_without_a_pause() {
        assert_eq!(ping_interval(200_000), Duration::from_millis(100));
        assert_eq!(ping_interval(1), MIN_WATCHDOG_PING);
        assert_eq!(ping_interval(1_999), MIN_WATCHDOG_PING);
    }

    #[test]
    fn datagrams_reach_path_and_abstract_sockets() {
        let dir = std::env::temp_dir().join(format!("mcpvisor-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let manager = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::to(path.to_str()).unwrap();
        n.notify("READY=1\nSTATUS=up").unwrap();
        let mut buf = [0u8; 256];
        let len = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=up");
        let name = format!("mcpvisor-test-{}", std::process::id());
        let abstract_addr = {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap()
        };
        let manager = UnixDatagram::bind_addr(&abstract_addr).unwrap();
        Notifier::to(Some(&format!("@{name}")))
            .unwrap()
            .notify("WATCHDOG=1")
            .unwrap();
        let len = manager.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
        assert!(!Notifier::to(None).unwrap().enabled());
        assert!(Notifier::to(None).unwrap().notify("READY=1").is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
