//! stdio transport: one message per line on stdin / stdout.
//!
//! A reader thread (the caller's) feeds the engine; one writer thread owns
//! the output and writes each message as one line, flushing whenever its
//! queue is empty. Nothing but MCP messages is ever written; logs go to
//! stderr through `log`.

use super::lines::{Frame, LineReader};
use crate::jsonrpc::ParseError;
use crate::protocol::{Engine, Outgoing, Session, Sink};
use crossbeam_channel::{Receiver, Sender};
use std::io::{self, BufWriter, Read, Write};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// Default maximum line length: 16 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Default time in-flight work may take to finish after EOF before it is cancelled.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Capacity of the queue in front of the writer thread (messages).
pub const WRITE_QUEUE_CAPACITY: usize = 1024;

/// Options of a line-framed transport.
#[derive(Clone, Debug)]
pub struct StdioOptions {
    /// Longest accepted line in bytes (default [`DEFAULT_MAX_LINE_BYTES`]).
    pub max_line_bytes: usize,
    /// Grace period after EOF (default [`DEFAULT_SHUTDOWN_GRACE`]).
    pub shutdown_grace: Duration,
}

impl Default for StdioOptions {
    fn default() -> Self {
        StdioOptions {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
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
}

/// Serves this process's stdin / stdout until EOF on stdin.
pub fn serve(engine: &Arc<Engine>, options: StdioOptions) -> io::Result<()> {
    // Raw fd 1 with our own buffer: std's Stdout is line-buffered and would
    // flush after every message; ours flushes when the queue runs dry.
    serve_io(engine, io::stdin().lock(), raw_stdout()?, options)
}

/// A duplicate of fd 1 as a plain file: unbuffered, so only our BufWriter decides when to flush.
#[cfg(unix)]
fn raw_stdout() -> io::Result<Box<dyn Write + Send>> {
    use std::os::fd::AsFd;
    io::stdout().flush()?;
    Ok(Box::new(std::fs::File::from(
        io::stdout().as_fd().try_clone_to_owned()?,
    )))
}

#[cfg(not(unix))]
fn raw_stdout() -> io::Result<Box<dyn Write + Send>> {
    Ok(Box::new(io::stdout()))
}

/// Writes each message as one line to the writer thread's queue.
struct LineSink {
    // Producer side of the writer queue (capacity WRITE_QUEUE_CAPACITY);
    // the writer thread owns the receiver.
    tx: Sender<Vec<u8>>,
}

impl Sink for LineSink {
    fn send(&self, out: Outgoing) {
        if let Some(m) = out.message() {
            let mut bytes = Vec::with_capacity(128);
            if serde_json::to_writer(&mut bytes, m).is_ok() {
                bytes.push(b'\n');
                // A closed writer means the peer is gone: the message has nowhere to go.
                let _ = self.tx.send(bytes);
            }
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
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(WRITE_QUEUE_CAPACITY);
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let writer = thread::Builder::new()
        .name("mcpvisor-line-writer".into())
        .spawn(move || write_loop(output, rx, stop_rx))?;
    let sink: Arc<dyn Sink> = Arc::new(LineSink { tx });
    let session = engine.open_session(sink.clone());
    let read_result = read_loop(&session, &sink, input, options.max_line_bytes);
    end_session(&session, options.shutdown_grace);
    drop(stop_tx);
    drop(sink);
    let write_result = writer
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("writer thread panicked")));
    read_result.and(write_result)
}

/// Input ended: in-flight work gets `grace` to finish, then is cancelled,
/// and the session closes.
pub(crate) fn end_session(session: &Session, grace: Duration) {
    if !session.wait_idle(grace) {
        log::warn!(
            "session {}: {} request(s) still running after the grace period; cancelling",
            session.id(),
            session.inflight()
        );
    }
    session.close();
}

fn read_loop<R: Read>(
    session: &Arc<Session>,
    sink: &Arc<dyn Sink>,
    input: R,
    max: usize,
) -> io::Result<()> {
    let mut lines = LineReader::new(input, max);
    while let Some(frame) = lines.next_frame()? {
        match frame {
            Frame::Line(line) if line.iter().all(u8::is_ascii_whitespace) => {}
            Frame::Line(line) => session.receive(line, sink),
            Frame::TooLong { len } => {
                log::warn!(
                    "session {}: discarded a line of {len} bytes (limit {max})",
                    session.id()
                );
                session.reject(ParseError::too_large(max), sink);
            }
        }
    }
    Ok(())
}

fn write_loop<W: Write>(output: W, rx: Receiver<Vec<u8>>, stop: Receiver<()>) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    loop {
        let first = match crate::wait::spin(&rx) {
            Ok(m) => Some(m),
            Err(_) => crossbeam_channel::select! {
                recv(rx) -> m => m.ok(),
                recv(stop) -> _ => None,
            },
        };
        let Some(first) = first else { break };
        out.write_all(&first)?;
        while let Ok(more) = rx.try_recv() {
            out.write_all(&more)?;
        }
        out.flush()?;
    }
    // Stopping: write what was already queued, then flush.
    while let Ok(more) = rx.try_recv() {
        out.write_all(&more)?;
    }
    out.flush()
}
