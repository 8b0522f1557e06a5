//! A broker link: one connection and one channel, owned by one thread (an
//! amiquip `Channel` is `Send` but not `Sync`), reconnected with backoff and
//! jitter after a failure, never after an intentional stop. Both the server
//! and the client side run their message loops inside [`run`].

use super::config::{AmqpConfig, AmqpEvent};
use super::connect::open;
use amiquip::{Channel, Connection};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

/// How one connection's message loop ended.
pub(crate) enum Outcome {
    /// The owner asked to stop: close and do not reconnect.
    Stop,
    /// The connection or channel failed: reconnect.
    Lost(String),
}

/// Whether `stop` was signalled (its sender dropped).
pub(crate) fn stopped(stop: &Receiver<()>) -> bool {
    matches!(stop.try_recv(), Err(TryRecvError::Disconnected) | Ok(()))
}

/// Runs `serve(connection, channel, generation, up)` over a connection
/// (`first`, if given, then fresh ones) until it returns [`Outcome::Stop`]
/// or `stop` is signalled (`Ok`), or every reconnection attempt failed
/// (`Err`, after [`AmqpEvent::GaveUp`]). A connection that came up (`serve`
/// sets `up` once its topology is declared and it consumes) restarts the
/// attempts; one the broker took and then refused counts as a failed
/// attempt, and so many connections in a row lost before the backoff's
/// `reset_after` ([`QuickDrops`](super::super::reconnect::QuickDrops)) end
/// it too, or either would be tried for ever.
///
/// `generations` numbers the connections and is owned by the caller, so
/// the numbers only ever grow, also across restarts of this loop by a
/// supervisor: work that outlives a connection (a handler still running)
/// carries its connection's number, and a delivery tag of an older
/// connection is never taken for one of the current connection.
pub(crate) fn run(
    config: &AmqpConfig,
    stop: &Receiver<()>,
    generations: &AtomicU64,
    mut first: Option<Connection>,
    mut serve: impl FnMut(&mut Connection, &Channel, u64, &Cell<bool>) -> Outcome,
) -> Result<(), String> {
    let mut delays = config.reconnect.delays();
    let mut quick = super::super::reconnect::QuickDrops::default();
    // Set when connections keep being lost as soon as they are up.
    let mut give_up = false;
    loop {
        let connection = match first.take() {
            Some(c) => Ok(c),
            None => open(&config.url, config.heartbeat_secs).map_err(|e| e.to_string()),
        };
        let why = match connection {
            Ok(mut conn) => match conn.open_channel(None) {
                // Stopped while it connected: nothing is served on it.
                Ok(channel) if stopped(stop) => {
                    let _ = channel.close();
                    let _ = conn.close();
                    config.emit(AmqpEvent::Closed);
                    return Ok(());
                }
                Ok(channel) => {
                    let generation = generations.fetch_add(1, Ordering::SeqCst) + 1;
                    config.emit(AmqpEvent::Connected { generation });
                    let up = Cell::new(false);
                    let since = std::time::Instant::now();
                    let outcome = serve(&mut conn, &channel, generation, &up);
                    match outcome {
                        Outcome::Stop => {
                            let _ = channel.close();
                            let _ = conn.close();
                            config.emit(AmqpEvent::Closed);
                            return Ok(());
                        }
                        Outcome::Lost(why) => {
                            config.emit(AmqpEvent::Disconnected(why.clone()));
                            // A connection that came up: the outage gets
                            // every attempt, unless connections keep being
                            // dropped at once (a message the broker refuses,
                            // published again each time).
                            if up.get() {
                                delays = config.reconnect.delays();
                                if !quick.go_on(&config.reconnect, since.elapsed()) {
                                    give_up = true;
                                }
                            }
                            why
                        }
                    }
                }
                Err(e) => format!("cannot open a channel: {e}"),
            },
            Err(e) => e,
        };
        if stopped(stop) {
            config.emit(AmqpEvent::Closed);
            return Ok(());
        }
        let Some(delay) = delays.next().filter(|_| !give_up) else {
            let why = if give_up {
                format!(
                    "{} connections in a row were lost within {:?} of coming up; last error: {why}",
                    config.reconnect.max_attempts, config.reconnect.backoff.reset_after
                )
            } else {
                format!(
                    "{} reconnection attempts failed; last error: {why}",
                    config.reconnect.max_attempts
                )
            };
            config.emit(AmqpEvent::GaveUp(why.clone()));
            return Err(why);
        };
        log::info!("amqp: reconnecting in {delay:?} ({why})");
        if !matches!(stop.recv_timeout(delay), Err(RecvTimeoutError::Timeout)) {
            config.emit(AmqpEvent::Closed);
            return Ok(());
        }
    }
}
