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
/// sets `up` once its topology is declared and it consumes) and served
/// for the backoff's `reset_after` restarts the attempts; one the broker
/// took and then refused, or dropped sooner, counts as a failed attempt,
/// or it would be tried for ever.
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
                            // Only a connection that served a while starts
                            // the attempts over: one the broker drops each
                            // time at once (a message it refuses, published
                            // again) uses them up.
                            if up.get() && since.elapsed() >= config.reconnect.backoff.reset_after {
                                delays = config.reconnect.delays();
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
        let Some(delay) = delays.next() else {
            let why = format!(
                "{} reconnection attempts failed; last error: {why}",
                config.reconnect.max_attempts
            );
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
