//! The session table shared by the transports that keep sessions across
//! connections (HTTP, AMQP): ids, idle expiry on an injectable clock, a
//! maximum count, and binding to the credential that created each session.

use crate::sync::FastMap;
use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use supervisor::Clock;

/// Default idle time after which a session expires: 30 minutes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Default maximum number of sessions.
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;
/// Default lifetime of a session that has not become operational (its
/// client never sent `notifications/initialized`): 10 s.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest the sweeper sleeps with sessions in the table.
const LONGEST_SLEEP: Duration = Duration::from_secs(3600);

/// What the table needs from a session.
pub trait Expirable: Send + Sync {
    /// Whether the session has work in flight or open streams (not idle).
    fn busy(&self) -> bool;
    /// Ends the session: cancels its in-flight work, closes its streams.
    fn end(&self);
    /// Whether the session's client is known to be gone: it ends at the
    /// next sweep, idle or not, unless busy (default: never known).
    fn abandoned(&self) -> bool {
        false
    }
    /// Whether the session may become [`abandoned`](Self::abandoned)
    /// without a request reaching it (its client was seen to go): the
    /// sweeper then looks at it every tick instead of at its expiry.
    fn may_be_abandoned(&self) -> bool {
        false
    }
    /// Whether the client finished the handshake (`notifications/initialized`);
    /// until then the session lives only for the handshake timeout.
    fn operational(&self) -> bool {
        true
    }
}

/// The identity a session is bound to (e.g. a digest of a bearer token).
pub type Owner = Option<[u8; 32]>;

struct Entry<T> {
    value: Arc<T>,
    last_seen: Instant,
    owner: Owner,
}

/// Why a session was not added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The table is full.
    Full,
    /// The table's transport stopped (its sweeper ended its sessions): a request
    /// read as it stopped opens no session that nothing would end.
    Closed,
}

/// Sessions by id.
pub struct SessionTable<T> {
    entries: Mutex<FastMap<String, Entry<T>>>,
    max: usize,
    idle: Duration,
    handshake: Duration,
    evict: bool,
    clock: Arc<dyn Clock>,
    /// When the sweeper means to sweep next (`None`: only after an insert);
    /// written and read under the `entries` lock.
    due: Mutex<Option<Instant>>,
    /// Wakes the sweeper: an insert that expires before `due`.
    wake: (Sender<()>, Receiver<()>),
    /// Set by [`end_run`](Self::end_run) (its transport stopped), cleared when
    /// its sweeper starts again: written and read under the `entries` lock.
    closed: AtomicBool,
    /// Counts the sweeper's runs (written under the `entries` lock): a run
    /// ends the table's sessions when it stops only if no later run began
    /// and no worker reopened the table after the run was told to stop
    /// ([`reopen`](Self::reopen)), so a sweeper detached at a stop that
    /// ends late leaves the table of its successor alone.
    runs: AtomicU64,
    /// The stop signal of the latest run (under the `entries` lock): told
    /// (disconnected) once that run was asked to stop, though it may not
    /// have ended yet ([`reopen`](Self::reopen)).
    run_stop: Mutex<Option<Receiver<()>>>,
}

impl<T: Expirable> SessionTable<T> {
    /// A table holding at most `max` sessions that expire after `idle`
    /// (after [`DEFAULT_HANDSHAKE_TIMEOUT`] until they are operational).
    pub fn new(max: usize, idle: Duration, clock: Arc<dyn Clock>) -> Self {
        SessionTable {
            entries: Mutex::new(FastMap::default()),
            max,
            idle,
            handshake: DEFAULT_HANDSHAKE_TIMEOUT.min(idle),
            evict: false,
            clock,
            due: Mutex::new(None),
            wake: crossbeam_channel::bounded(1),
            closed: AtomicBool::new(false),
            runs: AtomicU64::new(0),
            run_stop: Mutex::new(None),
        }
    }

    /// Makes a full table end its longest-idle session (one that never
    /// became operational first) for a new one, instead of refusing it
    /// (default: refuse). For transports anyone can reach (HTTP without
    /// credentials): a flood of sessions cannot lock everyone else out. A
    /// new session with an owner (a credential) only ends one of that
    /// owner's: one credential's holder cannot end another's sessions.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub fn evicting(mut self) -> Self {
        self.evict = true;
        self
    }

    fn lock(&self) -> MutexGuard<'_, FastMap<String, Entry<T>>> {
        crate::sync::lock(&self.entries)
    }

    /// Adds a session under `id` (from [`new_session_id`]). A full table
    /// refuses it, unless it is [`evicting`](Self::evicting): then it first
    /// makes room by ending the longest-idle session that is not busy,
    /// preferring one that never became operational. A table cleared
    /// because its transport stopped refuses it.
    pub fn insert(&self, id: String, value: Arc<T>, owner: Owner) -> Result<(), Refused> {
        let mut entries = self.lock();
        let mut evicted = None;
        if entries.len() >= self.max {
            if !self.evict {
                return Err(Refused::Full);
            }
            // The sessions are looked at (each takes locks of its own)
            // without the table's lock, which every request's lookup needs.
            let all: Vec<(String, Arc<T>, Instant)> = entries
                .iter()
                .filter(|(_, e)| owner.is_none() || e.owner == owner)
                .map(|(id, e)| (id.clone(), e.value.clone(), e.last_seen))
                .collect();
            drop(entries);
            let victim = all
                .iter()
                .filter(|(_, v, _)| !v.busy())
                .min_by_key(|(_, v, seen)| (v.operational(), *seen))
                .map(|(id, _, _)| id.clone())
                .ok_or(Refused::Full)?;
            drop(all);
            entries = self.lock();
            // Another insert may have made room, or taken this victim.
            if entries.len() >= self.max {
                evicted = Some(entries.remove(&victim).ok_or(Refused::Full)?);
                log::info!("session table full: ended the longest-idle session to make room");
            }
        }
        if self.closed.load(Ordering::SeqCst) {
            drop(entries);
            if let Some(e) = evicted {
                e.value.end();
            }
            return Err(Refused::Closed);
        }
        let now = self.clock.now();
        entries.insert(
            id,
            Entry {
                value,
                last_seen: now,
                owner,
            },
        );
        // A new session expires within the handshake timeout: a sweeper
        // asleep until later (or until an insert) must plan again.
        if crate::sync::lock(&self.due).is_none_or(|due| due > now + self.handshake) {
            let _ = self.wake.0.try_send(());
        }
        drop(entries);
        if let Some(e) = evicted {
            e.value.end();
        }
        Ok(())
    }

    /// The session with `id` if `owner` may use it; pushes its expiry back.
    /// Another owner's session is reported as absent.
    pub fn get(&self, id: &str, owner: &Owner) -> Option<Arc<T>> {
        let now = self.clock.now();
        let mut entries = self.lock();
        let e = entries.get_mut(id).filter(|e| e.owner == *owner)?;
        e.last_seen = now;
        Some(e.value.clone())
    }

    /// The session with `id` if `owner` may use it, without counting as
    /// activity: for sending to a session (a notification to a client that
    /// went away must not keep its session alive).
    #[cfg_attr(not(feature = "amqp"), allow(dead_code))]
    pub fn peek(&self, id: &str, owner: &Owner) -> Option<Arc<T>> {
        let entries = self.lock();
        let e = entries.get(id).filter(|e| e.owner == *owner)?;
        Some(e.value.clone())
    }

    /// Removes and ends a session (DELETE).
    pub fn remove(&self, id: &str, owner: &Owner) -> bool {
        let removed = {
            let mut entries = self.lock();
            match entries.get(id) {
                Some(e) if e.owner == *owner => entries.remove(id),
                _ => None,
            }
        };
        removed.map(|e| e.value.end()).is_some()
    }

    /// Ends every session idle for longer than the idle timeout, or
    /// abandoned by its client (see [`Expirable::abandoned`]). A
    /// session's idle time counts from the last request that reached it,
    /// or from the last sweep that found it busy (work in flight, a stream
    /// open): a call that ran for an hour does not leave its session
    /// expired the moment it ends. Returns how many expired.
    pub fn sweep(&self) -> usize {
        let now = self.clock.now();
        let expired: Vec<Arc<T>> = {
            let mut entries = self.lock();
            let mut ids = Vec::new();
            for (id, e) in entries.iter_mut() {
                let limit = if e.value.operational() {
                    self.idle
                } else {
                    self.handshake
                };
                if now.saturating_duration_since(e.last_seen) <= limit && !e.value.abandoned() {
                    continue;
                }
                if e.value.busy() {
                    e.last_seen = now;
                } else {
                    ids.push(id.clone());
                }
            }
            take(&mut entries, &ids)
        };
        end_all(expired)
    }

    /// Makes the sweeper plan again: a session's [`Expirable::may_be_abandoned`]
    /// changed.
    #[cfg_attr(not(feature = "amqp"), allow(dead_code))]
    pub(crate) fn replan(&self) {
        let _ = self.wake.0.try_send(());
    }

    /// How long the sweeper may sleep: until the first session's expiry,
    /// a tick (`tick`) while one is busy or may be abandoned, `None`
    /// (until an insert) while the table is empty.
    fn next_sweep(&self, tick: Duration) -> Option<Duration> {
        let now = self.clock.now();
        let entries = self.lock();
        let next = entries
            .values()
            .map(|e| {
                if e.value.busy() || e.value.may_be_abandoned() {
                    return tick;
                }
                let limit = if e.value.operational() {
                    self.idle
                } else {
                    self.handshake
                };
                // Expired means idle for longer than the limit: just after.
                let idle = now.saturating_duration_since(e.last_seen);
                limit
                    .saturating_sub(idle)
                    .saturating_add(Duration::from_millis(1))
            })
            .min()
            .map(|d| d.min(LONGEST_SLEEP));
        *crate::sync::lock(&self.due) = next.map(|d| now + d);
        next
    }

    /// Every session and its id, as they are now.
    #[cfg_attr(not(feature = "amqp"), allow(dead_code))]
    pub(crate) fn entries(&self) -> Vec<(String, Arc<T>)> {
        self.lock()
            .iter()
            .map(|(id, e)| (id.clone(), e.value.clone()))
            .collect()
    }

    /// Ends and removes every session whose owner `keep` refuses (its
    /// credential was revoked): such a session could never be reached
    /// again, and what it streams must stop. Returns how many ended.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    pub(crate) fn retain_owners(&self, keep: impl Fn(&Owner) -> bool) -> usize {
        let ended: Vec<Arc<T>> = {
            let mut entries = self.lock();
            let gone: Vec<String> = entries
                .iter()
                .filter(|(_, e)| !keep(&e.owner))
                .map(|(id, _)| id.clone())
                .collect();
            take(&mut entries, &gone)
        };
        end_all(ended)
    }

    /// Takes sessions again after [`end_run`](Self::end_run): a worker of its
    /// transport that takes sessions in before the sweeper starts runs
    /// again (the sweeper's own start reopens it too). A sweeper run asked
    /// to stop and not ended yet (detached at its tree's stop) is done
    /// with the table: its end leaves alone what this worker takes in.
    pub(crate) fn reopen(&self) {
        let _entries = self.lock();
        let mut stop = crate::sync::lock(&self.run_stop);
        if stop.as_ref().is_some_and(told_to_stop) {
            self.runs.fetch_add(1, Ordering::SeqCst);
            *stop = None;
        }
        self.closed.store(false, Ordering::SeqCst);
    }

    /// Reopens the table for a run of its sweeper, which `stop` asks to
    /// stop: returns the run, for [`end_run`](Self::end_run).
    fn begin_run(&self, stop: &Receiver<()>) -> u64 {
        let _entries = self.lock();
        *crate::sync::lock(&self.run_stop) = Some(stop.clone());
        self.closed.store(false, Ordering::SeqCst);
        self.runs.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// Whether `run` is still the table's (no later run began, and the
    /// table was not reopened after it was asked to stop).
    fn owned_by(&self, run: u64) -> bool {
        self.runs.load(Ordering::SeqCst) == run
    }

    /// At the end of the sweeper's run `run`: ends and removes every
    /// session, and adds none until the table is reopened (its sweeper
    /// starts again). Unless the run is no longer the table's (it was
    /// detached at a stop, and a new sweeper or a worker of its restarted
    /// transport took the table over): then it does nothing. Returns
    /// whether it cleared.
    fn end_run(&self, run: u64) -> bool {
        let all: Vec<Arc<T>> = {
            let mut entries = self.lock();
            if !self.owned_by(run) {
                return false;
            }
            self.closed.store(true, Ordering::SeqCst);
            entries.drain().map(|(_, e)| e.value).collect()
        };
        end_all(all);
        true
    }

    /// Number of sessions.
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Whether a supervisor's stop signal was given (it disconnects).
fn told_to_stop(stop: &Receiver<()>) -> bool {
    matches!(
        stop.try_recv(),
        Err(crossbeam_channel::TryRecvError::Disconnected)
    )
}

/// Removes the sessions `ids` from `entries`, to be ended once the
/// table's lock is let go ([`end_all`]).
fn take<T>(entries: &mut FastMap<String, Entry<T>>, ids: &[String]) -> Vec<Arc<T>> {
    ids.iter()
        .filter_map(|id| entries.remove(id))
        .map(|e| e.value)
        .collect()
}

/// Ends `sessions` (taken out of the table): how many.
fn end_all<T: Expirable>(sessions: Vec<Arc<T>>) -> usize {
    for s in &sessions {
        s.end();
    }
    sessions.len()
}

impl<T: Expirable + 'static> SessionTable<T> {
    /// A supervised worker named `name` that sweeps `table` when its first
    /// session is due to expire (every tenth of its shorter timeout, between
    /// 100 ms and 60 s, while a session is busy or may be abandoned), sleeps
    /// while the table is empty, and once stopped ends every session left
    /// (unless it was detached at its stop and a later worker took the
    /// table over meanwhile).
    pub fn sweeper(table: &Arc<Self>, name: &'static str) -> supervisor::ChildSpec {
        let table = table.clone();
        let tick = (table.idle.min(table.handshake) / 10)
            .clamp(Duration::from_millis(100), Duration::from_secs(60));
        supervisor::ChildSpec::worker(name, move |ctx| {
            let run = table.begin_run(ctx.stop_signal());
            table.sweep_until_stopped(run, ctx.stop_signal(), tick, name);
            // Stopped with its transport: the transport's sessions end too
            // (unless this run was detached and a later one owns them).
            if !table.end_run(run) {
                log::warn!(
                    "{name}: stopped after its transport started again; its sessions left to it"
                );
            }
            Ok(())
        })
    }

    /// The sweeper's run `run`: sweeps when due until `stop`, or until the
    /// table is no longer its own. A run that is not touches neither the
    /// plan nor the wake (both the later run's).
    fn sweep_until_stopped(&self, run: u64, stop: &Receiver<()>, tick: Duration, name: &str) {
        while self.owned_by(run) {
            let timeout = match self.next_sweep(tick) {
                Some(d) => crossbeam_channel::after(d),
                None => crossbeam_channel::never(),
            };
            crossbeam_channel::select! {
                recv(stop) -> _ => return,
                recv(self.wake.1) -> _ => {
                    if !self.owned_by(run) {
                        // The later run's wake: given back to it.
                        let _ = self.wake.0.try_send(());
                    }
                    continue;
                }
                recv(timeout) -> _ => {}
            }
            let n = self.sweep();
            if n > 0 {
                log::info!("{name}: {n} idle session(s) expired");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::new_session_id;
    use supervisor::ManualClock;

    #[derive(Default)]
    struct S {
        busy: AtomicBool,
        ended: AtomicBool,
        handshaking: AtomicBool,
    }
    impl Expirable for S {
        fn busy(&self) -> bool {
            self.busy.load(Ordering::SeqCst)
        }
        fn end(&self) {
            self.ended.store(true, Ordering::SeqCst);
        }
        fn operational(&self) -> bool {
            !self.handshaking.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn the_sweeper_sleeps_until_the_first_expiry_and_an_earlier_insert_wakes_it() {
        let clock = ManualClock::new();
        let t = SessionTable::new(9, Duration::from_secs(1800), Arc::new(clock.clone()));
        let tick = Duration::from_secs(1);
        let ms = Duration::from_millis(1);
        assert_eq!(t.next_sweep(tick), None, "empty: asleep until an insert");
        let a = Arc::new(S::default());
        t.insert("a".into(), a.clone(), None).unwrap();
        assert!(
            t.wake.1.try_recv().is_ok(),
            "an insert wakes an idle sweeper"
        );
        assert_eq!(t.next_sweep(tick), Some(Duration::from_secs(1800) + ms));
        clock.advance(Duration::from_secs(600));
        assert_eq!(t.next_sweep(tick), Some(Duration::from_secs(1200) + ms));
        // A handshake that expires before the planned sweep wakes it.
        let b = Arc::new(S::default());
        b.handshaking.store(true, Ordering::SeqCst);
        t.insert("b".into(), b.clone(), None).unwrap();
        assert!(t.wake.1.try_recv().is_ok());
        assert_eq!(t.next_sweep(tick), Some(DEFAULT_HANDSHAKE_TIMEOUT + ms));
        // One due later than the plan does not.
        clock.advance(tick);
        t.insert("c".into(), Arc::new(S::default()), None).unwrap();
        assert!(t.wake.1.try_recv().is_err());
        // A busy session is looked at every tick.
        a.busy.store(true, Ordering::SeqCst);
        assert_eq!(t.next_sweep(tick), Some(tick));
        a.busy.store(false, Ordering::SeqCst);
        clock.advance(DEFAULT_HANDSHAKE_TIMEOUT - tick + ms);
        assert_eq!(t.next_sweep(tick), Some(ms), "b is due");
        assert_eq!(t.sweep(), 1);
        assert!(b.ended.load(Ordering::SeqCst));
    }

    #[test]
    fn a_session_that_may_be_abandoned_is_looked_at_every_tick() {
        struct Gone(AtomicBool);
        impl Expirable for Gone {
            fn busy(&self) -> bool {
                false
            }
            fn end(&self) {}
            fn may_be_abandoned(&self) -> bool {
                self.0.load(Ordering::SeqCst)
            }
        }
        let clock = ManualClock::new();
        let t = SessionTable::new(9, Duration::from_secs(1800), Arc::new(clock.clone()));
        let tick = Duration::from_secs(1);
        let s = Arc::new(Gone(AtomicBool::new(false)));
        t.insert("s".into(), s.clone(), None).unwrap();
        assert!(t.next_sweep(tick) > Some(Duration::from_secs(1799)));
        let _ = t.wake.1.try_recv();
        s.0.store(true, Ordering::SeqCst);
        t.replan();
        assert!(t.wake.1.try_recv().is_ok(), "the sweeper plans again");
        assert_eq!(t.next_sweep(tick), Some(tick));
    }

    #[test]
    fn handshakes_are_short_and_a_full_table_makes_room() {
        // #11 item 11: 10,000 sessions that never finish the handshake
        // used to live 30 minutes and lock everyone else out.
        let clock = ManualClock::new();
        let t = SessionTable::new(3, Duration::from_secs(1800), Arc::new(clock.clone())).evicting();
        let half = || {
            let s = Arc::new(S::default());
            s.handshaking.store(true, Ordering::SeqCst);
            s
        };
        let (a, b) = (Arc::new(S::default()), half());
        t.insert("a".into(), a.clone(), None).unwrap();
        t.insert("b".into(), b.clone(), None).unwrap();
        clock.advance(DEFAULT_HANDSHAKE_TIMEOUT + Duration::from_secs(1));
        assert_eq!(t.sweep(), 1, "only the unfinished handshake expired");
        assert!(b.ended.load(Ordering::SeqCst) && !a.ended.load(Ordering::SeqCst));
        // Full: an unfinished handshake goes first, even if it is newer.
        let c = half();
        t.insert("c".into(), c.clone(), None).unwrap();
        let d = Arc::new(S::default());
        t.insert("d".into(), d.clone(), None).unwrap();
        clock.advance(Duration::from_secs(1));
        t.insert("e".into(), Arc::new(S::default()), None).unwrap();
        assert!(c.ended.load(Ordering::SeqCst), "the handshake made room");
        // Then the longest-idle operational session that is not busy.
        a.busy.store(true, Ordering::SeqCst);
        clock.advance(Duration::from_secs(1));
        t.insert("f".into(), Arc::new(S::default()), None).unwrap();
        assert!(!a.ended.load(Ordering::SeqCst), "busy sessions stay");
        assert!(d.ended.load(Ordering::SeqCst), "d was the longest idle");
        // With credentials, a full table makes room among the new
        // session's owner's own sessions only.
        let t = SessionTable::new(2, Duration::from_secs(60), Arc::new(clock.clone())).evicting();
        let (alice, bob) = (Some([1u8; 32]), Some([2u8; 32]));
        let bobs = Arc::new(S::default());
        t.insert("bob".into(), bobs.clone(), bob).unwrap();
        clock.advance(Duration::from_secs(1));
        let alices = Arc::new(S::default());
        t.insert("alice".into(), alices.clone(), alice).unwrap();
        t.insert("alice2".into(), Arc::new(S::default()), alice)
            .unwrap();
        assert!(alices.ended.load(Ordering::SeqCst), "alice made room");
        assert!(
            !bobs.ended.load(Ordering::SeqCst),
            "bob's longer idle one stays"
        );
        let carol = Some([3u8; 32]);
        assert_eq!(
            t.insert("carol".into(), Arc::new(S::default()), carol),
            Err(Refused::Full),
            "no session of carol's to end"
        );
        assert!(!bobs.ended.load(Ordering::SeqCst));
        // Everyone busy: refused.
        let t = SessionTable::new(1, Duration::from_secs(60), Arc::new(clock.clone())).evicting();
        t.insert("x".into(), a.clone(), None).unwrap();
        assert_eq!(
            t.insert("y".into(), Arc::new(S::default()), None),
            Err(Refused::Full)
        );
    }

    #[test]
    fn expiry_capacity_and_owners() {
        let clock = ManualClock::new();
        let t = SessionTable::new(2, Duration::from_secs(60), Arc::new(clock.clone()));
        let a = Arc::new(S::default());
        let owner = Some([1u8; 32]);
        let (id_a, id_b) = (new_session_id(), new_session_id());
        t.insert(id_a.clone(), a.clone(), owner).unwrap();
        t.insert(id_b.clone(), Arc::new(S::default()), None)
            .unwrap();
        assert_eq!(
            t.insert(new_session_id(), Arc::new(S::default()), None),
            Err(Refused::Full)
        );
        assert!(
            t.get(&id_a, &None).is_none(),
            "another credential sees nothing"
        );
        assert!(t.get(&id_a, &owner).is_some());
        clock.advance(Duration::from_secs(45));
        assert!(t.peek(&id_b, &None).is_some(), "peeking is no activity");
        assert!(t.get(&id_a, &owner).is_some(), "use pushes expiry back");
        clock.advance(Duration::from_secs(45));
        assert_eq!(t.sweep(), 1, "b idled 90 s");
        assert!(t.get(&id_b, &None).is_none());
        a.busy.store(true, Ordering::SeqCst);
        clock.advance(Duration::from_secs(120));
        assert_eq!(t.sweep(), 0, "busy sessions do not expire");
        a.busy.store(false, Ordering::SeqCst);
        clock.advance(Duration::from_secs(30));
        assert_eq!(
            t.sweep(),
            0,
            "idle time counts from the sweep that saw it busy"
        );
        clock.advance(Duration::from_secs(31));
        assert_eq!(t.sweep(), 1);
        assert!(a.ended.load(Ordering::SeqCst));
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn sessions_of_a_revoked_owner_end_and_the_rest_stay() {
        let t = SessionTable::new(8, Duration::from_secs(60), Arc::new(ManualClock::new()));
        let (kept, revoked) = (Some([1u8; 32]), Some([2u8; 32]));
        let sessions: Vec<(Owner, Arc<S>)> = [kept, revoked, None]
            .into_iter()
            .map(|o| (o, Arc::new(S::default())))
            .collect();
        for (i, (owner, s)) in sessions.iter().enumerate() {
            t.insert(format!("s{i}"), s.clone(), *owner).unwrap();
        }
        assert_eq!(t.retain_owners(|o| *o == kept), 2);
        let ended: Vec<bool> = sessions
            .iter()
            .map(|(_, s)| s.ended.load(Ordering::SeqCst))
            .collect();
        assert_eq!(ended, [false, true, true]);
        assert_eq!(t.len(), 1);
        assert!(t.get("s0", &kept).is_some());
    }

    #[test]
    fn a_cleared_table_adds_no_session() {
        let t = SessionTable::new(8, Duration::from_secs(60), Arc::new(ManualClock::new()));
        let (_stop, stop) = crossbeam_channel::bounded::<()>(0);
        let run = t.begin_run(&stop);
        let a = Arc::new(S::default());
        t.insert("a".into(), a.clone(), None).unwrap();
        assert!(t.end_run(run));
        assert!(a.ended.load(Ordering::SeqCst));
        // A request read as its transport stopped opens nothing that
        // nothing would end.
        assert_eq!(
            t.insert("b".into(), Arc::new(S::default()), None),
            Err(Refused::Closed)
        );
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_sweeper_run_that_ends_after_a_later_one_began_leaves_its_sessions() {
        let t = SessionTable::new(8, Duration::from_secs(60), Arc::new(ManualClock::new()));
        let (_stop, stop) = crossbeam_channel::bounded::<()>(0);
        let detached = t.begin_run(&stop);
        let current = t.begin_run(&stop);
        let a = Arc::new(S::default());
        t.insert("a".into(), a.clone(), None).unwrap();
        // The first run, detached at a stop, ends late: the table is the
        // second run's now.
        assert!(!t.end_run(detached));
        assert!(!a.ended.load(Ordering::SeqCst));
        assert_eq!(t.len(), 1);
        t.insert("b".into(), Arc::new(S::default()), None).unwrap();
        // The current run's stop ends them all and closes the table.
        assert!(t.end_run(current));
        assert!(a.ended.load(Ordering::SeqCst));
        assert_eq!(t.len(), 0);
        assert_eq!(
            t.insert("c".into(), Arc::new(S::default()), None),
            Err(Refused::Closed)
        );
        // The next run takes sessions again.
        t.begin_run(&stop);
        t.insert("c".into(), Arc::new(S::default()), None).unwrap();
    }

    #[test]
    fn a_worker_reopening_the_table_takes_it_from_a_run_told_to_stop() {
        let t = SessionTable::new(8, Duration::from_secs(60), Arc::new(ManualClock::new()));
        // A run still sweeping: a worker that starts again (AMQP's link,
        // alone) leaves the table to it.
        let (told, stop) = crossbeam_channel::bounded::<()>(0);
        let live = t.begin_run(&stop);
        t.reopen();
        t.insert("a".into(), Arc::new(S::default()), None).unwrap();
        assert!(t.end_run(live), "still the live run's");
        assert_eq!(t.len(), 0);
        // A run told to stop but not ended (detached at its tree's stop):
        // the worker of the tree started again takes the table over before
        // the new sweeper starts, and the old run's end leaves it be.
        let detached = t.begin_run(&stop);
        drop(told);
        t.reopen();
        let a = Arc::new(S::default());
        t.insert("a".into(), a.clone(), None).unwrap();
        assert!(!t.end_run(detached));
        assert!(!a.ended.load(Ordering::SeqCst));
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn a_run_no_longer_the_table_s_leaves_the_wake_to_the_later_one() {
        let t = SessionTable::new(8, Duration::from_secs(60), Arc::new(ManualClock::new()));
        let (told, stop) = crossbeam_channel::bounded::<()>(0);
        let detached = t.begin_run(&stop);
        drop(told);
        let (_live, stop_live) = crossbeam_channel::bounded::<()>(0);
        t.begin_run(&stop_live);
        // An insert wakes the later run's sweeper (asleep: nothing due).
        t.insert("a".into(), Arc::new(S::default()), None).unwrap();
        // The detached run, going round once more, takes neither the wake
        // (it would leave the later run asleep while sessions wait to
        // expire) nor plans a sweep.
        t.sweep_until_stopped(detached, &stop, Duration::from_millis(100), "test");
        assert!(t.wake.1.try_recv().is_ok(), "the wake is the later run's");
    }
}
