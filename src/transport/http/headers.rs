//! A request's header fields, kept in one buffer: names in lowercase,
//! values without the spaces and tabs around them, in the order they came.
//! Two allocations per request, where a `(String, String)` per field took
//! two per field.

use std::ops::Range;

/// Header fields of one request.
#[derive(Debug, Default, Clone)]
pub struct Headers {
    text: String,
    /// Where each field's name and value lie in `text`.
    fields: Vec<(Range<u32>, Range<u32>)>,
}

impl Headers {
    /// Room for `fields` fields of `bytes` bytes in all.
    pub fn with_capacity(fields: usize, bytes: usize) -> Headers {
        Headers {
            text: String::with_capacity(bytes),
            fields: Vec::with_capacity(fields),
        }
    }

    /// Adds a field: the name in lowercase, the value without the spaces
    /// and tabs around it ([`trim_ows`]).
    pub fn push(&mut self, name: &str, value: &str) {
        let start = self.len();
        let from = self.text.len();
        self.text.push_str(name);
        self.text[from..].make_ascii_lowercase();
        let middle = self.len();
        self.text.push_str(trim_ows(value));
        self.fields.push((start..middle, middle..self.len()));
    }

    fn len(&self) -> u32 {
        // A head of 4 GiB or more is refused before its fields are read
        // (`Conn::read_head`), and what is kept here is no longer than it.
        u32::try_from(self.text.len()).unwrap_or(u32::MAX)
    }

    fn at(&self, r: &Range<u32>) -> &str {
        self.text
            .get(r.start as usize..r.end as usize)
            .unwrap_or_default()
    }

    /// Whether a field is named `name`: bytes compared, nothing sliced.
    fn named(&self, (n, _): &(Range<u32>, Range<u32>), name: &str) -> bool {
        self.text.as_bytes().get(n.start as usize..n.end as usize) == Some(name.as_bytes())
    }

    /// The first value of the field `name` (given in lowercase).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.all(name).next()
    }

    /// Every value of the field `name` (given in lowercase), in order.
    pub fn all<'a, 'n>(&'a self, name: &'n str) -> impl Iterator<Item = &'a str> + use<'a, 'n> {
        self.fields
            .iter()
            .filter(move |f| self.named(f, name))
            .map(|(_, v)| self.at(v))
    }
}

/// `text` without the optional whitespace around it: spaces and tabs, and
/// nothing else (RFC 9110 §5.6.3). The one trim of header values and of the
/// list items and parameters inside them.
pub(crate) fn trim_ows(text: &str) -> &str {
    let ows = |b: &u8| *b == b' ' || *b == b'\t';
    let bytes = text.as_bytes();
    let start = bytes.iter().position(|b| !ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !ows(b))
        .map_or(start, |last| last + 1);
    // Both ends lie next to ASCII bytes: character boundaries.
    text.get(start..end).unwrap_or_default()
}

/// The items of the list header `values` (all lines of one field, as
/// `Transfer-Encoding` comes), each trimmed; empty ones (`a,,b`) too, for
/// a reader to ignore or refuse.
pub(crate) fn list_items<'a>(
    values: impl Iterator<Item = &'a str>,
) -> impl Iterator<Item = &'a str> {
    values.flat_map(|v| split_ascii(v, b',')).map(trim_ows)
}

/// Whether the `Content-Type` value `content_type` names the media type
/// `want`: its type and subtype, parameters aside, compared without
/// regard to case (RFC 9110 §8.3.1).
pub(crate) fn is_media_type(content_type: &str, want: &str) -> bool {
    let media = split_ascii(content_type, b';').next().unwrap_or("");
    trim_ows(media).eq_ignore_ascii_case(want)
}

/// The items of `text` separated by the ASCII byte `separator` (a list's
/// `,`, a media type's `;`), as `str::split` gives them, without its
/// general-purpose searcher: header values are short.
pub(crate) fn split_ascii(text: &str, separator: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let t = rest?;
        match t.bytes().position(|b| b == separator) {
            Some(i) => {
                rest = t.get(i + 1..);
                t.get(..i)
            }
            None => {
                rest = None;
                Some(t)
            }
        }
    })
}

impl<N: AsRef<str>, V: AsRef<str>> FromIterator<(N, V)> for Headers {
    fn from_iter<I: IntoIterator<Item = (N, V)>>(fields: I) -> Headers {
        let mut headers = Headers::default();
        for (n, v) in fields {
            headers.push(n.as_ref(), v.as_ref());
        }
        headers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lowercased_values_trimmed_order_kept() {
        let h: Headers = [
            ("Accept", " application/json \t"),
            ("X-Two", "a"),
            ("x-two", "b"),
            ("Empty", ""),
        ]
        .into_iter()
        .collect();
        assert_eq!(h.get("accept"), Some("application/json"));
        assert_eq!(h.get("empty"), Some(""));
        assert_eq!(h.all("x-two").collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(h.all("X-Two").count(), 0);
        assert_eq!(h.get("x-two"), Some("a"));
        assert_eq!(h.get("nope"), None);
        // Not trimmed: what only Unicode calls whitespace is part of a value.
        let nbsp: Headers = [("a", "\u{a0}v\u{a0}")].into_iter().collect();
        assert_eq!(nbsp.all("a").next(), Some("\u{a0}v\u{a0}"));
        for text in ["", " ", "\t \t", " a ", "a", "\ta b\t", "é ", " \u{a0}"] {
            assert_eq!(trim_ows(text), text.trim_matches([' ', '\t']), "{text:?}");
        }
    }

    #[test]
    fn split_ascii_splits_as_str_split_does() {
        for text in ["", ",", "a", "a,b", ",a,,b,", "é,ü;x", "a;b,c"] {
            for sep in [b',', b';'] {
                let ours: Vec<&str> = split_ascii(text, sep).collect();
                let std: Vec<&str> = text.split(char::from(sep)).collect();
                assert_eq!(ours, std, "{text:?} at {:?}", char::from(sep));
            }
        }
    }
}
