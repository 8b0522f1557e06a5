//! Matching URIs against RFC 6570 URI templates, as resource templates
//! need: the server gets a URI and must find the template and the values
//! of its variables.
//!
//! Supported, with one or several comma-separated variables per
//! expression: `{var}` (simple: a value holds none of `/ ? # &`),
//! `{+var}` (reserved: may hold `/`), `{#var}` (fragment), `{.var}`
//! (labels), `{/var}` (path segments), `{?q,lang}` (query: parameters in
//! any order, absent ones unset, unknown ones ignored) and `{&var}`
//! (query continuation). Every matched value is percent-decoded (UTF-8);
//! a URI whose encoding is broken matches nothing. A `{var}` or `{+var}`
//! must match at least one character; the other forms may be absent.
//!
//! Refused when the template is parsed, naming the expression: explode
//! (`{var*}`) and prefix (`{var:3}`) modifiers, path-style parameters
//! (`{;x}`), the reserved operators `= , ! @ |`, an unclosed `{`, a stray
//! `}`, an empty expression or variable name, a variable used twice, and
//! a `{var}` or `{+var}` right after another expression (where one value
//! would end and the next begin is ambiguous).

use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Simple,
    Reserved,
    Fragment,
    Label,
    Path,
    Query,
    QueryMore,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Expr(Op, Vec<String>),
}

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq)]
pub struct UriTemplate {
    text: String,
    parts: Vec<Part>,
}

type Vars = HashMap<String, String>;

impl UriTemplate {
    /// Parses a template; what it cannot match is an error naming the
    /// expression (see the module documentation).
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        let err = |expr: &str, why: &str| {
            format!("unsupported URI template expression {expr} in {template:?}: {why}")
        };
        let mut parts = Vec::new();
        let mut seen: Vec<String> = Vec::new();
        let mut rest = template;
        loop {
            let open = rest.find('{').unwrap_or(rest.len());
            let literal = &rest[..open];
            if literal.contains('}') {
                return Err(format!("a '}}' without '{{' in URI template {template:?}"));
            }
            if !literal.is_empty() {
                parts.push(Part::Literal(literal.to_owned()));
            }
            if open == rest.len() {
                break;
            }
            let close = rest[open..]
                .find('}')
                .map(|c| c + open)
                .ok_or_else(|| format!("unclosed '{{' in URI template {template:?}"))?;
            let expr = &rest[open..=close];
            let inner = &rest[open + 1..close];
            let (op, list) = match inner.chars().next() {
                Some('+') => (Op::Reserved, &inner[1..]),
                Some('#') => (Op::Fragment, &inner[1..]),
                Some('.') => (Op::Label, &inner[1..]),
                Some('/') => (Op::Path, &inner[1..]),
                Some('?') => (Op::Query, &inner[1..]),
                Some('&') => (Op::QueryMore, &inner[1..]),
                Some(';') => return Err(err(expr, "path-style parameters are not supported")),
                Some(c @ ('=' | ',' | '!' | '@' | '|')) => {
                    return Err(err(
                        expr,
                        &format!("the operator {c:?} is reserved by RFC 6570"),
                    ))
                }
                Some(_) => (Op::Simple, inner),
                None => return Err(err(expr, "an empty expression")),
            };
            let mut vars = Vec::new();
            for name in list.split(',') {
                if name.ends_with('*') {
                    return Err(err(expr, "explode modifiers are not supported"));
                }
                if name.contains(':') {
                    return Err(err(expr, "prefix modifiers are not supported"));
                }
                let valid = !name.is_empty()
                    && !name.starts_with('.')
                    && !name.ends_with('.')
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
                if !valid {
                    return Err(err(expr, &format!("{name:?} is not a variable name")));
                }
                if seen.iter().any(|s| s == name) {
                    return Err(err(expr, &format!("the variable {name:?} is used twice")));
                }
                seen.push(name.to_owned());
                vars.push(name.to_owned());
            }
            if matches!(op, Op::Simple | Op::Reserved)
                && matches!(parts.last(), Some(Part::Expr(..)))
            {
                return Err(err(
                    expr,
                    "it needs a literal between it and the expression before",
                ));
            }
            parts.push(Part::Expr(op, vars));
            rest = &rest[close + 1..];
        }
        Ok(UriTemplate {
            text: template.to_owned(),
            parts,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The variables' names, in order of appearance.
    pub fn variables(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Expr(_, vars) => Some(vars.iter().map(String::as_str)),
                Part::Literal(_) => None,
            })
            .flatten()
            .collect()
    }

    /// The (decoded) values of the variables of `uri` if it matches;
    /// variables left out of the URI are not in the map.
    pub fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        let mut vars = Vars::new();
        self.match_from(0, uri, &mut vars).then_some(vars)
    }

    fn match_from(&self, i: usize, rest: &str, vars: &mut Vars) -> bool {
        let Some(part) = self.parts.get(i) else {
            return rest.is_empty();
        };
        match part {
            Part::Literal(l) => rest
                .strip_prefix(l.as_str())
                .is_some_and(|r| self.match_from(i + 1, r, vars)),
            Part::Expr(op @ (Op::Simple | Op::Reserved), names) => {
                self.match_values(i, *op, names, rest, vars)
            }
            Part::Expr(Op::Fragment, names) => match rest.strip_prefix('#') {
                Some(r) => self.match_values(i, Op::Reserved, names, r, vars),
                None => self.match_from(i + 1, rest, vars),
            },
            Part::Expr(op @ (Op::Label | Op::Path), names) => {
                let sep = if *op == Op::Label { '.' } else { '/' };
                self.match_segments(i, sep, names, 0, rest, vars)
            }
            Part::Expr(op @ (Op::Query | Op::QueryMore), names) => {
                let lead = if *op == Op::Query { '?' } else { '&' };
                let Some(query) = rest.strip_prefix(lead) else {
                    return self.match_from(i + 1, rest, vars);
                };
                let end = query.find('#').unwrap_or(query.len());
                // A query takes the variables of the `{&..}` right after it.
                let mut wanted: Vec<&String> = names.iter().collect();
                let mut next = i + 1;
                while let Some(Part::Expr(Op::QueryMore, more)) = self.parts.get(next) {
                    wanted.extend(more);
                    next += 1;
                }
                let before = vars.clone();
                for pair in query[..end].split('&').filter(|p| !p.is_empty()) {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    if let Some(name) = wanted.iter().find(|n| n.as_str() == key) {
                        let Some(value) = decode(value) else {
                            *vars = before;
                            return false;
                        };
                        vars.insert((*name).clone(), value);
                    }
                }
                self.match_from(next, &query[end..], vars) || {
                    *vars = before;
                    false
                }
            }
        }
    }

    /// `{var}` / `{+var}` (and a fragment's value): one or more
    /// comma-separated values, ending where the rest of the template can
    /// match (the leftmost such end).
    fn match_values(
        &self,
        i: usize,
        op: Op,
        names: &[String],
        rest: &str,
        vars: &mut Vars,
    ) -> bool {
        let ends: Vec<usize> = match self.parts.get(i + 1) {
            None => vec![rest.len()],
            Some(Part::Literal(l)) => rest.match_indices(l.as_str()).map(|(at, _)| at).collect(),
            Some(Part::Expr(op, _)) => {
                let lead = match op {
                    Op::Fragment => '#',
                    Op::Label => '.',
                    Op::Path => '/',
                    Op::Query => '?',
                    _ => '&',
                };
                let mut ends: Vec<usize> = rest.match_indices(lead).map(|(at, _)| at).collect();
                ends.push(rest.len());
                ends
            }
        };
        let forbidden: &[char] = match op {
            Op::Simple => &['/', '?', '#', '&'],
            _ => &[],
        };
        for end in ends {
            let text = &rest[..end];
            if text.is_empty() || text.contains(forbidden) {
                continue;
            }
            let pieces: Vec<&str> = if names.len() > 1 {
                text.split(',').collect()
            } else {
                vec![text]
            };
            if pieces.len() > names.len() {
                continue;
            }
            let Some(values) = pieces.iter().map(|p| decode(p)).collect::<Option<Vec<_>>>() else {
                continue;
            };
            let before = vars.clone();
            vars.extend(names.iter().cloned().zip(values));
            if self.match_from(i + 1, &rest[end..], vars) {
                return true;
            }
            *vars = before;
        }
        false
    }

    /// `{.a,b}` / `{/a,b}`: up to one `sep`-led segment per variable,
    /// as many as the rest of the template allows (most first).
    fn match_segments(
        &self,
        i: usize,
        sep: char,
        names: &[String],
        taken: usize,
        rest: &str,
        vars: &mut Vars,
    ) -> bool {
        if taken < names.len() {
            if let Some(r) = rest.strip_prefix(sep) {
                let end = r.find([sep, '/', '?', '#']).unwrap_or(r.len());
                if end > 0 {
                    if let Some(value) = decode(&r[..end]) {
                        let before = vars.clone();
                        vars.insert(names[taken].clone(), value);
                        if self.match_segments(i, sep, names, taken + 1, &r[end..], vars) {
                            return true;
                        }
                        *vars = before;
                    }
                }
            }
        }
        self.match_from(i + 1, rest, vars)
    }
}

/// Percent-decodes `text` (UTF-8); `None` for a broken escape or bytes
/// that are not UTF-8.
fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
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

    fn vars(t: &str, uri: &str) -> Option<Vec<(String, String)>> {
        let m = UriTemplate::parse(t).unwrap().matches(uri)?;
        let mut v: Vec<(String, String)> = m.into_iter().collect();
        v.sort();
        Some(v)
    }

    fn pairs(p: &[(&str, &str)]) -> Option<Vec<(String, String)>> {
        Some(
            p.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
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
        assert_eq!(vars("a://{id}.txt", "a://x.y.txt"), pairs(&[("id", "x.y")]));
        assert_eq!(
            vars("a://{x,y}", "a://1,2"),
            pairs(&[("x", "1"), ("y", "2")])
        );
        assert_eq!(vars("a://{x,y}", "a://1"), pairs(&[("x", "1")]));
        assert_eq!(vars("a://{id}", "a://a%2Fb"), pairs(&[("id", "a/b")]));
        assert_eq!(vars("a://{id}", "a://%E2%82%AC"), pairs(&[("id", "€")]));
        assert_eq!(vars("a://{id}", "a://%zz"), None);
        assert_eq!(vars("a://{id}", "a://%E2%82"), None);
    }

    #[test]
    fn matches_paths_labels_fragments_and_queries() {
        let t = "a://tree{/a,b}";
        assert_eq!(vars(t, "a://tree"), pairs(&[]));
        assert_eq!(vars(t, "a://tree/x"), pairs(&[("a", "x")]));
        assert_eq!(vars(t, "a://tree/x/y"), pairs(&[("a", "x"), ("b", "y")]));
        assert_eq!(vars(t, "a://tree/x/y/z"), None);
        assert_eq!(vars("a://f{.ext}", "a://f.json"), pairs(&[("ext", "json")]));
        assert_eq!(
            vars("a://p{#frag}", "a://p#top/x"),
            pairs(&[("frag", "top/x")])
        );
        assert_eq!(vars("a://p{#frag}", "a://p"), pairs(&[]));
        let q = "a://s/{id}{?q,lang}";
        assert_eq!(
            vars(q, "a://s/1?lang=fr&q=hello%20world"),
            pairs(&[("id", "1"), ("lang", "fr"), ("q", "hello world")])
        );
        assert_eq!(
            vars(q, "a://s/1?q=a+b&x=9"),
            pairs(&[("id", "1"), ("q", "a+b")])
        );
        assert_eq!(vars(q, "a://s/1"), pairs(&[("id", "1")]));
        assert_eq!(vars(q, "a://s/1?q=%zz"), None);
        assert_eq!(
            vars("a://s{?q}{&page}", "a://s?page=2&q=x"),
            pairs(&[("page", "2"), ("q", "x")])
        );
        assert_eq!(
            vars("a://s?fixed=1{&x}", "a://s?fixed=1&x=y"),
            pairs(&[("x", "y")])
        );
    }

    #[test]
    fn rejects_what_it_cannot_match() {
        for (bad, says) in [
            ("a://{x", "unclosed"),
            ("a://x}", "without"),
            ("a://{}", "empty"),
            ("a://{x*}", "explode"),
            ("a://{x:3}", "prefix"),
            ("a://{;x}", "path-style"),
            ("a://{=x}", "reserved"),
            ("a://{|x}", "reserved"),
            ("a://{x}/{x}", "twice"),
            ("a://{a}{b}", "literal between"),
            ("a://{a b}", "variable name"),
        ] {
            let e = UriTemplate::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert!(UriTemplate::parse("a://{?q}").is_ok());
        let t = UriTemplate::parse("a://{x}/{+y}{?z}").unwrap();
        assert_eq!(t.variables(), ["x", "y", "z"]);
        assert_eq!(t.as_str(), "a://{x}/{+y}{?z}");
    }
}
