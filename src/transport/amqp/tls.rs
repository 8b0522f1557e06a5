//! TLS for `amqps://`, with rustls (ring; no C TLS stack): the handshake
//! runs on the blocking socket before amiquip sees it, then [`TlsStream`]
//! gives amiquip's non-blocking I/O loop the plaintext side.
//!
//! amiquip writes until `WouldBlock` and never flushes, so encrypted bytes
//! must not stay behind in rustls once `write` has returned: a write first
//! pushes out what is pending (or reports `WouldBlock`, which makes amiquip
//! wait for the socket to become writable), and what it encrypts it sends
//! before returning, waiting for the socket if it has to.

use super::config::AmqpUrl;
use mio::{Evented, Poll, PollOpt, Ready, Token};
use rustls::pki_types::ServerName;
use rustls::ClientConnection;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// How long a write may wait for the broker to take encrypted bytes.
pub const WRITE_STALL_LIMIT: Duration = Duration::from_secs(30);

/// Runs the TLS handshake with the broker of `url` on `socket` (blocking,
/// within `timeout`) and returns the stream for amiquip.
pub(crate) fn handshake(
    url: &AmqpUrl,
    mut socket: TcpStream,
    timeout: Duration,
) -> Result<TlsStream, String> {
    let config = match &url.ca_file {
        Some(path) => crate::transport::tls::file_config(path)?,
        None => crate::transport::tls::system_config()
            .map_err(|e| format!("{e}; name a PEM file with ?cacertfile=PATH"))?,
    };
    let name = ServerName::try_from(url.host.clone())
        .map_err(|e| format!("{:?} is not a valid TLS server name: {e}", url.host))?;
    let mut conn = ClientConnection::new(config, name).map_err(|e| e.to_string())?;
    let io_err = |e: io::Error| format!("handshake with {}: {e}", url.host);
    socket.set_read_timeout(Some(timeout)).map_err(io_err)?;
    socket.set_write_timeout(Some(timeout)).map_err(io_err)?;
    while conn.is_handshaking() {
        conn.complete_io(&mut socket).map_err(io_err)?;
    }
    socket.set_read_timeout(None).map_err(io_err)?;
    socket.set_write_timeout(None).map_err(io_err)?;
    let socket = mio::net::TcpStream::from_stream(socket).map_err(io_err)?;
    Ok(TlsStream { conn, socket })
}

/// A TLS client connection over a non-blocking socket, as amiquip's I/O
/// loop wants it: `Read` and `Write` of plaintext, readiness of the socket.
pub(crate) struct TlsStream {
    conn: ClientConnection,
    socket: mio::net::TcpStream,
}

impl TlsStream {
    /// Sends pending encrypted bytes until done or the socket is full.
    fn push(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.socket)?;
        }
        Ok(())
    }

    /// Sends every pending encrypted byte, waiting for the socket.
    fn push_all(&mut self) -> io::Result<()> {
        loop {
            match self.push() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.await_writable()?,
                other => return other,
            }
        }
    }

    fn await_writable(&self) -> io::Result<()> {
        let mut fd = libc::pollfd {
            fd: self.socket.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = WRITE_STALL_LIMIT.as_millis() as libc::c_int;
        // SAFETY: one valid pollfd, for the duration of the call.
        match unsafe { libc::poll(&mut fd, 1, ms) } {
            0 => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the broker took no data for too long",
            )),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(())
                } else {
                    Err(e)
                }
            }
            _ => Ok(()),
        }
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                // Ok(0) here is the broker's close_notify: the end.
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if self.conn.read_tls(&mut self.socket)? == 0 {
                return Ok(0);
            }
            let state = self
                .conn
                .process_new_packets()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
            // Alerts and key updates may want an answer.
            self.push_all()?;
            state?;
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push()?;
        let n = self.conn.writer().write(buf)?;
        self.push_all()?;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.push_all()
    }
}

impl Evented for TlsStream {
    fn register(
        &self,
        poll: &Poll,
        token: Token,
        interest: Ready,
        opts: PollOpt,
    ) -> io::Result<()> {
        self.socket.register(poll, token, interest, opts)
    }
    fn reregister(
        &self,
        poll: &Poll,
        token: Token,
        interest: Ready,
        opts: PollOpt,
    ) -> io::Result<()> {
        self.socket.reregister(poll, token, interest, opts)
    }
    fn deregister(&self, poll: &Poll) -> io::Result<()> {
        self.socket.deregister(poll)
    }
}

impl amiquip::IoStream for TlsStream {}
