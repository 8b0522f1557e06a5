//! SIGTERM, SIGINT and SIGHUP as messages: blocked in every thread (so no
//! handler runs on an arbitrary thread) and received by one thread with
//! sigwait(2), which forwards them on a channel.

use crossbeam_channel::Receiver;
use std::io;

/// The signals the daemon acts on.
pub const HANDLED: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP];

/// Signals received, as a channel.
pub struct Signals {
    rx: Receiver<libc::c_int>,
}

impl Signals {
    /// Blocks [`HANDLED`] in the calling thread (and so in every thread it
    /// starts afterwards) and starts the receiving thread. Call it before
    /// any other thread starts.
    pub fn block() -> io::Result<Signals> {
        // SAFETY: plain sigset(3) and pthread_sigmask(3) calls on a local set.
        let set = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in HANDLED {
                libc::sigaddset(&mut set, s);
            }
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            set
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        std::thread::Builder::new()
            .name("mcpvisor-signals".into())
            .spawn(move || loop {
                let mut signal: libc::c_int = 0;
                // SAFETY: sigwait(3) on the set blocked above.
                if unsafe { libc::sigwait(&set, &mut signal) } == 0 && tx.send(signal).is_err() {
                    return;
                }
            })?;
        Ok(Signals { rx })
    }

    /// The signals, in the order they arrived.
    pub fn receiver(&self) -> &Receiver<libc::c_int> {
        &self.rx
    }
}
