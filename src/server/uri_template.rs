//! Matching URIs against RFC 6570 templates (`{var}` and `{+var}`), as
//! resource templates need.

use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    // (name, reserved): `{+name}` may match `/`; `{name}` may not.
    Var(String, bool),
}

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses a template; an unclosed `{` or an empty name is an error.
    pub fn parse(template: &str) -> Result<UriTemplate, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("unclosed '{{' in URI template {template:?}"))?
                + open;
            let inner = &rest[open + 1..close];
            let (name, reserved) = match inner.strip_prefix('+') {
                Some(n) => (n, true),
                None => (inner, false),
            };
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "unsupported expression {{{inner}}} in URI template {template:?}"
                ));
            }
            parts.push(Part::Var(name.to_owned(), reserved));
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Ok(UriTemplate { parts })
    }

    /// The variables of `uri` if it matches the template.
    pub fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        let mut vars = HashMap::new();
        let mut rest = uri;
        for (i, part) in self.parts.iter().enumerate() {
            match part {
                Part::Literal(l) => rest = rest.strip_prefix(l.as_str())?,
                Part::Var(name, reserved) => {
                    let end = match self.parts.get(i + 1) {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || (!reserved && value.contains('/')) {
                        return None;
                    }
                    vars.insert(name.clone(), value.to_owned());
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rejects_bad_templates() {
        assert!(UriTemplate::parse("a://{x").is_err());
        assert!(UriTemplate::parse("a://{}").is_err());
        assert!(UriTemplate::parse("a://{?q}").is_err());
    }
}
