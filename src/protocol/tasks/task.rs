//! One task: its status, what it asks the client, and how it ended.

use super::super::cancel::CancelToken;
use super::super::context::PeerError;
use super::super::input::{check_answer, InputRequest};
use crate::jsonrpc::ErrorObject;
use crate::model::iso8601;
use crate::sync::lock;
use crossbeam_channel::{Receiver, Sender};
use serde_json::{json, Map, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// Where a task stands (SEP-2663).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for answers the client gives with `tasks/update`.
    InputRequired,
    /// Ended with a result (a tool error is a result with `isError`).
    Completed,
    /// Ended with a JSON-RPC error.
    Failed,
    /// Cancelled with `tasks/cancel` (or expired while running).
    Cancelled,
}

impl TaskStatus {
    /// Every status, in the order status reports list them.
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];
    /// The wire name (`working`, `input_required`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }
}

/// Whose a task is: the credential of the request that made it, else its
/// session (stateless requests without a credential share one owner).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A bearer token's digest.
    Credential([u8; 32]),
    /// A session's id (empty for stateless requests: one owner).
    Session(String),
}

impl Owner {
    pub(crate) fn of(credential: Option<[u8; 32]>, session: &str) -> Owner {
        match credential {
            Some(c) => Owner::Credential(c),
            None => Owner::Session(session.to_owned()),
        }
    }
}

pub(crate) struct Task {
    pub(crate) id: String,
    /// The credential (a bearer token's digest) of the request that made
    /// it, if any: only a request with the same one may follow it.
    pub(crate) credential: Option<[u8; 32]>,
    /// Whose it is, for [`TaskOptions::max_per_owner`](super::TaskOptions::max_per_owner).
    pub(crate) owner: Owner,
    created: SystemTime,
    created_at: Instant,
    ttl: Duration,
    poll: Duration,
    pub(crate) cancel: CancelToken,
    state: Mutex<State>,
}

struct State {
    status: TaskStatus,
    updated: SystemTime,
    message: Option<String>,
    result: Option<Value>,
    error: Option<ErrorObject>,
    /// Open questions by key: `{method, params}`.
    pending: Map<String, Value>,
    /// Answers not yet taken by the wait that asked them, by key.
    answers: Map<String, Value>,
    /// Keys minted so far: a key is never used twice in a task.
    minted: u64,
    /// Each waiting `ask` (several may wait at once, as a gateway relays
    /// concurrent questions): its keys, and what wakes it once all are
    /// answered. Dropped when the task ends, which wakes every one.
    waiters: Vec<(Vec<String>, Sender<()>)>,
}

impl Task {
    pub(crate) fn new(
        id: String,
        credential: Option<[u8; 32]>,
        owner: Owner,
        ttl: Duration,
        poll: Duration,
    ) -> Task {
        let now = SystemTime::now();
        Task {
            id,
            credential,
            owner,
            created: now,
            created_at: Instant::now(),
            ttl,
            poll,
            cancel: CancelToken::new(),
            state: Mutex::new(State {
                status: TaskStatus::Working,
                updated: now,
                message: None,
                result: None,
                error: None,
                pending: Map::new(),
                answers: Map::new(),
                minted: 0,
                waiters: Vec::new(),
            }),
        }
    }

    pub(crate) fn status(&self) -> TaskStatus {
        lock(&self.state).status
    }

    /// Whether its time to live has passed at `now`.
    pub(crate) fn expired(&self, now: Instant) -> bool {
        self.expires_in(now).is_zero()
    }

    /// How long until the task expires (zero once it has).
    pub(crate) fn expires_in(&self, now: Instant) -> Duration {
        self.ttl
            .saturating_sub(now.saturating_duration_since(self.created_at))
    }

    /// The `Task` fields every shape carries.
    fn base(&self, st: &State) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("taskId".into(), self.id.as_str().into());
        m.insert("status".into(), st.status.as_str().into());
        if let Some(msg) = &st.message {
            m.insert("statusMessage".into(), msg.as_str().into());
        }
        m.insert("createdAt".into(), iso8601(self.created).into());
        m.insert("lastUpdatedAt".into(), iso8601(st.updated).into());
        m.insert("ttlMs".into(), millis(self.ttl).into());
        m.insert("pollIntervalMs".into(), millis(self.poll).max(1).into());
        m
    }

    /// The `CreateTaskResult` answering the call that made it.
    pub(crate) fn created_result(&self) -> Value {
        let mut m = self.base(&lock(&self.state));
        m.insert("resultType".into(), "task".into());
        Value::Object(m)
    }

    /// The `DetailedTask` (`tasks/get`, `notifications/tasks`): the
    /// open questions, the result or the error inlined by status.
    pub(crate) fn detailed(&self) -> Map<String, Value> {
        let st = lock(&self.state);
        let mut m = self.base(&st);
        match st.status {
            TaskStatus::InputRequired => {
                m.insert("inputRequests".into(), Value::Object(st.pending.clone()));
            }
            TaskStatus::Completed => {
                m.insert("result".into(), st.result.clone().unwrap_or(json!({})));
            }
            TaskStatus::Failed => {
                let e = st
                    .error
                    .clone()
                    .unwrap_or_else(|| ErrorObject::internal("failed"));
                m.insert("error".into(), e.to_value());
            }
            TaskStatus::Working | TaskStatus::Cancelled => {}
        }
        m
    }

    /// Records how the handler ended; a cancelled task stays cancelled.
    pub(crate) fn settle(&self, outcome: Result<Value, ErrorObject>) {
        let mut st = lock(&self.state);
        if st.status.is_terminal() {
            return;
        }
        match outcome {
            Ok(v) => {
                st.status = TaskStatus::Completed;
                st.result = Some(v);
            }
            Err(e) => {
                st.status = TaskStatus::Failed;
                st.message = Some(e.message.clone());
                st.error = Some(e);
            }
        }
        st.pending.clear();
        // Every waiting question ends with the task.
        st.waiters.clear();
        st.updated = SystemTime::now();
    }

    /// `tasks/cancel`: ends the task as cancelled (unless it already
    /// ended) and tells its handler. Idempotent.
    pub(crate) fn cancel(&self, why: &str) {
        {
            let mut st = lock(&self.state);
            if st.status.is_terminal() {
                return;
            }
            st.status = TaskStatus::Cancelled;
            st.message = Some(why.to_owned());
            st.pending.clear();
            st.waiters.clear();
            st.updated = SystemTime::now();
        }
        self.cancel.cancel();
    }

    /// Asks the client `questions` through `tasks/get` and blocks until
    /// `tasks/update` has answered every one, the task ends or is
    /// cancelled, `also` (the caller's own cancellation) fires, or the
    /// longest of the questions' timeouts passes.
    pub(crate) fn ask(
        &self,
        questions: &[InputRequest],
        also: Option<&Receiver<()>>,
    ) -> Result<Vec<Value>, PeerError> {
        if questions.is_empty() {
            return Ok(Vec::new());
        }
        let (tx, rx): (Sender<()>, Receiver<()>) = crossbeam_channel::bounded(1);
        let keys: Vec<String> = {
            let mut st = lock(&self.state);
            if st.status.is_terminal() {
                return Err(PeerError::Cancelled);
            }
            let keys: Vec<String> = questions
                .iter()
                .map(|q| {
                    st.minted += 1;
                    let key = format!("{}-{}", q.short(), st.minted);
                    st.pending
                        .insert(key.clone(), json!({"method": q.method, "params": q.params}));
                    key
                })
                .collect();
            st.status = TaskStatus::InputRequired;
            st.updated = SystemTime::now();
            st.waiters.push((keys.clone(), tx));
            keys
        };
        let timeout = questions
            .iter()
            .map(|q| q.timeout)
            .max()
            .unwrap_or_default();
        let cancelled = self.cancel.receiver();
        let never = crossbeam_channel::never();
        let also = also.unwrap_or(&never);
        // `Some(e)`: the wait ended without its answers.
        let failed = crossbeam_channel::select! {
            // A dropped sender: the task ended.
            recv(rx) -> r => r.err().map(|_| PeerError::Cancelled),
            recv(cancelled) -> _ => Some(PeerError::Cancelled),
            recv(also) -> _ => Some(PeerError::Cancelled),
            default(timeout) => Some(PeerError::Timeout(timeout)),
        };
        let mut st = lock(&self.state);
        if let Some(e) = failed {
            // Its questions are withdrawn; the task works on if no other
            // question is open.
            for k in &keys {
                st.pending.remove(k);
                st.answers.remove(k);
            }
            st.waiters.retain(|(k, _)| k != &keys);
            if st.pending.is_empty() && st.status == TaskStatus::InputRequired {
                st.status = TaskStatus::Working;
                st.updated = SystemTime::now();
            }
            return Err(e);
        }
        // Every answer of the round is taken, a bad one's siblings too
        // (none is kept until the task expires).
        let answers: Vec<Value> = keys
            .iter()
            .map(|key| st.answers.remove(key).unwrap_or(Value::Null))
            .collect();
        for ((q, key), answer) in questions.iter().zip(&keys).zip(&answers) {
            if let Err(why) = check_answer(q.method, answer) {
                return Err(PeerError::Rpc(ErrorObject::invalid_params(format!(
                    "inputResponses[{key:?}] is not a {} result: {why}",
                    q.method
                ))));
            }
        }
        Ok(answers)
    }

    /// `tasks/update`: answers open questions; keys not open are ignored.
    /// Once none is open the task works again.
    pub(crate) fn update(&self, responses: &Map<String, Value>) {
        let mut st = lock(&self.state);
        let mut took = false;
        for (k, v) in responses {
            if st.pending.remove(k).is_some() {
                st.answers.insert(k.clone(), v.clone());
                took = true;
            }
        }
        if !took {
            return;
        }
        // Wake each wait whose questions are all answered.
        let State {
            waiters, pending, ..
        } = &mut *st;
        waiters.retain(|(keys, wake)| {
            let done = keys.iter().all(|k| !pending.contains_key(k));
            if done {
                let _ = wake.try_send(());
            }
            !done
        });
        if st.pending.is_empty() && st.status == TaskStatus::InputRequired {
            st.status = TaskStatus::Working;
        }
        st.updated = SystemTime::now();
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn task() -> Arc<Task> {
        Arc::new(Task::new(
            "t".into(),
            None,
            Owner::of(None, "s"),
            Duration::from_secs(60),
            Duration::from_millis(250),
        ))
    }

    /// `questions` asked on a thread of their own, once they are open.
    fn asking(
        t: &Arc<Task>,
        questions: Vec<InputRequest>,
    ) -> std::thread::JoinHandle<Result<Vec<Value>, PeerError>> {
        let n = questions.len();
        let asker = {
            let t = t.clone();
            std::thread::spawn(move || t.ask(&questions, None))
        };
        while lock(&t.state).pending.len() < n {
            std::thread::yield_now();
        }
        asker
    }

    #[test]
    fn created_result_is_flat_with_integer_milliseconds() {
        let t = task();
        let v = t.created_result();
        assert_eq!(v["resultType"], "task");
        assert_eq!(v["taskId"], "t");
        assert_eq!(v["status"], "working");
        assert_eq!(v["ttlMs"], 60000);
        assert_eq!(v["pollIntervalMs"], 250);
        for absent in [
            "task",
            "result",
            "error",
            "inputRequests",
            "ttl",
            "pollInterval",
        ] {
            assert!(v.get(absent).is_none(), "{absent}");
        }
    }

    #[test]
    fn results_and_errors_are_inlined_by_status() {
        let t = task();
        t.settle(Ok(json!({"content": [], "isError": true})));
        let d = t.detailed();
        assert_eq!(d["status"], "completed");
        assert_eq!(d["result"]["isError"], true);
        let f = task();
        f.settle(Err(ErrorObject::internal("boom")));
        let d = f.detailed();
        assert_eq!(d["status"], "failed");
        assert_eq!(d["error"]["code"], -32603);
        assert!(d.get("result").is_none());
    }

    #[test]
    fn cancel_wins_over_a_late_result_and_is_idempotent() {
        let t = task();
        t.cancel("asked");
        t.cancel("again");
        t.settle(Ok(json!({"content": []})));
        assert_eq!(t.status(), TaskStatus::Cancelled);
        assert!(t.cancel.is_cancelled());
    }

    #[test]
    fn partial_updates_keep_the_task_waiting_for_the_rest() {
        let t = task();
        let asker = asking(
            &t,
            vec![
                InputRequest::elicit(json!({"message": "a"})),
                InputRequest::elicit(json!({"message": "b"})),
            ],
        );
        let asked = t.detailed();
        let keys: Vec<String> = asked["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let accept = json!({"action": "accept", "content": {}});
        t.update(&Map::from_iter([(keys[0].clone(), accept.clone())]));
        let d = t.detailed();
        assert_eq!(d["status"], "input_required");
        let open: Vec<_> = d["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(open, vec![keys[1].clone()]);
        t.update(&Map::from_iter([
            ("never-asked".to_owned(), json!(1)),
            (keys[1].clone(), accept),
        ]));
        let answers = asker.join().unwrap().unwrap();
        assert_eq!(answers.len(), 2);
        assert_eq!(t.status(), TaskStatus::Working);
    }

    #[test]
    fn a_task_that_ends_wakes_its_waiting_questions_and_a_question_times_out() {
        let t = task();
        let asker = asking(&t, vec![InputRequest::list_roots()]);
        // The handler failed elsewhere (a relayed call timed out).
        t.settle(Err(ErrorObject::internal("upstream gone")));
        assert_eq!(asker.join().unwrap(), Err(PeerError::Cancelled));
        let t = task();
        let q = InputRequest::list_roots().timeout(Duration::from_millis(20));
        assert!(matches!(t.ask(&[q], None), Err(PeerError::Timeout(_))));
        let d = t.detailed();
        assert_eq!(d["status"], "working", "the question is withdrawn: {d:?}");
        assert_eq!(t.ask(&[], None), Ok(vec![]));
    }

    #[test]
    fn cancel_wakes_a_handler_waiting_for_input() {
        let t = task();
        let asker = asking(&t, vec![InputRequest::list_roots()]);
        t.cancel("stop");
        assert_eq!(asker.join().unwrap(), Err(PeerError::Cancelled));
    }
}
