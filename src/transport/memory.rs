//! An in-process channel pair: two connected endpoints in one process, with
//! the same semantics as any other transport (every message is serialized
//! and validated on arrival). A server serves one end (`Server::serve_memory`),
//! a client uses the other (`MemoryEnd::into_connection`).

use super::custom::{ConnectionOptions, ServerConnection};
use crate::protocol::{Engine, Outgoing, Sink};
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

/// Messages in flight in one direction before the sender waits.
pub const PAIR_CAPACITY: usize = 1024;

/// One end of a pair.
pub struct MemoryEnd {
    tx: Sender<Vec<u8>>,
    rx: Receiver<Vec<u8>>,
}

/// Two connected ends.
pub fn pair() -> (MemoryEnd, MemoryEnd) {
    let (a_tx, b_rx) = crossbeam_channel::bounded(PAIR_CAPACITY);
    let (b_tx, a_rx) = crossbeam_channel::bounded(PAIR_CAPACITY);
    (
        MemoryEnd { tx: a_tx, rx: a_rx },
        MemoryEnd { tx: b_tx, rx: b_rx },
    )
}

struct EndSink(Sender<Vec<u8>>);

impl Sink for EndSink {
    fn send(&self, out: Outgoing) {
        if let Some(text) = out.to_text() {
            // The other end is gone: nowhere to deliver.
            let _ = self.0.send(text.into_bytes());
        }
    }
}

/// Serves `end` until the other end is dropped; in-flight work then gets
/// `grace` before it is cancelled.
pub fn serve(engine: &Arc<Engine>, end: MemoryEnd, grace: Duration) {
    let MemoryEnd { tx, rx } = end;
    let options = ConnectionOptions::default().with_shutdown_grace(grace);
    let (stop, _) = crossbeam_channel::bounded(0);
    let conn = ServerConnection::with_sink(engine, Arc::new(EndSink(tx)), &options, stop);
    for bytes in rx {
        conn.receive(&bytes);
    }
    conn.close();
}

#[cfg(feature = "client")]
mod client_end {
    use super::MemoryEnd;
    use crate::transport::connection::{Connection, MessageReader, MessageWriter};
    use crossbeam_channel::{Receiver, Sender};
    use serde_json::Value;
    use std::io;

    struct EndWriter(Option<Sender<Vec<u8>>>);

    impl MessageWriter for EndWriter {
        fn write(&mut self, message: &Value) -> io::Result<()> {
            let tx = self
                .0
                .as_ref()
                .ok_or_else(|| io::Error::from(io::ErrorKind::BrokenPipe))?;
            tx.send(crate::jsonrpc::to_text(message).into_bytes())
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn close(&mut self) {
            self.0.take();
        }
    }

    struct EndReader(Receiver<Vec<u8>>);

    impl MessageReader for EndReader {
        fn read(&mut self) -> io::Result<Option<Vec<u8>>> {
            Ok(self.0.recv().ok())
        }
    }

    impl MemoryEnd {
        /// This end as a client connection.
        pub fn into_connection(self) -> Connection {
            Connection::new(
                Box::new(EndWriter(Some(self.tx))),
                Box::new(EndReader(self.rx)),
            )
        }
    }
}
