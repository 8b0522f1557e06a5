//! Which errors of accept(2) a listener rides out, for every accepting
//! loop: the transports' and the daemon's own small listeners.

use std::io;

/// Accept errors worth riding out rather than restarting the listener:
/// running out of descriptors or memory, the network errors of one
/// pending connection that accept(2) says to retry like `EAGAIN` (and
/// `EPERM`, a firewall's refusal of one connection), and those it says
/// various Linux kernels return besides (`ENOSR`, `ESOCKTNOSUPPORT`,
/// `EPROTONOSUPPORT`, `ETIMEDOUT`).
pub(crate) fn transient(e: &io::Error) -> bool {
    use libc::{
        ECONNABORTED, EHOSTDOWN, EHOSTUNREACH, EINTR, EMFILE, ENETDOWN, ENETUNREACH, ENFILE,
        ENOBUFS, ENOMEM, ENONET, ENOPROTOOPT, ENOSR, EOPNOTSUPP, EPERM, EPROTO, EPROTONOSUPPORT,
        ESOCKTNOSUPPORT, ETIMEDOUT,
    };
    const RETRIED: [i32; 19] = [
        ENOSR,
        ESOCKTNOSUPPORT,
        EPROTONOSUPPORT,
        ETIMEDOUT,
        EINTR,
        ENOMEM,
        ENFILE,
        EMFILE,
        ENOBUFS,
        ECONNABORTED,
        EPROTO,
        ENETDOWN,
        ENOPROTOOPT,
        EHOSTDOWN,
        ENONET,
        EHOSTUNREACH,
        EOPNOTSUPP,
        ENETUNREACH,
        EPERM,
    ];
    matches!(e.raw_os_error(), Some(c) if RETRIED.contains(&c))
        || matches!(
            e.kind(),
            io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
        )
}

#[cfg(test)]
mod tests {
    use super::transient;
    use std::io;

    #[test]
    fn a_pending_connection_s_network_error_is_retried_a_broken_listener_is_not() {
        for code in [
            libc::EMFILE,
            libc::ENETUNREACH,
            libc::EHOSTDOWN,
            libc::EPERM,
            libc::ETIMEDOUT,
            libc::ENOSR,
        ] {
            assert!(transient(&io::Error::from_raw_os_error(code)), "{code}");
        }
        for code in [libc::EBADF, libc::EINVAL, libc::ENOTSOCK] {
            assert!(!transient(&io::Error::from_raw_os_error(code)), "{code}");
        }
    }
}
