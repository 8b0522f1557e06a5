//! Opening broker connections: our own socket with TCP_NODELAY (amiquip
//! never sets it, which costs ~44 ms per request-reply round trip through
//! Nagle and delayed ACKs), handed to amiquip.

use super::config::AmqpUrl;
use amiquip::{Auth, Connection, ConnectionOptions, ConnectionTuning};
use std::fmt;
use std::net::ToSocketAddrs;
use std::time::Duration;

/// How long each step of opening a connection may stay silent: the TCP
/// connect, and each wait for the broker's bytes in the TLS and AMQP
/// handshakes (a broker that accepts TCP and stays silent is given up on
/// after it; one that trickles a byte within each is not).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a broker connection could not be opened. Never contains credentials.
#[derive(Debug)]
pub enum ConnectError {
    /// The TLS handshake or its configuration failed (`amqps://`).
    Tls(String),
    /// The host did not resolve or the socket failed.
    Io(std::io::Error),
    /// The AMQP handshake failed (e.g. refused credentials, unknown vhost).
    Amqp(String),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Tls(e) => write!(f, "TLS: {e}"),
            ConnectError::Io(e) => write!(f, "cannot reach the broker: {e}"),
            ConnectError::Amqp(e) => write!(f, "AMQP handshake failed: {e}"),
        }
    }
}

impl std::error::Error for ConnectError {}

/// Opens a connection to the broker of `url` over a socket with TCP_NODELAY,
/// asking for heartbeats every `heartbeat_secs` seconds (0: none). Each
/// silence is bounded by [`CONNECT_TIMEOUT`].
pub fn open(url: &AmqpUrl, heartbeat_secs: u16) -> Result<Connection, ConnectError> {
    open_within(url, heartbeat_secs, CONNECT_TIMEOUT)
}

fn open_within(
    url: &AmqpUrl,
    heartbeat_secs: u16,
    timeout: Duration,
) -> Result<Connection, ConnectError> {
    let addrs = (url.host.as_str(), url.port)
        .to_socket_addrs()
        .map_err(ConnectError::Io)?;
    let socket =
        crate::transport::dial::connect_any(&url.host, addrs, timeout).map_err(ConnectError::Io)?;
    socket.set_nodelay(true).map_err(ConnectError::Io)?;
    let options = ConnectionOptions::default()
        .auth(Auth::Plain {
            username: url.user.clone(),
            password: url.password().to_owned(),
        })
        .virtual_host(url.vhost.clone())
        .heartbeat(heartbeat_secs)
        .connection_timeout(Some(timeout));
    if url.tls {
        #[cfg(feature = "amqps")]
        {
            let stream = super::tls::handshake(url, socket, timeout).map_err(ConnectError::Tls)?;
            start(stream, options)
        }
        #[cfg(not(feature = "amqps"))]
        Err(ConnectError::Tls(
            "amqps:// needs mcpvisor built with the `amqps` feature".into(),
        ))
    } else {
        start(
            mio::net::TcpStream::from_stream(socket).map_err(ConnectError::Io)?,
            options,
        )
    }
}

/// Runs the AMQP handshake on `stream` ("insecure" in amiquip's name means
/// only that amiquip adds no TLS of its own).
fn start<S: amiquip::IoStream>(
    stream: S,
    options: ConnectionOptions<Auth>,
) -> Result<Connection, ConnectError> {
    // amiquip's error texts carry no credentials (it never sees the URL).
    Connection::insecure_open_stream(stream, options, ConnectionTuning::default())
        .map_err(|e| ConnectError::Amqp(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_that_accepts_and_stays_silent_is_given_up_on() {
        // #11 item 8: amiquip waits forever for the handshake by default.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let url = AmqpUrl::parse(&format!("amqp://u:p@127.0.0.1:{port}")).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(open_within(&url, 0, Duration::from_millis(300)).err());
        });
        let (_held, _) = silent.accept().unwrap();
        let e = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the handshake was given up on")
            .expect("no connection to a silent peer");
        assert!(matches!(e, ConnectError::Amqp(_)), "{e}");
    }

    #[cfg(feature = "amqps")]
    #[test]
    fn a_peer_that_does_not_speak_tls_fails_the_handshake_clearly() {
        // What a plain AMQP port answers to a TLS ClientHello.
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = plain.local_addr().unwrap().port();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = plain.accept().unwrap();
            let _ = std::io::Write::write_all(&mut s, b"AMQP\x00\x00\x09\x01");
        });
        let url = AmqpUrl::parse(&format!("amqps://u:secret@127.0.0.1:{port}")).unwrap();
        let e = open(&url, 0).unwrap_err();
        assert!(matches!(e, ConnectError::Tls(_)), "{e}");
        let e = e.to_string();
        assert!(e.starts_with("TLS: ") && !e.contains("secret"), "{e}");
        peer.join().unwrap();
        let missing = AmqpUrl::parse("amqps://h?cacertfile=/nonexistent/ca.pem").unwrap();
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let e = super::super::tls::handshake(&missing, socket, CONNECT_TIMEOUT)
            .err()
            .expect("no such CA file");
        assert!(e.contains("/nonexistent/ca.pem"), "{e}");
    }
}
