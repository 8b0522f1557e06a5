//! Supervision semantics: strategies, restart types, intensity, shutdown,
//! nesting, dynamic children, backoff, introspection. Synchronisation is by
//! events from the supervisor's hook, never by sleeping.

use crossbeam_channel::{Receiver, Sender};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use supervisor::*;

const WAIT: Duration = Duration::from_secs(10);

/// What a test can make a worker do.
#[derive(Clone, Copy, Debug)]
enum Do {
    Panic,
    Fail,
    Return,
}

/// Counts live worker threads; a guard decrements on any exit, even a panic.
#[derive(Clone, Default)]
struct Live(Arc<AtomicUsize>);
struct Guard(Arc<AtomicUsize>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
impl Live {
    fn enter(&self) -> Guard {
        self.0.fetch_add(1, Ordering::SeqCst);
        Guard(self.0.clone())
    }
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// A worker obeying commands; returns the spec and its command sender.
fn worker(id: &str, live: &Live) -> (ChildSpec, Sender<Do>) {
    let (tx, rx) = crossbeam_channel::unbounded::<Do>();
    let live = live.clone();
    let spec = ChildSpec::worker(id, move |ctx| {
        let _g = live.enter();
        ctx.ready();
        crossbeam_channel::select! {
            recv(ctx.stop_signal()) -> _ => Ok(()),
            recv(rx) -> cmd => match cmd {
                Ok(Do::Panic) => panic!("boom"),
                Ok(Do::Fail) => Err("bad things".into()),
                Ok(Do::Return) | Err(_) => Ok(()),
            },
        }
    })
    // Started (and counted live) only once its thread runs.
    .await_ready(WAIT);
    (spec, tx)
}

fn hook() -> (impl Fn(&Event) + Send + Sync + 'static, Receiver<Event>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    (move |e: &Event| drop(tx.send(e.clone())), rx)
}

/// Waits for the first event matching `pred`; returns the events before it too.
fn until(rx: &Receiver<Event>, pred: impl Fn(&Event) -> bool) -> Vec<Event> {
    let mut seen = Vec::new();
    loop {
        let e = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("event not seen within {WAIT:?}; saw {seen:#?}"));
        let hit = pred(&e);
        seen.push(e);
        if hit {
            return seen;
        }
    }
}

/// Starts a tree and discards the events of its initial start.
fn start(spec: SupervisorSpec, events: &Receiver<Event>) -> Supervisor {
    let sup = Supervisor::start(spec).expect("tree starts");
    events.try_iter().for_each(drop);
    sup
}

fn started(sup: &str, child: &str) -> impl Fn(&Event) -> bool {
    let (sup, child) = (sup.to_owned(), child.to_owned());
    move |e| {
        e.supervisor == sup
            && e.kind
                == EventKind::Started {
                    child: child.clone(),
                }
    }
}

fn exited(e: &Event) -> Option<(&str, &ExitReason)> {
    match &e.kind {
        EventKind::Exited { child, reason } => Some((child, reason)),
        _ => None,
    }
}

fn restarts(sup: &SupervisorRef) -> Vec<(String, u32)> {
    sup.which_children()
        .unwrap()
        .into_iter()
        .map(|c| (c.id, c.restarts))
        .collect()
}

fn three(strategy: Strategy, live: &Live) -> (SupervisorSpec, Vec<Sender<Do>>, Receiver<Event>) {
    let (h, events) = hook();
    let mut spec = SupervisorSpec::new("root", strategy)
        .intensity(10, Duration::from_secs(60))
        .on_event(h);
    let mut txs = Vec::new();
    for id in ["a", "b", "c"] {
        let (c, tx) = worker(id, live);
        spec = spec.child(c);
        txs.push(tx);
    }
    (spec, txs, events)
}

#[test]
fn one_for_one_restarts_only_the_failed_child() {
    let live = Live::default();
    let (spec, txs, events) = three(Strategy::OneForOne, &live);
    let sup = start(spec, &events);
    txs[1].send(Do::Panic).unwrap();
    let seen = until(&events, started("root", "b"));
    let exits: Vec<_> = seen.iter().filter_map(exited).collect();
    assert_eq!(
        exits,
        [("b", &ExitReason::Panic("boom".into()))],
        "only b exited; a panic becomes an exit reason"
    );
    assert_eq!(
        restarts(&sup.handle()),
        [("a".into(), 0), ("b".into(), 1), ("c".into(), 0)]
    );
    assert_eq!(live.count(), 3);
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn one_for_all_stops_the_others_in_reverse_order_and_restarts_all() {
    let live = Live::default();
    let (spec, txs, events) = three(Strategy::OneForAll, &live);
    let sup = start(spec, &events);
    txs[1].send(Do::Fail).unwrap();
    let seen = until(&events, started("root", "c"));
    let exits: Vec<_> = seen
        .iter()
        .filter_map(exited)
        .map(|(c, r)| (c.to_owned(), r.clone()))
        .collect();
    assert_eq!(
        exits,
        [
            ("b".into(), ExitReason::Error("bad things".into())),
            ("c".into(), ExitReason::Shutdown),
            ("a".into(), ExitReason::Shutdown)
        ]
    );
    let starts: Vec<_> = seen
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Started { child } => Some(child.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(starts, ["a", "b", "c"], "restarted in start order");
    assert_eq!(
        restarts(&sup.handle()),
        [("a".into(), 1), ("b".into(), 1), ("c".into(), 1)]
    );
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn rest_for_one_restarts_the_failed_child_and_those_after_it() {
    let live = Live::default();
    let (spec, txs, events) = three(Strategy::RestForOne, &live);
    let sup = start(spec, &events);
    txs[1].send(Do::Panic).unwrap();
    let seen = until(&events, started("root", "c"));
    let exited_ids: Vec<_> = seen.iter().filter_map(exited).map(|(c, _)| c).collect();
    assert_eq!(exited_ids, ["b", "c"]);
    assert_eq!(
        restarts(&sup.handle()),
        [("a".into(), 0), ("b".into(), 1), ("c".into(), 1)]
    );
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn restart_types_decide_who_comes_back() {
    let live = Live::default();
    let (h, events) = hook();
    let (perm, perm_tx) = worker("perm", &live);
    let (trans, trans_tx) = worker("trans", &live);
    let (temp, temp_tx) = worker("temp", &live);
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .intensity(10, Duration::from_secs(60))
        .on_event(h)
        .child(perm)
        .child(trans.restart(Restart::Transient))
        .child(temp.restart(Restart::Temporary));
    let sup = start(spec, &events);
    let handle = sup.handle();
    // Permanent: restarted even after a normal exit.
    perm_tx.send(Do::Return).unwrap();
    until(&events, started("root", "perm"));
    // Transient: a normal exit is final ...
    trans_tx.send(Do::Return).unwrap();
    until(&events, |e| {
        exited(e).is_some_and(|(c, r)| c == "trans" && *r == ExitReason::Normal)
    });
    let info = handle.which_children().unwrap();
    assert_eq!(info[1].state, ChildState::Stopped);
    // ... until restarted by hand; then an abnormal exit brings it back.
    handle.restart_child("trans").unwrap();
    until(&events, started("root", "trans"));
    trans_tx.send(Do::Panic).unwrap();
    until(&events, started("root", "trans"));
    // Temporary: never restarted, and removed once it exits.
    temp_tx.send(Do::Panic).unwrap();
    until(&events, |e| exited(e).is_some_and(|(c, _)| c == "temp"));
    let ids: Vec<String> = handle
        .which_children()
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(ids, ["perm", "trans"]);
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

fn crash_and_wait(tx: &Sender<Do>, events: &Receiver<Event>) {
    tx.send(Do::Panic).unwrap();
    until(events, started("root", "a"));
}

/// One worker under a supervisor allowing 3 restarts in 10 s of a manual clock.
fn three_in_ten_seconds() -> (Supervisor, ManualClock, Sender<Do>, Receiver<Event>, Live) {
    let clock = ManualClock::new();
    let live = Live::default();
    let (h, events) = hook();
    let (a, tx) = worker("a", &live);
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .intensity(3, Duration::from_secs(10))
        .clock(Arc::new(clock.clone()))
        .on_event(h)
        .child(a);
    let sup = start(spec, &events);
    (sup, clock, tx, events, live)
}

#[test]
fn intensity_allows_n_restarts_in_the_period_and_escalates_on_n_plus_one() {
    let (sup, clock, tx, events, live) = three_in_ten_seconds();
    for _ in 0..3 {
        crash_and_wait(&tx, &events);
        clock.advance(Duration::from_secs(3)); // all within 10 s
    }
    tx.send(Do::Panic).unwrap();
    until(
        &events,
        |e| matches!(&e.kind, EventKind::Escalated { reason } if reason == MAX_INTENSITY_REASON),
    );
    assert_eq!(
        sup.wait(),
        Err(SupervisorError::Escalated {
            supervisor: "root".into(),
            reason: MAX_INTENSITY_REASON.into()
        })
    );
    assert_eq!(live.count(), 0);
}

#[test]
fn restarts_older_than_the_period_are_forgotten() {
    let (sup, clock, tx, events, _live) = three_in_ten_seconds();
    for _ in 0..3 {
        crash_and_wait(&tx, &events);
    }
    // Past the period (one exactly a period old still counts, as in OTP).
    clock.advance(Duration::from_secs(10) + Duration::from_millis(1));
    for _ in 0..3 {
        crash_and_wait(&tx, &events);
    }
    assert_eq!(restarts(&sup.handle()), [("a".into(), 6)]);
    sup.shutdown()
        .expect("still alive after 6 restarts spread over two periods");
}

#[test]
fn shutdown_is_reverse_start_order_with_timeouts_and_detaching() {
    let (order_tx, order_rx) = crossbeam_channel::unbounded::<String>();
    let polite = |id: &str| {
        let order_tx = order_tx.clone();
        ChildSpec::worker(id, move |ctx| {
            let _ = ctx.stop_signal().recv();
            order_tx.send(ctx.id().to_owned()).unwrap();
            Ok(())
        })
    };
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(2);
    let stubborn = |id: &str, shutdown: Shutdown| {
        let release_rx = release_rx.clone();
        ChildSpec::worker(id, move |_| {
            let _ = release_rx.recv(); // ignores the stop signal
            Ok(())
        })
        .shutdown(shutdown)
    };
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .child(polite("first"))
        .child(stubborn(
            "stubborn",
            Shutdown::Timeout(Duration::from_millis(50)),
        ))
        .child(stubborn("brutal", Shutdown::Brutal))
        .child(polite("last"));
    let sup = Supervisor::start(spec).unwrap();
    let report = sup.shutdown().unwrap();
    let order: Vec<String> = order_rx.try_iter().collect();
    assert_eq!(order, ["last", "first"]);
    assert_eq!(report.stopped, 2);
    assert_eq!(
        report.detached,
        ["brutal", "stubborn"],
        "reverse order; both left running, reported"
    );
    release_tx.send(()).unwrap();
    release_tx.send(()).unwrap();
}

fn nested(intensity_root: u32, live: &Live) -> (SupervisorSpec, Sender<Do>, Receiver<Event>) {
    let (h, events) = hook();
    let (w, tx) = worker("w", live);
    let mid = SupervisorSpec::new("mid", Strategy::OneForOne)
        .intensity(0, Duration::from_secs(60))
        .child(w);
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .intensity(intensity_root, Duration::from_secs(60))
        .on_event(h)
        .child(ChildSpec::supervisor(mid));
    (spec, tx, events)
}

#[test]
fn a_nested_supervisor_escalates_and_its_parent_restarts_it() {
    let live = Live::default();
    let (spec, tx, events) = nested(5, &live);
    let sup = start(spec, &events);
    tx.send(Do::Panic).unwrap();
    let seen = until(&events, started("mid", "w"));
    assert!(seen
        .iter()
        .any(|e| e.supervisor == "mid" && matches!(e.kind, EventKind::Escalated { .. })));
    assert!(seen.iter().any(|e| e.supervisor == "root"
        && e.kind
            == EventKind::Exited {
                child: "mid".into(),
                reason: ExitReason::Error(MAX_INTENSITY_REASON.into())
            }));
    assert_eq!(restarts(&sup.handle()), [("mid".into(), 1)]);
    assert_eq!(live.count(), 1);
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn escalation_reaches_the_root_and_run_fails() {
    let live = Live::default();
    let (spec, tx, _events) = nested(0, &live);
    let sup = Supervisor::start(spec).unwrap();
    tx.send(Do::Panic).unwrap();
    assert_eq!(
        sup.wait(),
        Err(SupervisorError::Escalated {
            supervisor: "root".into(),
            reason: MAX_INTENSITY_REASON.into()
        })
    );
    assert_eq!(live.count(), 0);
}

#[test]
fn dynamic_children_start_terminate_restart_delete() {
    let live = Live::default();
    let sup = Supervisor::start(SupervisorSpec::new("conns", Strategy::OneForOne)).unwrap();
    let h = sup.handle();
    let mut keep = Vec::new(); // a worker whose command sender is dropped exits
    for n in 0..5 {
        let (spec, tx) = worker(&format!("conn-{n}"), &live);
        keep.push(tx);
        h.start_child(spec.restart(Restart::Temporary)).unwrap();
    }
    assert_eq!(live.count(), 5);
    assert_eq!(
        h.start_child(worker("conn-0", &live).0),
        Err(ChildError::AlreadyPresent)
    );
    assert_eq!(
        h.count_children().unwrap(),
        ChildCounts {
            specs: 5,
            active: 5,
            supervisors: 0,
            workers: 5
        }
    );
    assert_eq!(h.delete_child("conn-1"), Err(ChildError::Running));
    h.terminate_child("conn-1").unwrap();
    assert_eq!(live.count(), 4);
    h.restart_child("conn-1").unwrap();
    assert_eq!(live.count(), 5);
    h.terminate_child("conn-1").unwrap();
    h.delete_child("conn-1").unwrap();
    assert_eq!(h.delete_child("conn-1"), Err(ChildError::NotFound));
    assert_eq!(h.terminate_child("nope"), Err(ChildError::NotFound));
    assert_eq!(h.count_children().unwrap().specs, 4);
    let report = sup.shutdown().unwrap();
    assert_eq!((report.stopped, live.count()), (4, 0));
    assert_eq!(h.which_children(), Err(SupervisorError::Gone));
}

#[test]
fn a_child_that_fails_to_start_fails_the_start_and_stops_the_others() {
    let live = Live::default();
    let (ok, _tx) = worker("ok", &live);
    let bad =
        ChildSpec::worker("bad", |_| Err("no config".into())).await_ready(Duration::from_secs(5));
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .child(ok)
        .child(bad);
    match Supervisor::start(spec) {
        Err(SupervisorError::StartFailed { child, reason, .. }) => {
            assert_eq!(child, "bad");
            assert!(reason.contains("no config"), "{reason}");
        }
        other => panic!("expected a start failure, got {:?}", other.map(|_| ())),
    }
    assert_eq!(live.count(), 0);
}

#[test]
fn backoff_delays_grow_between_restarts_of_a_crashing_child() {
    let (h, events) = hook();
    let live = Live::default();
    let (ok, _ok_tx) = worker("ok", &live);
    // Starts fine once, then crashes at every restart before it is ready.
    let runs = Arc::new(AtomicUsize::new(0));
    let flaky = ChildSpec::worker("flaky", move |ctx| {
        if runs.fetch_add(1, Ordering::SeqCst) == 0 {
            ctx.ready();
        }
        Err("crash at start".into())
    })
    .await_ready(WAIT)
    .backoff(Backoff {
        initial: Duration::from_millis(5),
        multiplier: 2.0,
        max: Duration::from_millis(20),
        jitter: 0.0,
        reset_after: Duration::from_secs(60),
    });
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .intensity(100, Duration::from_secs(60))
        .on_event(h)
        .child(ok)
        .child(flaky);
    let sup = Supervisor::start(spec).unwrap();
    let mut delays = Vec::new();
    while delays.len() < 5 {
        let e = events.recv_timeout(WAIT).expect("events");
        if let EventKind::Restarting { child, delay, .. } = e.kind {
            assert_eq!(child, "flaky");
            delays.push(delay.as_millis());
        }
    }
    assert_eq!(delays, [5, 10, 20, 20, 20]);
    assert_eq!(
        sup.handle().which_children().unwrap()[0].restarts,
        0,
        "the healthy sibling is untouched"
    );
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn snapshot_draws_the_tree() {
    let live = Live::default();
    let keep = std::cell::RefCell::new(Vec::new());
    let leaf = |id: &str| {
        let (spec, tx) = worker(id, &live);
        keep.borrow_mut().push(tx);
        spec
    };
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .child(leaf("sessions"))
        .child(ChildSpec::supervisor(
            SupervisorSpec::new("listeners", Strategy::RestForOne)
                .child(leaf("tcp"))
                .child(leaf("http")),
        ))
        .child(leaf("control"));
    let sup = Supervisor::start(spec).unwrap();
    let snap = sup.handle().snapshot().unwrap();
    assert_eq!(snap.children.len(), 3);
    let sub = snap.children[1].subtree.as_ref().expect("nested snapshot");
    assert_eq!(
        sub.children
            .iter()
            .map(|c| c.info.id.as_str())
            .collect::<Vec<_>>(),
        ["tcp", "http"]
    );
    let text = snap.to_string();
    assert!(text.starts_with("root (one_for_one)\n"), "{text}");
    assert!(text.contains("├── sessions running, restarts 0"), "{text}");
    assert!(
        text.contains("├── listeners (rest_for_one) running"),
        "{text}"
    );
    assert!(text.contains("│   ├── tcp running"), "{text}");
    assert!(text.contains("│   └── http running"), "{text}");
    assert!(text.contains("└── control running"), "{text}");
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn a_stop_hook_wakes_a_worker_blocked_outside_its_stop_signal() {
    // The worker blocks on a channel of its own (as a worker in poll(2)
    // would): only its hook can wake it. A hook registered after the stop
    // runs at once.
    let (late_tx, late_rx) = crossbeam_channel::bounded::<()>(1);
    let (hooked_tx, hooked_rx) = crossbeam_channel::bounded::<()>(1);
    let spec = ChildSpec::worker("blocked", move |ctx| {
        let (wake_tx, wake) = crossbeam_channel::bounded::<()>(1);
        ctx.on_stop(move || {
            let _ = wake_tx.try_send(());
        });
        hooked_tx.send(()).unwrap();
        wake.recv().map_err(|_| "hook dropped unrun")?;
        assert!(ctx.should_stop(), "woken by the stop");
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        ctx.on_stop(move || {
            let _ = tx.try_send(());
        });
        rx.try_recv().map_err(|_| "late hook not run at once")?;
        late_tx.send(()).unwrap();
        Ok(())
    })
    // Without its hook the worker would never return: it is detached.
    .shutdown(Shutdown::Timeout(WAIT));
    let sup =
        Supervisor::start(SupervisorSpec::new("root", Strategy::OneForOne).child(spec)).unwrap();
    hooked_rx.recv_timeout(WAIT).unwrap();
    let h = sup.handle();
    h.terminate_child("blocked").unwrap();
    late_rx
        .recv_timeout(WAIT)
        .expect("the worker ran both hooks");
    let report = sup.shutdown().unwrap();
    assert!(report.detached.is_empty());
}

#[test]
fn rest_for_one_never_starts_a_child_while_the_one_before_it_is_down() {
    use std::sync::atomic::AtomicBool;
    // `db` crashes; its first restart fails to start (it never gets
    // ready), the next one works. `api`, after it, must only ever start
    // with `db` up.
    let up = Arc::new(AtomicBool::new(false));
    let starts = Arc::new(AtomicUsize::new(0));
    let (crash_tx, crash) = crossbeam_channel::unbounded::<()>();
    let (db_up, n) = (up.clone(), starts.clone());
    let db = ChildSpec::worker("db", move |ctx| {
        if n.fetch_add(1, Ordering::SeqCst) == 1 {
            return Err("cannot start this time".into());
        }
        db_up.store(true, Ordering::SeqCst);
        ctx.ready();
        let outcome = crossbeam_channel::select! {
            recv(ctx.stop_signal()) -> _ => Ok(()),
            recv(crash) -> _ => Err("crashed".into()),
        };
        db_up.store(false, Ordering::SeqCst);
        outcome
    })
    .await_ready(WAIT);
    let (saw_tx, saw) = crossbeam_channel::unbounded();
    let api = ChildSpec::worker("api", move |ctx| {
        let _ = saw_tx.send(up.load(Ordering::SeqCst));
        ctx.ready();
        let _ = ctx.stop_signal().recv();
        Ok(())
    })
    .await_ready(WAIT);
    let (h, events) = hook();
    let spec = SupervisorSpec::new("root", Strategy::RestForOne)
        .intensity(10, Duration::from_secs(60))
        .on_event(h)
        .child(db)
        .child(api);
    let sup = start(spec, &events);
    assert_eq!(saw.recv_timeout(WAIT), Ok(true));
    crash_tx.send(()).unwrap();
    // db: crashed, failed to start, started; then api.
    until(&events, started("root", "db"));
    until(&events, started("root", "api"));
    assert_eq!(starts.load(Ordering::SeqCst), 3);
    let seen: Vec<bool> = saw.try_iter().collect();
    assert_eq!(seen, [true], "api started once more, with db up");
    sup.shutdown().unwrap();
}

#[test]
fn a_panicking_event_hook_does_not_bring_the_supervisor_down() {
    let live = Live::default();
    let (a, tx) = worker("a", &live);
    let (seen_tx, seen) = crossbeam_channel::unbounded();
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .intensity(10, Duration::from_secs(60))
        .on_event(move |e: &Event| {
            let _ = seen_tx.send(e.clone());
            panic!("the hook's own bug");
        })
        .child(a);
    let sup = start(spec, &seen);
    tx.send(Do::Panic).unwrap();
    until(&seen, started("root", "a"));
    assert_eq!(restarts(&sup.handle()), [("a".into(), 1)]);
    sup.shutdown().unwrap();
    assert_eq!(live.count(), 0);
}

#[test]
fn a_restart_exactly_a_period_old_still_counts() {
    let (sup, clock, tx, events, _live) = three_in_ten_seconds();
    for _ in 0..3 {
        crash_and_wait(&tx, &events);
    }
    clock.advance(Duration::from_secs(10));
    tx.send(Do::Panic).unwrap();
    until(
        &events,
        |e| matches!(&e.kind, EventKind::Escalated { reason } if reason == MAX_INTENSITY_REASON),
    );
    assert!(sup.wait().is_err());
}

#[test]
fn a_tree_busy_starting_a_child_does_not_answer_but_shows_progress() {
    let (go_tx, go) = crossbeam_channel::bounded::<()>(1);
    let (asked_tx, asked) = crossbeam_channel::bounded::<()>(1);
    let slow = ChildSpec::worker("slow", move |ctx| {
        let _ = asked_tx.send(());
        let _ = go.recv();
        ctx.ready();
        let _ = ctx.stop_signal().recv();
        Ok(())
    })
    .await_ready(WAIT);
    let (h, events) = hook();
    let spec = SupervisorSpec::new("root", Strategy::OneForOne).on_event(h);
    let sup = start(spec, &events);
    let root = sup.handle();
    let before = root.progress();
    let starter = {
        let root = root.clone();
        std::thread::spawn(move || root.start_child(slow))
    };
    // Its thread runs and waits: the root waits for it to be ready.
    asked.recv_timeout(WAIT).unwrap();
    assert!(
        root.count_children_within(Duration::from_millis(50))
            .is_err(),
        "busy"
    );
    assert!(root.progress() > before, "at work");
    go_tx.send(()).unwrap();
    starter.join().unwrap().unwrap();
    assert_eq!(root.count_children_within(WAIT).unwrap().workers, 1);
    sup.shutdown().unwrap();
}

#[test]
fn ended_tells_a_select_that_the_supervisor_gave_up() {
    let live = Live::default();
    let (a, tx) = worker("a", &live);
    let spec = SupervisorSpec::new("root", Strategy::OneForOne)
        .intensity(0, Duration::from_secs(60))
        .child(a);
    let sup = Supervisor::start(spec).unwrap();
    let ended = sup.ended();
    assert!(ended.try_recv().is_err_and(|e| e.is_empty()), "running");
    tx.send(Do::Panic).unwrap();
    assert!(ended.recv_timeout(WAIT).is_err_and(|e| e.is_disconnected()));
    assert!(matches!(sup.wait(), Err(SupervisorError::Escalated { .. })));
}

/// OTP refuses two children of one id at init: the second would never be
/// restarted, stopped or seen to exit (its exits were taken for the
/// first's stale ones).
#[test]
fn two_children_of_one_id_are_refused() {
    let live = Live::default();
    let (a, _) = worker("w", &live);
    let (b, _) = worker("w", &live);
    let spec = SupervisorSpec::new("dup", Strategy::OneForOne)
        .child(a)
        .child(b);
    match Supervisor::start(spec) {
        Err(SupervisorError::StartFailed { child, reason, .. }) => {
            assert_eq!(child, "w");
            assert!(reason.contains("same id"), "{reason}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("started with two children named w"),
    }
}

/// A detached thread that ends at last is no longer reported as detached
/// (before, the list only grew: every snapshot and `mcpvisor status`
/// kept naming threads long gone).
#[test]
fn a_detached_thread_that_ends_leaves_the_report() {
    let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(1);
    let spec = SupervisorSpec::new("root", Strategy::OneForOne).child(
        ChildSpec::worker("stubborn", move |_| {
            let _ = release_rx.recv(); // ignores the stop signal
            Ok(())
        })
        .shutdown(Shutdown::Brutal),
    );
    let sup = Supervisor::start(spec).unwrap();
    let handle = sup.handle();
    handle.terminate_child("stubborn").unwrap();
    assert_eq!(handle.snapshot().unwrap().detached, ["stubborn"]);
    release_tx.send(()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !handle.snapshot().unwrap().detached.is_empty() {
        assert!(std::time::Instant::now() < deadline, "still reported");
        std::thread::sleep(Duration::from_millis(5));
    }
    sup.shutdown().unwrap();
}

/// A period of zero is taken as MIN_PERIOD: a child that cannot start
/// makes the supervisor give up instead of being retried for ever.
#[test]
fn a_zero_period_still_escalates() {
    let tries = Arc::new(AtomicUsize::new(0));
    let t = tries.clone();
    let spec = SupervisorSpec::new("zero", Strategy::OneForOne)
        .intensity(3, Duration::ZERO)
        .child(ChildSpec::worker("crashes", move |_| {
            t.fetch_add(1, Ordering::SeqCst);
            panic!("at once")
        }));
    let sup = Supervisor::start(spec).unwrap();
    let handle = sup.handle();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while handle.snapshot().is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "still restarting after {} tries",
            tries.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
