//! The schemas most tools declare — types, properties, `required`,
//! `additionalProperties`, `items`, `enum`/`const`, the numeric and length
//! bounds and the combinators — checked by a small compiled tree, with the
//! JSON Schema 2020-12 meaning of each keyword.
//!
//! It is a fast path, not a second validator: [`Node::compile`] takes a
//! schema only when every keyword in it is one of those, in the form the
//! 2020-12 meta-schema allows; anything else (`$ref`, `pattern`, `format`,
//! another `$schema`, a malformed keyword …) returns `None` and goes to the
//! full validator, which also says what is wrong with a broken schema. The
//! full validator's code and its meta-schemas are then never loaded for a
//! server whose tools are plain: 3.2 MiB less resident memory for the echo
//! server (`PERFORMANCE.md`). The unit tests check both agree on random
//! schemas and instances.

use serde_json::{Map, Number, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

/// The 2020-12 meta-schema's URI, the only `$schema` taken here.
const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// A compiled schema: a boolean schema or a set of checks.
#[derive(Debug)]
pub(crate) enum Node {
    /// `true` accepts everything, `false` nothing.
    Always(bool),
    Checks(Box<Checks>),
}

/// The instance types of `type`, as bits.
const NULL: u8 = 1;
const BOOLEAN: u8 = 2;
const OBJECT: u8 = 4;
const ARRAY: u8 = 8;
const NUMBER: u8 = 16;
const STRING: u8 = 32;
/// `integer`: a number with no fractional part.
const INTEGER: u8 = 64;
const TYPE_NAMES: [(&str, u8); 7] = [
    ("null", NULL),
    ("boolean", BOOLEAN),
    ("object", OBJECT),
    ("array", ARRAY),
    ("number", NUMBER),
    ("string", STRING),
    ("integer", INTEGER),
];

#[derive(Debug, Default)]
pub(crate) struct Checks {
    types: Option<u8>,
    properties: BTreeMap<String, Node>,
    required: Vec<String>,
    additional: Option<Node>,
    items: Option<Node>,
    /// `enum`: the instance equals one of these.
    enum_values: Option<Vec<Value>>,
    constant: Option<Value>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
    /// (`minimum` …, the limit): each a bound on numbers.
    bounds: Vec<(Bound, Number)>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Node>,
}

#[derive(Debug, Clone, Copy)]
enum Bound {
    Minimum,
    Maximum,
    ExclusiveMinimum,
    ExclusiveMaximum,
}

impl Bound {
    fn holds(self, n: &Number, limit: &Number) -> bool {
        let order = compare(n, limit);
        match self {
            Bound::Minimum => order != Ordering::Less,
            Bound::Maximum => order != Ordering::Greater,
            Bound::ExclusiveMinimum => order == Ordering::Greater,
            Bound::ExclusiveMaximum => order == Ordering::Less,
        }
    }
    fn says(self) -> &'static str {
        match self {
            Bound::Minimum => "less than the minimum of",
            Bound::Maximum => "greater than the maximum of",
            Bound::ExclusiveMinimum => "less than or equal to the exclusive minimum of",
            Bound::ExclusiveMaximum => "greater than or equal to the exclusive maximum of",
        }
    }
}

impl Node {
    /// The root of a schema: `$schema` is allowed here (and only as 2020-12).
    pub(crate) fn compile_root(schema: &Value) -> Option<Node> {
        match schema.get("$schema") {
            None => Node::compile(schema, None),
            // The URI, with or without an empty fragment.
            Some(Value::String(s)) if s.strip_suffix('#').unwrap_or(s) == DRAFT_2020_12 => {
                Node::compile(schema, Some("$schema"))
            }
            Some(_) => None,
        }
    }

    /// `None` when the schema has anything this module does not take.
    fn compile(schema: &Value, skip: Option<&str>) -> Option<Node> {
        let map = match schema {
            Value::Bool(b) => return Some(Node::Always(*b)),
            Value::Object(map) => map,
            _ => return None,
        };
        let mut c = Checks::default();
        for (key, value) in map {
            if Some(key.as_str()) == skip {
                continue;
            }
            match key.as_str() {
                // Annotations, in the types the meta-schema gives them.
                "title" | "description" | "$comment" => value.as_str().map(drop)?,
                "deprecated" | "readOnly" | "writeOnly" => value.as_bool().map(drop)?,
                "examples" => value.as_array().map(drop)?,
                "default" => {}
                "type" => c.types = Some(types(value)?),
                "properties" => {
                    for (name, sub) in value.as_object()? {
                        c.properties.insert(name.clone(), Node::compile(sub, None)?);
                    }
                }
                "required" => c.required = unique_strings(value)?,
                "additionalProperties" => c.additional = Some(Node::compile(value, None)?),
                "items" => c.items = Some(Node::compile(value, None)?),
                "enum" => c.enum_values = Some(value.as_array()?.clone()),
                "const" => c.constant = Some(value.clone()),
                "minLength" => c.min_length = Some(value.as_u64()?),
                "maxLength" => c.max_length = Some(value.as_u64()?),
                "minItems" => c.min_items = Some(value.as_u64()?),
                "maxItems" => c.max_items = Some(value.as_u64()?),
                "minProperties" => c.min_properties = Some(value.as_u64()?),
                "maxProperties" => c.max_properties = Some(value.as_u64()?),
                "minimum" => c.bounds.push((Bound::Minimum, number(value)?)),
                "maximum" => c.bounds.push((Bound::Maximum, number(value)?)),
                "exclusiveMinimum" => c.bounds.push((Bound::ExclusiveMinimum, number(value)?)),
                "exclusiveMaximum" => c.bounds.push((Bound::ExclusiveMaximum, number(value)?)),
                "allOf" => c.all_of = schemas(value)?,
                "anyOf" => c.any_of = schemas(value)?,
                "oneOf" => c.one_of = schemas(value)?,
                "not" => c.not = Some(Node::compile(value, None)?),
                _ => return None,
            }
        }
        Some(Node::Checks(Box::new(c)))
    }

    /// Whether `v` satisfies the schema; each violation is added to
    /// `errors` as "POINTER: what" (the pointer left out at the root).
    pub(crate) fn check(&self, v: &Value, at: &Path<'_>, errors: &mut Errors) {
        match self {
            Node::Always(true) => {}
            Node::Always(false) => {
                at.error(errors, format_args!("False schema does not allow {v}"))
            }
            Node::Checks(c) => c.check(v, at, errors),
        }
    }

    fn accepts(&self, v: &Value) -> bool {
        let mut errors = Errors::quiet();
        self.check(v, &Path::Root, &mut errors);
        errors.is_empty()
    }
}

impl Checks {
    fn check(&self, v: &Value, at: &Path<'_>, errors: &mut Errors) {
        if let Some(t) = self.types {
            if t & type_of(v) == 0 {
                let names: Vec<&str> = TYPE_NAMES
                    .iter()
                    .filter(|(_, bit)| t & bit != 0)
                    .map(|(n, _)| *n)
                    .collect();
                at.error(
                    errors,
                    format_args!("{v} is not of type {}", names.join(" or ")),
                );
            }
        }
        if let Some(values) = &self.enum_values {
            if !values.iter().any(|e| equal(e, v)) {
                at.error(errors, format_args!("{v} is not one of {}", Listed(values)));
            }
        }
        if let Some(constant) = &self.constant {
            if !equal(constant, v) {
                at.error(errors, format_args!("{constant} was expected, not {v}"));
            }
        }
        match v {
            Value::String(s) => self.check_string(s, v, at, errors),
            Value::Number(n) => {
                for (bound, limit) in &self.bounds {
                    if !bound.holds(n, limit) {
                        at.error(errors, format_args!("{n} is {} {limit}", bound.says()));
                    }
                }
            }
            Value::Array(items) => self.check_array(items, v, at, errors),
            Value::Object(map) => self.check_object(map, v, at, errors),
            _ => {}
        }
        self.check_combinators(v, at, errors);
    }

    fn check_string(&self, s: &str, v: &Value, at: &Path<'_>, errors: &mut Errors) {
        if self.min_length.is_none() && self.max_length.is_none() {
            return;
        }
        let length = s.chars().count() as u64;
        let bounds = (self.min_length, self.max_length);
        count_within(length, bounds, "characters", v, at, errors);
    }

    fn check_array(&self, items: &[Value], v: &Value, at: &Path<'_>, errors: &mut Errors) {
        let bounds = (self.min_items, self.max_items);
        count_within(items.len() as u64, bounds, "items", v, at, errors);
        if let Some(node) = &self.items {
            for (i, item) in items.iter().enumerate() {
                node.check(item, &Path::Index(at, i), errors);
            }
        }
    }

    fn check_object(
        &self,
        map: &Map<String, Value>,
        v: &Value,
        at: &Path<'_>,
        errors: &mut Errors,
    ) {
        let bounds = (self.min_properties, self.max_properties);
        count_within(map.len() as u64, bounds, "properties", v, at, errors);
        for name in &self.required {
            if !map.contains_key(name) {
                at.error(
                    errors,
                    format_args!("{} is a required property", Value::from(name.as_str())),
                );
            }
        }
        for (name, node) in &self.properties {
            if let Some(value) = map.get(name) {
                node.check(value, &Path::Key(at, name), errors);
            }
        }
        if let Some(node) = &self.additional {
            for (name, value) in map {
                if !self.properties.contains_key(name) {
                    match node {
                        Node::Always(false) => at.error(
                            errors,
                            format_args!(
                                "Additional properties are not allowed ({} was unexpected)",
                                Value::from(name.as_str())
                            ),
                        ),
                        node => node.check(value, &Path::Key(at, name), errors),
                    }
                }
            }
        }
    }

    fn check_combinators(&self, v: &Value, at: &Path<'_>, errors: &mut Errors) {
        for node in &self.all_of {
            node.check(v, at, errors);
        }
        if !self.any_of.is_empty() && !self.any_of.iter().any(|n| n.accepts(v)) {
            at.error(
                errors,
                format_args!("{v} is not valid under any of the schemas listed in 'anyOf'"),
            );
        }
        if !self.one_of.is_empty() {
            match self.one_of.iter().filter(|n| n.accepts(v)).count() {
                1 => {}
                0 => at.error(
                    errors,
                    format_args!("{v} is not valid under any of the schemas listed in 'oneOf'"),
                ),
                _ => at.error(
                    errors,
                    format_args!(
                        "{v} is valid under more than one of the schemas listed in 'oneOf'"
                    ),
                ),
            }
        }
        if self.not.as_ref().is_some_and(|n| n.accepts(v)) {
            at.error(
                errors,
                format_args!("{v} should not be valid under the schema in 'not'"),
            );
        }
    }
}

/// A list of values as JSON, for a message.
struct Listed<'a>(&'a [Value]);

impl std::fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&serde_json::to_string(self.0).unwrap_or_default())
    }
}

/// What a check found: the messages, or (for `anyOf`, `oneOf`, `not`,
/// which only ask whether a branch holds) just whether anything failed.
pub(crate) struct Errors {
    pub(crate) messages: Vec<String>,
    quiet: bool,
    failed: bool,
}

impl Errors {
    /// Collects every message.
    pub(crate) fn new() -> Errors {
        Errors {
            messages: Vec::new(),
            quiet: false,
            failed: false,
        }
    }
    fn quiet() -> Errors {
        Errors {
            messages: Vec::new(),
            quiet: true,
            failed: false,
        }
    }
    pub(crate) fn is_empty(&self) -> bool {
        !self.failed
    }
}

/// Where in the instance a check is: a JSON Pointer, built only for a
/// message.
pub(crate) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn pointer(&self, out: &mut String) {
        match self {
            Path::Root => {}
            Path::Key(parent, key) => {
                parent.pointer(out);
                out.push('/');
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Path::Index(parent, i) => {
                parent.pointer(out);
                let _ = write!(out, "/{i}");
            }
        }
    }

    fn error(&self, errors: &mut Errors, what: std::fmt::Arguments<'_>) {
        errors.failed = true;
        if errors.quiet {
            return;
        }
        let mut message = String::new();
        self.pointer(&mut message);
        if !message.is_empty() {
            message.push_str(": ");
        }
        let _ = message.write_fmt(what);
        errors.messages.push(message);
    }
}

/// A count of `what` (characters, items, properties) against its
/// `min…` and `max…` keywords.
fn count_within(
    count: u64,
    (min, max): (Option<u64>, Option<u64>),
    what: &str,
    v: &Value,
    at: &Path<'_>,
    errors: &mut Errors,
) {
    if let Some(m) = min.filter(|m| count < *m) {
        at.error(errors, format_args!("{v} has fewer than {m} {what}"));
    }
    if let Some(m) = max.filter(|m| count > *m) {
        at.error(errors, format_args!("{v} has more than {m} {what}"));
    }
}

fn type_of(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Object(_) => OBJECT,
        Value::Array(_) => ARRAY,
        Value::String(_) => STRING,
        Value::Number(n) if is_integer(n) => NUMBER | INTEGER,
        Value::Number(_) => NUMBER,
    }
}

/// 2020-12: an integer is any number with a zero fractional part (`1.0`).
fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// `type`: one name, or a non-empty array of distinct names.
fn types(value: &Value) -> Option<u8> {
    let bit = |v: &Value| {
        let name = v.as_str()?;
        TYPE_NAMES.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
    };
    match value {
        Value::Array(names) if !names.is_empty() => {
            let mut bits = 0;
            for name in names {
                let b = bit(name)?;
                if bits & b != 0 {
                    return None;
                }
                bits |= b;
            }
            Some(bits)
        }
        v => bit(v),
    }
}

fn unique_strings(value: &Value) -> Option<Vec<String>> {
    let list = value.as_array()?;
    let mut seen = HashSet::with_capacity(list.len());
    list.iter()
        .map(|v| v.as_str().filter(|s| seen.insert(*s)).map(str::to_owned))
        .collect()
}

/// A bound: a number an `f64` holds (with serde_json's
/// `arbitrary_precision`, one that does not goes to the full validator).
fn number(value: &Value) -> Option<Number> {
    value
        .as_number()
        .filter(|n| n.as_f64().is_some_and(f64::is_finite))
        .cloned()
}

/// `allOf`/`anyOf`/`oneOf`: a non-empty array of schemas.
fn schemas(value: &Value) -> Option<Vec<Node>> {
    let list = value.as_array()?;
    if list.is_empty() {
        return None;
    }
    list.iter().map(|s| Node::compile(s, None)).collect()
}

/// JSON equality as JSON Schema means it: numbers by value (`1` is `1.0`).
pub(crate) fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y) == Ordering::Equal,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| equal(a, b)))
        }
        (a, b) => a == b,
    }
}

/// Numbers compared exactly, across integers and floats.
fn compare(a: &Number, b: &Number) -> Ordering {
    match (integer(a), integer(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(x), None) => compare_int_float(x, b.as_f64().unwrap_or(0.0)),
        (None, Some(y)) => compare_int_float(y, a.as_f64().unwrap_or(0.0)).reverse(),
        (None, None) => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

fn integer(n: &Number) -> Option<i128> {
    n.as_i64()
        .map(i128::from)
        .or_else(|| n.as_u64().map(i128::from))
}

/// An integer against a float, exactly: a float with a fraction is below
/// 2^52 in magnitude, where every integer is a float too.
fn compare_int_float(i: i128, f: f64) -> Ordering {
    // 2^100: beyond every i64 and u64, and exactly an i128.
    const FAR: f64 = 1.2676506002282294e30;
    if f >= FAR {
        Ordering::Less
    } else if f <= -FAR {
        Ordering::Greater
    } else if f.fract() == 0.0 {
        i.cmp(&(f as i128))
    } else {
        (i as f64).partial_cmp(&f).unwrap_or(Ordering::Equal)
    }
}

#[cfg(test)]
#[path = "plain_tests.rs"]
mod tests;
