//! The threads that POST the client's messages.

use super::target::{is_request, Target};
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// How long a thread that POSTs messages waits for the next one before it
/// ends: 10 s.
pub const POST_THREAD_IDLE: Duration = Duration::from_secs(10);

/// Most POSTs of messages that are not requests (the client's answers to
/// the server's requests, its notifications) under way at once: 256, far
/// more than a server that answers them leaves open at once. Past
/// it such a message is dropped and logged: a server that takes these
/// POSTs and never answers them (the answers to its pings, say) cannot
/// make the client start threads and open sockets without end. Requests
/// are not counted: each is a call its caller waits for, within its
/// timeout.
pub const MAX_UNANSWERED_POSTS: usize = 256;

/// The threads that POST messages: one for each message in flight, so a
/// long call never holds up the next message; a thread done with its
/// message takes the next one instead of a new thread starting for it.
pub(super) struct Posters {
    /// `None` once closed: idle threads then end.
    jobs: Option<Sender<Value>>,
    rx: Receiver<Value>,
    /// Idle threads not yet promised a message.
    idle: Arc<AtomicUsize>,
    /// POSTs of messages that are not requests under way
    /// ([`MAX_UNANSWERED_POSTS`]).
    not_requests: Arc<AtomicUsize>,
    /// At most this many of them ([`MAX_UNANSWERED_POSTS`]).
    max_not_requests: usize,
    /// What a thread does with a message.
    run: Arc<dyn Fn(&Value) + Send + Sync>,
    /// How long an idle thread waits for a message ([`POST_THREAD_IDLE`]).
    wait: Duration,
}

impl Posters {
    pub(super) fn new(run: Arc<dyn Fn(&Value) + Send + Sync>) -> Posters {
        let (jobs, rx) = crossbeam_channel::unbounded();
        Posters {
            jobs: Some(jobs),
            rx,
            idle: Arc::default(),
            not_requests: Arc::default(),
            max_not_requests: MAX_UNANSWERED_POSTS,
            run,
            wait: POST_THREAD_IDLE,
        }
    }

    /// The threads of `target`'s writer: each POSTs its message.
    pub(super) fn of(target: &Arc<Target>) -> Posters {
        let target = target.clone();
        Posters::new(Arc::new(move |message: &Value| {
            if let Err(e) = target.post(message) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log::warn!("client: POST failed: {e}");
                }
            }
        }))
    }

    /// Runs `message` on an idle thread, or a new one.
    pub(super) fn post(&self, message: Value) -> io::Result<()> {
        let Some(jobs) = &self.jobs else {
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        let counted = !is_request(&message);
        if counted && self.not_requests.fetch_add(1, Ordering::SeqCst) >= self.max_not_requests {
            self.not_requests.fetch_sub(1, Ordering::SeqCst);
            log::warn!(
                "client: the server has left {} POSTs of answers and notifications unanswered; \
                 one more ({}) is dropped",
                self.max_not_requests,
                message
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or("an answer")
            );
            return Ok(());
        }
        if take_one(&self.idle) {
            // An idle thread waits for it (it was counted before it began
            // to wait, and only leaves uncounted).
            return jobs.send(message).map_err(|_| {
                if counted {
                    self.not_requests.fetch_sub(1, Ordering::SeqCst);
                }
                io::ErrorKind::BrokenPipe.into()
            });
        }
        let (run, rx, idle) = (self.run.clone(), self.rx.clone(), self.idle.clone());
        let not_requests = self.not_requests.clone();
        let wait = self.wait;
        std::thread::Builder::new()
            .name("mcpvisor-client-post".into())
            .spawn(move || {
                // Messages that follow one another closely (a caller's
                // next call) are taken without a wake-up.
                let spin = crate::wait::Spin::default();
                let mut next = Some(message);
                while let Some(message) = next.take() {
                    run(&message);
                    if !is_request(&message) {
                        not_requests.fetch_sub(1, Ordering::SeqCst);
                    }
                    idle.fetch_add(1, Ordering::SeqCst);
                    next = loop {
                        match spin.recv_timeout(&rx, wait) {
                            Ok(m) => break Some(m),
                            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break None,
                            // Leaves, unless a message was promised to the
                            // idle threads meanwhile: it is on its way.
                            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                                if take_one(&idle) {
                                    break None;
                                }
                            }
                        }
                    };
                }
            })
            .inspect_err(|_| {
                // Never run: not under way.
                if counted {
                    self.not_requests.fetch_sub(1, Ordering::SeqCst);
                }
            })?;
        Ok(())
    }

    /// No more messages: idle threads end (busy ones after their message).
    pub(super) fn close(&mut self) {
        self.jobs = None;
    }
}

/// Takes one from `n` unless it is 0.
fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| v.checked_sub(1))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::flow::tests::until;
    use serde_json::json;
    use std::collections::HashSet;
    use std::thread::ThreadId;

    /// Posters whose threads report (their id, the message) when done; a
    /// message `"wait"` is reported (with `None`) when it starts, then
    /// waits for `go`.
    #[allow(clippy::type_complexity)]
    fn recording() -> (Posters, Receiver<(Option<ThreadId>, Value)>, Sender<()>) {
        let (done_tx, done) = crossbeam_channel::unbounded();
        let (go, go_rx) = crossbeam_channel::unbounded::<()>();
        let mut posters = Posters::new(Arc::new(move |m: &Value| {
            if m == "wait" {
                let _ = done_tx.send((None, m.clone()));
                let _ = go_rx.recv();
            }
            let _ = done_tx.send((Some(std::thread::current().id()), m.clone()));
        }));
        // The tests' messages are plain values, which count as answers:
        // no bound on them unless a test sets one.
        posters.max_not_requests = usize::MAX;
        (posters, done, go)
    }

    #[test]
    fn answers_and_notifications_the_server_leaves_unanswered_are_bounded() {
        let (mut posters, done, go) = recording();
        posters.max_not_requests = 2;
        for _ in 0..2 {
            posters.post("wait".into()).unwrap();
            assert_eq!(done.recv().unwrap(), (None, "wait".into()));
        }
        // Two unanswered: the next is dropped, a request is not.
        posters
            .post(json!({"jsonrpc": "2.0", "method": "notifications/x"}))
            .unwrap();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"});
        posters.post(call.clone()).unwrap();
        assert_eq!(done.recv().unwrap().1, call);
        assert!(
            done.recv_timeout(Duration::from_millis(100)).is_err(),
            "dropped"
        );
        // One answered: one more goes.
        go.send(()).unwrap();
        assert_eq!(done.recv().unwrap().1, "wait");
        let answer = json!({"jsonrpc": "2.0", "id": 7, "result": {}});
        posters.post(answer.clone()).unwrap();
        assert_eq!(done.recv().unwrap().1, answer);
        go.send(()).unwrap();
    }

    #[test]
    fn a_thread_done_with_its_message_takes_the_next() {
        let (posters, done, _go) = recording();
        let mut threads = HashSet::new();
        for i in 0..20 {
            posters.post(Value::from(i)).unwrap();
            let (thread, m) = done.recv().unwrap();
            assert_eq!(m, i);
            threads.insert(thread);
            // Until it counts as idle, the next message would start another.
            until("never idle", || posters.idle.load(Ordering::SeqCst) > 0);
        }
        assert_eq!(threads.len(), 1, "one thread served them one after another");
    }

    #[test]
    fn a_message_never_waits_behind_a_busy_thread() {
        let (posters, done, go) = recording();
        posters.post("wait".into()).unwrap();
        assert_eq!(done.recv().unwrap(), (None, "wait".into()));
        // The first thread is busy: the next messages go to others.
        for i in 0..3 {
            posters.post(Value::from(i)).unwrap();
            let (_, m) = done
                .recv_timeout(Duration::from_secs(20))
                .expect("a message waited behind the busy thread");
            assert_eq!(m, i);
        }
        go.send(()).unwrap();
        assert_eq!(done.recv().unwrap().1, "wait");
    }

    /// Waits until no thread holds what the posters run: every one ended.
    fn all_ended(posters: &Posters) {
        until("a thread lives on", || Arc::strong_count(&posters.run) == 1);
    }

    #[test]
    fn a_thread_idle_for_its_wait_ends_and_a_later_message_starts_one() {
        let (mut posters, done, _go) = recording();
        posters.wait = Duration::from_millis(1);
        for i in 0..3 {
            posters.post(Value::from(i)).unwrap();
            assert_eq!(done.recv().unwrap().1, i);
            all_ended(&posters);
            assert_eq!(posters.idle.load(Ordering::SeqCst), 0, "none counted idle");
        }
    }

    #[test]
    fn a_message_promised_to_a_thread_that_stops_waiting_still_runs() {
        let (mut posters, done, _go) = recording();
        // Every idle thread gives up at once, racing every promise.
        posters.wait = Duration::ZERO;
        for i in 0..200 {
            posters.post(Value::from(i)).unwrap();
        }
        let mut got: Vec<i64> = (0..200)
            .map(|_| {
                done.recv_timeout(Duration::from_secs(20))
                    .expect("a message was lost")
                    .1
            })
            .map(|v| v.as_i64().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..200).collect::<Vec<i64>>());
    }

    #[test]
    fn closing_ends_the_idle_threads() {
        let (mut posters, done, _go) = recording();
        // Only the close can end them within the test.
        posters.wait = Duration::from_secs(3600);
        for i in 0..3 {
            posters.post(Value::from(i)).unwrap();
        }
        for _ in 0..3 {
            done.recv().unwrap();
        }
        posters.close();
        assert!(posters.post(Value::from(4)).is_err(), "closed");
        all_ended(&posters);
    }
}
