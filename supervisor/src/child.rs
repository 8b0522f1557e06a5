//! Running children: the context a worker receives, exit reasons, and the
//! thread wrapper that turns a panic into an exit reason.

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

/// Why a child exited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitReason {
    /// It returned `Ok` without being asked to stop.
    Normal,
    /// It returned after its stop signal.
    Shutdown,
    /// It panicked, with this message.
    Panic(String),
    /// It returned this error (or failed to start).
    Error(String),
}

impl ExitReason {
    /// Normal and shutdown exits are normal; panics and errors are not.
    pub fn is_abnormal(&self) -> bool {
        matches!(self, ExitReason::Panic(_) | ExitReason::Error(_))
    }
}

impl fmt::Display for ExitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitReason::Normal => f.write_str("normal"),
            ExitReason::Shutdown => f.write_str("shutdown"),
            ExitReason::Panic(m) => write!(f, "panic: {m}"),
            ExitReason::Error(e) => write!(f, "error: {e}"),
        }
    }
}

/// What a worker thread receives from its supervisor.
pub struct ChildContext {
    id: String,
    stop: Receiver<()>,
    ready: Mutex<Option<Sender<()>>>,
}

impl ChildContext {
    pub(crate) fn new(id: String, stop: Receiver<()>, ready: Sender<()>) -> Self {
        ChildContext {
            id,
            stop,
            ready: Mutex::new(Some(ready)),
        }
    }
    /// The child's id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// A receiver that becomes ready (disconnected) when the supervisor asks
    /// the child to stop: `select!` on it beside your own channels.
    pub fn stop_signal(&self) -> &Receiver<()> {
        &self.stop
    }
    /// Whether the supervisor asked the child to stop.
    pub fn should_stop(&self) -> bool {
        matches!(self.stop.try_recv(), Err(TryRecvError::Disconnected))
    }
    /// Reports that the child finished starting (for
    /// [`ChildSpec::await_ready`](crate::ChildSpec::await_ready)). Idempotent.
    pub fn ready(&self) {
        if let Some(tx) = self.ready.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = tx.send(());
        }
    }
}

/// The message of a panic payload.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_owned())
}

/// Runs a child body, catching panics, and classifies the exit.
pub(crate) fn run_body<F>(ctx: ChildContext, body: F) -> ExitReason
where
    F: FnOnce(&ChildContext) -> Result<(), String>,
{
    let outcome = catch_unwind(AssertUnwindSafe(|| body(&ctx)));
    match outcome {
        Ok(Ok(())) if ctx.should_stop() => ExitReason::Shutdown,
        Ok(Ok(())) => ExitReason::Normal,
        Ok(Err(e)) => ExitReason::Error(e),
        Err(panic) => ExitReason::Panic(panic_message(panic.as_ref())),
    }
}
