//! The one path for requests to the peer, used by a handler's [`Context`]
//! (sampling, elicitation, roots) and by the `Client` alike: the pending
//! table, the per-call timeout that progress restarts, an optional total
//! limit, cancellation that tells the peer with `notifications/cancelled`,
//! and late answers dropped.
//!
//! A call may carry an **association**: a function that answers the
//! requests the peer sends back while this call runs (the gateway passes
//! the downstream [`Context`] there, so an upstream's sampling during a
//! proxied call reaches the session that made the call).
//!
//! [`Context`]: super::Context

use super::sink::Outgoing;
use crate::jsonrpc::{self, ErrorObject, Request, RequestId, Response};
use crate::sync::{lock, FastMap};
use crossbeam_channel::{Receiver, Sender};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Receives progress of a call: (progress, total, message).
pub type ProgressHandler = Arc<dyn Fn(f64, Option<f64>, Option<&str>) + Send + Sync>;

/// Answers a request from the peer (method, params).
pub type PeerRequestHandler = Arc<dyn Fn(&str, Value) -> Result<Value, ErrorObject> + Send + Sync>;

/// How one call waits.
#[derive(Clone, Default)]
pub(crate) struct Wait {
    /// Per-request timeout; each progress notification restarts it.
    pub(crate) timeout: Duration,
    /// A limit progress cannot extend.
    pub(crate) total: Option<Duration>,
    /// Ready (or disconnected) when the caller gives up.
    pub(crate) cancel: Option<Receiver<()>>,
    /// Receives the call's progress; asks the peer for it with a progress token.
    pub(crate) progress: Option<ProgressHandler>,
    /// Answers the peer's requests that belong to this call.
    pub(crate) association: Option<PeerRequestHandler>,
    /// The `reason` of `notifications/cancelled` when the caller cancels.
    pub(crate) cancel_reason: &'static str,
    /// The answer must wait for the peer's messages that came before it
    /// to be handled (see [`Outbound::defer_answer`]).
    pub(crate) ordered: bool,
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallError {
    /// Closed before or while waiting.
    Closed,
    /// No answer within the timeout (the peer was told), or the call's
    /// total limit was spent before it was sent (then it never was).
    Timeout(RequestId, Duration),
    /// The caller cancelled (the peer was told).
    Cancelled,
    /// The peer answered with an error.
    Rpc(ErrorObject),
    /// The request could not be sent.
    Send(String),
}

type Answer = Result<Value, ErrorObject>;

struct Pending {
    tx: Sender<Answer>,
    // Each progress notification is a tick that restarts the timeout.
    tick: Sender<()>,
    progress: Option<ProgressHandler>,
    // Read when the client side routes the peer's requests.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    association: Option<PeerRequestHandler>,
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    ordered: bool,
    /// Its answer, come and kept until the peer's earlier messages are
    /// handled ([`Outbound::defer_answer`]); a call whose time runs out
    /// meanwhile takes it at once.
    arrived: Option<Answer>,
    /// The last progress passed on: only a greater one restarts the timeout.
    last_progress: Option<f64>,
}

/// What the grace ([`ABANDONED_CALL_GRACE`]) knows of a call with an
/// association, and since when.
#[derive(Clone, Copy, Debug)]
enum Abandon {
    /// Given up: the peer's requests that name no call are not guessed.
    Held(Instant),
    /// The handler of its own request of the peer's cancelled it, the
    /// question having gone back to its caller ([`excuse_the_call`]): its
    /// being given up holds no grace.
    Excused(Instant),
}

impl Abandon {
    fn at(self) -> Instant {
        match self {
            Abandon::Held(at) | Abandon::Excused(at) => at,
        }
    }
}

type Abandoned = Arc<Mutex<FastMap<RequestId, Abandon>>>;

thread_local! {
    // Set by a handler of the peer's request (see `excuse_the_call`).
    static EXCUSED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Called by a handler of the peer's request, as it cancels the call that
/// request belongs to because the question went back to its caller (a
/// gateway's stateless round: the client answers in a retry, which makes
/// the call again): that call's being given up holds no grace
/// ([`Abandon::Excused`]).
#[cfg_attr(not(feature = "client"), allow(dead_code))]
pub(crate) fn excuse_the_call() {
    EXCUSED.with(|e| e.set(true));
}

/// Records what the giving up of call `id` (`Held`), or its excuse
/// (`Excused`), says, whichever comes first: the second of the two takes
/// the first's mark away, so an excused call holds no grace either way.
fn mark(abandoned: &Mutex<FastMap<RequestId, Abandon>>, id: &RequestId, now: Abandon) {
    let mut abandoned = lock(abandoned);
    abandoned.retain(|_, a| a.at().elapsed() < ABANDONED_CALL_GRACE);
    match abandoned.remove(id) {
        Some(first) if std::mem::discriminant(&first) != std::mem::discriminant(&now) => {}
        _ => {
            abandoned.insert(id.clone(), now);
        }
    }
}

/// How long after a call with an association was given up (it timed out,
/// or was cancelled) the peer's requests that name no call are not taken
/// for the only associated call still in flight: 30 s. The peer may still
/// be at work on the call given up, and what it asks then belongs to that
/// call's caller, not to another's (a gateway's upstream shared by
/// sessions: one user's elicitation shown to another). Not after a call
/// that the handler of its own request of the peer's cancelled, saying so
/// (see `excuse_the_call`).
pub const ABANDONED_CALL_GRACE: Duration = Duration::from_secs(30);

/// Requests in flight to the peer.
pub(crate) struct Outbound {
    pending: Mutex<FastMap<RequestId, Pending>>,
    next_id: AtomicI64,
    closed: AtomicBool,
    /// Calls with an association given up within the grace, and when:
    /// each until its late answer comes or the grace ends.
    abandoned: Abandoned,
}

impl Default for Outbound {
    fn default() -> Self {
        Outbound {
            pending: Mutex::new(FastMap::default()),
            next_id: AtomicI64::new(1),
            closed: AtomicBool::new(false),
            abandoned: Arc::default(),
        }
    }
}

impl Outbound {
    /// Sends `method` through `send` and blocks for the answer.
    pub(crate) fn call(
        &self,
        method: &str,
        mut params: Value,
        wait: Wait,
        send: &dyn Fn(Outgoing) -> Result<(), String>,
    ) -> Result<Value, CallError> {
        if super::pool::running_quick() {
            // Its answer may have to come through the thread this blocks.
            return Err(CallError::Rpc(ErrorObject::internal(format!(
                "{method}: a quick tool cannot wait for an answer (it runs on the thread that reads them); declare it without Tool::quick"
            ))));
        }
        // Given up before it was sent (a question of a call cancelled while
        // it waited for a thread): the peer never sees it.
        if wait
            .cancel
            .as_ref()
            .is_some_and(|c| !matches!(c.try_recv(), Err(crossbeam_channel::TryRecvError::Empty)))
        {
            return Err(CallError::Cancelled);
        }
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        // Its total limit is spent (a later round of a call that has used
        // it up): it times out unsent, and there is nothing to cancel.
        if let Some(spent) = wait.total.filter(|t| t.is_zero()) {
            return Err(CallError::Timeout(id, spent));
        }
        if wait.progress.is_some() {
            if let Some(p) = params.as_object_mut() {
                let meta = p.entry("_meta").or_insert_with(|| json!({}));
                if let Some(m) = meta.as_object_mut() {
                    m.insert("progressToken".into(), id.to_value());
                }
            }
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        // Ticks that come faster than the waiting thread takes them are
        // one restart (a peer's flood of progress holds no memory).
        let (tick, ticks) = crossbeam_channel::bounded(2);
        {
            let mut pending = lock(&self.pending);
            if self.closed.load(Ordering::SeqCst) {
                return Err(CallError::Closed);
            }
            pending.insert(
                id.clone(),
                Pending {
                    tx,
                    tick,
                    progress: wait.progress.clone(),
                    association: wait.association.clone(),
                    ordered: wait.ordered,
                    arrived: None,
                    last_progress: None,
                },
            );
        }
        let request = Request::new(id.clone(), method, Some(params)).into_value();
        if let Err(e) = send(Outgoing::Request(request)) {
            self.forget(&id);
            return Err(CallError::Send(e));
        }
        let outcome = waiting(&id, &rx, &ticks, &wait);
        if let Err(e @ (CallError::Timeout(..) | CallError::Cancelled)) = &outcome {
            if !self.give_up(&id) {
                // Answered as the wait ended: its answer is on its way
                // (taken from the table, not sent yet, or waiting for the
                // peer's earlier messages to be handled). It is the
                // outcome, and there is nothing to cancel.
                return outcome_of(rx.recv());
            }
            if wait.association.is_some() {
                mark(&self.abandoned, &id, Abandon::Held(Instant::now()));
            }
            // `initialize` must never be cancelled (the spec's cancellation
            // rules): the wait ends, the peer is not told.
            if method == "initialize" {
                return outcome;
            }
            let reason = match e {
                CallError::Timeout(_, d) => format!("timed out after {d:?}"),
                _ => wait.cancel_reason.to_owned(),
            };
            let _ = send(Outgoing::Notification(jsonrpc::notification(
                "notifications/cancelled",
                json!({"requestId": id.to_value(), "reason": reason}),
            )));
        }
        outcome
    }

    fn forget(&self, id: &RequestId) {
        lock(&self.pending).remove(id);
    }

    /// Takes the call `id` out of the table; false when its answer came
    /// first (then it is in the call's channel, or on its way there).
    fn give_up(&self, id: &RequestId) -> bool {
        let Some(p) = lock(&self.pending).remove(id) else {
            return false;
        };
        match p.arrived {
            Some(answer) => {
                let _ = p.tx.send(answer);
                false
            }
            None => true,
        }
    }

    /// Hands a response to its waiting call; false (and logged) when nobody
    /// waits for it any more (a late answer).
    pub(crate) fn answer(&self, response: Response, who: &str) -> bool {
        let waiter = response.id().and_then(|id| lock(&self.pending).remove(id));
        match waiter {
            Some(p) => {
                let _ = p.tx.send(response.into_outcome());
                true
            }
            None => {
                // A call given up has its answer: the peer is done with it.
                if let Some(id) = response.id() {
                    lock(&self.abandoned).remove(id);
                }
                log::warn!(
                    "{who}: response to unknown or abandoned request {:?} dropped",
                    response.id()
                );
                false
            }
        }
    }

    /// Keeps the answer of a call that asked for it to come after the
    /// peer's earlier messages are handled, and returns the call's id, to
    /// be given to [`deliver`](Self::deliver) once they are; any other
    /// response comes back, to be answered now. A kept answer is not lost
    /// to the call's timeout: a call whose time runs out takes it.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn defer_answer(&self, response: Response) -> Result<RequestId, Response> {
        let Some(id) = response.id().cloned() else {
            return Err(response);
        };
        let mut pending = lock(&self.pending);
        match pending.get_mut(&id) {
            Some(p) if p.ordered && p.arrived.is_none() => {
                p.arrived = Some(response.into_outcome());
                Ok(id)
            }
            _ => Err(response),
        }
    }

    /// Hands the call `id` its kept answer ([`defer_answer`](Self::defer_answer)),
    /// unless the call took it already.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn deliver(&self, id: &RequestId) {
        let mut pending = lock(&self.pending);
        if pending.get(id).is_some_and(|p| p.arrived.is_some()) {
            if let Some(Pending {
                tx,
                arrived: Some(answer),
                ..
            }) = pending.remove(id)
            {
                drop(pending);
                let _ = tx.send(answer);
            }
        }
    }

    /// Routes `notifications/progress`: restarts the call's timeout at once
    /// and returns the call's progress callback, ready to run, for the
    /// caller to run where user code may block (never under a lock, never
    /// on a reader thread).
    pub(crate) fn progress(&self, params: &Map<String, Value>) -> Option<Box<dyn FnOnce() + Send>> {
        let id = params
            .get("progressToken")
            .and_then(RequestId::from_value)?;
        let progress = params.get("progress").and_then(Value::as_f64)?;
        let callback = {
            let mut pending = lock(&self.pending);
            let p = pending.get_mut(&id)?;
            // Only a call that gave a token: the id of one that did not is
            // no token, and must not keep it from timing out. Progress
            // must increase: a peer repeating a value makes none, and
            // must not keep the call from timing out either.
            let callback = p.progress.clone()?;
            if p.last_progress.is_some_and(|last| progress <= last) {
                return None;
            }
            p.last_progress = Some(progress);
            let _ = p.tick.try_send(());
            callback
        };
        let total = params.get("total").and_then(Value::as_f64);
        let message = params
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Some(Box::new(move || {
            callback(progress, total, message.as_deref())
        }))
    }

    /// The association for a request the peer sent: the one of the call
    /// named by `related` (a transport that knows, e.g. an HTTP response
    /// stream), else that of the only call in flight with an association
    /// (calls without one, a heartbeat, a list refresh, never ask for
    /// anything). With several and no hint there is no telling which:
    /// `None`; nor within [`ABANDONED_CALL_GRACE`] of giving up a call with
    /// an association (unless its late answer came), which the request may
    /// come from. The call's timeout
    /// starts again as the request is answered and once it is: a call
    /// waits for the question it asked (a user thinking over an
    /// elicitation) as it waits for progress.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn association(&self, related: Option<&RequestId>) -> Option<PeerRequestHandler> {
        let pending = lock(&self.pending);
        let (id, call) = match related.and_then(|id| pending.get_key_value(id)) {
            Some(found) => found,
            None => {
                let abandoned = lock(&self.abandoned);
                if abandoned
                    .values()
                    .any(|a| matches!(a, Abandon::Held(at) if at.elapsed() < ABANDONED_CALL_GRACE))
                {
                    return None;
                }
                drop(abandoned);
                let mut associated = pending.iter().filter(|(_, p)| p.association.is_some());
                match (associated.next(), associated.next()) {
                    (Some(found), None) => found,
                    _ => return None,
                }
            }
        };
        let (handler, tick) = (call.association.clone()?, call.tick.clone());
        let (id, abandoned) = (id.clone(), self.abandoned.clone());
        Some(Arc::new(move |method: &str, params: Value| {
            let _ = tick.try_send(());
            EXCUSED.with(|e| e.set(false));
            let answer = handler(method, params);
            let _ = tick.try_send(());
            if EXCUSED.with(|e| e.replace(false)) {
                mark(&abandoned, &id, Abandon::Excused(Instant::now()));
            }
            answer
        }))
    }

    /// Fails every waiting call with `Closed` (the connection was lost);
    /// new calls may follow.
    #[cfg_attr(not(feature = "client"), allow(dead_code))]
    pub(crate) fn fail_all(&self) {
        end_all(&mut lock(&self.pending));
    }

    /// Fails every waiting call and refuses new ones.
    pub(crate) fn close(&self) {
        let mut pending = lock(&self.pending);
        self.closed.store(true, Ordering::SeqCst);
        end_all(&mut pending);
    }
}

/// Ends every call in the table: `Closed`, except a call whose answer came
/// and waits for the peer's earlier messages ([`Outbound::defer_answer`]),
/// which gets that answer (a peer that answers and exits did answer).
fn end_all(pending: &mut FastMap<RequestId, Pending>) {
    for (_, p) in pending.drain() {
        if let Some(answer) = p.arrived {
            // Never blocks: the channel holds one answer and had none.
            let _ = p.tx.send(answer);
        }
    }
}

/// A call's outcome from what its answer channel gave.
fn outcome_of(answer: Result<Answer, crossbeam_channel::RecvError>) -> Result<Value, CallError> {
    match answer {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(CallError::Rpc(e)),
        Err(_) => Err(CallError::Closed),
    }
}

fn waiting(
    id: &RequestId,
    rx: &Receiver<Answer>,
    ticks: &Receiver<()>,
    wait: &Wait,
) -> Result<Value, CallError> {
    let hard = wait.total.map(crate::wait::deadline_in);
    let never = crossbeam_channel::never();
    let cancel = wait.cancel.as_ref().unwrap_or(&never);
    let mut deadline = crate::wait::deadline_in(wait.timeout);
    loop {
        let until = hard.map_or(deadline, |h| h.min(deadline));
        let left = until.saturating_duration_since(Instant::now());
        crossbeam_channel::select! {
            recv(rx) -> answer => return outcome_of(answer),
            recv(ticks) -> _ => deadline = crate::wait::deadline_in(wait.timeout),
            recv(cancel) -> _ => return Err(CallError::Cancelled),
            default(left) => return Err(CallError::Timeout(id.clone(), wait.timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn response(id: i64) -> Response {
        match crate::jsonrpc::parse(
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"ok":true}}}}"#).as_bytes(),
        ) {
            Ok(crate::jsonrpc::Parsed::Single(crate::jsonrpc::Message::Response(r))) => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_kept_answer_is_the_outcome_of_a_call_whose_time_runs_out() {
        // The answer came but waits behind notification callbacks that do
        // not end: the call's time runs out, and it takes its answer
        // rather than fail and tell the peer to cancel what it answered.
        let out = Arc::new(Outbound::default());
        let sent = Arc::new(Mutex::new(Vec::new()));
        let (o, s) = (out.clone(), sent.clone());
        let send = move |m: Outgoing| -> Result<(), String> {
            if let Outgoing::Request(r) = &m {
                let id = r["id"].as_i64().unwrap_or_default();
                assert_eq!(
                    o.defer_answer(response(id)).ok(),
                    Some(RequestId::Number(id))
                );
            }
            lock(&s).push(m);
            Ok(())
        };
        let wait = Wait {
            timeout: Duration::from_millis(20),
            ordered: true,
            ..Default::default()
        };
        assert_eq!(
            out.call("a", json!({}), wait, &send),
            Ok(json!({"ok": true}))
        );
        assert_eq!(lock(&sent).len(), 1, "no cancellation: {:?}", lock(&sent));
        // Delivered later, it finds the call gone: nothing happens.
        out.deliver(&RequestId::Number(1));
        // An unordered call's answer is not kept.
        let other = out.defer_answer(response(9)).unwrap_err();
        assert_eq!(other.id(), Some(&RequestId::Number(9)));
    }

    #[test]
    fn answered_timed_out_and_late() {
        let out = Arc::new(Outbound::default());
        let o = out.clone();
        let send = move |m: Outgoing| -> Result<(), String> {
            if let Outgoing::Request(r) = m {
                let id = r["id"].as_i64().unwrap_or_default();
                if id == 1 {
                    o.answer(response(id), "test");
                }
            }
            Ok(())
        };
        let wait = Wait {
            timeout: Duration::from_millis(50),
            ..Default::default()
        };
        assert_eq!(
            out.call("a", json!({}), wait.clone(), &send),
            Ok(json!({"ok": true}))
        );
        let sent = Arc::new(Mutex::new(Vec::new()));
        let s = sent.clone();
        let record = move |m: Outgoing| -> Result<(), String> {
            lock(&s).push(m);
            Ok(())
        };
        let e = out.call("b", json!({}), wait, &record).unwrap_err();
        assert!(
            matches!(e, CallError::Timeout(RequestId::Number(2), _)),
            "{e:?}"
        );
        let sent = lock(&sent);
        assert_eq!(
            sent[1].message().unwrap()["method"],
            "notifications/cancelled"
        );
        assert_eq!(sent[1].message().unwrap()["params"]["requestId"], 2);
        assert!(
            !out.answer(response(2), "test"),
            "the late answer is dropped"
        );
    }

    #[test]
    fn progress_restarts_the_timeout() {
        // Progress every 20 ms for 1.5 s against a 1 s timeout: only the
        // restarts keep the call alive that long (a stall of a whole second
        // would be needed to end it early). Then progress stops and the
        // call times out.
        let out = Arc::new(Outbound::default());
        let seen = Arc::new(AtomicUsize::new(0));
        let (o, s) = (out.clone(), seen.clone());
        let (stop_tx, stop) = crossbeam_channel::bounded::<()>(0);
        let ticker = Mutex::new(None);
        let send = |m: Outgoing| -> Result<(), String> {
            if let Outgoing::Request(r) = m {
                let token = r["params"]["_meta"]["progressToken"].clone();
                let (o, stop) = (o.clone(), stop.clone());
                *lock(&ticker) = Some(std::thread::spawn(move || {
                    let until = Instant::now() + Duration::from_millis(1500);
                    let mut i = 0;
                    while Instant::now() < until
                        && stop.recv_timeout(Duration::from_millis(20)).is_err()
                    {
                        i += 1;
                        let p = json!({"progressToken": token, "progress": i});
                        if let Some(report) = o.progress(p.as_object().unwrap()) {
                            report();
                        }
                    }
                }));
            }
            Ok(())
        };
        let progress: ProgressHandler = Arc::new(move |_, _, _| {
            s.fetch_add(1, Ordering::SeqCst);
        });
        let wait = Wait {
            timeout: Duration::from_secs(1),
            progress: Some(progress),
            ..Default::default()
        };
        let started = Instant::now();
        let e = out.call("long", json!({}), wait, &send).unwrap_err();
        drop(stop_tx);
        if let Some(t) = lock(&ticker).take() {
            t.join().unwrap();
        }
        assert!(matches!(e, CallError::Timeout(..)));
        assert!(
            started.elapsed() >= Duration::from_millis(1500),
            "kept alive by progress"
        );
        assert!(seen.load(Ordering::SeqCst) > 0);
    }

    #[test]
    fn progress_naming_a_call_that_gave_no_token_restarts_nothing() {
        let out = Outbound::default();
        let (_rx, ticks) = waiting_call(&out, 1, None);
        let p = json!({"progressToken": 1, "progress": 1});
        assert!(out.progress(p.as_object().unwrap()).is_none());
        assert!(ticks.try_recv().is_err(), "the timeout was not restarted");
    }

    #[test]
    fn only_increasing_progress_restarts_the_timeout() {
        let out = Outbound::default();
        let (_rx, ticks) = waiting_call(&out, 1, None);
        lock(&out.pending)
            .get_mut(&RequestId::Number(1))
            .unwrap()
            .progress = Some(Arc::new(|_, _, _| {}));
        let report = |progress: Value| {
            let p = json!({"progressToken": 1, "progress": progress});
            out.progress(p.as_object().unwrap()).is_some()
        };
        assert!(report(json!(1)));
        assert!(!report(json!(1)), "a repeated value");
        assert!(!report(json!(0.5)), "a smaller one");
        assert!(!report(json!("2")), "not a number");
        assert!(report(json!(2)));
        assert_eq!(ticks.try_iter().count(), 2, "two restarts");
    }

    #[test]
    fn a_kept_answer_outlives_the_connection_that_brought_it() {
        // The peer answered, then its connection ended before the answer's
        // turn came: the call has the answer, not `Closed`.
        for close in [false, true] {
            let out = Arc::new(Outbound::default());
            let o = out.clone();
            let send = move |m: Outgoing| -> Result<(), String> {
                if let Outgoing::Request(r) = &m {
                    let id = r["id"].as_i64().unwrap_or_default();
                    assert!(o.defer_answer(response(id)).is_ok());
                    if close {
                        o.close();
                    } else {
                        o.fail_all();
                    }
                }
                Ok(())
            };
            let wait = Wait {
                timeout: Duration::from_secs(10),
                ordered: true,
                ..Default::default()
            };
            assert_eq!(
                out.call("a", json!({}), wait, &send),
                Ok(json!({"ok": true}))
            );
        }
    }

    #[test]
    fn a_call_cancelled_before_it_is_sent_is_not_sent() {
        let out = Outbound::default();
        let (given_up, cancel) = crossbeam_channel::bounded(1);
        drop(given_up);
        let wait = Wait {
            timeout: Duration::from_secs(10),
            cancel: Some(cancel),
            ..Default::default()
        };
        let send = |_: Outgoing| -> Result<(), String> { panic!("sent") };
        assert_eq!(
            out.call("a", json!({}), wait, &send),
            Err(CallError::Cancelled)
        );
        assert!(lock(&out.pending).is_empty());
    }

    /// Puts a call with id `id` in flight; keep the receiver to keep it.
    fn waiting_call(
        out: &Outbound,
        id: i64,
        association: Option<PeerRequestHandler>,
    ) -> (Receiver<Answer>, Receiver<()>) {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let (tick, ticks) = crossbeam_channel::unbounded();
        let pending = Pending {
            tx,
            tick,
            progress: None,
            association,
            ordered: false,
            arrived: None,
            last_progress: None,
        };
        lock(&out.pending).insert(RequestId::Number(id), pending);
        (rx, ticks)
    }

    #[test]
    fn association_by_hint_or_the_only_associated_call() {
        let out = Outbound::default();
        assert!(out.association(None).is_none());
        let a: PeerRequestHandler = Arc::new(|_, _| Ok(json!("a")));
        let _rx = waiting_call(&out, 7, Some(a));
        let found = out.association(None).expect("the only associated call");
        assert_eq!(found("x", json!({})), Ok(json!("a")));
        assert!(out.association(Some(&RequestId::Number(7))).is_some());
        // A second call in flight without an association changes nothing.
        let _rx2 = waiting_call(&out, 8, None);
        assert!(out.association(None).is_some());
        // A second associated call: no guessing without a hint.
        let b: PeerRequestHandler = Arc::new(|_, _| Ok(json!("b")));
        let _rx3 = waiting_call(&out, 9, Some(b));
        assert!(out.association(None).is_none());
        let hinted = out
            .association(Some(&RequestId::Number(9)))
            .expect("the hint decides");
        assert_eq!(hinted("x", json!({})), Ok(json!("b")));
        out.close();
        assert!(out.association(None).is_none());
    }

    #[test]
    fn answering_a_call_s_question_restarts_its_timeout_twice() {
        let out = Outbound::default();
        let a: PeerRequestHandler = Arc::new(|_, _| Ok(json!("a")));
        let (_rx, ticks) = waiting_call(&out, 7, Some(a));
        let answer = out.association(None).expect("the only associated call");
        assert_eq!(ticks.try_iter().count(), 0, "not before it is asked");
        assert_eq!(answer("x", json!({})), Ok(json!("a")));
        assert_eq!(
            ticks.try_iter().count(),
            2,
            "as it is asked, and once answered"
        );
    }

    #[test]
    fn a_call_whose_total_limit_is_spent_is_not_sent() {
        let out = Outbound::default();
        let sent = AtomicUsize::new(0);
        let send = |_: Outgoing| -> Result<(), String> {
            sent.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        let wait = Wait {
            timeout: Duration::from_secs(60),
            total: Some(Duration::ZERO),
            ..Default::default()
        };
        let e = out.call("late", json!({}), wait, &send).unwrap_err();
        assert!(matches!(e, CallError::Timeout(..)), "{e:?}");
        assert_eq!(
            sent.load(Ordering::SeqCst),
            0,
            "neither the request nor a cancellation"
        );
        assert!(lock(&out.pending).is_empty());
    }

    #[test]
    fn a_call_given_up_leaves_the_only_associated_call_unguessed_for_a_while() {
        let out = Outbound::default();
        let a: PeerRequestHandler = Arc::new(|_, _| Ok(json!("a")));
        let b: PeerRequestHandler = Arc::new(|_, _| Ok(json!("b")));
        // Call 1 (associated with a) is given up; no answer yet.
        let wait = Wait {
            timeout: Duration::from_millis(1),
            association: Some(a),
            ..Default::default()
        };
        let e = out.call("a", json!({}), wait, &|_| Ok(())).unwrap_err();
        assert!(matches!(e, CallError::Timeout(..)), "{e:?}");
        // Call 100 is the only associated call in flight, but a request with
        // no hint may still come from call 1: it is not guessed.
        let _rx = waiting_call(&out, 100, Some(b));
        assert!(out.association(None).is_none());
        let hinted = out
            .association(Some(&RequestId::Number(100)))
            .expect("a hint still decides");
        assert_eq!(hinted("x", json!({})), Ok(json!("b")));
        // Once the call given up has its late answer, the peer is done
        // with it: the only associated call is taken again.
        assert!(!out.answer(response(1), "test"), "late");
        assert!(out.association(None).is_some());
        // So it is once the grace is over.
        let b2: PeerRequestHandler = Arc::new(|_, _| Ok(json!("b")));
        let wait = Wait {
            timeout: Duration::from_millis(1),
            association: Some(b2),
            ..Default::default()
        };
        assert!(out.call("c", json!({}), wait, &|_| Ok(())).is_err());
        assert!(out.association(None).is_none());
        if let Some(past) = Instant::now().checked_sub(ABANDONED_CALL_GRACE) {
            for a in lock(&out.abandoned).values_mut() {
                *a = Abandon::Held(past);
            }
            assert!(out.association(None).is_some());
        }
    }

    /// A call whose own request's handler cancels it, saying so (a
    /// gateway's stateless round: the question went back to the client,
    /// who answers in a retry that makes the call again), holds no grace,
    /// whichever of its giving up and its question's end comes first: the
    /// retry's call is the only associated one, and what the peer asks
    /// next is taken for it. A call given up while its question is asked,
    /// without that word, still holds the grace.
    #[test]
    fn a_call_its_own_question_cancels_holds_no_grace() {
        for (excused, question_ends_first) in [(true, true), (true, false), (false, true)] {
            let out = Arc::new(Outbound::default());
            let token = crate::protocol::CancelToken::new();
            let (asking_tx, asking) = crossbeam_channel::bounded::<()>(0);
            let (go_tx, go) = crossbeam_channel::bounded::<()>(0);
            let first: PeerRequestHandler = Arc::new(move |_, _| {
                let _ = asking_tx.send(());
                let _ = go.recv();
                if excused {
                    excuse_the_call();
                }
                Err(ErrorObject::internal("asked the client instead"))
            });
            let waiting = {
                let out = out.clone();
                let wait = Wait {
                    timeout: Duration::from_secs(60),
                    cancel: Some(token.receiver()),
                    association: Some(first),
                    ..Default::default()
                };
                std::thread::spawn(move || out.call("a", json!({}), wait, &|_| Ok(())))
            };
            let question = loop {
                if let Some(q) = out.association(None) {
                    break q;
                }
                std::thread::yield_now();
            };
            let asked = std::thread::spawn(move || question("elicitation/create", json!({})));
            asking.recv().unwrap();
            if question_ends_first {
                go_tx.send(()).unwrap();
                assert!(asked.join().unwrap().is_err());
                token.cancel();
                assert_eq!(waiting.join().unwrap(), Err(CallError::Cancelled));
            } else {
                token.cancel();
                assert_eq!(waiting.join().unwrap(), Err(CallError::Cancelled));
                go_tx.send(()).unwrap();
                assert!(asked.join().unwrap().is_err());
            }
            let retry: PeerRequestHandler = Arc::new(|_, _| Ok(json!("retry")));
            let _rx = waiting_call(&out, 100, Some(retry));
            let taken = out.association(None);
            assert_eq!(
                taken.is_some(),
                excused,
                "excused {excused}, question ends first {question_ends_first}"
            );
            if let Some(q) = taken {
                assert_eq!(q("x", json!({})), Ok(json!("retry")));
            }
        }
    }
}
