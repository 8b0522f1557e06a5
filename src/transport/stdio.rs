//! stdio transport: one message per line on stdin / stdout.
//!
//! A reader thread (the caller's) feeds the engine; one writer thread
//! writes each message as one line, flushing whenever its queue is empty.
//! On a pipe, the thread that produced a message writes it itself when it
//! can without blocking or overtaking a queued one
//! (`transport::direct`). Nothing but MCP messages is ever written; logs go to
//! stderr through `log`.

use super::custom::{ConnectionOptions, ServerConnection};
use super::direct::Direct;
use super::lines::LineBudget;
use crate::protocol::Engine;
use std::io::{self, Read, Write};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Default maximum line length: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = super::custom::DEFAULT_MAX_MESSAGE_BYTES;
/// Default time in-flight work may take to finish after EOF before it is cancelled.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = super::custom::DEFAULT_SHUTDOWN_GRACE;
/// Capacity of the queue in front of the writer thread (messages).
pub const WRITE_QUEUE_CAPACITY: usize = super::custom::DEFAULT_OUTBOX_CAPACITY;

/// Options of a line-framed transport.
#[derive(Clone, Debug)]
pub struct StdioOptions {
    /// Longest accepted line in bytes (default [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
    /// Grace period after EOF (default [`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
    /// Longest the answers still owed when input ends (after the grace)
    /// may take to be written (default [`DEFAULT_DRAIN_LIMIT`]): a peer
    /// that reads them a few bytes at a time, each write going on, is cut
    /// off then (a TCP connection is shut down), rather than hold its
    /// threads for ever.
    pub drain_limit: Duration,
}

/// Default [`StdioOptions::drain_limit`]: 60 s.
pub const DEFAULT_DRAIN_LIMIT: Duration = Duration::from_secs(60);

impl Default for StdioOptions {
    fn default() -> Self {
        StdioOptions {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            drain_limit: DEFAULT_DRAIN_LIMIT,
        }
    }
}

impl StdioOptions {
    /// Sets the line limit.
    pub fn with_max_line_bytes(mut self, bytes: usize) -> Self {
        self.max_line_bytes = bytes;
        self
    }
    /// Sets the grace period.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }
    /// Sets the drain limit.
    pub fn with_drain_limit(mut self, limit: Duration) -> Self {
        self.drain_limit = limit;
        self
    }
}

/// Serves this process's stdin / stdout until EOF on stdin.
pub fn serve(engine: &Arc<Engine>, options: StdioOptions) -> io::Result<()> {
    serve_ending(engine, options, None)
}

/// [`serve`], calling `end` when stdout fails (its reader is gone) or its
/// client stopped reading: a read of stdin cannot be interrupted, so the
/// caller ends what it serves for (the daemon stops).
fn serve_ending(engine: &Arc<Engine>, options: StdioOptions, end: Option<EndFn>) -> io::Result<()> {
    // Raw fd 1: std's Stdout is line-buffered and would flush after every
    // message. On a pipe, a thread that produced an answer writes it itself
    // when it can without blocking; otherwise (and elsewhere) the writer
    // thread's buffer flushes when its queue runs dry.
    let output = match raw_stdout()? {
        Ok(file) => match Direct::for_pipe(file) {
            Ok(direct) => Output::Direct(Arc::new(direct)),
            Err(file) => Output::Buffered(Box::new(file) as Box<dyn Write + Send>),
        },
        Err(stdout) => Output::Buffered(stdout),
    };
    let stdin = io::stdin().lock();
    let fd = {
        use std::os::fd::AsRawFd;
        stdin.as_raw_fd()
    };
    serve_lines(engine, stdin, output, options, end, None, Some(fd))
}

/// A duplicate of fd 1 as a plain file: unbuffered, so only we decide when
/// to write.
#[cfg(unix)]
fn raw_stdout() -> io::Result<Result<std::fs::File, Box<dyn Write + Send>>> {
    use std::os::fd::AsFd;
    io::stdout().flush()?;
    Ok(Ok(std::fs::File::from(
        io::stdout().as_fd().try_clone_to_owned()?,
    )))
}

#[cfg(not(unix))]
fn raw_stdout() -> io::Result<Result<std::fs::File, Box<dyn Write + Send>>> {
    Ok(Err(Box::new(io::stdout())))
}

/// Where a line-framed connection's messages go.
pub(crate) enum Output<W> {
    /// Through the writer thread's buffer.
    Buffered(W),
    /// To a pipe the producing threads share with the writer thread.
    Direct(Arc<Direct>),
}

impl StdioOptions {
    /// The same limits for a [`ServerConnection`].
    pub(crate) fn connection(&self) -> ConnectionOptions {
        ConnectionOptions {
            max_message_bytes: self.max_line_bytes,
            outbox_capacity: WRITE_QUEUE_CAPACITY,
            shutdown_grace: self.shutdown_grace,
        }
    }
}

/// Serves line-delimited JSON-RPC on any reader / writer pair until EOF on
/// `input`: a session per call. After EOF, in-flight requests get
/// `options.shutdown_grace` to finish, then are cancelled, and the call
/// returns once everything already sent has been written.
pub fn serve_io<R, W>(
    engine: &Arc<Engine>,
    input: R,
    output: W,
    options: StdioOptions,
) -> io::Result<()>
where
    R: Read,
    W: Write + Send + 'static,
{
    serve_lines(
        engine,
        input,
        Output::Buffered(output),
        options,
        None,
        None,
        None,
    )
}

/// Ends a connection from outside its reader (shuts a socket down).
pub(crate) type EndFn = Arc<dyn Fn() + Send + Sync>;

/// [`serve_io`], calling `end` when the peer stops reading (its outbox
/// overflowed) or writing to it failed, so that the reader stops too;
/// `spin_fd` is the descriptor `input` reads, polled for a moment before
/// a read that would block.
pub(crate) fn serve_lines<R, W>(
    engine: &Arc<Engine>,
    input: R,
    output: Output<W>,
    options: StdioOptions,
    end: Option<EndFn>,
    budget: Option<Arc<LineBudget>>,
    spin_fd: Option<std::os::fd::RawFd>,
) -> io::Result<()>
where
    R: Read,
    W: Write + Send + 'static,
{
    let direct = match &output {
        Output::Direct(d) => Some(d.clone()),
        Output::Buffered(_) => None,
    };
    let (conn, outbox) = ServerConnection::open_with(engine, options.connection(), direct);
    if let Some(end) = end.clone() {
        conn.on_overflow(move || end());
    }
    let cut = end.clone();
    let (written_tx, written_rx) = crossbeam_channel::bounded::<()>(1);
    let writer = thread::Builder::new()
        .name("mcpvisor-line-writer".into())
        .spawn(move || {
            let _done = written_tx;
            let written = match output {
                Output::Buffered(output) => outbox.write_lines(output),
                Output::Direct(_) => outbox.write_direct(),
            };
            if let (Err(_), Some(end)) = (&written, end) {
                end();
            }
            written
        })?;
    let read_result = conn.read_lines_within(input, budget, spin_fd);
    conn.close();
    // The writer's end disconnects the channel.
    if let (Err(crossbeam_channel::RecvTimeoutError::Timeout), Some(cut)) =
        (written_rx.recv_timeout(options.drain_limit), cut)
    {
        // `cut` says it.
        log::debug!(
            "the answers owed were not written within {:?} of the end of input",
            options.drain_limit
        );
        cut();
    }
    let write_result = writer
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("writer thread panicked")));
    read_result.and(write_result)
}

/// This process's stdin and stdout as a supervised worker for a tree of
/// yours: it serves until EOF on stdin and then ends normally, so it is
/// not restarted (`Restart::Transient`). An I/O failure (stdout closed,
/// a client that stopped reading) ends it the same way, logged: the
/// session cannot go on over streams part read, and a new one on them
/// would refuse every request of a client that initialized already.
/// A read of stdin cannot be interrupted: when its tree stops it before
/// EOF, the worker is detached after its shutdown timeout.
pub fn child_spec(engine: Arc<Engine>, options: StdioOptions) -> supervisor::ChildSpec {
    worker(engine, options, None)
}

/// [`child_spec`], telling `done` when input ended (EOF).
pub(crate) fn worker(
    engine: Arc<Engine>,
    options: StdioOptions,
    done: Option<crossbeam_channel::Sender<()>>,
) -> supervisor::ChildSpec {
    supervisor::ChildSpec::worker("stdio", move |_| {
        let end = done.clone().map(|d| -> EndFn {
            Arc::new(move || {
                log::error!("stdio: standard output failed, or its reader stopped reading");
                let _ = d.try_send(());
            })
        });
        if let Err(e) = serve_ending(&engine, options.clone(), end) {
            log::error!("stdio: {e}; the session ends");
        }
        if let Some(d) = &done {
            let _ = d.try_send(());
        }
        Ok(())
    })
    .restart(supervisor::Restart::Transient)
}
