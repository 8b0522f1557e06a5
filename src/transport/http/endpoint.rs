//! The MCP endpoint: routes each HTTP request through the checks, into
//! sessions, and writes the JSON or SSE answer.

use super::checks::{self, origin_allowed, reject};
use super::listener::Handler;
use super::stateless;
use super::streams::{
    Attached, EventId, Frame, LogBudget, ResumeError, SessionStreams, STANDALONE,
};
use super::wire::{write_head_response, write_response, ChunkedWriter, Framing, Request, Response};
use super::{AllowList, HttpOptions, ResponseMode};
use crate::jsonrpc::{self, ErrorObject, Message, Parsed};
use crate::protocol::{Engine, ProtocolVersion, Session};
use crate::sync::read;
use crate::transport::session_table::{Owner, Refused, SessionTable};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::json;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, RwLock};
use std::time::Duration;

const SESSION_HEADER: &str = "Mcp-Session-Id";
const ALLOW_HEADERS: &str = "Content-Type, Accept, Authorization, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, Mcp-Method, Mcp-Name";
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate";

pub(crate) struct Endpoint {
    engine: Arc<Engine>,
    opts: HttpOptions,
    sessions: Arc<SessionTable<SessionStreams>>,
    access: Arc<RwLock<Arc<Access>>>,
    /// The bytes of events its sessions keep for resumption, together.
    log_budget: Arc<LogBudget>,
}

/// Who may use an endpoint: its Host and Origin allow lists and the
/// digests of its bearer tokens, replaced as a whole while it runs
/// ([`HttpListener::set_access`](super::HttpListener::set_access)).
pub(crate) struct Access {
    hosts: AllowList,
    origins: AllowList,
    tokens: Vec<[u8; 32]>,
}

impl Access {
    pub(crate) fn of(opts: &HttpOptions) -> Access {
        Access {
            hosts: opts.allowed_hosts.clone(),
            origins: opts.allowed_origins.clone(),
            tokens: opts
                .bearer_tokens
                .iter()
                .map(|t| checks::token_digest(t))
                .collect(),
        }
    }

    /// Whether a session bound to `owner` can still be reached: its
    /// credential is among the tokens, or it has none and none are asked.
    pub(crate) fn admits(&self, owner: &Owner) -> bool {
        match owner {
            None => self.tokens.is_empty(),
            Some(digest) => self.tokens.contains(digest),
        }
    }
}

/// What a route produced: a response to write, or a stream already written.
enum Reply {
    Full(Response),
    Streamed { keep_alive: bool },
}

impl Handler for Endpoint {
    /// Every check that needs no body, in the order a client would fix
    /// them: path, Host, Origin, credentials, then for a POST its media
    /// types, protocol version and session. A refusal carries the CORS
    /// headers an allowed browser origin needs to read it.
    fn check_head(&self, req: &Request) -> Result<(), Response> {
        self.head_checks(req).map_err(|mut refused| {
            refused.headers.extend(self.cors(req));
            refused
        })
    }

    fn handle(&self, req: Request, stream: &TcpStream, _peer: SocketAddr) -> io::Result<bool> {
        let keep_alive = req.keep_alive;
        let cors = self.cors(&req);
        let head_only = req.method == "HEAD";
        let reply = self.route(req, stream, &cors).unwrap_or_else(Reply::Full);
        match reply {
            Reply::Full(mut resp) => {
                resp.headers.extend(cors);
                if head_only {
                    write_head_response(stream, &resp, keep_alive)?;
                } else {
                    write_response(stream, &resp, keep_alive)?;
                }
                Ok(keep_alive)
            }
            Reply::Streamed { keep_alive } => Ok(keep_alive),
        }
    }
}

impl Endpoint {
    fn head_checks(&self, req: &Request) -> Result<(), Response> {
        let access = self.access();
        if is_health(req) {
            // Anyone may ask whether it runs (a load balancer has no
            // token), but through a name it answers to: no rebound name.
            return checks::host(req, &access.hosts);
        }
        if req.path != self.opts.path {
            return Err(reject(404, -32000, "Not Found"));
        }
        checks::host(req, &access.hosts)?;
        checks::origin(req, &access.origins)?;
        if req.method == "OPTIONS" {
            return Ok(());
        }
        let owner = checks::auth(req, &access.tokens)?;
        if req.method == "POST" {
            checks::accept_post(req)?;
            checks::content_type(req)?;
            // Without a session the version is checked with the body: a
            // stateless request's answer names its id.
            if let Some(sid) = req.header("mcp-session-id") {
                checks::protocol_version(req)?;
                self.sessions
                    .get(sid, &owner)
                    .ok_or_else(|| reject(404, -32001, "Session not found"))?;
            }
        }
        Ok(())
    }

    pub(crate) fn new(
        engine: Arc<Engine>,
        opts: HttpOptions,
        sessions: Arc<SessionTable<SessionStreams>>,
        access: Arc<RwLock<Arc<Access>>>,
    ) -> Self {
        Endpoint {
            engine,
            log_budget: Arc::new(LogBudget::new(opts.event_log_total_bytes)),
            opts,
            sessions,
            access,
        }
    }

    /// Who may use it now.
    fn access(&self) -> Arc<Access> {
        read(&self.access).clone()
    }

    /// CORS headers for an allowed browser origin (none otherwise).
    fn cors(&self, req: &Request) -> Vec<(String, String)> {
        match req.header("origin") {
            Some(o) if origin_allowed(o, &self.access().origins) => vec![
                ("Access-Control-Allow-Origin".into(), o.to_owned()),
                ("Vary".into(), "Origin".into()),
                (
                    "Access-Control-Expose-Headers".into(),
                    EXPOSE_HEADERS.into(),
                ),
            ],
            _ => Vec::new(),
        }
    }

    fn route(
        &self,
        req: Request,
        stream: &TcpStream,
        cors: &[(String, String)],
    ) -> Result<Reply, Response> {
        if is_health(&req) {
            // How many sessions it holds only to those who may use it.
            let body = match checks::auth(&req, &self.access().tokens) {
                Ok(_) => json!({"status": "ok", "sessions": self.sessions.len()}),
                Err(_) => json!({"status": "ok"}),
            };
            return Ok(Reply::Full(Response::json(200, &body)));
        }
        // The head passed `check_head` before the body was read.
        if req.method == "OPTIONS" {
            return Ok(Reply::Full(
                Response::status(204)
                    .header("Access-Control-Allow-Methods", self.allow())
                    .header("Access-Control-Allow-Headers", ALLOW_HEADERS)
                    .header("Access-Control-Max-Age", "600"),
            ));
        }
        let owner = checks::auth(&req, &self.access().tokens)?;
        match req.method.as_str() {
            "POST" => self.post(req, owner, stream, cors),
            "GET" => self.get(req, owner, stream, cors),
            "DELETE" => self.delete(req, owner),
            _ => Err(reject(405, -32000, "Method Not Allowed").header("Allow", self.allow())),
        }
    }

    fn allow(&self) -> String {
        let mut m = vec!["POST", "OPTIONS"];
        if self.opts.enable_get_stream {
            m.insert(0, "GET");
        }
        if self.opts.enable_delete {
            m.push("DELETE");
        }
        m.join(", ")
    }

    fn post(
        &self,
        req: Request,
        owner: Owner,
        stream: &TcpStream,
        cors: &[(String, String)],
    ) -> Result<Reply, Response> {
        // The head passed `check_head` before the body was read.
        let parsed = jsonrpc::parse(&req.body).map_err(|e| {
            // Refused; a broken answer to one of a session's requests
            // still fails that request now.
            if let Some(s) = req
                .header("mcp-session-id")
                .and_then(|sid| self.sessions.get(sid, &owner))
            {
                s.mcp().fail_answered(&e);
            }
            refused(e)
        })?;
        if req.header("mcp-session-id").is_none() && stateless::is_stateless(&req, &parsed) {
            return Ok(self.stateless(req, parsed, owner, stream, cors));
        }
        if req.header("mcp-session-id").is_none() {
            checks::protocol_version(&req)?;
        }
        let is_init =
            matches!(&parsed, Parsed::Single(Message::Request(r)) if r.method() == "initialize");
        let (session, sid, created) = match req.header("mcp-session-id") {
            Some(sid) => {
                let s = self
                    .sessions
                    .get(sid, &owner)
                    .ok_or_else(|| reject(404, -32001, "Session not found"))?;
                (s, sid.to_owned(), false)
            }
            None if is_init => {
                let engine = self.engine.clone();
                let json_only = self.opts.response_mode == ResponseMode::JsonOnly;
                let s = SessionStreams::new(
                    self.opts.event_log_capacity,
                    self.opts.event_log_bytes,
                    self.log_budget.clone(),
                    json_only,
                    move |sink| bound(engine.open_session(sink), owner),
                );
                let sid = s.mcp().id().to_owned();
                self.sessions
                    .insert(sid.clone(), s.clone(), owner)
                    .map_err(|why| match why {
                        Refused::Full => {
                            reject(503, -32000, "Service Unavailable: too many sessions")
                        }
                        Refused::Closed => {
                            reject(503, -32000, "Service Unavailable: the listener stopped")
                        }
                    })?;
                // A reload may have revoked the credential since it was
                // checked, and ended its sessions before this one came.
                let access = self.access();
                if !access.admits(&owner) {
                    self.sessions.remove(&sid, &owner);
                    return Err(checks::auth(&req, &access.tokens)
                        .err()
                        .unwrap_or_else(|| reject(401, -32000, "Unauthorized")));
                }
                (s, sid, true)
            }
            None => {
                return Err(checks::session_id(&req)
                    .err()
                    .unwrap_or_else(|| reject(400, -32000, "Bad Request")))
            }
        };
        if matches!(parsed, Parsed::Batch(_))
            && !session
                .mcp()
                .version()
                .is_some_and(ProtocolVersion::allows_batches)
        {
            // Refused here with a status: a rejection with no request to
            // answer must not go on the session's standalone stream.
            return Err(refused(jsonrpc::ParseError::batch_not_supported()));
        }
        let has_request = parsed.answers_owed() > 0;
        let mcp = session.mcp().clone();
        if !has_request {
            mcp.receive_parsed(parsed, mcp.sink());
            return Ok(Reply::Full(Response::status(202)));
        }
        let (sink, attached) = session.open_stream();
        mcp.receive_parsed(parsed, &sink);
        let mut headers = vec![(SESSION_HEADER.to_owned(), sid.clone())];
        headers.extend(cors.iter().cloned());
        let framing = Framing::of(&req);
        let created = created.then_some((sid.as_str(), &owner));
        let keep_alive = self.answer(stream, &session, attached, headers, framing, created);
        Ok(Reply::Streamed { keep_alive })
    }

    /// A stateless (2026-07-28) request: checked against its headers, then
    /// served on a session of its own.
    fn stateless(
        &self,
        req: Request,
        parsed: Parsed,
        owner: Owner,
        stream: &TcpStream,
        cors: &[(String, String)],
    ) -> Reply {
        if let Some(resp) = stateless::not_a_request(&parsed) {
            return Reply::Full(resp);
        }
        if let Parsed::Single(Message::Request(r)) = &parsed {
            if let Err(e) = stateless::check(&req, r, &self.engine) {
                log::debug!("http: stateless request {} refused: {e}", r.id());
                return Reply::Full(stateless::error_response(Some(r.id()), &e));
            }
        }
        let open = |sink| bound(self.engine.open_stateless(sink), owner);
        let keep_alive = stateless::serve(
            open,
            &req,
            parsed,
            stream,
            cors.to_vec(),
            self.opts.response_mode,
            self.opts.sse_keepalive,
        );
        Reply::Streamed { keep_alive }
    }

    fn get(
        &self,
        req: Request,
        owner: Owner,
        stream: &TcpStream,
        cors: &[(String, String)],
    ) -> Result<Reply, Response> {
        // Without the standalone stream a GET may still resume a
        // request's stream (one its handler closed for the client to poll).
        let resumes_a_request = req
            .header("last-event-id")
            .and_then(|l| l.parse::<EventId>().ok())
            .is_some_and(|EventId(stream, _)| stream != STANDALONE);
        if !self.opts.enable_get_stream && !resumes_a_request {
            return Err(
                reject(405, -32000, "Method Not Allowed: no standalone stream")
                    .header("Allow", self.allow()),
            );
        }
        checks::accept_sse(&req)?;
        checks::protocol_version(&req)?;
        let sid = checks::session_id(&req)?;
        let session = self
            .sessions
            .get(sid, &owner)
            .ok_or_else(|| reject(404, -32001, "Session not found"))?;
        let attached = match req.header("last-event-id") {
            Some(last) => {
                let EventId(stream_id, seq) = last
                    .parse()
                    .map_err(|()| reject(400, -32000, "Bad Request: malformed Last-Event-ID"))?;
                session.attach(stream_id, Some(seq), stream)
            }
            None => session.attach(STANDALONE, None, stream),
        }
        .map_err(|e| match e {
            ResumeError::InUse => reject(
                409,
                -32000,
                "Conflict: the session's standalone stream is already open",
            ),
            ResumeError::UnknownStream => {
                reject(400, -32000, "Bad Request: unknown or expired event stream")
            }
        })?;
        let mut headers = vec![(SESSION_HEADER.to_owned(), sid.to_owned())];
        headers.extend(cors.iter().cloned());
        let resumed = req.header("last-event-id").is_some();
        let keep_alive = self.sse(
            stream,
            &session,
            attached,
            headers,
            Framing::of(&req),
            None,
            !resumed,
        );
        Ok(Reply::Streamed { keep_alive })
    }

    fn delete(&self, req: Request, owner: Owner) -> Result<Reply, Response> {
        if !self.opts.enable_delete {
            return Err(reject(
                405,
                -32000,
                "Method Not Allowed: sessions cannot be deleted",
            )
            .header("Allow", self.allow()));
        }
        checks::protocol_version(&req)?;
        let sid = checks::session_id(&req)?;
        if self.sessions.remove(sid, &owner) {
            Ok(Reply::Full(Response::status(200)))
        } else {
            Err(reject(404, -32001, "Session not found"))
        }
    }

    /// Answers a POSTed request: JSON if the response comes first (and the
    /// mode allows), SSE otherwise. `created`: the new session (id, owner)
    /// this request initializes. Returns whether the connection may be reused.
    fn answer(
        &self,
        stream: &TcpStream,
        session: &Arc<SessionStreams>,
        attached: Attached,
        mut headers: Vec<(String, String)>,
        framing: Framing,
        created: Option<(&str, &Owner)>,
    ) -> bool {
        let keep_alive = framing.keep_alive;
        // How long the first message may take before the stream starts
        // without it (its head, a priming event, keep-alives), so that a
        // long call holds no proxy's read timeout and gives the client an
        // id to resume from: no time when only SSE is sent; one keep-alive
        // interval when JSON is sent if the answer comes first; for as
        // long as it takes when only JSON is (and for an initialize, whose
        // answer decides whether its session stays).
        let wait = match self.opts.response_mode {
            _ if created.is_some() => None,
            ResponseMode::SseOnly => Some(Duration::ZERO),
            ResponseMode::Auto => Some(self.opts.sse_keepalive),
            ResponseMode::JsonOnly => None,
        };
        let first = match wait {
            None => next_frame(&attached.rx, stream),
            Some(w) => match attached.rx.recv_timeout(w) {
                Ok(f) => Ok(f),
                Err(RecvTimeoutError::Timeout) => {
                    return self.sse(stream, session, attached, headers, framing, None, true)
                }
                Err(RecvTimeoutError::Disconnected) => Err(Unanswered::SessionEnded),
            },
        };
        let first = match first {
            Ok(first) => first,
            Err(Unanswered::ClientGone) => {
                session.release(attached.stream, attached.token);
                // A new session whose id never reached its client: gone.
                if let Some((sid, owner)) = created {
                    self.sessions.remove(sid, owner);
                }
                return false;
            }
            Err(Unanswered::SessionEnded) => {
                // The session ended before anything was produced.
                let resp = reject(404, -32001, "Session not found");
                return write_response(stream, &resp, keep_alive).is_ok() && keep_alive;
            }
        };
        // A new session's initialize: did it succeed? (Its answer comes
        // first.) A failed one names no session and leaves none: it is
        // removed before the answer leaves.
        let initialized = match &first {
            _ if created.is_none() => true,
            Frame::Event {
                data, last: true, ..
            } => serde_json::from_str::<serde_json::Value>(data)
                .is_ok_and(|v| v.get("result").is_some()),
            Frame::Event { .. } => true,
            Frame::End | Frame::Reconnect(_) => false,
        };
        if let (false, Some((sid, owner))) = (initialized, created) {
            headers.retain(|(name, _)| name != SESSION_HEADER);
            self.sessions.remove(sid, owner);
        }
        let json_first = matches!(first, Frame::Event { last: true, .. })
            && self.opts.response_mode != ResponseMode::SseOnly;
        let json_only = self.opts.response_mode == ResponseMode::JsonOnly;
        // A request cancelled before it produced anything gets an SSE
        // stream that ends without its response (a request's POST is
        // answered with SSE or JSON, never 202), or 202 where only JSON
        // may be sent.
        if json_first || json_only {
            let mut frame = Some(first);
            // JSON only: wait for the response, dropping what comes before.
            loop {
                match frame.take() {
                    Some(Frame::Event {
                        data, last: true, ..
                    }) => {
                        let mut resp = Response {
                            status: 200,
                            headers,
                            body: data.as_bytes().to_vec(),
                        };
                        resp.headers
                            .push(("Content-Type".into(), "application/json".into()));
                        session.release(attached.stream, attached.token);
                        let ok = write_response(stream, &resp, keep_alive).is_ok();
                        if ok {
                            session.forget(attached.stream);
                        }
                        return ok && keep_alive;
                    }
                    Some(Frame::End) => {
                        // Cancelled, where only JSON may be sent: no
                        // JSON-RPC response is ever sent, and no body
                        // could stand for one.
                        session.release(attached.stream, attached.token);
                        session.forget(attached.stream);
                        let ok = write_response(
                            stream,
                            &Response {
                                status: 202,
                                headers,
                                body: Vec::new(),
                            },
                            keep_alive,
                        )
                        .is_ok();
                        return ok && keep_alive;
                    }
                    Some(_) => {}
                    None => match next_frame(&attached.rx, stream) {
                        Ok(f) => frame = Some(f),
                        Err(Unanswered::ClientGone) => {
                            session.release(attached.stream, attached.token);
                            return false;
                        }
                        Err(Unanswered::SessionEnded) => {
                            // The session ended meanwhile: no head has
                            // gone out yet, so say so.
                            session.release(attached.stream, attached.token);
                            let resp = reject(404, -32001, "Session not found");
                            return write_response(stream, &resp, keep_alive).is_ok() && keep_alive;
                        }
                    },
                }
            }
        }
        self.sse(
            stream,
            session,
            attached,
            headers,
            framing,
            Some(first),
            true,
        )
    }

    /// Writes an SSE stream until it ends, the client leaves, or the handler
    /// asks the client to reconnect. Returns whether the connection may be reused.
    #[allow(clippy::too_many_arguments)]
    fn sse(
        &self,
        stream: &TcpStream,
        session: &Arc<SessionStreams>,
        attached: Attached,
        mut headers: Vec<(String, String)>,
        framing: Framing,
        first: Option<Frame>,
        prime: bool,
    ) -> bool {
        headers.push(("Content-Type".into(), "text/event-stream".into()));
        headers.push(("Cache-Control".into(), "no-cache".into()));
        let mut w = match ChunkedWriter::start(stream, 200, &headers, framing) {
            Ok(w) => w,
            Err(_) => {
                session.release(attached.stream, attached.token);
                return false;
            }
        };
        let retry_ms = self.opts.sse_retry.as_millis();
        let primes = session
            .mcp()
            .version()
            .is_some_and(|v| v >= ProtocolVersion::V2025_11_25);
        let mut out = Vec::new();
        // Whether an event id went out on this connection: a client that
        // must reconnect before any did is told one to resume from.
        let mut wrote_id = false;
        let mut delivered_end = false;
        let replay = attached.replay;
        let mut pending = first;
        let result: io::Result<()> = (|| {
            // What this stream missed comes first; the priming event after
            // it (written with it, at once), under an id no event has.
            for frame in replay {
                if let Frame::Event { id, data, last } = frame {
                    write_event(&mut w, &mut out, id, &data)?;
                    wrote_id = true;
                    delivered_end |= last;
                }
            }
            if prime && primes && !delivered_end {
                let id = EventId(attached.stream, attached.prime_seq);
                let _ = write!(out, "id: {id}\nretry: {retry_ms}\ndata: \n\n");
                wrote_id = true;
            }
            loop {
                if delivered_end {
                    return Ok(());
                }
                let frame = match pending.take() {
                    Some(f) => f,
                    None => {
                        if !out.is_empty() {
                            w.chunk(&out)?;
                            out.clear();
                        }
                        match attached.rx.recv_timeout(self.opts.sse_keepalive) {
                            Ok(f) => f,
                            Err(RecvTimeoutError::Timeout) => {
                                w.chunk(b": keep-alive\n\n")?;
                                continue;
                            }
                            // The session ended: close the stream.
                            Err(RecvTimeoutError::Disconnected) if session.is_closed() => {
                                return Ok(())
                            }
                            // Detached (see `is_closed`): the stream goes on
                            // elsewhere, so it must not look ended here: the
                            // connection closes without the last chunk, and
                            // the client resumes from the last event it got.
                            Err(RecvTimeoutError::Disconnected) => {
                                return Err(io::Error::other("detached from its stream"))
                            }
                        }
                    }
                };
                match frame {
                    Frame::Event { id, data, last } => {
                        write_event(&mut w, &mut out, id, &data)?;
                        wrote_id = true;
                        delivered_end = last;
                    }
                    Frame::End => delivered_end = true,
                    Frame::Reconnect(retry) => {
                        // SSE polling: tell the client when to come back,
                        // then close. The client resumes from the last id it
                        // got here; only if none went out is it given the
                        // priming id (never an event's: ids are unique in a
                        // session).
                        if !wrote_id {
                            let id = EventId(attached.stream, attached.prime_seq);
                            let _ = write!(out, "id: {id}\ndata: \n\n");
                        }
                        let _ = write!(out, "retry: {}\n\n", retry.as_millis());
                        return Ok(());
                    }
                }
            }
        })();
        // Released before the last bytes leave (see `SessionStreams::release`).
        session.release(attached.stream, attached.token);
        let ok = result.and_then(|()| {
            if !out.is_empty() {
                w.chunk(&out)?;
            }
            w.finish()
        });
        if delivered_end && ok.is_ok() {
            session.forget(attached.stream);
        }
        matches!(ok, Ok(true)) && framing.keep_alive
    }
}

/// Why a connection stopped waiting for its stream's next frame.
enum Unanswered {
    /// The session ended.
    SessionEnded,
    /// The client closed its connection.
    ClientGone,
}

/// The next frame for a connection that writes nothing while it waits
/// (JSON only, an initialize): its client is looked at every
/// [`stateless::DISCONNECT_POLL`], so one that left frees the connection's
/// thread at once. The request runs on (leaving is no cancellation), and
/// its answer is logged as any other.
fn next_frame(rx: &Receiver<Frame>, stream: &TcpStream) -> Result<Frame, Unanswered> {
    loop {
        match rx.recv_timeout(stateless::DISCONNECT_POLL) {
            Ok(frame) => return Ok(frame),
            Err(RecvTimeoutError::Disconnected) => return Err(Unanswered::SessionEnded),
            Err(RecvTimeoutError::Timeout) if stateless::peer_gone(stream) => {
                return Err(Unanswered::ClientGone)
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

/// Bytes of SSE text gathered for one write at most: past it they are
/// written (a long replay is not gathered whole), and an event's data
/// larger than it is written as it is, not copied: a connection holds
/// about this much of its own, however much it replays (many connections
/// resuming a large answer at once hold no copy each).
const GATHER_AT_MOST: usize = 64 * 1024;

/// Adds one message of an SSE stream to `out`, writing what is gathered
/// past [`GATHER_AT_MOST`]. The event's last bytes stay in `out`.
fn write_event<W: Write>(
    w: &mut ChunkedWriter<W>,
    out: &mut Vec<u8>,
    id: EventId,
    data: &str,
) -> io::Result<()> {
    let _ = write!(out, "id: {id}\nevent: message\ndata: ");
    if data.len() > GATHER_AT_MOST {
        w.chunk(out)?;
        out.clear();
        w.chunk(data.as_bytes())?;
    } else {
        out.extend_from_slice(data.as_bytes());
    }
    out.extend_from_slice(b"\n\n");
    if out.len() > GATHER_AT_MOST {
        // All but the event's end: the stream's last bytes go after the
        // release (see `SessionStreams::release`).
        let keep = out.len() - 2;
        w.chunk(&out[..keep])?;
        out.drain(..keep);
    }
    Ok(())
}

/// `session` bound to the credential its requests come with, if any: the
/// tasks they make are then followed only with that credential.
fn bound(session: Arc<Session>, owner: Owner) -> Arc<Session> {
    if let Some(digest) = owner {
        session.bind_credential(digest);
    }
    session
}

/// A POST body that cannot be accepted: 400 with the JSON-RPC error.
fn refused(e: jsonrpc::ParseError) -> Response {
    // Refused whatever it was: a notification's or a response's error too.
    let body = e.reply().unwrap_or_else(|| {
        jsonrpc::Reply::error(None, ErrorObject::new(e.code, e.message.clone()))
    });
    Response::json(400, &body)
}

fn is_health(req: &Request) -> bool {
    req.path == "/healthz" && matches!(req.method.as_str(), "GET" | "HEAD")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The writes a connection makes, as they are made.
    #[derive(Default)]
    struct Writes(Vec<Vec<u8>>);

    impl Write for &mut Writes {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.push(buf.to_vec());
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_long_replay_is_written_as_it_goes_and_a_large_event_is_not_copied() {
        let mut writes = Writes::default();
        let framing = Framing {
            keep_alive: true,
            chunked: true,
        };
        let mut out = Vec::new();
        let large = "y".repeat(4 * GATHER_AT_MOST);
        {
            let mut w = ChunkedWriter::start(&mut writes, 200, &[], framing).unwrap();
            let small = "x".repeat(1000);
            for seq in 1..=200 {
                write_event(&mut w, &mut out, EventId(1, seq), &small).unwrap();
                assert!(out.len() <= GATHER_AT_MOST + 1100, "{} gathered", out.len());
            }
            write_event(&mut w, &mut out, EventId(1, 201), &large).unwrap();
        }
        assert!(out.len() < 64, "the large data is not gathered");
        assert!(out.ends_with(b"\n\n"), "the event's end waits");
        // Past the head, about 200 KB in a few writes of at most the
        // gathering size (each with its chunk's size line), and the large
        // data in one write of its own.
        let body = &writes.0[1..];
        assert!(body.len() > 3, "{} writes", body.len());
        assert!(body.iter().any(|b| b.len() == large.len()));
        assert!(body
            .iter()
            .all(|b| b.len() <= GATHER_AT_MOST + 1100 || b.len() == large.len()));
    }
}
