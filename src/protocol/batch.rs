//! JSON-RPC batches (revisions before 2025-06-18): the responses to a
//! batch's requests go back together as one array.

use super::sink::{Outgoing, Sink};
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
        let done = {
            let mut st = lock(&self.state);
            match out {
                Outgoing::Response { message, .. } => st.1.push(message),
                Outgoing::Suppressed { .. } => {}
                other => return self.parent.send(other),
            }
            st.0 = st.0.saturating_sub(1);
            (st.0 == 0 && !st.1.is_empty()).then(|| std::mem::take(&mut st.1))
        };
        if let Some(responses) = done {
            self.parent.send(Outgoing::Response {
                id: None,
                message: Value::Array(responses),
            });
        }
    }
}
