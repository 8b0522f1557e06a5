//! The HTTP client's socket to a server: plain TCP for `http://`, TLS
//! (rustls on ring, trusting the system's roots or `SSL_CERT_FILE`) for
//! `https://`.

use std::io::{self, Read, Write};
use std::net::TcpStream;

/// Longest a server may take to answer each step of a TLS handshake.
#[cfg(feature = "https")]
pub(crate) const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How a server is reached: in the clear, or over TLS as `name`.
#[derive(Clone)]
pub(crate) enum Security {
    Plain,
    #[cfg(feature = "https")]
    Tls {
        config: std::sync::Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    },
}

impl Security {
    /// What `scheme` (`http` or `https`) asks for, with `host` as the TLS
    /// server name.
    #[cfg_attr(not(feature = "https"), allow(unused_variables))]
    pub(crate) fn of(scheme: &str, host: &str) -> io::Result<Security> {
        match scheme {
            "http" => Ok(Security::Plain),
            #[cfg(feature = "https")]
            "https" => {
                let config = crate::transport::tls::system_config().map_err(|e| {
                    io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("https: {e}; name a PEM file of them with SSL_CERT_FILE"),
                    )
                })?;
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                let name =
                    rustls::pki_types::ServerName::try_from(bare.to_owned()).map_err(|e| {
                        io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!(
                                "{:?} is not a valid TLS server name: {e}",
                                crate::transport::listen::redact(host)
                            ),
                        )
                    })?;
                Ok(Security::Tls { config, name })
            }
            other => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{other}:// is not supported (http://{})",
                    if cfg!(feature = "https") {
                        " or https://"
                    } else {
                        "; this build has no TLS"
                    }
                ),
            )),
        }
    }

    /// The default port of the scheme.
    pub(crate) fn default_port(&self) -> u16 {
        match self {
            Security::Plain => 80,
            #[cfg(feature = "https")]
            Security::Tls { .. } => 443,
        }
    }

    /// `stream` as a socket of this kind; a TLS handshake is done at once
    /// (within the stream's timeouts), so that a refused certificate is
    /// the error of this request.
    pub(crate) fn open(&self, stream: TcpStream) -> io::Result<Socket> {
        match self {
            Security::Plain => Ok(Socket::Plain(stream)),
            #[cfg(feature = "https")]
            Security::Tls { config, name } => {
                let mut conn = rustls::ClientConnection::new(config.clone(), name.clone())
                    .map_err(io::Error::other)?;
                let mut stream = stream;
                // A server that never finishes the handshake fails it.
                let silence = stream.read_timeout()?;
                stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
                while conn.is_handshaking() {
                    conn.complete_io(&mut stream)?;
                }
                stream.set_read_timeout(silence)?;
                Ok(Socket::Tls(Box::new(rustls::StreamOwned::new(
                    conn, stream,
                ))))
            }
        }
    }
}

/// A connected socket, read and written in plaintext.
pub(crate) enum Socket {
    Plain(TcpStream),
    #[cfg(feature = "https")]
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Socket {
    /// The TCP connection underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Socket::Plain(s) => s,
            #[cfg(feature = "https")]
            Socket::Tls(s) => &s.sock,
        }
    }

    /// Whether this idle connection is still open with nothing to read: a
    /// server that closed it (or sent anything unasked) leaves bytes or an
    /// end of stream, and such a connection is not used again.
    pub(crate) fn quiet(&mut self) -> bool {
        let tcp = self.tcp();
        if tcp.set_nonblocking(true).is_err() {
            return false;
        }
        let quiet =
            matches!(tcp.peek(&mut [0u8; 1]), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        tcp.set_nonblocking(false).is_ok() && quiet && self.nothing_decrypted()
    }

    /// Whether TLS holds no plaintext (nor a close) it already read.
    fn nothing_decrypted(&mut self) -> bool {
        match self {
            Socket::Plain(_) => true,
            #[cfg(feature = "https")]
            Socket::Tls(s) => matches!(
                s.conn.reader().read(&mut [0u8; 1]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock
            ),
        }
    }
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Plain(s) => s.read(buf),
            // A server that closes without close_notify ends the stream
            // as a plain close would: every body we read is framed
            // (Content-Length or chunked), and one that ends before its
            // framing says is an error, so a cut cannot pass for whole.
            #[cfg(feature = "https")]
            Socket::Tls(s) => match s.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(0),
                other => other,
            },
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Plain(s) => s.write(buf),
            #[cfg(feature = "https")]
            Socket::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Plain(s) => s.flush(),
            #[cfg(feature = "https")]
            Socket::Tls(s) => s.flush(),
        }
    }
}
