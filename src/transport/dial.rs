//! Opening a TCP connection to a host that resolved to several addresses
//! (`localhost` is often `::1` first and `127.0.0.1` second): each is tried
//! in turn, as the AMQP and HTTP clients both need.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Least time one address gets however many are left: a connection over
/// a slow link takes a round trip or two.
const MIN_ATTEMPT: Duration = Duration::from_millis(250);

/// Connects to the first of `addrs` that accepts, all of them within
/// `timeout` (`localhost` may give ::1 first to a server that listens on
/// 127.0.0.1 only); the last address's error when none does, or a "did
/// not resolve" naming `host` when there were none. Each address gets its
/// share of the time left ([`attempt_time`]), so one that never answers
/// (a dropped SYN, a broken IPv6 route) leaves time for the others.
pub(crate) fn connect_any(
    host: &str,
    addrs: impl IntoIterator<Item = SocketAddr>,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{host} did not resolve"),
    );
    let addrs: Vec<SocketAddr> = addrs.into_iter().collect();
    let deadline = crate::wait::deadline_in(timeout);
    for (tried, addr) in addrs.iter().enumerate() {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{host}: no address answered within {timeout:?}"),
            ));
        }
        match TcpStream::connect_timeout(addr, attempt_time(left, addrs.len() - tried)) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The time the next of `remaining` addresses gets out of `left`: an
/// equal share, but at least [`MIN_ATTEMPT`] and at most `left` (the last
/// one gets all of it; one refused at once leaves its share to the rest).
fn attempt_time(left: Duration, remaining: usize) -> Duration {
    let share = left / u32::try_from(remaining.max(1)).unwrap_or(u32::MAX);
    share.max(MIN_ATTEMPT).min(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    /// A loopback port bound but not listened on: a connection to it is
    /// refused, and no other socket can take it while the result lives.
    fn refusing() -> (std::os::fd::OwnedFd, SocketAddr) {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: a socket(2) of our own, bound and named through plain
        // sockaddr_in values of the right size.
        unsafe {
            let raw = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = std::os::fd::OwnedFd::from_raw_fd(raw);
            let mut sa: libc::sockaddr_in = std::mem::zeroed();
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
            let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
            let at = (&raw mut sa).cast::<libc::sockaddr>();
            assert_eq!(libc::bind(fd.as_raw_fd(), at, len), 0, "bind");
            let mut got = len;
            assert_eq!(libc::getsockname(fd.as_raw_fd(), at, &mut got), 0);
            let port = u16::from_be(sa.sin_port);
            (fd, SocketAddr::from(([127, 0, 0, 1], port)))
        }
    }

    #[test]
    fn each_address_gets_its_share_of_the_time_left_and_at_least_the_floor() {
        let secs = Duration::from_secs;
        let ms = Duration::from_millis;
        assert_eq!(attempt_time(secs(10), 1), secs(10), "the last: all of it");
        assert_eq!(attempt_time(secs(10), 2), secs(5));
        assert_eq!(attempt_time(secs(10), 4), ms(2500));
        assert_eq!(
            attempt_time(secs(1), 100),
            MIN_ATTEMPT,
            "never below the floor"
        );
        assert_eq!(attempt_time(ms(100), 3), ms(100), "nor beyond what is left");
        assert_eq!(attempt_time(secs(10), 0), secs(10));
    }

    #[test]
    fn every_resolved_address_is_tried_in_turn() {
        let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (_held, dead) = refusing();
        let s = connect_any("h", [dead, live.local_addr().unwrap()], WAIT).unwrap();
        assert_eq!(s.peer_addr().unwrap(), live.local_addr().unwrap());
        let e = connect_any("h", [dead], WAIT).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        let e = connect_any("nowhere.invalid", std::iter::empty(), WAIT).unwrap_err();
        assert!(
            e.to_string().contains("nowhere.invalid did not resolve"),
            "{e}"
        );
    }
}
