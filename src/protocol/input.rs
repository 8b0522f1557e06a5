//! Input a handler asks of the client — sampling, elicitation, roots —
//! for both generations, with one handler API.
//!
//! A session client (2024-11-05 … 2025-11-25) is sent the request and the
//! handler blocks for the answer. A stateless client (2026-07-28, SEP-2322)
//! cannot be sent requests: the handler's question ends the round instead.
//! The engine answers with an **input-required result** listing every
//! question the handler could not have answered, and a signed
//! `requestState` holding the answers it already used. The client retries
//! the same request with `inputResponses`; the engine runs the handler
//! again from the start, and each question it asks again is answered from
//! the state or the responses, until it completes.
//!
//! So a handler that asks the client must be safe to run again up to its
//! questions (ask first, act after), and ask the same questions in the same
//! order. Questions are matched by key: a handler's own
//! ([`InputRequest::key`]), or the method's short name and the question's
//! number (`elicitation-1`, `sampling-1`, `roots-1`).
//!
//! The state is an HMAC-SHA256 (per-process key from `ring`) over the
//! answers, the method, a digest of the request's target and arguments, and
//! an expiry: a state changed, moved to another request, or older than
//! [`REQUEST_STATE_LIFETIME`] is refused with -32602.

use crate::jsonrpc::{ErrorObject, Request};
use crate::model::{base64, base64_decode, Answer};
use crate::sync::lock;
use ring::hmac;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a `requestState` is accepted after it was issued.
pub const REQUEST_STATE_LIFETIME: Duration = Duration::from_secs(3600);

/// The methods whose handlers may end a round with an input-required
/// result (the spec allows no others).
pub(crate) const ROUND_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

/// A question for the client: sampling, elicitation or roots.
#[derive(Clone, Debug)]
pub struct InputRequest {
    pub(crate) key: Option<String>,
    pub(crate) method: &'static str,
    pub(crate) params: Value,
    pub(crate) timeout: Duration,
}

impl InputRequest {
    /// `elicitation/create` with `params` (`message`, `requestedSchema`).
    pub fn elicit(params: Value) -> Self {
        Self::new("elicitation/create", params)
    }
    /// `sampling/createMessage` with `params` (`messages`, `maxTokens`, ...).
    pub fn sample(params: Value) -> Self {
        Self::new("sampling/createMessage", params)
    }
    /// `roots/list`.
    pub fn list_roots() -> Self {
        Self::new("roots/list", json!({}))
    }
    fn new(method: &'static str, params: Value) -> Self {
        InputRequest {
            key: None,
            method,
            params,
            timeout: super::DEFAULT_PEER_REQUEST_TIMEOUT,
        }
    }
    /// The key a stateless client answers it under (`inputResponses`);
    /// default: the method's short name and the question's number.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    /// How long a session client has to answer (default
    /// [`DEFAULT_PEER_REQUEST_TIMEOUT`](super::DEFAULT_PEER_REQUEST_TIMEOUT)).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// The method asked.
    pub fn method(&self) -> &str {
        self.method
    }
    pub(crate) fn short(&self) -> &'static str {
        match self.method {
            "sampling/createMessage" => "sampling",
            "elicitation/create" => "elicitation",
            _ => "roots",
        }
    }
}

/// One run of a stateless request's handler: the answers it may use and
/// the questions it asked that have none yet.
pub(crate) struct Round {
    key: StateKey,
    method: String,
    binding: String,
    /// Whether this method may end in an input-required result.
    allowed: bool,
    answers: Map<String, Value>,
    state: Mutex<RoundState>,
}

#[derive(Default)]
struct RoundState {
    asked: HashMap<&'static str, usize>,
    used: Map<String, Value>,
    pending: Map<String, Value>,
    invalid: Option<ErrorObject>,
    missing_capability: Option<&'static str>,
}

/// What a question got.
pub(crate) enum Asked {
    Answer(Value),
    /// No answer yet: the round ends with it.
    Pending,
    /// The answer given is malformed: the request fails with this.
    Invalid(ErrorObject),
}

impl Round {
    /// The round of a stateless request: its answers from `requestState`
    /// (verified) and `inputResponses`. -32602 for a malformed or forged one.
    pub(crate) fn of(
        req: &Request,
        key: &StateKey,
        credential: Option<&[u8; 32]>,
    ) -> Result<Round, ErrorObject> {
        let params = req.params();
        let get = |k: &str| params.and_then(|p| p.get(k));
        let binding = binding(req, credential);
        let mut answers = match get("requestState") {
            None => Map::new(),
            Some(Value::String(s)) => open_state(key, s, req.method(), &binding)?,
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "params.requestState must be a string",
                ))
            }
        };
        match get("inputResponses") {
            None => {}
            Some(Value::Object(responses)) => {
                for (k, v) in responses {
                    answers.insert(k.clone(), v.clone());
                }
            }
            Some(_) => {
                return Err(ErrorObject::invalid_params(
                    "params.inputResponses must be an object of answers by key",
                ))
            }
        }
        Ok(Round {
            key: key.clone(),
            method: req.method().to_owned(),
            binding,
            allowed: ROUND_METHODS.contains(&req.method()),
            answers,
            state: Mutex::new(RoundState::default()),
        })
    }

    /// Asks `q`: its answer if the client gave one (checked against the
    /// method's result shape), else the round ends with it.
    pub(crate) fn ask(&self, q: &InputRequest) -> Asked {
        let mut st = lock(&self.state);
        let n = st.asked.entry(q.short()).or_insert(0);
        *n += 1;
        let key = q
            .key
            .clone()
            .unwrap_or_else(|| format!("{}-{n}", q.short()));
        // A limit of the method, not the client's fault: the handler learns
        // it cannot ask, and what it makes of that is the outcome (one that
        // copes without the answer succeeds).
        if !self.allowed {
            return Asked::Invalid(ErrorObject::internal(format!(
                "{} cannot ask the client for input in protocol 2026-07-28 (only {} can)",
                self.method,
                ROUND_METHODS.join(", ")
            )));
        }
        match self.answers.get(&key) {
            Some(answer) => match check_answer(q.method, answer) {
                Ok(()) => {
                    st.used.insert(key, answer.clone());
                    Asked::Answer(answer.clone())
                }
                Err(why) => {
                    let e = ErrorObject::invalid_params(format!(
                        "inputResponses[{key:?}] is not a {} result: {why}",
                        q.method
                    ));
                    st.invalid.get_or_insert(e.clone());
                    Asked::Invalid(e)
                }
            },
            None => {
                st.pending
                    .insert(key, json!({"method": q.method, "params": q.params}));
                Asked::Pending
            }
        }
    }

    /// Whether a question of this round is still unanswered.
    pub(crate) fn has_pending(&self) -> bool {
        !lock(&self.state).pending.is_empty()
    }

    /// Notes that the handler needed `capability` and the request lacked it.
    pub(crate) fn missing(&self, capability: &'static str) {
        lock(&self.state)
            .missing_capability
            .get_or_insert(capability);
    }

    /// The request's outcome after its handler returned `outcome`: a
    /// malformed answer fails it; open questions make it input-required
    /// (whatever the handler returned once its question went unanswered);
    /// a handler that failed after needing an undeclared capability fails
    /// with -32021.
    pub(crate) fn settle(
        &self,
        outcome: Result<Answer, ErrorObject>,
    ) -> Result<Answer, ErrorObject> {
        let st = lock(&self.state);
        if let Some(e) = &st.invalid {
            return Err(e.clone());
        }
        if !st.pending.is_empty() {
            return Ok(Answer::Json(json!({
                "resultType": "input_required",
                "inputRequests": st.pending,
                "requestState": seal_state(&self.key, &self.method, &self.binding, &st.used),
            })));
        }
        let failed = match &outcome {
            Err(_) => true,
            Ok(a) => a.is_tool_error(),
        };
        match st.missing_capability {
            Some(cap) if failed => Err(ErrorObject::missing_client_capability(cap)),
            _ => outcome,
        }
    }
}

/// Whether `answer` has the shape of a result of `method`.
pub(crate) fn check_answer(method: &str, answer: &Value) -> Result<(), &'static str> {
    let o = answer.as_object().ok_or("not an object")?;
    match method {
        "elicitation/create" => {
            match o.get("action").and_then(Value::as_str) {
                Some("accept" | "decline" | "cancel") => {}
                _ => return Err("action must be accept, decline or cancel"),
            }
            match o.get("content") {
                None | Some(Value::Object(_)) => Ok(()),
                Some(_) => Err("content must be an object"),
            }
        }
        "sampling/createMessage" => {
            if !o.get("role").is_some_and(Value::is_string) {
                return Err("role (a string) is required");
            }
            match o.get("content") {
                Some(Value::Object(_) | Value::Array(_)) => Ok(()),
                _ => Err("content (an object or array) is required"),
            }
        }
        _ => match o.get("roots") {
            Some(Value::Array(_)) => Ok(()),
            _ => Err("roots (an array) is required"),
        },
    }
}

/// What a state is bound to, as a SHA-256 digest: the method's target
/// (the tool or prompt by `name`, the resource by `uri`), its arguments,
/// and the bearer credential the request came with, if any (a state is
/// good only for the principal it was issued to).
fn binding(req: &Request, credential: Option<&[u8; 32]>) -> String {
    let p = req.params();
    let field = if req.method() == "resources/read" {
        "uri"
    } else {
        "name"
    };
    let target = p.and_then(|p| p.get(field)).cloned().unwrap_or(Value::Null);
    let args = p
        .and_then(|p| p.get("arguments"))
        .cloned()
        .unwrap_or(Value::Null);
    let principal = credential.map_or_else(String::new, |c| base64(c));
    let text = format!("{}\n{target}\n{args}\n{principal}", req.method());
    base64(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref())
}

/// The secret `requestState` is signed with. Instances behind one load
/// balancer share one ([`EngineOptions::request_state_key`]); without it
/// each process draws its own, and a retry that reaches another instance
/// (or comes after a restart) is refused.
///
/// [`EngineOptions::request_state_key`]: super::EngineOptions::request_state_key
#[derive(Clone)]
pub struct StateKey(hmac::Key);

impl StateKey {
    /// A key from 32 secret bytes.
    pub fn new(secret: &[u8; 32]) -> StateKey {
        StateKey(hmac::Key::new(hmac::HMAC_SHA256, secret))
    }
    /// The key of this process alone (from the system's random source).
    pub fn random() -> StateKey {
        static KEY: OnceLock<hmac::Key> = OnceLock::new();
        StateKey(
            KEY.get_or_init(|| {
                let rng = ring::rand::SystemRandom::new();
                hmac::Key::generate(hmac::HMAC_SHA256, &rng)
                    .expect("the system random source is available")
            })
            .clone(),
        )
    }
}

impl std::fmt::Debug for StateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateKey(..)")
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `base64(payload) "." base64(HMAC(payload))`.
fn seal_state(key: &StateKey, method: &str, binding: &str, answers: &Map<String, Value>) -> String {
    let payload = json!({
        "m": method,
        "b": binding,
        "a": answers,
        "x": now() + REQUEST_STATE_LIFETIME.as_secs(),
    })
    .to_string();
    let tag = hmac::sign(&key.0, payload.as_bytes());
    format!("{}.{}", base64(payload.as_bytes()), base64(tag.as_ref()))
}

/// The answers a state holds, if it is ours, intact, for this request and
/// not expired.
fn open_state(
    key: &StateKey,
    state: &str,
    method: &str,
    binding: &str,
) -> Result<Map<String, Value>, ErrorObject> {
    let refused = |why: &str| ErrorObject::invalid_params(format!("invalid requestState: {why}"));
    let (payload, tag) = state.split_once('.').ok_or_else(|| refused("malformed"))?;
    let payload = base64_decode(payload).ok_or_else(|| refused("malformed"))?;
    let tag = base64_decode(tag).ok_or_else(|| refused("malformed"))?;
    hmac::verify(&key.0, &payload, &tag).map_err(|_| {
        refused("it was altered, or issued by another server or an earlier run of this one")
    })?;
    let v: Value = serde_json::from_slice(&payload).map_err(|_| refused("malformed"))?;
    if v["m"] != method || v["b"] != binding {
        return Err(refused("it belongs to another request"));
    }
    if v["x"].as_u64().is_none_or(|x| x < now()) {
        return Err(refused("it expired"));
    }
    match v.get("a") {
        Some(Value::Object(a)) => Ok(a.clone()),
        _ => Err(refused("malformed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::{RequestId, INVALID_PARAMS};

    /// `Round::settle` of a JSON outcome, as JSON.
    fn settle(r: &Round, outcome: Result<Value, ErrorObject>) -> Result<Value, ErrorObject> {
        r.settle(outcome.map(Answer::Json)).map(Answer::into_value)
    }

    fn call(extra: Value) -> Request {
        let mut p = json!({"name": "t", "arguments": {"x": 1}});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        Request::new(RequestId::Number(1), "tools/call", Some(p))
    }

    fn elicit() -> InputRequest {
        InputRequest::elicit(
            json!({"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}),
        )
    }

    #[test]
    fn a_question_without_answer_ends_the_round_with_a_signed_state() {
        let r = Round::of(&call(json!({})), &StateKey::random(), None).unwrap();
        assert!(matches!(r.ask(&elicit().key("name")), Asked::Pending));
        let out = settle(&r, Err(ErrorObject::internal("handler gave up"))).unwrap();
        assert_eq!(out["resultType"], "input_required");
        assert_eq!(out["inputRequests"]["name"]["method"], "elicitation/create");
        let state = out["requestState"].as_str().unwrap().to_owned();

        // The retry: answered from inputResponses, the state verified.
        let answer = json!({"action": "accept", "content": {"n": "Alice"}});
        let retry = call(json!({"requestState": state, "inputResponses": {"name": answer}}));
        let r2 = Round::of(&retry, &StateKey::random(), None).unwrap();
        assert!(matches!(r2.ask(&elicit().key("name")), Asked::Answer(a) if a == answer));
        // A second question: its answer is kept in the next state.
        assert!(matches!(r2.ask(&elicit()), Asked::Pending));
        let out2 = settle(&r2, Ok(json!({}))).unwrap();
        let state2 = out2["requestState"].as_str().unwrap();
        assert_ne!(state2, state);
        let r3 = Round::of(&call(json!({"requestState": state2, "inputResponses": {"elicitation-2": {"action": "decline"}}})), &StateKey::random(), None).unwrap();
        assert!(matches!(r3.ask(&elicit().key("name")), Asked::Answer(a) if a == answer));
        assert!(matches!(r3.ask(&elicit()), Asked::Answer(_)));
        assert_eq!(
            settle(&r3, Ok(json!({"content": []}))).unwrap(),
            json!({"content": []})
        );
    }

    #[test]
    fn altered_moved_or_malformed_states_are_refused() {
        let r = Round::of(&call(json!({})), &StateKey::random(), None).unwrap();
        r.ask(&elicit());
        let state = settle(&r, Ok(json!({}))).unwrap()["requestState"]
            .as_str()
            .unwrap()
            .to_owned();
        for bad in [
            format!("{state}-TAMPERED"),
            "x".into(),
            format!("A{state}"),
            String::new(),
        ] {
            let e = Round::of(
                &call(json!({"requestState": bad})),
                &StateKey::random(),
                None,
            )
            .err()
            .unwrap();
            assert_eq!(e.code, INVALID_PARAMS);
        }
        let other = Request::new(
            RequestId::Number(1),
            "tools/call",
            Some(json!({"name": "u", "requestState": state})),
        );
        assert!(
            Round::of(&other, &StateKey::random(), None).is_err(),
            "bound to its tool and arguments"
        );
        assert!(
            Round::of(
                &call(json!({"requestState": state})),
                &StateKey::random(),
                Some(&[1; 32])
            )
            .is_err(),
            "bound to the principal it was issued to (here: none)"
        );
        // A resource's state is bound to its URI, whatever name it carries.
        let read = |uri: &str, state: Option<&str>| {
            let mut p = json!({"uri": uri, "name": "same"});
            if let Some(s) = state {
                p["requestState"] = json!(s);
            }
            Request::new(RequestId::Number(1), "resources/read", Some(p))
        };
        let r = Round::of(&read("r://a", None), &StateKey::random(), None).unwrap();
        r.ask(&elicit());
        let state = settle(&r, Ok(json!({}))).unwrap()["requestState"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(Round::of(&read("r://a", Some(&state)), &StateKey::random(), None).is_ok());
        assert!(Round::of(&read("r://b", Some(&state)), &StateKey::random(), None).is_err());
        assert!(Round::of(
            &call(json!({"inputResponses": null})),
            &StateKey::random(),
            None
        )
        .is_err());
    }

    #[test]
    fn malformed_answers_fail_the_request_and_capabilities_map_to_32021() {
        let r = Round::of(
            &call(json!({"inputResponses": {"elicitation-1": 12345}})),
            &StateKey::random(),
            None,
        )
        .unwrap();
        assert!(matches!(r.ask(&elicit()), Asked::Invalid(_)));
        assert_eq!(settle(&r, Ok(json!({}))).unwrap_err().code, INVALID_PARAMS);

        let r = Round::of(&call(json!({})), &StateKey::random(), None).unwrap();
        r.missing("sampling");
        let e = settle(&r, Ok(json!({"content": [], "isError": true}))).unwrap_err();
        assert_eq!(e.code, crate::jsonrpc::MISSING_CLIENT_CAPABILITY);
        let typed = Answer::Tool(crate::model::ToolResult::error("no sampling"));
        assert_eq!(
            r.settle(Ok(typed)).unwrap_err().code,
            crate::jsonrpc::MISSING_CLIENT_CAPABILITY,
            "a typed tool error too"
        );
        assert_eq!(
            e.data.unwrap(),
            json!({"requiredCapabilities": {"sampling": {}}})
        );
        let r = Round::of(&call(json!({})), &StateKey::random(), None).unwrap();
        r.missing("sampling");
        assert!(
            settle(&r, Ok(json!({"content": []}))).is_ok(),
            "a handler that coped succeeds"
        );
    }

    #[test]
    fn a_method_that_cannot_ask_leaves_the_outcome_to_its_handler() {
        let complete = Request::new(
            RequestId::Number(1),
            "completion/complete",
            Some(json!({"ref": {"type": "ref/prompt", "name": "p"}})),
        );
        let r = Round::of(&complete, &StateKey::random(), None).unwrap();
        let Asked::Invalid(e) = r.ask(&elicit()) else {
            panic!("a completion cannot ask");
        };
        assert_eq!(e.code, crate::jsonrpc::INTERNAL_ERROR);
        // A handler that copes succeeds; one that fails, fails with its error.
        let coped = settle(&r, Ok(json!({"completion": {"values": []}})));
        assert_eq!(coped.unwrap()["completion"]["values"], json!([]));
        assert_eq!(settle(&r, Err(e.clone())).unwrap_err(), e);
    }

    #[test]
    fn instances_sharing_a_key_accept_each_others_states() {
        let (a, b, other) = (
            StateKey::new(&[7; 32]),
            StateKey::new(&[7; 32]),
            StateKey::new(&[8; 32]),
        );
        let r = Round::of(&call(json!({})), &a, None).unwrap();
        r.ask(&elicit());
        let state = settle(&r, Ok(json!({}))).unwrap()["requestState"].clone();
        assert!(Round::of(&call(json!({"requestState": state})), &b, None).is_ok());
        assert!(Round::of(&call(json!({"requestState": state})), &other, None).is_err());
        assert_eq!(
            format!("{a:?}"),
            "StateKey(..)",
            "the secret is never printed"
        );
    }
}
