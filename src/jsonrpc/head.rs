//! What a message is, and its id, read from its first bytes alone: a
//! message too large to keep whole is discarded as it is read, but a
//! request should still be answered with its id, and when it answers a
//! call, the call should fail at once rather than wait for its timeout.

use super::RequestId;

/// What the first bytes of a message show it to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// A request: an `id` and a `method`.
    Request(RequestId),
    /// A response (an answer to a call): an `id` and a `result` or `error`.
    Response(RequestId),
    /// A notification: a `method`, and no `id` in the whole object.
    Notification,
}

/// What the message whose first bytes are `head` is, if `head` shows it:
/// a JSON object whose top-level members, as far as `head` goes, include
/// `id` and `method` (a request), or `id` and `result` or `error` (a
/// response); or a whole object with a `method` and no `id` (a
/// notification). `None` when `head` ends first, or says otherwise (an
/// id that is null or too long, a `method` beside a `result`).
pub(crate) fn read(head: &[u8]) -> Option<Head> {
    let mut s = Scan { b: head, i: 0 };
    s.ws();
    s.eat(b'{')?;
    let (mut id, mut method, mut answer) = (None, false, false);
    loop {
        s.ws();
        let key = s.token(Scan::string)?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        // Decided as soon as the members say: what follows may be cut.
        match key {
            b"\"method\"" => {
                if answer {
                    return None;
                }
                if let Some(id) = id.take() {
                    return Some(Head::Request(id));
                }
                method = true;
                s.token(Scan::value)?;
            }
            b"\"result\"" | b"\"error\"" => {
                if method {
                    return None;
                }
                if let Some(id) = id.take() {
                    return Some(Head::Response(id));
                }
                answer = true;
                s.token(Scan::value)?;
            }
            b"\"id\"" => {
                let value = serde_json::from_slice(s.token(Scan::value)?).ok()?;
                let found = RequestId::bounded(&value)?;
                if method {
                    return Some(Head::Request(found));
                }
                if answer {
                    return Some(Head::Response(found));
                }
                id = Some(found);
            }
            _ => {
                s.token(Scan::value)?;
            }
        }
        s.ws();
        match s.next()? {
            b',' => {}
            // Whole: an id with neither a method nor an answer says
            // nothing, nor does an answer without an id.
            b'}' => return (method && id.is_none()).then_some(Head::Notification),
            _ => return None,
        }
    }
}

/// A cursor over `b`; every step fails (`None`) where `b` ends early or
/// does not hold JSON.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.b.get(self.i)?;
        self.i += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }

    /// The bytes `step` passes over.
    fn token(&mut self, step: fn(&mut Self) -> Option<()>) -> Option<&'a [u8]> {
        let start = self.i;
        step(self)?;
        Some(&self.b[start..self.i])
    }

    /// A string, with its quotes.
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => {
                    self.next()?;
                }
                _ => {}
            }
        }
    }

    /// Any value, nested ones whole.
    fn value(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.b.get(self.i)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    self.i += 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
            }
            _ => {
                // A number or a literal: complete only where something
                // follows it.
                let start = self.i;
                while !matches!(*self.b.get(self.i)?, b',' | b'}' | b']')
                    && !self.b[self.i].is_ascii_whitespace()
                {
                    self.i += 1;
                }
                (self.i > start).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_of_a_response_is_read_from_its_head() {
        let id = |head: &str| match read(head.as_bytes()) {
            Some(Head::Response(id)) => Some(id),
            _ => None,
        };
        // The id before the (cut) result: ours, whatever comes first.
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":7,"result":{"contents":[{"text":"xxxx"#),
            Some(RequestId::Number(7))
        );
        assert_eq!(
            id(r#" { "_meta": {"a": [1, {"b": "}"}]}, "id" : "s\"1", "error": {"#),
            Some(RequestId::String("s\"1".into()))
        );
        assert_eq!(
            id(r#"{"result":{},"jsonrpc":"2.0","id":3}"#),
            Some(RequestId::Number(3)),
            "whole, in any order"
        );
        // Not a response, or not known to be one.
        for head in [
            r#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"#,
            r#"{"jsonrpc":"2.0","id":7,"params":{"x":"#,
            r#"{"jsonrpc":"2.0","result":{"text":"xxxx"#,
            r#"{"jsonrpc":"2.0","id":7"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{}}"#,
            r#"[{"id":1,"result":{}}]"#,
            "not json",
            "",
        ] {
            assert_eq!(id(head), None, "{head}");
        }
    }

    #[test]
    fn a_request_and_a_notification_are_told_from_their_head() {
        let head = |text: &str| read(text.as_bytes());
        assert_eq!(
            head(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"x":"xx"#),
            Some(Head::Request(RequestId::Number(7)))
        );
        assert_eq!(
            head(r#"{"method":"ping", "id" : "a", "params":{"#),
            Some(Head::Request(RequestId::String("a".into()))),
            "the method first"
        );
        assert_eq!(
            head(r#"{"jsonrpc":"2.0","method":"notifications/x","params":{}}"#),
            Some(Head::Notification),
            "whole, without an id"
        );
        for text in [
            // Cut before it says whether an id follows.
            r#"{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"#,
            r#"{"jsonrpc":"2.0","params":{},"method":"x""#,
            // A method beside an answer is neither.
            r#"{"method":"x","result":{},"id":1}"#,
            r#"{"result":{},"method":"x","id":1}"#,
            r#"{"jsonrpc":"2.0","id":7,"params":{}}"#,
        ] {
            assert_eq!(head(text), None, "{text}");
        }
    }
}
