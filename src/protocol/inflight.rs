//! A session's requests in flight, by id: what makes an id in use, what
//! counts against the in-flight limit, and whose entry leaves when.
//!
//! A request stays in the table until its answer is queued for the
//! client (whoever waits for the session to go idle then finds it
//! there), but from the moment its answer is about to leave it no longer
//! holds its id: a client may reuse an id as soon as it reads the
//! answer, which can be before the handler's thread has taken the
//! request out. A new request with that id then takes the entry's place;
//! the old one stays in flight, set aside, until it ends (its answer may
//! still be on its way to the client's queue), and its end leaves the new
//! entry alone. (So a client that sends an id again before it has the
//! answer, against the rule, is refused only while the first is running:
//! one arriving while the answer is committed but not yet queued is run,
//! and each gets its answer.)

use super::cancel::CancelToken;
use crate::jsonrpc::RequestId;
use crate::sync::FastMap;

/// One request in flight.
struct Entry {
    /// Its cancellation token, which also tells its entry from one that
    /// took its place under the same id.
    cancel: CancelToken,
    /// Its answer is on its way: its id is free again.
    answered: bool,
}

/// The requests of one session in flight.
#[derive(Default)]
pub(crate) struct InFlight {
    entries: FastMap<RequestId, Entry>,
    /// Requests whose id a new request took (answered ones: the caller
    /// checks [`InFlight::holds`] first), until they end.
    set_aside: Vec<Entry>,
    /// Of the entries and those set aside, those answered.
    answered: usize,
}

impl InFlight {
    /// Whether a request in flight holds `id`: one whose answer is not on
    /// its way yet. A request reusing it must be refused.
    pub(crate) fn holds(&self, id: &RequestId) -> bool {
        self.entries.get(id).is_some_and(|e| !e.answered)
    }

    /// Whether any entry, answered or not, has `id` (a redelivered copy of
    /// its request can be dropped).
    pub(crate) fn has(&self, id: &RequestId) -> bool {
        self.entries.contains_key(id)
    }

    /// Requests in flight whose answer has not left: what counts against
    /// the session's limit.
    pub(crate) fn unanswered(&self) -> usize {
        self.len() - self.answered
    }

    /// Requests in flight, answered or not.
    pub(crate) fn len(&self) -> usize {
        self.entries.len() + self.set_aside.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds request `id` with `cancel`; the caller checked
    /// [`InFlight::holds`]. An answered entry with that id is set aside.
    pub(crate) fn join(&mut self, id: RequestId, cancel: CancelToken) {
        let entry = Entry {
            cancel,
            answered: false,
        };
        if let Some(old) = self.entries.insert(id, entry) {
            debug_assert!(old.answered, "joined over a request holding its id");
            self.set_aside.push(old);
        }
    }

    /// The answer of request `id` (the one with `cancel`) is about to
    /// leave.
    pub(crate) fn answering(&mut self, id: &RequestId, cancel: &CancelToken) {
        if let Some(e) = self.entries.get_mut(id) {
            if e.cancel.same(cancel) && !e.answered {
                e.answered = true;
                self.answered += 1;
            }
        }
    }

    /// Request `id` (the one with `cancel`) has ended; an entry that took
    /// its place stays.
    pub(crate) fn leave(&mut self, id: &RequestId, cancel: &CancelToken) {
        if self.entries.get(id).is_some_and(|e| e.cancel.same(cancel)) {
            if self.entries.remove(id).is_some_and(|e| e.answered) {
                self.answered -= 1;
            }
        } else if let Some(at) = self.set_aside.iter().position(|e| e.cancel.same(cancel)) {
            if self.set_aside.swap_remove(at).answered {
                self.answered -= 1;
            }
        }
    }

    /// The token of the request holding `id` (to cancel it).
    pub(crate) fn token(&self, id: &RequestId) -> Option<CancelToken> {
        self.entries.get(id).map(|e| e.cancel.clone())
    }

    /// Every request's token, those set aside too.
    pub(crate) fn tokens(&self) -> impl Iterator<Item = &CancelToken> {
        self.entries
            .values()
            .chain(&self.set_aside)
            .map(|e| &e.cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answered_request_frees_its_id_and_its_end_leaves_the_new_entry() {
        let mut table = InFlight::default();
        let (id, first, second) = (RequestId::Number(1), CancelToken::new(), CancelToken::new());
        table.join(id.clone(), first.clone());
        assert!(table.holds(&id));
        assert_eq!(table.unanswered(), 1);
        table.answering(&id, &first);
        assert!(!table.holds(&id), "its answer is on its way");
        assert!(table.has(&id));
        assert_eq!((table.len(), table.unanswered()), (1, 0));
        // The client read the answer and reused the id at once; the first
        // is still in flight until it ends (its answer may not be queued).
        table.join(id.clone(), second.clone());
        assert!(table.holds(&id));
        assert_eq!((table.len(), table.unanswered()), (2, 1));
        assert_eq!(table.tokens().count(), 2);
        // The first request's end, late: the second stays.
        table.leave(&id, &first);
        assert!(table.holds(&id));
        assert_eq!((table.len(), table.unanswered()), (1, 1));
        table.answering(&id, &first);
        assert_eq!(
            table.unanswered(),
            1,
            "the first cannot answer for the second"
        );
        table.answering(&id, &second);
        table.leave(&id, &second);
        assert!(table.is_empty());
        assert_eq!(table.answered, 0);
    }

    #[test]
    fn a_request_set_aside_keeps_the_table_busy_until_it_ends() {
        let mut table = InFlight::default();
        let (id, first, second) = (RequestId::Number(1), CancelToken::new(), CancelToken::new());
        table.join(id.clone(), first.clone());
        table.answering(&id, &first);
        table.join(id.clone(), second.clone());
        // The second ends first: the first, set aside, is still in flight.
        table.answering(&id, &second);
        table.leave(&id, &second);
        assert!(!table.has(&id));
        assert_eq!((table.len(), table.unanswered()), (1, 0));
        assert!(!table.is_empty());
        table.leave(&id, &first);
        assert!(table.is_empty());
        assert_eq!(table.answered, 0);
    }

    #[test]
    fn a_request_refused_after_joining_leaves_unanswered() {
        let mut table = InFlight::default();
        let (id, token) = (RequestId::Number(7), CancelToken::new());
        table.join(id.clone(), token.clone());
        table.leave(&id, &token);
        assert!(!table.has(&id));
        assert_eq!((table.len(), table.answered), (0, 0));
    }
}
