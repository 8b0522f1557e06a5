//! Waiting for a child process to exit without reaping it: while it is a
//! zombie its process id (and the group and session it leads) are still
//! its own, so they can be signalled with no risk of reaching a process
//! that took the id since.

use std::io;

/// Blocks until child `pid` has exited, leaving it unreaped (Linux's
/// `waitid` with `WNOWAIT`). An error when it is no child of ours or
/// already reaped (`ECHILD`).
pub(crate) fn exited_unreaped(pid: libc::pid_t) -> io::Result<()> {
    loop {
        match wait_exit(pid, 0) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other.map(drop),
        }
    }
}

/// Whether child `pid` has exited, without waiting and leaving it
/// unreaped (also `true` when it is no child of ours any more).
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn has_exited(pid: libc::pid_t) -> bool {
    wait_exit(pid, libc::WNOHANG).unwrap_or(true)
}

/// `waitid(P_PID, pid, WEXITED | WNOWAIT | flags)`: whether it reported
/// an exit.
fn wait_exit(pid: libc::pid_t, flags: libc::c_int) -> io::Result<bool> {
    // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid(2).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid(2) on one process id, writing into `info`; WNOWAIT
    // leaves the child a zombie.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT | flags,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: si_pid is set by waitid(2) when a child changed state, and
    // stays 0 (as zeroed) otherwise (WNOHANG with nothing to report).
    Ok(unsafe { info.si_pid() } != 0)
}

#[cfg(test)]
mod tests {
    use super::{exited_unreaped, has_exited};

    #[test]
    fn an_exited_child_stays_a_zombie_until_reaped() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        exited_unreaped(pid).unwrap();
        assert!(has_exited(pid));
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        assert!(stat.contains(") Z "), "a zombie: {stat}");
        assert!(child.wait().unwrap().success());
        assert!(exited_unreaped(pid).is_err(), "reaped: no child of ours");
    }
}
