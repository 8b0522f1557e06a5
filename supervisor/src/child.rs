//! Running children: the context a worker receives, exit reasons, and the
//! thread wrapper that turns a panic into an exit reason.

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

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

/// A callback run when a child is asked to stop.
type StopHook = Box<dyn FnOnce() + Send>;

/// The callbacks a child registered with [`ChildContext::on_stop`], and
/// whether the stop already came; shared by the child and its supervisor.
#[derive(Default)]
pub(crate) struct StopHooks {
    fired: bool,
    hooks: Vec<StopHook>,
}

impl StopHooks {
    /// Marks the stop as come and runs the hooks registered so far (once).
    pub(crate) fn fire(hooks: &Mutex<StopHooks>) {
        let pending = {
            let mut h = hooks.lock().unwrap_or_else(|p| p.into_inner());
            h.fired = true;
            std::mem::take(&mut h.hooks)
        };
        for hook in pending {
            // A panicking hook must not take the supervisor down with it.
            let _ = catch_unwind(AssertUnwindSafe(hook));
        }
    }
}

/// What a worker thread receives from its supervisor.
pub struct ChildContext {
    id: String,
    stop: Receiver<()>,
    ready: Mutex<Option<Sender<()>>>,
    hooks: Arc<Mutex<StopHooks>>,
}

impl ChildContext {
    pub(crate) fn new(
        id: String,
        stop: Receiver<()>,
        ready: Sender<()>,
        hooks: Arc<Mutex<StopHooks>>,
    ) -> Self {
        ChildContext {
            id,
            stop,
            ready: Mutex::new(Some(ready)),
            hooks,
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
    /// Runs `hook` once when the supervisor asks the child to stop (at once,
    /// on this thread, if it already has). For a worker blocked in a call
    /// that cannot select on [`stop_signal`](Self::stop_signal) — poll(2) on
    /// a socket, say — the hook wakes it (writes to a pipe the worker also
    /// polls), so it needs no timeout to notice. The hook runs on the
    /// supervisor's thread: it must return at once and never block.
    pub fn on_stop(&self, hook: impl FnOnce() + Send + 'static) {
        let mut h = self.hooks.lock().unwrap_or_else(|p| p.into_inner());
        if h.fired {
            drop(h);
            hook();
        } else {
            h.hooks.push(Box::new(hook));
        }
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
