//! AMQP test helpers: per-test broker names and their cleanup.

use mcpvisor::transport::amqp::{open, AmqpConfig};
use std::time::Duration;

/// The local broker (`.ci/run` starts it).
pub const BROKER: &str = "amqp://guest:guest@127.0.0.1:5672";

/// A configuration private to one test: its own names everywhere.
pub fn config(test: &str) -> AmqpConfig {
    let _ = env_logger::builder()
        .is_test(true)
        .filter_module(mcpvisor::SECRET_LOGGING_MODULE, log::LevelFilter::Info)
        .try_init();
    let tag = &mcpvisor::protocol::new_session_id()[..8];
    let mut c = AmqpConfig::new(BROKER, format!("{test}-{tag}")).unwrap();
    c.reconnect.backoff.initial = Duration::from_millis(20);
    c.reconnect.backoff.max = Duration::from_millis(200);
    c.exchange = format!("mcp.test.{test}.{tag}");
    c.dead_letter_exchange = format!("mcp.test.{test}.{tag}.dlx");
    c.dead_letter_queue = format!("mcp.test.{test}.{tag}.dead");
    c
}

/// Deletes a test's durable queues and exchanges when the test ends.
pub struct Cleanup(pub AmqpConfig);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let c = &self.0;
        let Ok(mut conn) = open(&c.url, 0) else {
            return;
        };
        // A failed delete closes the channel: one channel per object.
        for queue in [c.request_queue(), c.dead_letter_queue.clone()] {
            if let Ok(ch) = conn.open_channel(None) {
                let _ = ch.queue_delete(queue, Default::default());
            }
        }
        if c.exchange.starts_with("mcp.test.") {
            for ex in [
                c.servers_exchange(),
                c.exchange.clone(),
                c.dead_letter_exchange.clone(),
            ] {
                if let Ok(ch) = conn.open_channel(None) {
                    let _ = ch.exchange_delete(ex, false);
                }
            }
        }
        let _ = conn.close();
    }
}
