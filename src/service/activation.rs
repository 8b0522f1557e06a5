//! Socket activation as sd_listen_fds(3) defines it: the service manager
//! passes listening sockets from fd 3 on, `LISTEN_FDS` of them, for the
//! process `LISTEN_PID`, named by `LISTEN_FDNAMES` (colon-separated, from
//! `FileDescriptorName=`). The variables are removed once read, so the
//! programs the daemon starts do not take the sockets for theirs.

use std::net::TcpListener;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// The first passed descriptor (`SD_LISTEN_FDS_START`).
pub const LISTEN_FDS_START: RawFd = 3;
/// The name of a socket when `LISTEN_FDNAMES` is not set (as
/// sd_listen_fds_with_names(3) reports it; systemd itself names a socket
/// without `FileDescriptorName=` after its socket unit).
pub const UNNAMED: &str = "unknown";

/// A socket the service manager passed.
#[derive(Debug)]
pub struct Inherited {
    /// Its name (`FileDescriptorName=`, else [`UNNAMED`]).
    pub name: String,
    /// Its descriptor number, for messages.
    pub fd: RawFd,
    /// The socket.
    pub socket: OwnedFd,
}

impl Inherited {
    /// As a TCP listener: fails when it is not a listening TCP socket.
    pub fn into_tcp(self) -> Result<TcpListener, String> {
        let what = format!("inherited socket {:?} (fd {})", self.name, self.fd);
        let mut kind: libc::c_int = 0;
        let mut listening: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        use std::os::fd::AsRawFd;
        let fd = self.socket.as_raw_fd();
        // SAFETY: getsockopt(2) into c_ints we own, with their size.
        let ok = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TYPE,
                (&mut kind as *mut libc::c_int).cast(),
                &mut len,
            ) == 0
                && libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_ACCEPTCONN,
                    (&mut listening as *mut libc::c_int).cast(),
                    &mut len,
                ) == 0
        };
        if !ok || kind != libc::SOCK_STREAM || listening == 0 {
            return Err(format!(
                "{what} is not a listening stream socket (ListenStream=)"
            ));
        }
        let listener = TcpListener::from(self.socket);
        match listener.local_addr() {
            Ok(_) => Ok(listener),
            Err(e) => Err(format!("{what} is not a TCP socket: {e}")),
        }
    }
}

/// Takes the sockets passed to this process, if any, and removes the
/// variables. Each gets close-on-exec. Errors name what is malformed.
pub fn take() -> Result<Vec<Inherited>, String> {
    let fds = std::env::var("LISTEN_FDS").ok();
    let pid = std::env::var("LISTEN_PID").ok();
    let names = std::env::var("LISTEN_FDNAMES").ok();
    for v in ["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        std::env::remove_var(v);
    }
    parse(
        fds.as_deref(),
        pid.as_deref(),
        names.as_deref(),
        std::process::id(),
    )?
    .into_iter()
    .map(|(fd, name)| {
        // SAFETY: fcntl(2) on a descriptor the service manager passed us.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(format!(
                "LISTEN_FDS: fd {fd} is not open: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: the descriptor was passed to this process to own
        // (LISTEN_PID is ours) and nothing else in it took it.
        let socket = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Inherited { name, fd, socket })
    })
    .collect()
}

/// The descriptors and names the variables describe for process `me`.
fn parse(
    fds: Option<&str>,
    pid: Option<&str>,
    names: Option<&str>,
    me: u32,
) -> Result<Vec<(RawFd, String)>, String> {
    let (Some(fds), Some(pid)) = (fds, pid) else {
        return Ok(Vec::new());
    };
    let pid: u32 = pid
        .parse()
        .map_err(|_| format!("LISTEN_PID={pid:?} is not a process id"))?;
    if pid != me {
        // Meant for another process (our parent, say): not ours to take.
        return Ok(Vec::new());
    }
    let n: RawFd = fds
        .parse()
        .ok()
        .filter(|n| (0..=4096).contains(n))
        .ok_or_else(|| format!("LISTEN_FDS={fds:?} is not a count of descriptors"))?;
    let names: Vec<&str> = names.map_or_else(Vec::new, |s| s.split(':').collect());
    if !names.is_empty() && names.len() != n as usize {
        return Err(format!(
            "LISTEN_FDNAMES names {} sockets but LISTEN_FDS passes {n}",
            names.len()
        ));
    }
    Ok((0..n)
        .map(|i| {
            let name = names.get(i as usize).copied().unwrap_or(UNNAMED);
            (LISTEN_FDS_START + i, name.to_owned())
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variables_as_sd_listen_fds_reads_them() {
        assert_eq!(parse(None, None, None, 7), Ok(vec![]));
        assert_eq!(parse(Some("2"), Some("8"), None, 7), Ok(vec![]), "not ours");
        assert_eq!(
            parse(Some("2"), Some("7"), Some("http:tcp"), 7),
            Ok(vec![(3, "http".into()), (4, "tcp".into())])
        );
        assert_eq!(
            parse(Some("1"), Some("7"), None, 7),
            Ok(vec![(3, UNNAMED.into())])
        );
        assert!(parse(Some("2"), Some("7"), Some("http"), 7)
            .unwrap_err()
            .contains("names 1 sockets"));
        assert!(parse(Some("x"), Some("7"), None, 7).is_err());
        assert!(parse(Some("1"), Some("me"), None, 7).is_err());
    }

    #[test]
    fn only_a_listening_tcp_socket_is_taken_as_one() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let got = Inherited {
            name: "http".into(),
            fd: 3,
            socket: OwnedFd::from(l),
        }
        .into_tcp()
        .unwrap();
        assert_eq!(got.local_addr().unwrap(), addr);
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let e = Inherited {
            name: "x".into(),
            fd: 4,
            socket: OwnedFd::from(a),
        }
        .into_tcp()
        .unwrap_err();
        assert!(e.contains("not a listening stream socket"), "{e}");
    }
}
