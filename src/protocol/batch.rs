//! JSON-RPC batches (revisions before 2025-06-18): the responses to a
//! batch's requests go back together as one array.

use super::sink::{Outgoing, Sink};
use crate::jsonrpc::Reply;
use crate::sync::lock;
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Collects the responses of one batch and sends them as one array.
pub(crate) struct Collector {
    parent: Arc<dyn Sink>,
    state: Mutex<(usize, Vec<Value>)>,
}

impl Collector {
    /// `expected`: how many requests of the batch will end (with a response
    /// or suppressed by cancellation).
    pub(crate) fn new(parent: Arc<dyn Sink>, expected: usize) -> Collector {
        Collector {
            parent,
            state: Mutex::new((expected, Vec::with_capacity(expected))),
        }
    }
}

impl Sink for Collector {
    fn send(&self, out: Outgoing) {
        let (done, last_cancelled) = {
            let mut st = lock(&self.state);
            let cancelled = match out {
                Outgoing::Response(reply) => {
                    st.1.push(reply.into_value());
                    None
                }
                Outgoing::Suppressed { id } => Some(id),
                other => return self.parent.send(other),
            };
            st.0 = st.0.saturating_sub(1);
            let done = (st.0 == 0).then(|| std::mem::take(&mut st.1));
            (done, cancelled)
        };
        match (done, last_cancelled) {
            (Some(responses), _) if !responses.is_empty() => self
                .parent
                .send(Outgoing::Response(Reply::Batch(responses))),
            // Every request was cancelled: nothing is written, but whoever
            // waits for the batch's end (an HTTP stream) learns it ended.
            (Some(_), Some(id)) => self.parent.send(Outgoing::Suppressed { id }),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RequestId;

    /// A collector of `expected` requests and what it passes on.
    fn collector(expected: usize) -> (Collector, Arc<Mutex<Vec<Outgoing>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let parent: Arc<dyn Sink> = Arc::new(move |out: Outgoing| lock(&record).push(out));
        (Collector::new(parent, expected), seen)
    }

    fn cancelled(id: i64) -> Outgoing {
        Outgoing::Suppressed {
            id: RequestId::Number(id),
        }
    }

    #[test]
    fn a_batch_whose_requests_were_all_cancelled_still_ends() {
        // #11 item 6: nothing was sent, so the HTTP stream waited forever.
        let (c, seen) = collector(2);
        c.send(cancelled(1));
        assert!(lock(&seen).is_empty());
        c.send(cancelled(2));
        assert!(matches!(
            lock(&seen).as_slice(),
            [Outgoing::Suppressed { .. }]
        ));
        // One answered, one cancelled: the array holds the answer.
        let (c, seen) = collector(2);
        c.send(cancelled(1));
        c.send(Outgoing::Response(Reply::Result(
            RequestId::Number(2),
            serde_json::json!({}).into(),
        )));
        assert!(matches!(
            lock(&seen).as_slice(),
            [Outgoing::Response(Reply::Batch(answers))] if answers.len() == 1
        ));
    }
}
