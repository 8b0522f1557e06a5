//! Opening a TCP connection to a host that resolved to several addresses
//! (`localhost` is often `::1` first and `127.0.0.1` second): each is tried
//! in turn, as the AMQP and HTTP clients both need.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connects to the first of `addrs` that accepts within `timeout` each; the
/// last address's error when none does, or a "did not resolve" naming
/// `host` when there were none.
pub(crate) fn connect_any(
    host: &str,
    addrs: impl IntoIterator<Item = SocketAddr>,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        format!("{host} did not resolve"),
    );
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn every_resolved_address_is_tried_in_turn() {
        let live = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        // A port that was just free: nothing listens there.
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
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
