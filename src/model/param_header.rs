//! Tool parameters mirrored into HTTP headers (SEP-2243, 2026-07-28): a
//! property of a tool's `inputSchema` marked `x-mcp-header: "Region"` is
//! sent by a client over Streamable HTTP as `Mcp-Param-Region` too, and a
//! server checks that the two agree.
//!
//! The rules of a valid declaration, stated once here for both sides (the
//! values' wire encoding, `=?base64?…?=`, is the HTTP transport's):
//! - the name is an HTTP token (RFC 9110: visible ASCII, none of the
//!   delimiters, no space, colon or control character) and not empty;
//! - the property is a `string`, `integer` or `boolean`;
//! - no two declarations of one tool share a name, ignoring case;
//! - the property is reached from the schema's root through `properties`
//!   alone: a declaration under `items`, a composition keyword, a
//!   conditional or a `$ref`'s target cannot be mirrored statically.
//!
//! A tool with an invalid declaration is an invalid tool: a client drops
//! it from the tools it lists; a server enforces none of its headers.

use serde_json::Value;

/// The schema keyword that marks a mirrored property.
pub const X_MCP_HEADER: &str = "x-mcp-header";
/// The prefix of a mirrored parameter's header name.
pub const PARAM_HEADER_PREFIX: &str = "Mcp-Param-";

/// Keywords whose subschemas no declaration may sit under (2020-12, and
/// draft-07's names for the same).
const UNREACHABLE: [&str; 20] = [
    "items",
    "prefixItems",
    "contains",
    "additionalProperties",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "dependentSchemas",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "$defs",
    "definitions",
    "dependencies",
    "additionalItems",
];

/// One mirrored parameter: its header's name (after the prefix) and the
/// path of its argument under `arguments`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamHeader {
    /// The name after `Mcp-Param-`, as the schema spells it.
    pub name: String,
    /// The argument's path (property names from the root).
    pub path: Vec<String>,
}

impl ParamHeader {
    /// The full header name (`Mcp-Param-Region`).
    pub fn header_name(&self) -> String {
        format!("{PARAM_HEADER_PREFIX}{}", self.name)
    }

    /// The argument this header mirrors, if present and not null.
    pub fn argument<'a>(&self, arguments: &'a Value) -> Option<&'a Value> {
        self.path
            .iter()
            .try_fold(arguments, |v, k| v.get(k))
            .filter(|v| !v.is_null())
    }
}

/// Every declaration of `input_schema`, or why the tool is invalid.
pub fn param_headers(input_schema: &Value) -> Result<Vec<ParamHeader>, String> {
    if input_schema.get(X_MCP_HEADER).is_some() {
        return Err(format!("{X_MCP_HEADER} on the schema's root"));
    }
    let mut out: Vec<ParamHeader> = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out)?;
    for (i, h) in out.iter().enumerate() {
        if out[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&h.name))
        {
            return Err(format!("{X_MCP_HEADER} {:?} is declared twice", h.name));
        }
    }
    Ok(out)
}

fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<ParamHeader>) -> Result<(), String> {
    for key in UNREACHABLE {
        if schema.get(key).is_some_and(declares) {
            return Err(format!(
                "an {X_MCP_HEADER} under {key} (at {}) cannot be mirrored",
                shown(path)
            ));
        }
    }
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (name, prop) in props {
        path.push(name.clone());
        if let Some(h) = prop.get(X_MCP_HEADER) {
            out.push(ParamHeader {
                name: valid_name(h, path)?,
                path: path.clone(),
            });
            valid_type(prop, path)?;
        }
        walk(prop, path, out)?;
        path.pop();
    }
    Ok(())
}

/// Whether a subschema (or any schema inside it) declares a header.
fn declares(v: &Value) -> bool {
    match v {
        Value::Object(o) => o.contains_key(X_MCP_HEADER) || o.values().any(declares),
        Value::Array(a) => a.iter().any(declares),
        _ => false,
    }
}

fn shown(path: &[String]) -> String {
    if path.is_empty() {
        "the root".into()
    } else {
        path.join(".")
    }
}

fn valid_name(h: &Value, path: &[String]) -> Result<String, String> {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    match h.as_str() {
        Some(s) if token(s) => Ok(s.to_owned()),
        _ => Err(format!(
            "{X_MCP_HEADER} of {} is {h}, not an HTTP header name",
            shown(path)
        )),
    }
}

fn valid_type(prop: &Value, path: &[String]) -> Result<(), String> {
    match prop.get("type").and_then(Value::as_str) {
        Some("string" | "integer" | "boolean") => Ok(()),
        _ => Err(format!(
            "{X_MCP_HEADER} on {} of type {}: only string, integer and boolean \
             parameters may be mirrored",
            shown(path),
            prop.get("type").unwrap_or(&Value::Null)
        )),
    }
}

/// Largest integer a header mirrors exactly (2^53 - 1, what every JSON
/// peer reads without loss).
const SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// The text a header carries for argument `v` (before encoding): strings
/// as they are, booleans and numbers in their JSON form, a whole number
/// written as an integer (`42.0` is `42`, as an `integer` parameter reads).
pub fn param_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() <= SAFE_INTEGER => {
                Some(format!("{}", f as i64))
            }
            _ => Some(n.to_string()),
        },
        Value::Bool(_) => Some(v.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(props: Value) -> Value {
        json!({"type": "object", "properties": props})
    }

    #[test]
    fn valid_declarations_are_found_with_their_paths() {
        let s = schema(json!({
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
            "query": {"type": "string"},
        }));
        let h = param_headers(&s).unwrap();
        assert_eq!(h.len(), 2);
        let n = h.iter().find(|h| h.name == "N").unwrap();
        assert_eq!(n.path, ["opts", "n"]);
        assert_eq!(n.header_name(), "Mcp-Param-N");
        assert_eq!(n.argument(&json!({"opts": {"n": 3}})), Some(&json!(3)));
        assert_eq!(n.argument(&json!({"opts": {"n": null}})), None);
    }

    #[test]
    fn every_rule_rejects_what_it_names() {
        for (prop, why) in [
            (
                json!({"a": {"type": "string", "x-mcp-header": ""}}),
                "empty",
            ),
            (
                json!({"a": {"type": "object", "x-mcp-header": "A"}}),
                "object",
            ),
            (
                json!({"a": {"type": "array", "x-mcp-header": "A"}}),
                "array",
            ),
            (json!({"a": {"type": "null", "x-mcp-header": "A"}}), "null"),
            (
                json!({"a": {"type": "number", "x-mcp-header": "A"}}),
                "number",
            ),
            (json!({"a": {"x-mcp-header": "A"}}), "no type"),
            (
                json!({"a": {"type": "string", "x-mcp-header": "My A"}}),
                "space",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "A:B"}}),
                "colon",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "Ré"}}),
                "non-ASCII",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "A\t1"}}),
                "control",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": 7}}),
                "not a string",
            ),
            (
                json!({"a": {"type": "string", "x-mcp-header": "Id"},
                       "b": {"type": "string", "x-mcp-header": "iD"}}),
                "duplicate",
            ),
            (
                json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}),
                "under items",
            ),
            (
                json!({"a": {"anyOf": [{"type": "string", "x-mcp-header": "A"}]}}),
                "under anyOf",
            ),
        ] {
            assert!(param_headers(&schema(prop)).is_err(), "{why}");
        }
        let root = json!({"type": "string", "x-mcp-header": "A"});
        assert!(param_headers(&root).is_err(), "root");
        // Reached only through a $ref (draft-07 definitions).
        let by_ref = json!({"type": "object", "properties": {"a": {"$ref": "#/definitions/d"}},
            "definitions": {"d": {"type": "string", "x-mcp-header": "A"}}});
        assert!(param_headers(&by_ref).is_err(), "through $ref");
    }

    #[test]
    fn values_are_mirrored_in_their_json_form() {
        assert_eq!(param_text(&json!("a b")).unwrap(), "a b");
        assert_eq!(param_text(&json!(42)).unwrap(), "42");
        assert_eq!(param_text(&json!(42.0)).unwrap(), "42");
        assert_eq!(param_text(&json!(2.5)).unwrap(), "2.5");
        assert_eq!(param_text(&json!(false)).unwrap(), "false");
        assert_eq!(param_text(&json!({"x": 1})), None);
    }
}
