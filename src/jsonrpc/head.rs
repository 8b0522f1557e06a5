//! The id of a response read from its first bytes alone: a message too
//! large to keep whole is discarded as it is read, but when it answers a
//! call, the call should fail at once rather than wait for its timeout.

use super::RequestId;

/// The id of the response whose first bytes are `head`, if `head` shows
/// it is one: a JSON object whose top-level members, as far as `head`
/// goes, include `id` and `result` or `error`, and no `method` (a request
/// has an `id` too). `None` when `head` ends first, or says otherwise.
pub(crate) fn response_id(head: &[u8]) -> Option<RequestId> {
    let mut s = Scan { b: head, i: 0 };
    s.ws();
    s.eat(b'{')?;
    let (mut id, mut answer) = (None, false);
    loop {
        s.ws();
        let key = s.token(Scan::string)?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        match key {
            b"\"method\"" => return None,
            b"\"result\"" | b"\"error\"" => {
                if id.is_some() {
                    return id;
                }
                answer = true;
                s.token(Scan::value)?;
            }
            b"\"id\"" => {
                let value = serde_json::from_slice(s.token(Scan::value)?).ok()?;
                id = Some(RequestId::bounded(&value)?);
            }
            _ => {
                s.token(Scan::value)?;
            }
        }
        s.ws();
        match s.next()? {
            b',' => {}
            b'}' => return id.filter(|_| answer),
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
        let id = |head: &str| response_id(head.as_bytes());
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
}
