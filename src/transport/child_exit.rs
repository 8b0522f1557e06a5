//! Child processes: waiting for one to exit without reaping it (while it
//! is a zombie its process id, and the group and session it leads, are
//! still its own, so they can be signalled with no risk of reaching a
//! process that took the id since), and starting one with no signal
//! blocked.

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

/// Clears the signal mask in the child of `command` before it runs its
/// program. A mask survives exec, std does not reset it, and a process
/// that takes its signals with sigwait(2) (the daemon) blocks them in
/// every thread: without this its children would not die of SIGTERM,
/// SIGINT or SIGHUP (`timeout`, `kill`, the stop of an upstream, the
/// parent-death signal).
#[cfg(unix)]
pub(crate) fn with_no_signal_blocked(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: sigemptyset(3) and pthread_sigmask(3) on a local set are
    // async-signal-safe, as code between fork and exec must be.
    unsafe {
        command.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_child_starts_with_no_signal_blocked_whatever_its_parent_blocks() {
        let mask_of = |clear: bool| {
            // On a thread of its own, which blocks SIGHUP as the daemon does.
            std::thread::spawn(move || {
                // SAFETY: sigset(3) and pthread_sigmask(3) on a local set.
                unsafe {
                    let mut set: libc::sigset_t = std::mem::zeroed();
                    libc::sigemptyset(&mut set);
                    libc::sigaddset(&mut set, libc::SIGHUP);
                    libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                }
                let mut cmd = std::process::Command::new("grep");
                cmd.args(["^SigBlk", "/proc/self/status"]);
                if clear {
                    with_no_signal_blocked(&mut cmd);
                }
                let out = cmd.output().unwrap();
                String::from_utf8(out.stdout).unwrap().trim().to_owned()
            })
            .join()
            .unwrap()
        };
        // std passes the mask on: what the helper is for.
        assert_eq!(mask_of(false), "SigBlk:\t0000000000000001");
        assert_eq!(mask_of(true), "SigBlk:\t0000000000000000");
    }

    use super::{exited_unreaped, has_exited, with_no_signal_blocked};

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
