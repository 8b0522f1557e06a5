//! Where in the file a key path is: the structured path the reader
//! carries, and a small scan of the (already valid) JSON text that finds
//! the line and column of what it names, or of a key given twice.

use std::fmt;

/// One step of a [`KeyPath`].
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

/// A path to a value of the configuration, as the keys and indexes that
/// lead to it. It is shown as `commands.disk.argv[0]`; it is never read
/// back from that text, so a key holding dots or brackets is one step.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct KeyPath(Vec<Step>);

impl KeyPath {
    /// The path to `key` of the object at this path.
    pub(super) fn key(&self, key: &str) -> KeyPath {
        let mut steps = self.0.clone();
        steps.push(Step::Key(key.to_owned()));
        KeyPath(steps)
    }

    /// The path to element `n` of the array at this path.
    pub(super) fn index(&self, n: usize) -> KeyPath {
        let mut steps = self.0.clone();
        steps.push(Step::Index(n));
        KeyPath(steps)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, step) in self.0.iter().enumerate() {
            match step {
                Step::Key(k) if n == 0 => f.write_str(k)?,
                Step::Key(k) => write!(f, ".{k}")?,
                Step::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

/// The 1-based line and column of the key (or element) that `path` names
/// in JSON `text`; `None` when the text does not hold it.
pub(super) fn locate(text: &str, path: &KeyPath) -> Option<(usize, usize)> {
    let offset = Scan::new(text).find(&path.0)?;
    Some(position(text, offset))
}

/// The 1-based line and column of byte `offset` of `text`.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

/// The first key that appears twice in one object of the valid JSON
/// `text` (a parser keeps only the last: a typo that must not pass), as
/// its offset and key path.
pub(super) fn duplicate_key(text: &str) -> Option<(usize, KeyPath)> {
    Scan::new(text).duplicate(&KeyPath::default()).flatten()
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn new(text: &'a str) -> Self {
        Scan {
            b: text.as_bytes(),
            i: 0,
        }
    }

    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    /// Skips the string starting at `i`; returns where its raw contents are.
    fn string(&mut self) -> Option<(usize, usize)> {
        let start = self.i + 1;
        let mut j = start;
        while j < self.b.len() {
            match self.b[j] {
                b'\\' => j += 2,
                b'"' => {
                    self.i = j + 1;
                    return Some((start, j));
                }
                _ => j += 1,
            }
        }
        None
    }

    /// The object key starting at `i`, unescaped, and the `:` after it
    /// skipped; with the key's offset.
    fn key(&mut self) -> Option<(usize, String)> {
        let at = self.i;
        let (_, to) = self.string()?;
        let key = serde_json::from_slice(&self.b[at..=to]).ok()?;
        self.ws();
        self.i += 1; // ':'
        Some((at, key))
    }

    /// Skips one value.
    fn skip(&mut self) -> Option<()> {
        self.ws();
        match *self.b.get(self.i)? {
            b'"' => self.string().map(drop),
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                self.i += 1;
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        c if c == close => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' | b':' => self.i += 1,
                        _ => self.skip()?,
                    }
                }
            }
            _ => {
                while self.i < self.b.len() && !b",:]} \t\r\n".contains(&self.b[self.i]) {
                    self.i += 1;
                }
                Some(())
            }
        }
    }

    /// Looks for a repeated key in the value at `i` (at `path`); the
    /// outer `None` means the text ended early.
    fn duplicate(&mut self, path: &KeyPath) -> Option<Option<(usize, KeyPath)>> {
        self.ws();
        match *self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                let mut seen = std::collections::HashSet::new();
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b'}' => {
                            self.i += 1;
                            return Some(None);
                        }
                        b',' => self.i += 1,
                        b'"' => {
                            let (at, key) = self.key()?;
                            let here = path.key(&key);
                            if !seen.insert(key) {
                                return Some(Some((at, here)));
                            }
                            if let Some(d) = self.duplicate(&here)? {
                                return Some(Some(d));
                            }
                        }
                        _ => return None,
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut n = 0;
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b']' => {
                            self.i += 1;
                            return Some(None);
                        }
                        b',' => {
                            self.i += 1;
                            n += 1;
                        }
                        _ => {
                            if let Some(d) = self.duplicate(&path.index(n))? {
                                return Some(Some(d));
                            }
                        }
                    }
                }
            }
            _ => self.skip().map(|()| None),
        }
    }

    /// The offset of what `steps` names, from the value at `i`.
    fn find(&mut self, steps: &[Step]) -> Option<usize> {
        self.ws();
        let Some((step, rest)) = steps.split_first() else {
            return Some(self.i);
        };
        match (step, *self.b.get(self.i)?) {
            (Step::Key(wanted), b'{') => {
                self.i += 1;
                loop {
                    self.ws();
                    match *self.b.get(self.i)? {
                        b'}' => return None,
                        b',' => self.i += 1,
                        b'"' => {
                            let (at, key) = self.key()?;
                            if key == *wanted {
                                return if rest.is_empty() {
                                    Some(at)
                                } else {
                                    self.find(rest)
                                };
                            }
                            self.skip()?;
                        }
                        _ => return None,
                    }
                }
            }
            (Step::Index(n), b'[') => {
                self.i += 1;
                // Element `n` is there only if the array has not ended
                // before it.
                for k in 0..=*n {
                    self.ws();
                    if self.b.get(self.i) == Some(&b']') {
                        return None;
                    }
                    if k == *n {
                        break;
                    }
                    self.skip()?;
                    self.ws();
                    if self.b.get(self.i) == Some(&b',') {
                        self.i += 1;
                    }
                }
                self.find(rest)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(keys: &[&str]) -> KeyPath {
        keys.iter().fold(KeyPath::default(), |p, k| p.key(k))
    }

    #[test]
    fn a_path_shows_dots_between_keys_and_brackets_around_indexes() {
        assert_eq!(path(&[]).to_string(), "");
        assert_eq!(
            path(&["a.b", "x[1]"]).index(0).index(2).to_string(),
            "a.b.x[1][0][2]"
        );
    }

    #[test]
    fn elements_are_found_only_inside_their_array() {
        let a = path(&["a"]);
        assert_eq!(locate("{\"a\": [1, 2]}", &a.index(5)), None);
        assert_eq!(locate("{\"a\": [1, 2]}", &a.index(2)), None);
        assert_eq!(locate("{\"a\": []}", &a.index(0)), None);
        assert_eq!(
            locate("{\"a\": [1, [2, 3]]}", &a.index(1).index(1)),
            Some((1, 15))
        );
    }

    #[test]
    fn keys_are_matched_whole_and_unescaped() {
        let text = "{\"x[1]\": {\"a.b\": 1},\n \"x\": [0, {\"a\": {\"b\": 2}}], \"\\u0079\": 3}";
        assert_eq!(locate(text, &path(&["x[1]", "a.b"])), Some((1, 11)));
        assert_eq!(
            locate(text, &path(&["x"]).index(1).key("a").key("b")),
            Some((2, 18))
        );
        assert_eq!(locate(text, &path(&["x", "a.b"])), None);
        assert_eq!(locate(text, &path(&["y"])), Some((2, 29)));
    }

    #[test]
    fn a_repeated_key_is_found_with_its_path() {
        let (at, p) = duplicate_key("{\"a\": [{}, {\"b.c\": 1, \"b.c\": 2}]}").unwrap();
        assert_eq!((at, p.to_string().as_str()), (22, "a[1].b.c"));
        assert_eq!(duplicate_key("{\"a\": {\"b\": 1}, \"b\": 1}"), None);
    }
}
