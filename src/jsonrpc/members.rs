//! A message's envelope members (`jsonrpc`, `id`, `method`, `params`,
//! `result`, `error`) and the rest, gathered either from an object already
//! parsed ([`Members::of`]) or straight from the bytes ([`read`]): the
//! second builds no JSON object for the envelope and compares member names
//! where they lie in the input. What the members make is decided in one
//! place, [`super::validate_members`], whichever way they were gathered.

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// The envelope members of one message, each as it arrived, and the rest.
/// A member given twice counts once, with its last value, as in a JSON
/// object.
#[derive(Default)]
pub(super) struct Members {
    pub(super) jsonrpc: Option<Value>,
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
            jsonrpc: object.remove("jsonrpc"),
            id: object.remove("id"),
            method: object.remove("method"),
            params: object.remove("params"),
            result: object.remove("result"),
            error: object.remove("error"),
            extra: object,
        }
    }
}

/// The members of `bytes` when they are one JSON object; `None` for
/// anything else (a batch, another value, bad JSON), which is parsed the
/// long way.
pub(super) fn read(bytes: &[u8]) -> Option<Members> {
    serde_json::from_slice::<Members>(bytes).ok()
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
                Key::Jsonrpc => &mut m.jsonrpc,
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
