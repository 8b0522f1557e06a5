//! Writing a message on the thread that produced it, when that cannot
//! block: stdout on a pipe with room for it, nothing queued before it, and
//! the writer thread not writing. An answer then reaches the peer without
//! a hand-off to the writer thread (a wake-up on a small machine costs more
//! than the write), and the writer, with nothing to do, parks instead of
//! polling. Everything else goes through the writer's queue as before.
//!
//! Order is kept: a message is written directly only while no message sits
//! in the queue or in the writer's hands (`queued` counts them from before
//! they are queued until after they are written), so nothing overtakes
//! what one thread sent before. A peer that stops reading never blocks the
//! producing thread: it writes through a non-blocking description of the
//! pipe of its own, at most PIPE_BUF bytes (all or nothing); a full pipe
//! sends the message to the queue instead. Nor does the thread that reads the
//! requests write directly while it holds more of them already read
//! ([`ReadingAhead`]): its answers then go to the writer, which writes
//! them in one batch.

use crate::protocol::Session;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError, Weak};

/// With more requests than this in flight (the answer's own included),
/// messages go through the writer, which writes them in batches: one
/// write(2) a message would cost more than the hand-off saves (measured:
/// at 8 in flight, direct writes halved the throughput).
pub(crate) const DIRECT_MAX_IN_FLIGHT: usize = 2;

thread_local! {
    // This thread reads requests and holds more of them already read.
    static READING_AHEAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// While alive: the reading thread has more requests at hand than the one
/// it is handling, so what it answers meanwhile goes to the writer, which
/// writes a batch in one write(2), rather than one write(2) each now.
pub(crate) struct ReadingAhead(bool);

impl ReadingAhead {
    pub(crate) fn set(more: bool) -> ReadingAhead {
        ReadingAhead(READING_AHEAD.with(|r| r.replace(more)))
    }
}

impl Drop for ReadingAhead {
    fn drop(&mut self) {
        READING_AHEAD.with(|r| r.set(self.0));
    }
}

/// A pipe shared by the writer thread and the threads that produce
/// messages.
pub(crate) struct Direct {
    // The pipe, blocking: the writer thread's. Its lock orders all writes.
    out: Mutex<File>,
    // The same pipe opened again without blocking (a description of its
    // own: the shared one's flags stay), for direct writes under `out`.
    nonblocking: File,
    // Messages queued for the writer or in its hands, not yet written.
    queued: AtomicUsize,
    // A direct write failed (the writer's queue takes everything and
    // reports the failure), or the writer ended (nothing more is written).
    off: AtomicBool,
    // The session whose messages these are: its requests in flight.
    session: OnceLock<Weak<Session>>,
}

impl Direct {
    /// For `file` if it is a pipe that can be opened again without
    /// blocking (Linux, through /proc); else gives `file` back.
    pub(crate) fn for_pipe(file: File) -> Result<Direct, File> {
        match reopen_nonblocking(&file) {
            Some(nonblocking) => Ok(Direct {
                out: Mutex::new(file),
                nonblocking,
                queued: AtomicUsize::new(0),
                off: AtomicBool::new(false),
                session: OnceLock::new(),
            }),
            None => Err(file),
        }
    }

    /// The session writing here (its requests in flight decide).
    pub(crate) fn serve(&self, session: &std::sync::Arc<Session>) {
        let _ = self.session.set(std::sync::Arc::downgrade(session));
    }

    /// Writes `line` (a message and its newline) now, if it can without
    /// blocking and without overtaking a queued message, and few requests
    /// are in flight (true); else writes nothing (false), and the message
    /// is to be queued (after [`Direct::queue`]).
    pub(crate) fn try_write(&self, line: &[u8]) -> bool {
        // Up to PIPE_BUF bytes a write to a pipe is atomic: all of it, or
        // (no room, not blocking) none.
        if line.len() > libc::PIPE_BUF
            || self.queued.load(Ordering::SeqCst) != 0
            || self.off.load(Ordering::SeqCst)
            || READING_AHEAD.with(std::cell::Cell::get)
        {
            return false;
        }
        let busy = |s: std::sync::Arc<Session>| s.inflight() > DIRECT_MAX_IN_FLIGHT;
        if self.session.get().and_then(Weak::upgrade).is_some_and(busy) {
            return false;
        }
        let _out = match self.out.try_lock() {
            Ok(out) => out,
            // The writer is writing: it takes this one after its batch.
            Err(TryLockError::WouldBlock | TryLockError::Poisoned(_)) => return false,
        };
        if self.queued.load(Ordering::SeqCst) != 0 {
            return false;
        }
        loop {
            match (&self.nonblocking).write(line) {
                Ok(n) if n == line.len() => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                other => {
                    // A short write cannot happen within PIPE_BUF; an error
                    // means the peer is gone. The writer reports it.
                    log::debug!("a direct write failed ({other:?}); the writer takes over");
                    self.off.store(true, Ordering::SeqCst);
                    return false;
                }
            }
        }
    }

    /// A message is about to be queued for the writer.
    pub(crate) fn queue(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// `n` messages counted by [`Direct::queue`] were written or will never
    /// be (the queue refused them).
    pub(crate) fn done(&self, n: usize) {
        self.queued.fetch_sub(n, Ordering::SeqCst);
    }

    /// The writer ended: what comes later is not written (as the closed
    /// queue drops it).
    pub(crate) fn stop(&self) {
        self.off.store(true, Ordering::SeqCst);
    }

    /// The pipe, for the writer thread.
    pub(crate) fn lock(&self) -> MutexGuard<'_, File> {
        crate::sync::lock(&self.out)
    }
}

/// `file` (a pipe) opened again, not blocking; `None` if it is no pipe or
/// cannot be.
#[cfg(target_os = "linux")]
fn reopen_nonblocking(file: &File) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let fd = file.as_raw_fd();
    // SAFETY: fstat(2) on a descriptor we own, into a zeroed struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFIFO {
        return None;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{fd}"))
        .ok()
}

/// Elsewhere: no direct writes.
#[cfg(not(target_os = "linux"))]
fn reopen_nonblocking(_: &File) -> Option<File> {
    None
}

/// Writes `batch` for the writer thread, then counts its `n` messages as
/// written (under the lock, so no direct write slips in between).
pub(crate) fn write_batch(direct: &Direct, batch: &[u8], n: usize) -> io::Result<()> {
    let mut out = direct.lock();
    let written = out.write_all(batch);
    direct.done(n);
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn pipe() -> (File, Direct) {
        let (r, w) = std::io::pipe().unwrap();
        let reader = File::from(std::os::fd::OwnedFd::from(r));
        let direct = Direct::for_pipe(File::from(std::os::fd::OwnedFd::from(w)))
            .unwrap_or_else(|_| panic!("a pipe"));
        (reader, direct)
    }

    #[test]
    fn writes_at_once_only_with_nothing_queued_and_room_in_the_pipe() {
        let (mut reader, direct) = pipe();
        assert!(direct.try_write(b"{\"a\":1}\n"));
        let mut buf = [0u8; 8];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"{\"a\":1}\n");
        // A queued message is not overtaken.
        direct.queue();
        assert!(!direct.try_write(b"x\n"));
        write_batch(&direct, b"q\n", 1).unwrap();
        let mut buf = [0u8; 2];
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"q\n");
        assert!(direct.try_write(b"y\n"));
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"y\n");
        // While the writer holds the pipe, a producer does not wait for it.
        let held = direct.lock();
        assert!(!direct.try_write(b"z\n"));
        drop(held);
        // A peer that reads nothing: the pipe fills, and a write that would
        // block is refused instead (never blocking this test).
        let line = vec![b'x'; 1000];
        let mut written = 0;
        while direct.try_write(&line) {
            written += line.len();
        }
        assert!(written >= 4096, "only {written} bytes");
        let mut drained = vec![0u8; written];
        reader.read_exact(&mut drained).unwrap();
        assert!(direct.try_write(b"a\n"), "room again");
        let mut buf = [0u8; 2];
        reader.read_exact(&mut buf).unwrap();
        // Longer than PIPE_BUF: the writer's (it may be written in parts).
        assert!(!direct.try_write(&[b'x'; libc::PIPE_BUF + 1]));
        // While its reader holds more requests, this thread's answers go
        // to the writer (a batch, one write(2)); then direct again.
        {
            let _ahead = ReadingAhead::set(true);
            assert!(!direct.try_write(b"b\n"));
        }
        assert!(direct.try_write(b"b\n"));
        reader.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"b\n");
        // Once the writer ended, nothing more is written.
        direct.stop();
        assert!(!direct.try_write(b"c\n"));
    }

    #[test]
    fn only_pipes() {
        let file = File::open("/dev/null").unwrap();
        assert!(Direct::for_pipe(file).is_err());
    }
}
