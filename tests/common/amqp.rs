//! AMQP test helpers: per-test broker names and their cleanup.

use mcpvisor::transport::amqp::{open, AmqpConfig};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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

/// A TCP proxy in front of the broker that the test can cut (every open
/// connection dies), close (and refuse new ones) or hold (what the broker
/// sends waits in the proxy until released): a network failure or a slow
/// broker without disturbing the broker for the other tests.
pub struct Proxy {
    port: u16,
    closed: Arc<AtomicBool>,
    /// While set, new connections are accepted and dropped at once.
    pub refusing: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    /// While true, bytes from the broker are not passed on.
    held: Arc<(Mutex<bool>, Condvar)>,
    /// What the broker sent while held.
    withheld: Arc<Mutex<Vec<u8>>>,
}

impl Proxy {
    pub fn start() -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Proxy {
            port,
            closed: Arc::default(),
            refusing: Arc::default(),
            conns: Arc::default(),
            held: Arc::default(),
            withheld: Arc::default(),
        };
        let (closed, refusing, conns, held, withheld) = (
            proxy.closed.clone(),
            proxy.refusing.clone(),
            proxy.conns.clone(),
            proxy.held.clone(),
            proxy.withheld.clone(),
        );
        std::thread::spawn(move || {
            for inbound in listener.incoming() {
                if closed.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(inbound) = inbound else { continue };
                if refusing.load(Ordering::SeqCst) {
                    continue;
                }
                let Ok(upstream) = TcpStream::connect("127.0.0.1:5672") else {
                    continue;
                };
                let _ = inbound.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                conns
                    .lock()
                    .unwrap()
                    .extend([inbound.try_clone().unwrap(), upstream.try_clone().unwrap()]);
                let pairs = [
                    (
                        inbound.try_clone().unwrap(),
                        upstream.try_clone().unwrap(),
                        None,
                    ),
                    (upstream, inbound, Some(held.clone())),
                ];
                for (mut from, mut to, held) in pairs {
                    let withheld = withheld.clone();
                    // Read on, whatever is held: what comes while held is
                    // recorded and queued, and written once released.
                    let (chunks_tx, chunks) = crossbeam_channel::unbounded::<Vec<u8>>();
                    let gate = held.clone();
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 16 * 1024];
                        while let Ok(n @ 1..) = from.read(&mut buf) {
                            if gate.as_ref().is_some_and(|g| *g.0.lock().unwrap()) {
                                withheld.lock().unwrap().extend_from_slice(&buf[..n]);
                            }
                            if chunks_tx.send(buf[..n].to_vec()).is_err() {
                                break;
                            }
                        }
                    });
                    std::thread::spawn(move || {
                        for chunk in chunks {
                            if let Some(held) = &held {
                                let (lock, released) = &**held;
                                let mut h = lock.lock().unwrap();
                                while *h {
                                    h = released.wait(h).unwrap();
                                }
                            }
                            if to.write_all(&chunk).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        proxy
    }

    pub fn url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}", self.port)
    }

    /// Kills every connection through the proxy.
    pub fn cut(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }

    /// Cuts and refuses every later connection.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        self.cut();
    }

    /// From now on, what the broker sends waits in the proxy ...
    pub fn hold(&self) {
        *self.held.0.lock().unwrap() = true;
    }

    /// Whether what the broker sent while held contains `needle`.
    pub fn withheld(&self, needle: &str) -> bool {
        let bytes = self.withheld.lock().unwrap();
        bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
    }

    /// ... until this passes it on.
    pub fn release(&self) {
        *self.held.0.lock().unwrap() = false;
        self.held.1.notify_all();
    }
}
