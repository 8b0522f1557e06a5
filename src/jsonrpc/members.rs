//! A message's envelope members (`jsonrpc`, `id`, `method`, `params`,
//! `result`, `error`) and the rest, gathered either from an object already
//! parsed ([`Members::of`]) or straight from the text ([`read`]): the
//! second builds no JSON object for the envelope and compares member names
//! where they lie in the input. What the members make is decided in one
//! place, [`super::validate_members`], whichever way they were gathered.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// The envelope members of one message, each as it arrived, and the rest.
/// A member given twice counts once, with its last value, as in a JSON
/// object.
#[derive(Default)]
pub(super) struct Members {
    pub(super) jsonrpc: Option<Version>,
    pub(super) id: Option<Value>,
    pub(super) method: Option<Value>,
    pub(super) params: Option<Value>,
    pub(super) result: Option<Value>,
    pub(super) error: Option<Value>,
    /// Every other member.
    pub(super) extra: Map<String, Value>,
}

impl Members {
    /// The members of a parsed object.
    pub(super) fn of(mut object: Map<String, Value>) -> Members {
        Members {
            jsonrpc: object.remove("jsonrpc").map(Version::of),
            id: object.remove("id"),
            method: object.remove("method"),
            params: object.remove("params"),
            result: object.remove("result"),
            error: object.remove("error"),
            extra: object,
        }
    }
}

/// The `jsonrpc` member: the version this side speaks, or what came
/// instead.
pub(super) enum Version {
    /// `"2.0"` (read without making a string of it).
    Exact,
    /// Anything else, as it arrived.
    Other(Value),
}

impl Version {
    fn of(value: Value) -> Version {
        match value {
            Value::String(v) if v == super::JSONRPC_VERSION => Version::Exact,
            other => Version::Other(other),
        }
    }

    /// The member's value.
    pub(super) fn into_value(self) -> Value {
        match self {
            Version::Exact => super::JSONRPC_VERSION.into(),
            Version::Other(v) => v,
        }
    }
}

/// The members of `text` when it is one JSON object; `None` for anything
/// else (a batch, another value, bad JSON), which is parsed the long way.
pub(super) fn read(text: &str) -> Option<Members> {
    serde_json::from_str::<Members>(text).ok()
}

impl<'de> Deserialize<'de> for Members {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> Visitor<'de> for MembersVisitor {
    type Value = Members;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<Key>()? {
            let slot = match key {
                Key::Jsonrpc => {
                    m.jsonrpc = Some(map.next_value()?);
                    continue;
                }
                Key::Id => &mut m.id,
                Key::Method => &mut m.method,
                Key::Params => &mut m.params,
                Key::Result => &mut m.result,
                Key::Error => &mut m.error,
                Key::Other(name) => {
                    let value = map.next_value()?;
                    m.extra.insert(name, value);
                    continue;
                }
            };
            *slot = Some(map.next_value()?);
        }
        Ok(m)
    }
}

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(VersionVisitor)
    }
}

/// Compares a string where it lies; any other value is read as a [`Value`].
struct VersionVisitor;

impl<'de> Visitor<'de> for VersionVisitor {
    type Value = Version;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Version, E> {
        Ok(match v {
            super::JSONRPC_VERSION => Version::Exact,
            other => Version::Other(Value::String(other.to_owned())),
        })
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Version, E> {
        Ok(Version::Other(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Version, E> {
        Ok(Version::Other(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Version, E> {
        Ok(Version::Other(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Version, E> {
        Ok(Version::Other(Value::from(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Version, E> {
        Ok(Version::Other(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Version, A::Error> {
        Value::deserialize(de::value::SeqAccessDeserializer::new(seq)).map(Version::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Version, A::Error> {
        Value::deserialize(de::value::MapAccessDeserializer::new(map)).map(Version::Other)
    }
}

/// A member name, compared where it lies in the input.
enum Key {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other(String),
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
                Ok(match name {
                    "jsonrpc" => Key::Jsonrpc,
                    "id" => Key::Id,
                    "method" => Key::Method,
                    "params" => Key::Params,
                    "result" => Key::Result,
                    "error" => Key::Error,
                    other => Key::Other(other.to_owned()),
                })
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}
