//! What a client talks through: a message writer and a message reader, made
//! from any byte stream (stdio of a child process, TCP) or an in-process pair.

use crate::jsonrpc::{self, ErrorObject, ParseError, Parsed, RequestId};
use crate::transport::lines::{Frame, LineReader};
use serde_json::Value;
use std::io::{self, BufWriter, Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Default longest incoming line: 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Default time a child process gets after stdin closes, and again after SIGTERM.
pub const DEFAULT_CHILD_GRACE: Duration = Duration::from_secs(2);

/// Writes whole messages.
pub trait MessageWriter: Send {
    /// Writes one message.
    fn write(&mut self, message: &Value) -> io::Result<()>;
    /// Closes the writing side (EOF for the peer).
    fn close(&mut self);
}

/// Reads whole messages.
pub trait MessageReader: Send {
    /// The next message's bytes, or `None` at end of stream.
    fn read(&mut self) -> io::Result<Option<Vec<u8>>>;
    /// The next message and, when the transport knows it, the id of our
    /// request it was sent for: the server's requests made while serving
    /// that call, told by the response stream that carried it (Streamable
    /// HTTP) or by its correlation id (AMQP). By default: unknown.
    fn read_related(&mut self) -> io::Result<Option<(Vec<u8>, Option<RequestId>)>> {
        Ok(self.read()?.map(|m| (m, None)))
    }
    /// The next message parsed (or why it could not be), with the request
    /// it relates to as [`read_related`](Self::read_related) tells. By
    /// default that message's bytes, parsed; a transport that parses what
    /// it reads anyway (AMQP looks at every answer's id) hands over its
    /// parse, so a message is parsed once. An override must give what
    /// [`jsonrpc::parse`] makes of the bytes `read_related` would give,
    /// with the same related id.
    fn read_parsed(&mut self) -> io::Result<Option<(ParsedMessage, Option<RequestId>)>> {
        let next = self.read_related()?;
        Ok(next.map(|(bytes, related)| (jsonrpc::parse(&bytes), related)))
    }
}

/// What one message's bytes parsed as (a message or a batch), or why they
/// did not, as [`MessageReader::read_parsed`] gives it.
pub type ParsedMessage = Result<Parsed, ParseError>;

/// A connection to a server.
pub struct Connection {
    pub(crate) writer: Box<dyn MessageWriter>,
    pub(crate) reader: Box<dyn MessageReader>,
    pub(crate) on_close: Option<Box<dyn FnOnce() + Send>>,
    pid: Option<u32>,
}

impl Connection {
    /// A connection from a writer and a reader.
    pub fn new(writer: Box<dyn MessageWriter>, reader: Box<dyn MessageReader>) -> Connection {
        Connection {
            writer,
            reader,
            on_close: None,
            pid: None,
        }
    }

    /// Newline-delimited JSON over any byte streams.
    pub fn lines<R: Read + Send + 'static, W: Write + Send + 'static>(
        input: R,
        output: W,
    ) -> Connection {
        Connection::new(
            Box::new(LineWriter(Some(BufWriter::new(output)))),
            Box::new(LineMessages(LineReader::new(
                input,
                DEFAULT_MAX_MESSAGE_BYTES,
            ))),
        )
    }

    /// The process id of a child-process connection.
    pub fn process_id(&self) -> Option<u32> {
        self.pid
    }

    /// A TCP connection to a line-delimited MCP server, made within
    /// [`DEFAULT_CONNECT_TIMEOUT`]. A write that blocks for
    /// [`DEFAULT_WRITE_TIMEOUT`] (the server stopped reading) fails;
    /// closing the connection shuts the socket down at once.
    pub fn tcp(addr: std::net::SocketAddr) -> io::Result<Connection> {
        let stream = std::net::TcpStream::connect_timeout(&addr, DEFAULT_CONNECT_TIMEOUT)?;
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(DEFAULT_WRITE_TIMEOUT))?;
        let closer = stream.try_clone()?;
        let mut conn = Connection::lines(stream.try_clone()?, TcpOut(stream));
        conn.on_close = Some(Box::new(move || {
            let _ = closer.shutdown(std::net::Shutdown::Both);
        }));
        Ok(conn)
    }

    /// Spawns `command` and speaks MCP over its stdin / stdout. Its stderr is
    /// logged line by line. On Linux the child leads a session (and process
    /// group) of its own, with no controlling terminal, and gets SIGTERM if
    /// this process dies. Closing the client closes stdin, then sends
    /// SIGTERM, then SIGKILL, each after [`DEFAULT_CHILD_GRACE`], to its
    /// group, always reaps it, and then SIGKILLs whatever is left of its
    /// group and session.
    pub fn child(command: Command) -> io::Result<Connection> {
        Connection::child_named(command, "child")
    }

    /// [`Connection::child`], its stderr logged as `label PID: line`.
    pub fn child_named(mut command: Command, label: &str) -> io::Result<Connection> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        super::child_exit::with_no_signal_blocked(&mut command);
        let mut child = spawn_child(command)?;
        let reaped = std::sync::Arc::new(std::sync::Mutex::new(false));
        let pipes = (|| {
            let stdin = child
                .stdin
                .take()
                .ok_or_else(|| io::Error::other("no stdin"))?;
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| io::Error::other("no stdout"))?;
            if let Some(stderr) = child.stderr.take() {
                let pid = child.id();
                let label = label.to_owned();
                std::thread::Builder::new()
                    .name("mcpvisor-child-stderr".into())
                    .spawn(move || {
                        each_stderr_line(stderr, |line| log::info!("{label} {pid}: {line}"))
                    })?;
            }
            Ok((stdout, PipeOut::new(stdin)?))
        })();
        let (stdout, stdin) = match pipes {
            Ok(p) => p,
            Err(e) => {
                // Not left running, nor a zombie.
                reap(child, &reaped);
                return Err(e);
            }
        };
        if let Err(e) = watch_exit(child.id() as libc::pid_t, reaped.clone()) {
            // Its exit is then seen when its stdout closes, as before.
            log::warn!("{label} {}: cannot watch for its exit: {e}", child.id());
        }
        let mut conn = Connection::lines(stdout, stdin);
        conn.pid = Some(child.id());
        conn.on_close = Some(Box::new(move || reap(child, &reaped)));
        Ok(conn)
    }
}

/// Longest piece of a child's stderr logged as one line; a longer line is
/// logged in pieces of this size.
pub(crate) const MAX_STDERR_LINE: usize = 8 * 1024;

/// Reads a child's stderr to its end, handing each line (without its line
/// ending; bytes that are not UTF-8 replaced) to `each`. The pipe is read
/// to the end whatever it carries, so a child never blocks on, or dies of,
/// a stderr nobody reads.
fn each_stderr_line(stderr: impl Read, mut each: impl FnMut(&str)) {
    use std::io::BufRead;
    let mut reader = io::BufReader::new(stderr);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        match reader
            .by_ref()
            .take(MAX_STDERR_LINE as u64)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => return,
            Ok(_) => {
                let text = line.strip_suffix(b"\n").unwrap_or(&line);
                let text = text.strip_suffix(b"\r").unwrap_or(text);
                each(&String::from_utf8_lossy(text));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                each(&format!("(stderr unreadable: {e})"));
                return;
            }
        }
    }
}

/// Stack of the thread that waits for a child's exit.
const EXIT_WATCHER_STACK: usize = 64 * 1024;

/// Waits (on a small thread of its own) for the child to exit, without
/// reaping it, and then SIGKILLs what is left of its group and session: a
/// process it started that still holds its stdout would otherwise hide
/// its exit, since the reader sees EOF only when every holder has closed
/// it. `reaped` is set (under its lock) before the child is reaped, so no
/// signal can reach a process that took the id since.
fn watch_exit(pid: libc::pid_t, reaped: std::sync::Arc<std::sync::Mutex<bool>>) -> io::Result<()> {
    if !cfg!(target_os = "linux") {
        return Ok(());
    }
    std::thread::Builder::new()
        .name("mcpvisor-child-exit".into())
        .stack_size(EXIT_WATCHER_STACK)
        .spawn(move || {
            // ECHILD: already reaped; nothing of it is left to end.
            if super::child_exit::exited_unreaped(pid).is_err() {
                return;
            }
            let reaped = crate::sync::lock(&reaped);
            if !*reaped {
                kill_group_and_session(pid, &[]);
            }
        })?;
    Ok(())
}

/// SIGKILLs the group and the session that `pid` leads, the descendants
/// of their processes, and what `earlier` saw of them (Linux; `pid` is an
/// unreaped child of ours, so the ids are still its). The processes are
/// found before any is killed: a killed parent's children would move to
/// another parent.
fn kill_group_and_session(pid: libc::pid_t, earlier: &[Seen]) {
    let tree = session_tree(pid);
    // SAFETY: kill(2) on the group the child led; the child is not yet
    // reaped, so the id is still its.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    kill_seen(&tree);
    kill_seen(earlier);
}

/// Stops and reaps a child: EOF on stdin was already given; then SIGTERM,
/// then SIGKILL, each after the grace period, to its whole process group
/// (on Linux the child leads one of its own: what it started goes too).
fn reap(mut c: Child, reaped: &std::sync::Mutex<bool>) {
    let pid = c.id() as libc::pid_t;
    // What the child runs now: the signals below may end a parent (a
    // shell, a runner) before its children, which then leave its tree.
    let before = if cfg!(target_os = "linux") {
        session_tree(pid)
    } else {
        Vec::new()
    };
    // Waits up to the grace period for the child to exit, without reaping
    // it: while it is a zombie its id (which is also its group's and
    // session's) cannot be taken by another process, so the kills below
    // cannot reach a stranger.
    let waited = || -> bool {
        let deadline = std::time::Instant::now() + DEFAULT_CHILD_GRACE;
        loop {
            if super::child_exit::has_exited(pid) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // The group: on Linux the child's own (setsid); elsewhere just it.
    let target = if cfg!(target_os = "linux") { -pid } else { pid };
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        if waited() {
            break;
        }
        // SAFETY: kill(2) on our own child (or its group), not yet reaped,
        // so its id cannot have been reused.
        unsafe {
            libc::kill(target, signal);
        }
    }
    // The leader has exited (or was just SIGKILLed); what it left running
    // goes too: its group, and every process still in the session it led
    // (grandchildren that made process groups of their own, as command
    // runners do). Only then is the leader reaped.
    let mut reaped = crate::sync::lock(reaped);
    if cfg!(target_os = "linux") {
        kill_group_and_session(pid, &before);
    }
    *reaped = true;
    let _ = c.wait();
}

/// A process seen in /proc: its id and start time (so that a later kill
/// cannot reach a process that took the id since).
type Seen = (libc::pid_t, u64);

/// Every process of session `sid` but its leader, and every descendant of
/// one or of the leader (Linux, from /proc): children that made sessions of
/// their own are found while their parent lives.
fn session_tree(sid: libc::pid_t) -> Vec<Seen> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    // (pid, ppid, session, start time) of every process.
    let procs: Vec<(libc::pid_t, libc::pid_t, libc::pid_t, u64)> = entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse().ok()?;
            let (ppid, session, start) = stat_of(pid)?;
            Some((pid, ppid, session, start))
        })
        .collect();
    // The leader seeds the walk (its children that made sessions of their
    // own, while it lives) but is not listed: it is reaped, not killed.
    let mut doomed: std::collections::HashSet<libc::pid_t> =
        procs.iter().filter(|p| p.2 == sid).map(|p| p.0).collect();
    doomed.insert(sid);
    // Their descendants, to a fixed point.
    loop {
        let before = doomed.len();
        for p in &procs {
            if doomed.contains(&p.1) {
                doomed.insert(p.0);
            }
        }
        if doomed.len() == before {
            break;
        }
    }
    procs
        .iter()
        .filter(|p| p.0 != sid && doomed.contains(&p.0))
        .map(|p| (p.0, p.3))
        .collect()
}

/// Parent, session and start time of `pid`, from /proc/PID/stat.
fn stat_of(pid: libc::pid_t) -> Option<(libc::pid_t, libc::pid_t, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name: state, ppid, pgrp, session, ... starttime
    // (the 20th).
    let rest: Vec<&str> = stat.rsplit_once(") ")?.1.split(' ').collect();
    Some((
        rest.get(1)?.parse().ok()?,
        rest.get(3)?.parse().ok()?,
        rest.get(19)?.parse().ok()?,
    ))
}

/// SIGKILLs each process of `seen` that is still the one seen.
fn kill_seen(seen: &[Seen]) {
    for &(pid, start) in seen {
        if stat_of(pid).is_some_and(|(_, _, s)| s == start) {
            // SAFETY: kill(2) on a process of our child's session (or a
            // descendant), the same one as seen (its start time matches).
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Longest a write to a server may block (it stopped reading) before it
/// fails: 30 s.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest a TCP connect to a server (over TCP or HTTP) may take: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A child's stdin, written without blocking: a write waits for room in the
/// pipe at most [`DEFAULT_WRITE_TIMEOUT`].
struct PipeOut(std::process::ChildStdin);

impl PipeOut {
    fn new(stdin: std::process::ChildStdin) -> io::Result<PipeOut> {
        use std::os::fd::AsRawFd;
        let fd = stdin.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own, adding O_NONBLOCK.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) >= 0
        };
        if !ok {
            return Err(io::Error::last_os_error());
        }
        Ok(PipeOut(stdin))
    }
}

impl Write for PipeOut {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        let deadline = std::time::Instant::now() + DEFAULT_WRITE_TIMEOUT;
        loop {
            match self.0.write(b) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return other,
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the server has not read its input for 30 s",
                ));
            }
            let mut fds = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLOUT,
                revents: 0,
            };
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            // SAFETY: poll(2) on one valid pollfd for the call's duration.
            if unsafe { libc::poll(&mut fds, 1, ms) } < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes each message as one line and flushes it. After a failed write
/// it writes no more, and what it still held is dropped unwritten: a
/// flush at close (or at drop) would wait out the write timeout again for
/// a peer that stopped reading.
struct LineWriter<W: Write>(Option<BufWriter<W>>);

impl<W: Write + Send> MessageWriter for LineWriter<W> {
    fn write(&mut self, message: &Value) -> io::Result<()> {
        let w = self
            .0
            .as_mut()
            .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))?;
        let written = serde_json::to_writer(&mut *w, message)
            .map_err(io::Error::from)
            .and_then(|()| w.write_all(b"\n"))
            .and_then(|()| w.flush());
        if written.is_err() {
            if let Some(w) = self.0.take() {
                drop(w.into_parts());
            }
        }
        written
    }
    fn close(&mut self) {
        if let Some(mut w) = self.0.take() {
            let _ = w.flush();
        }
    }
}

struct LineMessages<R>(LineReader<R>);

impl<R: Read + Send> MessageReader for LineMessages<R> {
    fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            match self.0.next_frame()? {
                None => return Ok(None),
                Some(Frame::Line(l)) if l.iter().all(u8::is_ascii_whitespace) => continue,
                Some(Frame::Line(l)) => return Ok(Some(l.to_vec())),
                Some(Frame::TooLong { len, head }) => {
                    log::warn!("client: discarded an incoming message of {len} bytes");
                    // An answer to one of our calls: the call fails now,
                    // saying why, not at its timeout.
                    if let Some(jsonrpc::Head::Response(id)) = jsonrpc::read_head(head) {
                        let why = ErrorObject::internal(format!(
                            "the answer of {len} bytes is over this client's limit"
                        ));
                        let failed = jsonrpc::error_response_value(Some(&id), &why);
                        return Ok(Some(failed.to_string().into_bytes()));
                    }
                }
                Some(Frame::Refused { len, .. }) => {
                    log::warn!("client: discarded an incoming message of {len} bytes");
                }
            }
        }
    }
}

/// The writing half of a TCP connection; closing it shuts the socket down
/// both ways, so the reader ends too (and reconnection can begin).
struct TcpOut(std::net::TcpStream);

impl Write for TcpOut {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Drop for TcpOut {
    fn drop(&mut self) {
        let _ = self.0.shutdown(std::net::Shutdown::Both);
    }
}

/// Spawns children from one long-lived thread with `PR_SET_PDEATHSIG`, so
/// they get SIGTERM if this process dies without closing them (no orphans).
/// Linux sends that signal when the *thread* that forked exits, which is why
/// the forking thread lives as long as the process.
#[cfg(target_os = "linux")]
fn spawn_child(command: Command) -> io::Result<Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::OnceLock;
    type Job = (Command, crossbeam_channel::Sender<io::Result<Child>>);
    static SPAWNER: OnceLock<crossbeam_channel::Sender<Job>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let _ = std::thread::Builder::new()
            .name("mcpvisor-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    // SAFETY: setsid and prctl are async-signal-safe; between
                    // fork and exec they make the child a session (and
                    // process group) of its own and set its parent-death
                    // signal.
                    unsafe {
                        command.pre_exec(|| {
                            libc::setsid();
                            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                            Ok(())
                        });
                    }
                    let _ = reply.send(command.spawn());
                }
            });
        tx
    });
    let (tx, rx) = crossbeam_channel::bounded(1);
    spawner
        .send((command, tx))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

#[cfg(not(target_os = "linux"))]
fn spawn_child(mut command: Command) -> io::Result<Child> {
    command.spawn()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{Message, PARSE_ERROR};

    #[test]
    fn a_child_s_stderr_is_read_to_its_end_whatever_it_carries() {
        let mut input = b"first\r\nnot \xff utf-8\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_STDERR_LINE + 10));
        input.extend(b"\nlast without an end");
        let mut lines = Vec::new();
        each_stderr_line(&input[..], |l| lines.push(l.to_owned()));
        assert_eq!(lines[0], "first");
        assert_eq!(lines[1], "not \u{fffd} utf-8");
        assert_eq!(lines[2].len(), MAX_STDERR_LINE);
        assert_eq!(lines[3], "x".repeat(10));
        assert_eq!(lines[4], "last without an end");
        assert_eq!(lines.len(), 5);
    }

    #[test]
    fn an_answer_too_large_fails_its_call_at_once() {
        let mut input = br#"{"jsonrpc":"2.0","id":9,"result":{"text":""#.to_vec();
        input.extend(vec![b'x'; 500]);
        input.extend_from_slice(b"\"}}\n");
        // A request too large gets nothing: the client cannot answer it.
        input.extend_from_slice(br#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":""#);
        input.extend(vec![b'x'; 500]);
        input.extend_from_slice(b"\"}}\nlast\n");
        let mut reader = LineMessages(LineReader::new(&input[..], 100));
        let failed = reader.read().unwrap().unwrap();
        let Ok(Parsed::Single(Message::Response(r))) = jsonrpc::parse(&failed) else {
            panic!("an answer: {}", String::from_utf8_lossy(&failed));
        };
        assert_eq!(r.id(), Some(&RequestId::Number(9)));
        let e = r.outcome().unwrap_err();
        assert!(e.message.contains("over this client's limit"), "{e:?}");
        assert_eq!(reader.read().unwrap().unwrap(), b"last");
    }

    /// Fails every write, counting them.
    struct Stalled(std::sync::Arc<std::sync::atomic::AtomicUsize>);

    impl Write for Stalled {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(io::ErrorKind::TimedOut.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn after_a_failed_write_nothing_is_written_again_not_even_at_close() {
        let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut w = LineWriter(Some(BufWriter::new(Stalled(attempts.clone()))));
        let e = w.write(&serde_json::json!({"jsonrpc": "2.0", "method": "m"}));
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::TimedOut);
        let e = w.write(&serde_json::json!({"jsonrpc": "2.0", "method": "n"}));
        assert_eq!(e.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
        w.close();
        drop(w);
        assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    /// Gives its messages, last first, each with the request it relates to.
    struct Related(Vec<(Vec<u8>, Option<RequestId>)>);

    impl MessageReader for Related {
        fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
            Ok(self.read_related()?.map(|(bytes, _)| bytes))
        }
        fn read_related(&mut self) -> io::Result<Option<(Vec<u8>, Option<RequestId>)>> {
            Ok(self.0.pop())
        }
    }

    #[test]
    fn a_reader_s_messages_are_parsed_by_default_with_what_they_relate_to() {
        let notification = br#"{"jsonrpc":"2.0","method":"m"}"#.to_vec();
        let mut reader = Related(vec![
            (b"{bad".to_vec(), None),
            (notification, Some(RequestId::Number(3))),
        ]);
        let (first, related) = reader.read_parsed().unwrap().unwrap();
        assert_eq!(related, Some(RequestId::Number(3)));
        assert!(
            matches!(&first, Ok(Parsed::Single(Message::Notification(n))) if n.method() == "m"),
            "{first:?}"
        );
        let (second, related) = reader.read_parsed().unwrap().unwrap();
        assert_eq!(related, None);
        assert_eq!(second.unwrap_err().code, PARSE_ERROR);
        assert!(reader.read_parsed().unwrap().is_none());
    }
}
