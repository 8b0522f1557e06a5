//! Matching URIs against [RFC 6570] URI templates, as MCP resource templates
//! need: given a concrete URI, decide whether it fits a template and extract
//! the values of the template's variables. Expansion is not implemented.
//!
//! Supported expressions, each with one or several comma-separated variables:
//!
//! | Expression                 | Matches, e.g. | A raw value cannot contain  |
//! |----------------------------|---------------|-----------------------------|
//! | `{x}`, `{x,y}` (simple)    | `1`, `1,2`    | `/ ? # & ,`                 |
//! | `{+x}` (reserved)          | `a/b?c`       | `,` if several variables    |
//! | `{#x}` (fragment)          | `#a/b`        | `,` if several variables    |
//! | `{.x}` (label)             | `.txt`        | `. / ? #`                   |
//! | `{/x,y}` (path segments)   | `/a/b`        | `/ ? #`                     |
//! | `{;x,y}` (path parameters) | `;x=1;y`      | `; / ? #`                   |
//! | `{?x,y}` (query)           | `?x=1&y=2`    | `& #`                       |
//! | `{&x}` (query continued)   | `&x=1`        | `& #`                       |
//!
//! Matching rules:
//! - Literal text must match exactly (case-sensitive, no normalisation).
//! - `{x}` and `{+x}` need a non-empty value for their first variable (so
//!   `a/{id}/b` does not match `a//b`); their later variables may be absent.
//! - With the other operators any variable may be absent, as an undefined
//!   variable expands to nothing: `{/a,b}` matches the empty string, `/x`
//!   and `/x/y`, the segments binding to the variables in order. `{;x,y}`
//!   parameters are recognised by name but must come in template order, and
//!   unknown ones are not skipped.
//! - `{?..}` and `{&..}` take the rest of the query, up to `#` or the end of
//!   the URI: parameters may come in any order, unknown ones are ignored, the
//!   first occurrence wins, `name` without `=` is the empty string and `+`
//!   stays `+`. `{?a}{&b}` (or `{&a}{&b}`) act as one expression.
//! - Absent variables are missing from the returned map.
//! - Every value is percent-decoded as UTF-8; an invalid `%` sequence or
//!   invalid UTF-8 makes the whole match fail. Forbidden characters are
//!   checked on the raw text, so `{id}` matches `a%2Fb` as `a/b`.
//! - When several splits fit, earlier variables get the shortest values that
//!   let the rest match: `{name}{.ext}` splits `a.b.c` as `a.b` and `c`.
//!   Matching backtracks with memoisation, so its cost stays polynomial.
//!
//! Rejected by [`UriTemplate::parse`]: explode (`{x*}`) and prefix (`{x:3}`)
//! modifiers; the reserved operators `= , ! @ |`; an unclosed `{`, a stray
//! `}`, an empty expression; variable names other than ASCII letters, digits
//! and `_` with single inner dots (percent-encoded names are not supported);
//! a variable used twice; and a `{x}` or `{+x}` expression directly after
//! another expression (`{a}{b}`), where the split would be ambiguous.
//!
//! [RFC 6570]: https://www.rfc-editor.org/rfc/rfc6570

use std::collections::{HashMap, HashSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Simple,
    Reserved,
    Fragment,
    Label,
    Path,
    Param,
    Query,
    Cont,
}

impl Op {
    fn from_char(c: char) -> Option<Op> {
        Some(match c {
            '+' => Op::Reserved,
            '#' => Op::Fragment,
            '.' => Op::Label,
            '/' => Op::Path,
            ';' => Op::Param,
            '?' => Op::Query,
            '&' => Op::Cont,
            _ => return None,
        })
    }

    /// The text before the first present variable, and between two.
    fn lead(self) -> (&'static str, &'static str) {
        match self {
            Op::Simple | Op::Reserved => ("", ","),
            Op::Fragment => ("#", ","),
            Op::Label => (".", "."),
            Op::Path => ("/", "/"),
            Op::Param => (";", ";"),
            Op::Query => ("?", "&"),
            Op::Cont => ("&", "&"),
        }
    }

    /// Whether a raw value may not contain `c`.
    fn forbids(self, c: char, several: bool) -> bool {
        match self {
            Op::Simple => matches!(c, '/' | '?' | '#' | '&' | ','),
            Op::Reserved | Op::Fragment => several && c == ',',
            Op::Label => matches!(c, '.' | '/' | '?' | '#'),
            Op::Path => matches!(c, '/' | '?' | '#'),
            Op::Param => matches!(c, ';' | '/' | '?' | '#'),
            Op::Query | Op::Cont => matches!(c, '&' | '#'),
        }
    }

    /// `{x}` and `{+x}`: the first variable must be there, values non-empty.
    fn required(self) -> bool {
        matches!(self, Op::Simple | Op::Reserved)
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Expr { op: Op, vars: Vec<String> },
}

/// A parsed RFC 6570 URI template, used to match URIs (see the module
/// documentation for the supported forms).
#[derive(Debug, Clone, PartialEq)]
pub struct UriTemplate {
    template: String,
    parts: Vec<Part>,
}

fn error(kind: &str, expr: &str, template: &str, why: &str) -> String {
    format!("{kind} URI template expression {expr} in {template:?}: {why}")
}

/// The operator and variable names of the expression `text` (`{inner}`).
fn parse_expression(inner: &str, text: &str, template: &str) -> Result<(Op, Vec<String>), String> {
    let (op, list) = match inner.chars().next() {
        None => return Err(error("invalid", text, template, "empty expression")),
        Some(c @ ('=' | ',' | '!' | '@' | '|')) => {
            let why = format!("operator '{c}' is reserved by RFC 6570 and not supported");
            return Err(error("unsupported", text, template, &why));
        }
        Some(c) => match Op::from_char(c) {
            Some(op) => (op, &inner[c.len_utf8()..]),
            None => (Op::Simple, inner),
        },
    };
    let mut vars = Vec::new();
    for name in list.split(',') {
        let unsupported = |why: &str| Err(error("unsupported", text, template, why));
        if name.ends_with('*') {
            return unsupported("explode modifiers are not supported");
        }
        if name.contains(':') {
            return unsupported("prefix modifiers (:N) are not supported");
        }
        if name.contains('%') {
            return unsupported("percent-encoded variable names are not supported");
        }
        if name.is_empty() {
            return Err(error(
                "invalid",
                text,
                template,
                "a variable name is missing",
            ));
        }
        let valid = name
            .split('.')
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
        if !valid {
            let why = format!(
                "invalid variable name {name:?} (ASCII letters, digits, '_' and inner '.')"
            );
            return Err(error("invalid", text, template, &why));
        }
        vars.push(name.to_owned());
    }
    Ok((op, vars))
}

impl UriTemplate {
    /// Parses `template`; an unsupported or malformed expression is an error
    /// whose message names the expression and the template.
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        let mut parts = Vec::new();
        let mut names: Vec<String> = Vec::new();
        // The expression just before, if no literal came after it.
        let mut previous: Option<&str> = None;
        let mut rest = template;
        while !rest.is_empty() {
            let Some(open) = rest.find(['{', '}']) else {
                parts.push(Part::Literal(rest.to_owned()));
                break;
            };
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
                previous = None;
            }
            if rest[open..].starts_with('}') {
                return Err(error(
                    "invalid",
                    "}",
                    template,
                    "'}' without a matching '{'",
                ));
            }
            let after = &rest[open + 1..];
            let close = match after.find(['{', '}']) {
                Some(i) if after[i..].starts_with('}') => i,
                next => {
                    let text = &rest[open..open + 1 + next.unwrap_or(after.len())];
                    return Err(error("invalid", text, template, "unclosed '{'"));
                }
            };
            let text = &rest[open..open + close + 2];
            let (op, vars) = parse_expression(&after[..close], text, template)?;
            if let (Some(prev), true) = (previous, op.required()) {
                return Err(format!(
                    "ambiguous URI template {template:?}: expressions {prev}{text} \
                     need a literal between them"
                ));
            }
            for name in &vars {
                if names.contains(name) {
                    let why = format!("variable {name:?} is used twice");
                    return Err(error("invalid", text, template, &why));
                }
                names.push(name.clone());
            }
            let merge = op == Op::Cont
                && matches!(
                    parts.last(),
                    Some(Part::Expr {
                        op: Op::Query | Op::Cont,
                        ..
                    })
                );
            if merge {
                if let Some(Part::Expr { vars: before, .. }) = parts.last_mut() {
                    before.extend(vars);
                }
            } else {
                parts.push(Part::Expr { op, vars });
            }
            previous = Some(text);
            rest = &after[close + 1..];
        }
        Ok(UriTemplate {
            template: template.to_owned(),
            parts,
        })
    }

    /// The template text, as given to [`UriTemplate::parse`].
    pub fn as_str(&self) -> &str {
        &self.template
    }

    /// The variable names, in order of appearance.
    pub fn variables(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for part in &self.parts {
            if let Part::Expr { vars, .. } = part {
                out.extend(vars.iter().map(String::as_str));
            }
        }
        out
    }

    /// The percent-decoded values of the variables present in `uri` if it
    /// matches the template; absent variables are left out of the map. A
    /// URI longer than `MAX_MATCHED_URI_BYTES` (8 KiB) matches no template.
    pub fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        if uri.len() > MAX_MATCHED_URI_BYTES {
            return None;
        }
        let mut search = Search {
            parts: &self.parts,
            uri,
            found: Vec::new(),
            failed: HashSet::new(),
        };
        if !search.at(0, 0, 0) {
            return None;
        }
        search
            .found
            .into_iter()
            .map(|(name, raw)| decode(raw).map(|value| (name.to_owned(), value)))
            .collect()
    }
}

/// The longest URI matched against a template: matching may take time
/// and memory growing with the square of the URI's length (a template with
/// two variables and a URI made of their separator), and a peer chooses
/// the URI.
pub const MAX_MATCHED_URI_BYTES: usize = 8 * 1024;

/// A backtracking match of `uri` against `parts`. A state is (part index,
/// index of the next variable in that part, byte position in `uri`).
struct Search<'a> {
    parts: &'a [Part],
    uri: &'a str,
    /// (name, raw value) of the variables bound so far.
    found: Vec<(&'a str, &'a str)>,
    /// States known not to match; the rest of a match does not depend on
    /// the values bound before it.
    failed: HashSet<(usize, usize, usize)>,
}

impl<'a> Search<'a> {
    fn at(&mut self, pi: usize, vi: usize, pos: usize) -> bool {
        if self.failed.contains(&(pi, vi, pos)) {
            return false;
        }
        let ok = self.step(pi, vi, pos);
        if !ok {
            self.failed.insert((pi, vi, pos));
        }
        ok
    }

    fn step(&mut self, pi: usize, vi: usize, pos: usize) -> bool {
        let (parts, uri) = (self.parts, self.uri);
        let rest = &uri[pos..];
        let (op, vars) = match parts.get(pi) {
            None => return rest.is_empty(),
            Some(Part::Literal(lit)) => {
                return rest.starts_with(lit.as_str()) && self.at(pi + 1, 0, pos + lit.len())
            }
            Some(Part::Expr { op, vars }) => (*op, vars),
        };
        if matches!(op, Op::Query | Op::Cont) {
            return self.query(pi, op, vars, pos);
        }
        if let Some(name) = vars.get(vi) {
            let name = name.as_str();
            let (first, sep) = op.lead();
            let lead = if vi == 0 { first } else { sep };
            if let Some(after) = rest.strip_prefix(lead) {
                let start = pos + lead.len();
                if op != Op::Param {
                    if self.value(pi, vi, name, start) {
                        return true;
                    }
                } else if let Some(tail) = after.strip_prefix(name) {
                    let start = start + name.len();
                    if tail.starts_with('=') && self.value(pi, vi, name, start + 1) {
                        return true;
                    }
                    // `;name` alone: the empty string.
                    self.found.push((name, ""));
                    if self.at(pi, vi + 1, start) {
                        return true;
                    }
                    self.found.pop();
                }
            }
            if op == Op::Param {
                // Parameters are named: skip this one, try the next.
                return self.at(pi, vi + 1, pos);
            }
        }
        // The expression ends here.
        !(vi == 0 && op.required()) && self.at(pi + 1, 0, pos)
    }

    /// Binds variable `vi` of part `pi`, called `name`, to a value starting
    /// at `start`, shortest first, and matches the rest.
    fn value(&mut self, pi: usize, vi: usize, name: &'a str, start: usize) -> bool {
        let (parts, uri) = (self.parts, self.uri);
        let Some(Part::Expr { op, vars }) = parts.get(pi) else {
            return false;
        };
        let rest = &uri[start..];
        let several = vars.len() > 1;
        let limit = rest
            .find(|c: char| op.forbids(c, several))
            .unwrap_or(rest.len());
        let min = usize::from(op.required());
        let last_var = vi + 1 == vars.len();
        // Shortcuts: what must follow the value when the expression ends.
        let next_literal = match parts.get(pi + 1) {
            Some(Part::Literal(lit)) if last_var => Some(lit.as_str()),
            _ => None,
        };
        let lowest = if last_var && pi + 1 == parts.len() {
            rest.len().max(min)
        } else {
            min
        };
        for end in lowest..=limit {
            if !rest.is_char_boundary(end)
                || next_literal.is_some_and(|lit| !rest[end..].starts_with(lit))
            {
                continue;
            }
            self.found.push((name, &rest[..end]));
            if self.at(pi, vi + 1, start + end) {
                return true;
            }
            self.found.pop();
        }
        false
    }

    /// `{?..}` or `{&..}` at `pos`: the query up to `#` or the end, if any.
    fn query(&mut self, pi: usize, op: Op, vars: &'a [String], pos: usize) -> bool {
        let uri = self.uri;
        let rest = &uri[pos..];
        if !rest.starts_with(op.lead().0) {
            return self.at(pi + 1, 0, pos);
        }
        let len = rest.find('#').unwrap_or(rest.len());
        let mark = self.found.len();
        for pair in rest[1..len].split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if let Some(name) = vars.iter().find(|v| v.as_str() == key) {
                if !self.found[mark..].iter().any(|(n, _)| *n == name.as_str()) {
                    self.found.push((name.as_str(), value));
                }
            }
        }
        if self.at(pi + 1, 0, pos + len) {
            return true;
        }
        self.found.truncate(mark);
        false
    }
}

/// Percent-decodes `raw` as UTF-8; `None` for a bad `%` sequence or UTF-8.
fn decode(raw: &str) -> Option<String> {
    fn hex(b: Option<&u8>) -> Option<u8> {
        (*b? as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            out.push((hex(bytes.get(i + 1))? << 4) | hex(bytes.get(i + 2))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Option<HashMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn matches_simple_variables() {
        let t = UriTemplate::parse("test://template/{id}/data").unwrap();
        assert_eq!(t.matches("test://template/123/data").unwrap()["id"], "123");
        assert!(t.matches("test://template/1/2/data").is_none());
        assert!(t.matches("test://template//data").is_none());
        assert!(t.matches("test://template/123/datax").is_none());
        let t = UriTemplate::parse("file:///{+path}").unwrap();
        assert_eq!(t.matches("file:///a/b.txt").unwrap()["path"], "a/b.txt");
    }

    #[test]
    fn a_uri_past_the_limit_matches_nothing_and_one_at_it_still_matches() {
        let t = UriTemplate::parse("data://{a}-{b}.json").unwrap();
        // Without the limit this would take some 10^12 steps.
        let hostile = "data://".to_owned() + &"-".repeat(1 << 20);
        assert!(t.matches(&hostile).is_none());
        let long = format!("data://x-{}.json", "y".repeat(MAX_MATCHED_URI_BYTES - 14));
        assert_eq!(long.len(), MAX_MATCHED_URI_BYTES);
        assert_eq!(t.matches(&long).unwrap()["a"], "x");
    }

    #[test]
    fn rejects_bad_templates() {
        assert!(UriTemplate::parse("a://{x").is_err());
        assert!(UriTemplate::parse("a://{}").is_err());
        assert!(UriTemplate::parse("a://{?q}").is_ok());
    }

    #[test]
    fn several_variables_in_one_expression() {
        let t = UriTemplate::parse("map://{x,y}/tile").unwrap();
        assert_eq!(t.matches("map://1,2/tile"), vars(&[("x", "1"), ("y", "2")]));
        assert_eq!(t.matches("map://1/tile"), vars(&[("x", "1")]));
        assert!(t.matches("map://1,2,3/tile").is_none());
        assert!(t.matches("map:///tile").is_none());
        let t = UriTemplate::parse("x:{+a,b}").unwrap();
        assert_eq!(t.matches("x:p/q,r/s"), vars(&[("a", "p/q"), ("b", "r/s")]));
    }

    #[test]
    fn path_segments_may_be_absent() {
        let t = UriTemplate::parse("repo://r{/a,b}").unwrap();
        assert_eq!(t.matches("repo://r"), vars(&[]));
        assert_eq!(t.matches("repo://r/x"), vars(&[("a", "x")]));
        assert_eq!(t.matches("repo://r/x/y"), vars(&[("a", "x"), ("b", "y")]));
        assert!(t.matches("repo://r/x/y/z").is_none());
        assert!(t.matches("repo://rx").is_none());
    }

    #[test]
    fn query_parameters_in_any_order() {
        let t = UriTemplate::parse("search://s{?q,lang}").unwrap();
        let both = vars(&[("q", "rust"), ("lang", "en")]);
        assert_eq!(t.matches("search://s?q=rust&lang=en"), both);
        assert_eq!(t.matches("search://s?lang=en&q=rust"), both);
        assert_eq!(t.matches("search://s?lang=en"), vars(&[("lang", "en")]));
        assert_eq!(t.matches("search://s"), vars(&[]));
        assert_eq!(
            t.matches("search://s?page=2&q=rust"),
            vars(&[("q", "rust")])
        );
        assert_eq!(
            t.matches("search://s?q=hello%20world&lang=%E2%82%AC"),
            vars(&[("q", "hello world"), ("lang", "€")])
        );
        assert_eq!(t.matches("search://s?q=a+b"), vars(&[("q", "a+b")]));
        assert_eq!(t.matches("search://s?q"), vars(&[("q", "")]));
        assert!(t.matches("search://s?q=%zz").is_none());
        assert!(t.matches("search://t?q=x").is_none());
        let t = UriTemplate::parse("list://items?sort=asc{&page,size}").unwrap();
        assert_eq!(
            t.matches("list://items?sort=asc&size=10&page=2"),
            vars(&[("page", "2"), ("size", "10")])
        );
        assert_eq!(t.matches("list://items?sort=asc"), vars(&[]));
        assert!(t.matches("list://items?sort=desc&page=2").is_none());
        let t = UriTemplate::parse("x://y{?a}{&b}").unwrap();
        assert_eq!(t.matches("x://y?b=2&a=1"), vars(&[("a", "1"), ("b", "2")]));
        let t = UriTemplate::parse("test://items/{id}{?lang,fmt}").unwrap();
        assert_eq!(
            t.matches("test://items/a%20b?fmt=json&lang=fr"),
            vars(&[("id", "a b"), ("fmt", "json"), ("lang", "fr")])
        );
        assert!(t.matches("test://items/a/b").is_none());
    }

    #[test]
    fn fragment_label_and_path_parameters() {
        let t = UriTemplate::parse("doc://d{#section}").unwrap();
        assert_eq!(
            t.matches("doc://d#intro/part%201"),
            vars(&[("section", "intro/part 1")])
        );
        assert_eq!(t.matches("doc://d"), vars(&[]));
        assert!(t.matches("doc://dx").is_none());
        let t = UriTemplate::parse("doc://{page}{#section}").unwrap();
        assert_eq!(
            t.matches("doc://p1#s"),
            vars(&[("page", "p1"), ("section", "s")])
        );
        let t = UriTemplate::parse("file:///{name}{.ext}").unwrap();
        assert_eq!(
            t.matches("file:///notes.txt"),
            vars(&[("name", "notes"), ("ext", "txt")])
        );
        assert_eq!(t.matches("file:///notes"), vars(&[("name", "notes")]));
        assert_eq!(
            t.matches("file:///a.b.c"),
            vars(&[("name", "a.b"), ("ext", "c")])
        );
        let t = UriTemplate::parse("map://m{;x,y}").unwrap();
        assert_eq!(
            t.matches("map://m;x=1;y=2"),
            vars(&[("x", "1"), ("y", "2")])
        );
        assert_eq!(t.matches("map://m;x"), vars(&[("x", "")]));
        assert_eq!(t.matches("map://m;y=2"), vars(&[("y", "2")]));
        assert_eq!(t.matches("map://m"), vars(&[]));
        assert!(t.matches("map://m;z=1").is_none());
    }

    #[test]
    fn values_are_percent_decoded() {
        let t = UriTemplate::parse("test://{id}").unwrap();
        assert_eq!(t.matches("test://a%2Fb"), vars(&[("id", "a/b")]));
        assert_eq!(t.matches("test://%E2%82%AC"), vars(&[("id", "€")]));
        assert!(t.matches("test://%zz").is_none());
        assert!(t.matches("test://%E2%82").is_none());
        assert!(t.matches("test://50%").is_none());
        assert!(t.matches("test://%+1").is_none());
        let t = UriTemplate::parse("file:///{+path}").unwrap();
        assert_eq!(t.matches("file:///a%20b/c"), vars(&[("path", "a b/c")]));
    }

    #[test]
    fn unsupported_forms_are_named_in_the_error() {
        let e = UriTemplate::parse("a://{var*}").unwrap_err();
        assert_eq!(
            e,
            "unsupported URI template expression {var*} in \"a://{var*}\": \
             explode modifiers are not supported"
        );
        for (template, expr) in [
            ("a://{x:3}", "{x:3}"),
            ("a://{=x}", "{=x}"),
            ("a://{,x}", "{,x}"),
            ("a://{!x}", "{!x}"),
            ("a://{@x}", "{@x}"),
            ("a://{|x}", "{|x}"),
            ("a://{x", "{x"),
            ("a://{a{b}", "{a"),
            ("a://x}", "}"),
            ("a://{}", "{}"),
            ("a://{+}", "{+}"),
            ("a://{a,}", "{a,}"),
            ("a://{a-b}", "{a-b}"),
            ("a://{.a.}", "{.a.}"),
            ("a://{a..b}", "{a..b}"),
            ("a://{%41}", "{%41}"),
            ("a://{x}/{x}", "{x}"),
            ("a://{a,a}", "{a,a}"),
            ("a://{a}{b}", "{a}{b}"),
            ("a://{#a}{+b}", "{#a}{+b}"),
            ("a://{/a}{b}", "{/a}{b}"),
        ] {
            let e = UriTemplate::parse(template).expect_err(template);
            assert!(e.contains(expr) && e.contains(template), "{template}: {e}");
        }
        for fine in [
            "a://{a}{/b}",
            "a://{a}{.b}",
            "a://{+a}{?q}{#f}",
            "a://{a.b_1}",
        ] {
            assert!(UriTemplate::parse(fine).is_ok(), "{fine}");
        }
    }

    #[test]
    fn variables_and_text() {
        let text = "a://{x}/{+y}{/z,w}{?q}{&r}";
        let t = UriTemplate::parse(text).unwrap();
        assert_eq!(t.variables(), ["x", "y", "z", "w", "q", "r"]);
        assert_eq!(t.as_str(), text);
    }

    #[test]
    fn a_hostile_uri_is_refused_without_trying_every_split() {
        // Without the memo of failed states this tries about n^3 splits.
        let t = UriTemplate::parse("a://{a}-{b}-{c}-{d}.x").unwrap();
        let uri = format!("a://{}", "-".repeat(1000));
        assert!(t.matches(&uri).is_none());
    }
}
