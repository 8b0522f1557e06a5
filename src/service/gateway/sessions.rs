//! `perSession` upstreams: each client session that calls one gets a
//! connection of its own (for `command`, a child process of its own),
//! started at its first call with exactly the client's capabilities, and
//! stopped when the session ends or the upstream stops. A connection that
//! exits is started again at the session's next call. What the upstream
//! logs on it goes to that session alone. A stateless (2026-07-28) request
//! has no session to give a connection of its own: it is refused (a tool
//! error saying so), never served on another user's connection. The
//! session's roots are the connection's: asked of the session's client
//! whenever the upstream asks, and their changes passed on.
//!
//! A start runs on a thread of its own, one at a time a session: the
//! session's calls (the one that started it too) wait for it as long as
//! their `timeoutMs` (and `maxTotalTimeoutMs`) allow, or until they are
//! cancelled, and hold no lock meanwhile. A start that fails is the answer
//! of every call that waited for it, and of the session's calls for
//! [`START_BACKOFF`] after, before one is tried again.

use super::proxy::Link;
use super::upstream;
use crate::client::ClientOptions;
use crate::protocol::{CancelToken, SessionWatcher};
use crate::server::Server;
use crate::service::config::UpstreamConfig;
use crate::sync::lock;
use crate::Context;
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a session's connection that failed to start is not started
/// again: meanwhile the session's calls get that failure at once (an
/// upstream that cannot start is not spawned anew for each call).
pub const START_BACKOFF: Duration = Duration::from_secs(2);

/// What a slot holds: a connection that may exit, closed when its session
/// ends.
trait SlotConnection: Clone + Send + 'static {
    fn is_closed(&self) -> bool;
    fn close(&self);
}

impl SlotConnection for Arc<Link> {
    fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
    fn close(&self) {
        self.client.close();
    }
}

/// A start of a connection, run on a thread of its own.
type Start<C> = Box<dyn FnOnce() -> Result<C, String> + Send>;

/// A session's connection, started at most once at a time. No start, and
/// no close, runs under its lock.
struct Slot<C> {
    state: Mutex<State<C>>,
    /// [`START_BACKOFF`] (tests choose their own).
    backoff: Duration,
    /// Waits begun on a start (tests order their threads by it).
    waits: AtomicUsize,
    /// Whether a start runs now (even for a slot that has ended): it
    /// holds a thread and a child, and counts toward `maxSessions`.
    start_runs: AtomicBool,
    /// Disconnected when the thread of the latest start ends, which the
    /// upstream's stop waits for ([`Slot::await_start`]).
    start_thread: Mutex<Option<Receiver<()>>>,
}

enum State<C> {
    /// Never started.
    Idle,
    /// A start under way: `done` is disconnected when the state changes
    /// (its sender, kept here, dropped), which wakes every waiter.
    Starting {
        done: Receiver<()>,
        _wake: Sender<()>,
    },
    Ready(C),
    /// The last start failed, `at` then.
    Failed {
        error: String,
        at: Instant,
    },
    /// The session has ended (or the upstream stops): nothing is started
    /// for it any more.
    Ended,
}

/// Why a slot gave no connection.
#[derive(Debug, PartialEq)]
enum Unavailable {
    /// The session has ended.
    Ended,
    /// Its start failed (the one waited for, or one within the backoff).
    Failed(String),
    /// The call was cancelled while it waited for the start.
    Cancelled,
    /// The call's time ran out while it waited for the start.
    TimedOut,
}

impl<C: SlotConnection> Slot<C> {
    fn new(backoff: Duration) -> Slot<C> {
        Slot {
            state: Mutex::new(State::Idle),
            backoff,
            waits: AtomicUsize::new(0),
            start_runs: AtomicBool::new(false),
            start_thread: Mutex::new(None),
        }
    }

    /// The slot's connection: the one it has, else the outcome of a start
    /// (the one under way, or one made by `starter` when there is none,
    /// the last connection exited, or the last failure is past the
    /// backoff), waited for until `cancel` or `limit` from now. `name` and
    /// `session` are for the log.
    fn get(
        self: &Arc<Self>,
        mut starter: impl FnMut() -> Start<C>,
        cancel: &CancelToken,
        limit: Duration,
        name: &str,
        session: &str,
    ) -> Result<C, Unavailable> {
        // Made when a wait begins (most calls find the connection ready).
        let mut bounds: Option<(Receiver<()>, Instant)> = None;
        loop {
            let mut state = lock(&self.state);
            // The start this call makes: what it replaced, and its thread's
            // handle (held by the thread while it runs).
            let mut launching = None;
            let done = match &*state {
                State::Ended => return Err(Unavailable::Ended),
                State::Ready(c) if !c.is_closed() => return Ok(c.clone()),
                State::Failed { error, at } if at.elapsed() < self.backoff => {
                    return Err(Unavailable::Failed(error.clone()))
                }
                State::Starting { done, .. } => done.clone(),
                // None yet, the last one exited, or its failure is old.
                _ => {
                    // Under the lock: a session that ends from here on
                    // finds the start counted, and a stop waits for it.
                    self.start_runs.store(true, Ordering::SeqCst);
                    let (running, ended) = crossbeam_channel::bounded::<()>(0);
                    *lock(&self.start_thread) = Some(ended);
                    let (wake, done) = crossbeam_channel::bounded(0);
                    let starting = State::Starting {
                        done: done.clone(),
                        _wake: wake,
                    };
                    launching = Some((std::mem::replace(&mut *state, starting), running));
                    done
                }
            };
            drop(state);
            if let Some((old, running)) = launching {
                // Dropped here, not under the lock (the last handle of an
                // exited client closes it).
                let exited = matches!(old, State::Ready(_));
                drop(old);
                if exited {
                    log::warn!(
                        "upstream {name}: the connection of session {} exited; starting it again",
                        crate::protocol::session_log_name(session)
                    );
                }
                // A starter that panics is a failed start, not a slot left
                // starting for good.
                let start = std::panic::catch_unwind(std::panic::AssertUnwindSafe(&mut starter))
                    .unwrap_or_else(|_| Box::new(|| Err(PANICKED.to_owned())));
                self.launch(start, running);
            }
            self.waits.fetch_add(1, Ordering::Relaxed);
            let (cancelled, deadline) = &*bounds
                .get_or_insert_with(|| (cancel.receiver(), crate::wait::deadline_in(limit)));
            let left = deadline.saturating_duration_since(Instant::now());
            crossbeam_channel::select! {
                recv(done) -> _ => {}
                recv(cancelled) -> _ => return Err(Unavailable::Cancelled),
                default(left) => return Err(Unavailable::TimedOut),
            }
            match &*lock(&self.state) {
                // Even if it has exited since: the call says so.
                State::Ready(c) => return Ok(c.clone()),
                // The start waited for failed: its failure is every
                // waiter's, however old.
                State::Failed { error, .. } => return Err(Unavailable::Failed(error.clone())),
                State::Ended => return Err(Unavailable::Ended),
                // A start after it: waited for in turn.
                State::Starting { .. } | State::Idle => {}
            }
        }
    }

    /// Runs `start` on a thread of its own (on this one if none can be
    /// had), its outcome becoming the slot's; `running` is held until it
    /// ended (for [`await_start`](Self::await_start)).
    fn launch(self: &Arc<Self>, start: Start<C>, running: Sender<()>) {
        let job = Arc::new(Mutex::new(Some((start, running))));
        let (slot, theirs) = (self.clone(), job.clone());
        let spawned = std::thread::Builder::new()
            .name("mcpvisor-upstream-start".into())
            .spawn(move || {
                let start = lock(&theirs).take();
                if let Some((start, _running)) = start {
                    slot.finish(run(start));
                }
            });
        if spawned.is_err() {
            let start = lock(&job).take();
            if let Some((start, _running)) = start {
                self.finish(run(start));
            }
        }
    }

    /// Waits until `deadline` for the thread of the latest start to end
    /// (with what it started closed, if the slot has ended): whether it
    /// ended.
    fn await_start(&self, deadline: Instant) -> bool {
        let ended = lock(&self.start_thread).clone();
        match ended {
            Some(ended) => !matches!(
                ended.recv_deadline(deadline),
                Err(crossbeam_channel::RecvTimeoutError::Timeout)
            ),
            None => true,
        }
    }

    /// A start's outcome, which wakes its waiters. A connection started
    /// for a slot that has ended meanwhile is closed, not kept.
    fn finish(&self, outcome: Result<C, String>) {
        let mut state = lock(&self.state);
        if matches!(*state, State::Starting { .. }) {
            *state = match outcome {
                Ok(c) => State::Ready(c),
                Err(error) => State::Failed {
                    error,
                    at: Instant::now(),
                },
            };
            self.start_runs.store(false, Ordering::SeqCst);
            return;
        }
        drop(state);
        if let Ok(c) = outcome {
            c.close();
        }
        // Counted until what it started is closed.
        self.start_runs.store(false, Ordering::SeqCst);
    }

    /// The connection once a start under way has ended (`None` if there
    /// is none).
    fn settled(&self) -> Option<C> {
        loop {
            let done = match &*lock(&self.state) {
                State::Ready(c) => return Some(c.clone()),
                State::Starting { done, .. } => done.clone(),
                _ => return None,
            };
            let _ = done.recv();
        }
    }

    /// Whether a start runs now.
    fn start_runs(&self) -> bool {
        self.start_runs.load(Ordering::SeqCst)
    }

    /// Ends the slot: no start after this, its waiters woken, and its
    /// connection (if any) closed; one still starting is closed when it
    /// comes.
    fn end(&self) {
        if let Some(c) = self.mark_ended() {
            c.close();
        }
    }

    /// Ends the slot as [`end`](Self::end) does, but returns its connection
    /// for the caller to close.
    fn mark_ended(&self) -> Option<C> {
        match std::mem::replace(&mut *lock(&self.state), State::Ended) {
            State::Ready(c) => Some(c),
            _ => None,
        }
    }
}

/// The failure of a start that panicked.
const PANICKED: &str = "the start of the connection panicked";

/// `start`'s outcome; a panic is a failure (its waiters must hear of it).
fn run<C: 'static>(start: Start<C>) -> Result<C, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(start))
        .unwrap_or_else(|_| Err(PANICKED.to_owned()))
}

/// The per-session connections of one life of one upstream.
pub(crate) struct Sessions {
    cfg: Arc<UpstreamConfig>,
    server: Server,
    slots: Mutex<Slots>,
    telling_roots: OnePerKey,
}

#[derive(Default)]
struct Slots {
    stopped: bool,
    by_session: HashMap<String, Arc<Slot<Arc<Link>>>>,
    /// The threads stopping the connections of ended sessions, which the
    /// upstream's stop waits for. Each counts toward `maxSessions` until
    /// it ends (a child takes up to two grace periods to stop).
    closing: Vec<std::thread::JoinHandle<()>>,
    /// Slots of ended sessions whose start still runs: each holds a thread
    /// and a child until it ends, and counts toward `maxSessions` (a
    /// client that opens sessions and ends them mid-start cannot pile
    /// starts up).
    ended_starting: Vec<Arc<Slot<Arc<Link>>>>,
}

/// Runs a job for a key on a thread of its own, at most one thread a key:
/// asked again while that thread runs, the thread runs the job once more
/// when it is done (however often it was asked meanwhile). A client that
/// sends `roots/list_changed` in a burst starts one thread, not one each.
#[derive(Clone, Default)]
struct OnePerKey(Arc<Mutex<HashMap<String, bool>>>);

impl OnePerKey {
    fn run(&self, key: &str, job: impl Fn() + Send + 'static) -> std::io::Result<()> {
        {
            let mut running = lock(&self.0);
            if let Some(again) = running.get_mut(key) {
                *again = true;
                return Ok(());
            }
            running.insert(key.to_owned(), false);
        }
        let (running, mine) = (self.clone(), key.to_owned());
        std::thread::Builder::new()
            .name("mcpvisor-upstream-roots".into())
            .spawn(move || loop {
                job();
                let mut map = lock(&running.0);
                match map.get_mut(&mine) {
                    Some(again) if *again => *again = false,
                    _ => {
                        map.remove(&mine);
                        return;
                    }
                }
            })
            .map(drop)
            .inspect_err(|_| {
                lock(&self.0).remove(key);
            })
    }
}

impl Sessions {
    /// Per-session connections for `cfg`; they end with their sessions
    /// (the engine tells this as long as it lives).
    pub(crate) fn new(cfg: Arc<UpstreamConfig>, server: &Server) -> Arc<Sessions> {
        let sessions = Arc::new(Sessions {
            cfg,
            server: server.clone(),
            slots: Mutex::default(),
            telling_roots: OnePerKey::default(),
        });
        let watcher: Arc<dyn SessionWatcher> = sessions.clone();
        server.engine().watch_sessions(&watcher);
        sessions
    }

    /// The connection of `ctx`'s session, started if it has none (or its
    /// last one exited). Only this session's calls wait for the start, as
    /// long as the call's timeout allows and until it is cancelled.
    pub(crate) fn link(&self, ctx: &Context) -> Result<Arc<Link>, String> {
        let name = &self.cfg.name;
        let session = ctx.session_id();
        let slot = {
            let mut slots = lock(&self.slots);
            slots.ended_starting.retain(|s| s.start_runs());
            slots.closing.retain(|c| !c.is_finished());
            let open = slots.by_session.len() + slots.ended_starting.len() + slots.closing.len();
            if slots.stopped {
                return Err(format!("upstream {name}: stopping"));
            }
            match slots.by_session.get(session) {
                Some(slot) => slot.clone(),
                // A call that outlived its session (its watcher has run, or
                // is waiting for this lock, and finds no slot to end).
                None if !self.server.engine().is_open(session) => {
                    return Err(format!("upstream {name}: the session has ended"))
                }
                None if open >= self.cfg.max_sessions => {
                    return Err(format!(
                        "upstream {name}: {open} sessions have a connection of their own \
                         (or one still starting or stopping), the most maxSessions allows"
                    ))
                }
                None => slots
                    .by_session
                    .entry(session.to_owned())
                    .or_insert_with(|| Arc::new(Slot::new(START_BACKOFF)))
                    .clone(),
            }
        };
        // What a relayed call may take, progress aside.
        let limit = match self.cfg.max_total_timeout {
            Some(total) => total.min(self.cfg.timeout),
            None => self.cfg.timeout,
        };
        slot.get(
            || self.start(ctx),
            &ctx.cancel_token(),
            limit,
            name,
            session,
        )
        .map_err(|why| match why {
            Unavailable::Ended => format!("upstream {name}: the session has ended"),
            Unavailable::Failed(e) => e,
            Unavailable::Cancelled => {
                format!("upstream {name}: cancelled while the session's connection started")
            }
            Unavailable::TimedOut => format!(
                "upstream {name}: the session's connection did not start within {} ms",
                limit.as_millis()
            ),
        })
    }

    /// A start of a new connection for `ctx`'s session, declaring the
    /// capabilities its client declared (so the upstream asks only for
    /// what it can do).
    fn start(&self, ctx: &Context) -> Start<Arc<Link>> {
        let session = ctx.session_id().to_owned();
        let label = format!(
            "upstream {} session {}",
            self.cfg.name,
            crate::protocol::session_log_name(&session)
        );
        let theirs = ctx.protocol();
        let refuse = |method: &'static str| {
            theirs
                .client_supports(method)
                .then(|| upstream::refuse(method))
        };
        // The connection is this session's alone: its roots are the
        // session's client's, also outside a call (an upstream that asks
        // for them as it starts).
        let roots = match (theirs.client_supports("roots"), ctx.session()) {
            (true, Some(handle)) => {
                let timeout = self.cfg.timeout;
                let asked: crate::client::RequestHandler =
                    Arc::new(move |_| handle.list_roots(timeout).map_err(upstream::relayed_error));
                Some(asked)
            }
            _ => refuse("roots"),
        };
        let (server, name) = (self.server.clone(), self.cfg.name.clone());
        let options = ClientOptions {
            sampling: refuse("sampling"),
            sampling_tools: theirs.client_supports("sampling.tools"),
            elicitation: refuse("elicitation"),
            elicitation_url: theirs.client_supports("elicitation.url"),
            roots,
            // Its lists come from the shared connection; its logs are this
            // session's.
            on_notification: Some(Arc::new(move |method: &str, params: &Value| {
                if method == "notifications/message" {
                    let (level, logger, data) = upstream::log_message(&name, params);
                    server.engine().log_to(&session, level, Some(&logger), data);
                }
            })),
            ..upstream::client_options(&self.cfg)
        };
        let cfg = self.cfg.clone();
        Box::new(move || -> Result<Arc<Link>, String> {
            let client = upstream::connect(&cfg, &label, options)?;
            // All it logs reaches us; the session's own level filters it.
            if client.server_capabilities().get("logging").is_some() {
                if let Err(e) = client.set_log_level(crate::LogLevel::Debug) {
                    log::warn!("{label}: logging/setLevel: {e}");
                }
            }
            Ok(Arc::new(Link::new(&cfg, client)))
        })
    }

    /// Stops every connection (the upstream's life ends) and starts no more.
    /// A start under way is waited for as long as closing a connection may
    /// take (two grace periods of its child,
    /// [`DEFAULT_CHILD_GRACE`](crate::transport::connection::DEFAULT_CHILD_GRACE)), within the worker's
    /// [`STOP_TIMEOUT`](super::upstream::STOP_TIMEOUT); one that takes
    /// longer (a child that does not answer `initialize`) closes what it
    /// started when it ends; if the daemon exits first, the child gets
    /// SIGTERM then (its parent-death signal).
    pub(crate) fn stop_all(&self) {
        let deadline =
            crate::wait::deadline_in(2 * crate::transport::connection::DEFAULT_CHILD_GRACE);
        let (slots, ending, starting): (Vec<_>, Vec<_>, Vec<_>) = {
            let mut s = lock(&self.slots);
            s.stopped = true;
            (
                s.by_session.drain().map(|(_, slot)| slot).collect(),
                s.closing.drain(..).collect(),
                s.ended_starting.drain(..).collect(),
            )
        };
        let all: Vec<_> = slots.iter().chain(&starting).cloned().collect();
        // In parallel: each may take two grace periods.
        let closing: Vec<_> = slots
            .into_iter()
            .filter_map(|slot| {
                let s = slot.clone();
                let spawned = std::thread::Builder::new()
                    .name("mcpvisor-upstream-close".into())
                    .spawn(move || s.end());
                if spawned.is_err() {
                    slot.end();
                }
                spawned.ok()
            })
            .collect();
        for c in closing.into_iter().chain(ending) {
            let _ = c.join();
        }
        // Starts still under way close what they start (their slots have
        // ended): no child outlives the upstream's stop.
        let left = all.iter().filter(|s| !s.await_start(deadline)).count();
        if left > 0 {
            log::warn!(
                "upstream {}: {left} session connection(s) still starting at the stop; \
                 each is closed when its start ends",
                self.cfg.name
            );
        }
    }
}

impl SessionWatcher for Sessions {
    /// Tells the session's connection, if it has one, from a thread of its
    /// own: it waits for a start under way (and then tells the new
    /// connection too: one notice more does no harm), and the write may
    /// wait for an upstream that reads slowly. Changes that come while it
    /// tells are told once more after it, by the same thread.
    fn roots_changed(&self, session: &crate::protocol::SessionHandle) {
        let id = session.id();
        let Some(slot) = lock(&self.slots).by_session.get(id).cloned() else {
            return;
        };
        let told = self.telling_roots.run(id, move || {
            // Not under the slot's lock: the write may wait for the upstream.
            if let Some(link) = slot.settled() {
                if let Err(e) = link.client.roots_changed() {
                    log::warn!(
                        "upstream {}: notifications/roots/list_changed: {e}",
                        link.name
                    );
                }
            }
        });
        if let Err(e) = told {
            log::warn!("upstream: cannot tell a session's roots changed: {e}");
        }
    }

    fn session_closed(&self, session_id: &str) {
        let mut slots = lock(&self.slots);
        let Some(slot) = slots.by_session.remove(session_id) else {
            return;
        };
        slots.closing.retain(|c| !c.is_finished());
        // Ended first (under the slot's lock): a call of the session still
        // under way starts nothing after it, so a start that runs now was
        // made before, and is counted.
        let connection = slot.mark_ended();
        if slot.start_runs() {
            slots.ended_starting.push(slot);
        }
        // Closing a child takes up to two grace periods: not on the thread
        // that closed the session. (A start still under way closes what it
        // started when it ends.)
        let Some(c) = connection else { return };
        let theirs = c.clone();
        match std::thread::Builder::new()
            .name("mcpvisor-upstream-close".into())
            .spawn(move || theirs.close())
        {
            Ok(closing) => slots.closing.push(closing),
            Err(_) => {
                drop(slots);
                c.close();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{OnePerKey, Slot, SlotConnection, Start, Unavailable};
    use crate::protocol::CancelToken;
    use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// No limit a test reaches.
    const LONG: Duration = Duration::from_secs(3600);

    /// A connection that says (its `id`) when it is closed.
    #[derive(Clone, Debug)]
    struct Fake {
        id: usize,
        closed: Arc<AtomicBool>,
        closes: Sender<usize>,
    }

    impl Fake {
        fn new(id: usize, closes: &Sender<usize>) -> Fake {
            Fake {
                id,
                closed: Arc::default(),
                closes: closes.clone(),
            }
        }
    }

    impl SlotConnection for Fake {
        fn is_closed(&self) -> bool {
            self.closed.load(Ordering::SeqCst)
        }
        fn close(&self) {
            if !self.closed.swap(true, Ordering::SeqCst) {
                let _ = self.closes.send(self.id);
            }
        }
    }

    /// Starts that are counted, say they began, and end as the test sends
    /// (or fail once it has dropped this).
    struct Starts {
        count: Arc<AtomicUsize>,
        began_tx: Sender<()>,
        began: Receiver<()>,
        end: Sender<Result<Fake, String>>,
        ends: Receiver<Result<Fake, String>>,
    }

    impl Starts {
        fn new() -> Starts {
            let (began_tx, began) = unbounded();
            let (end, ends) = unbounded();
            Starts {
                count: Arc::default(),
                began_tx,
                began,
                end,
                ends,
            }
        }

        /// A starter for [`Slot::get`].
        fn starter(&self) -> impl FnMut() -> Start<Fake> + Send + 'static {
            let (count, began, ends) =
                (self.count.clone(), self.began_tx.clone(), self.ends.clone());
            move || -> Start<Fake> {
                count.fetch_add(1, Ordering::SeqCst);
                let (began, ends) = (began.clone(), ends.clone());
                Box::new(move || -> Result<Fake, String> {
                    let _ = began.send(());
                    ends.recv()
                        .unwrap_or_else(|_| Err("the test is over".to_owned()))
                })
            }
        }

        fn count(&self) -> usize {
            self.count.load(Ordering::SeqCst)
        }
    }

    /// A call for `slot`'s connection on a thread of its own.
    fn call(
        slot: &Arc<Slot<Fake>>,
        starts: &Starts,
        cancel: &CancelToken,
        limit: Duration,
    ) -> std::thread::JoinHandle<Result<Fake, Unavailable>> {
        let (slot, starter, cancel) = (slot.clone(), starts.starter(), cancel.clone());
        std::thread::spawn(move || slot.get(starter, &cancel, limit, "up", "s"))
    }

    /// The same on this thread.
    fn get(slot: &Arc<Slot<Fake>>, starts: &Starts, limit: Duration) -> Result<Fake, Unavailable> {
        slot.get(starts.starter(), &CancelToken::new(), limit, "up", "s")
    }

    /// Until `n` waits on a start have begun in `slot`.
    fn until_waiting(slot: &Slot<Fake>, n: usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while slot.waits.load(Ordering::Relaxed) < n {
            assert!(
                std::time::Instant::now() < deadline,
                "{n} waits never began"
            );
            std::thread::yield_now();
        }
    }

    #[test]
    fn calls_during_a_start_wait_for_it_and_share_its_connection() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starts = Starts::new();
        let (closes_tx, closes) = unbounded();
        let calls: Vec<_> = (0..4)
            .map(|_| call(&slot, &starts, &CancelToken::new(), LONG))
            .collect();
        starts.began.recv().unwrap();
        // All four wait (the one that started it too), on that one start.
        until_waiting(&slot, 4);
        starts.end.send(Ok(Fake::new(1, &closes_tx))).unwrap();
        for c in calls {
            assert_eq!(c.join().unwrap().unwrap().id, 1);
        }
        assert_eq!(starts.count(), 1);
        assert!(starts.began.try_recv().is_err());
        // Later calls get it at once; the session's end closes it, and
        // nothing is started after.
        assert_eq!(get(&slot, &starts, LONG).unwrap().id, 1);
        slot.end();
        assert_eq!(closes.try_recv(), Ok(1));
        assert_eq!(get(&slot, &starts, LONG).unwrap_err(), Unavailable::Ended);
        assert_eq!(starts.count(), 1);
    }

    #[test]
    fn a_connection_that_exited_is_started_again_at_the_next_call() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starts = Starts::new();
        let (closes_tx, _closes) = unbounded();
        starts.end.send(Ok(Fake::new(1, &closes_tx))).unwrap();
        let first = get(&slot, &starts, LONG).unwrap();
        assert_eq!(first.id, 1);
        first.close();
        starts.end.send(Ok(Fake::new(2, &closes_tx))).unwrap();
        assert_eq!(get(&slot, &starts, LONG).unwrap().id, 2);
        assert_eq!(starts.count(), 2);
    }

    #[test]
    fn a_cancelled_or_timed_out_wait_returns_while_the_start_runs_on() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starts = Starts::new();
        let (closes_tx, _closes) = unbounded();
        let first = CancelToken::new();
        let starter = call(&slot, &starts, &first, LONG);
        starts.began.recv().unwrap();
        let waiter = call(&slot, &starts, &CancelToken::new(), LONG);
        until_waiting(&slot, 2);
        // The call that started it is cancelled: it returns, with the
        // start still held.
        first.cancel();
        assert_eq!(starter.join().unwrap().unwrap_err(), Unavailable::Cancelled);
        // So does a call whose time is up.
        assert_eq!(
            get(&slot, &starts, Duration::ZERO).unwrap_err(),
            Unavailable::TimedOut
        );
        let cancelled = CancelToken::new();
        cancelled.cancel();
        assert_eq!(
            slot.get(starts.starter(), &cancelled, LONG, "up", "s")
                .unwrap_err(),
            Unavailable::Cancelled
        );
        // The start goes on: its connection is the other waiter's, and
        // the next call's.
        starts.end.send(Ok(Fake::new(1, &closes_tx))).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap().id, 1);
        assert_eq!(get(&slot, &starts, LONG).unwrap().id, 1);
        assert_eq!(starts.count(), 1);
    }

    #[test]
    fn a_failed_start_is_every_waiter_s_and_not_tried_again_within_the_backoff() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starts = Starts::new();
        let boom = || Unavailable::Failed("upstream up: cannot start: boom".to_owned());
        let calls: Vec<_> = (0..3)
            .map(|_| call(&slot, &starts, &CancelToken::new(), LONG))
            .collect();
        starts.began.recv().unwrap();
        until_waiting(&slot, 3);
        starts
            .end
            .send(Err("upstream up: cannot start: boom".to_owned()))
            .unwrap();
        for c in calls {
            assert_eq!(c.join().unwrap().unwrap_err(), boom());
        }
        // Within the backoff: that failure at once, no start.
        for _ in 0..3 {
            assert_eq!(get(&slot, &starts, LONG).unwrap_err(), boom());
        }
        assert_eq!(starts.count(), 1);
        assert!(starts.began.try_recv().is_err());
    }

    #[test]
    fn a_failed_start_is_tried_again_past_the_backoff() {
        let slot = Arc::new(Slot::<Fake>::new(Duration::ZERO));
        let starts = Starts::new();
        let (closes_tx, _closes) = unbounded();
        starts.end.send(Err("boom".to_owned())).unwrap();
        assert_eq!(
            get(&slot, &starts, LONG).unwrap_err(),
            Unavailable::Failed("boom".to_owned())
        );
        starts.end.send(Ok(Fake::new(2, &closes_tx))).unwrap();
        assert_eq!(get(&slot, &starts, LONG).unwrap().id, 2);
        assert_eq!(starts.count(), 2);
    }

    #[test]
    fn a_connection_started_for_a_session_that_ended_meanwhile_is_closed() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starts = Starts::new();
        let (closes_tx, closes) = unbounded();
        let waiting = call(&slot, &starts, &CancelToken::new(), LONG);
        starts.began.recv().unwrap();
        until_waiting(&slot, 1);
        // The session ends during the start: its call hears at once, and
        // the start still counts (toward maxSessions) while it runs.
        slot.end();
        assert_eq!(waiting.join().unwrap().unwrap_err(), Unavailable::Ended);
        assert!(slot.start_runs());
        // What the start brings is closed, not kept.
        starts.end.send(Ok(Fake::new(1, &closes_tx))).unwrap();
        assert_eq!(closes.recv_timeout(Duration::from_secs(30)), Ok(1));
        assert!(!slot.start_runs(), "ended: it counts no more");
        assert_eq!(get(&slot, &starts, LONG).unwrap_err(), Unavailable::Ended);
        assert_eq!(starts.count(), 1);
    }

    #[test]
    fn a_stop_waits_for_a_start_under_way_and_what_it_started_is_closed() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starts = Starts::new();
        let (closes_tx, closes) = unbounded();
        let waiting = call(&slot, &starts, &CancelToken::new(), LONG);
        starts.began.recv().unwrap();
        until_waiting(&slot, 1);
        slot.end();
        assert_eq!(waiting.join().unwrap().unwrap_err(), Unavailable::Ended);
        // The stop waits while the start runs, until its deadline ...
        let soon = std::time::Instant::now() + Duration::from_millis(20);
        assert!(!slot.await_start(soon));
        assert!(std::time::Instant::now() >= soon);
        let stopping = {
            let slot = slot.clone();
            std::thread::spawn(move || slot.await_start(std::time::Instant::now() + LONG))
        };
        // ... and returns once it has ended, with its connection closed.
        starts.end.send(Ok(Fake::new(1, &closes_tx))).unwrap();
        assert!(stopping.join().unwrap());
        assert_eq!(closes.try_recv(), Ok(1));
    }

    #[test]
    fn a_stop_just_after_a_start_was_made_waits_for_it() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let (release, released) = bounded::<()>(0);
        let (closes_tx, closes) = unbounded();
        // The stop comes after the call made its start, before the start's
        // thread runs: it waits for that start all the same.
        let (stopped, stop) = (slot.clone(), std::cell::Cell::new(true));
        let starter = || -> Start<Fake> {
            if stop.take() {
                stopped.end();
                assert!(!stopped.await_start(std::time::Instant::now()));
            }
            let (released, closes) = (released.clone(), closes_tx.clone());
            Box::new(move || {
                let _ = released.recv();
                Ok(Fake::new(1, &closes))
            })
        };
        let got = slot.get(starter, &CancelToken::new(), LONG, "up", "s");
        assert_eq!(got.unwrap_err(), Unavailable::Ended);
        drop(release);
        assert!(slot.await_start(std::time::Instant::now() + LONG));
        assert_eq!(closes.try_recv(), Ok(1), "what it started is closed");
    }

    #[test]
    fn a_starter_that_panics_fails_its_call_and_leaves_the_slot_startable() {
        let slot = Arc::new(Slot::<Fake>::new(Duration::ZERO));
        let panics = || -> Start<Fake> { panic!("a starter that panics") };
        let got = slot.get(panics, &CancelToken::new(), LONG, "up", "s");
        assert!(matches!(got, Err(Unavailable::Failed(_))), "{got:?}");
        let (closes, _) = unbounded();
        let starts = || -> Start<Fake> {
            let closes = closes.clone();
            Box::new(move || Ok(Fake::new(1, &closes)))
        };
        assert!(slot
            .get(starts, &CancelToken::new(), LONG, "up", "s")
            .is_ok());
    }

    #[test]
    fn a_start_that_panics_fails_its_waiters() {
        let slot = Arc::new(Slot::<Fake>::new(LONG));
        let starter = || -> Start<Fake> {
            Box::new(|| -> Result<Fake, String> { panic!("a start that panics") })
        };
        let got = slot.get(starter, &CancelToken::new(), LONG, "up", "s");
        assert!(matches!(got, Err(Unavailable::Failed(_))), "{got:?}");
    }

    #[test]
    fn one_thread_a_key_runs_once_more_for_what_came_meanwhile() {
        let runs = OnePerKey::default();
        let (started, starts) = unbounded();
        let (release, released) = bounded::<()>(0);
        let job = move || {
            started.send(()).unwrap();
            let _ = released.recv();
        };
        runs.run("a", job.clone()).unwrap();
        starts.recv().unwrap();
        // The first run is held: these only mark the key.
        for _ in 0..100 {
            runs.run("a", job.clone()).unwrap();
        }
        release.send(()).unwrap();
        // Exactly one run more, then the thread ends and forgets the key.
        starts.recv().unwrap();
        release.send(()).unwrap();
        while super::lock(&runs.0).contains_key("a") {
            std::thread::yield_now();
        }
        assert!(starts.try_recv().is_err());
        // A later change starts a thread again.
        runs.run("a", job).unwrap();
        starts.recv().unwrap();
        release.send(()).unwrap();
    }
}
