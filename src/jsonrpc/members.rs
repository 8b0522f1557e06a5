//! A message's members read straight into their fields, the way nearly
//! every message arrives: no JSON object is built for the envelope, its
//! member names are compared where they lie in the input, and `"2.0"` is
//! checked without being copied. Anything this reading is not sure of
//! (another shape, a duplicate member, a member of the wrong type) is left
//! to [`validate`](super::validate), which states every rule and words
//! every error: this module decides nothing of its own, it only takes the
//! shortcut when the answer is certain to be the same.

use super::{ErrorObject, Message, Notification, Request, RequestId, Response, JSONRPC_VERSION};
use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::OnceLock;

/// `bytes` as a message, when they plainly are one; `None` sends them the
/// long way (batches, bad input, unusual shapes).
pub(crate) fn read(bytes: &[u8]) -> Option<Message> {
    serde_json::from_slice::<Plain>(bytes).ok().map(|p| p.0)
}

/// A message read the short way.
struct Plain(Message);

/// The id member as read.
enum Id {
    Valid(RequestId),
    Null,
}

#[derive(Default)]
struct Members {
    version: bool,
    id: Option<Id>,
    method: Option<String>,
    params: Option<Map<String, Value>>,
    result: Option<Value>,
    error: Option<Value>,
    extra: Map<String, Value>,
}

impl Members {
    /// The message, when its members leave no doubt about it.
    fn message(self) -> Option<Message> {
        if !self.version {
            return None;
        }
        let Members {
            id,
            method,
            params,
            result,
            error,
            extra,
            ..
        } = self;
        match (method, result, error) {
            (Some(method), None, None) => Some(match id {
                None => Message::Notification(Notification {
                    method,
                    params,
                    extra,
                    whole: OnceLock::new(),
                }),
                Some(Id::Valid(id)) => Message::Request(Request {
                    id,
                    method,
                    params,
                    extra,
                    whole: OnceLock::new(),
                }),
                Some(Id::Null) => return None,
            }),
            (None, result, error) if params.is_none() => {
                let (name, outcome) = match (result, error) {
                    (Some(r), None) => ("result", r),
                    (None, Some(e)) if ErrorObject::from_value(&e).is_some() => ("error", e),
                    _ => return None,
                };
                let id = match (id?, name) {
                    (Id::Valid(id), _) => Some(id),
                    (Id::Null, "error") => None,
                    (Id::Null, _) => return None,
                };
                let mut object = extra;
                object.insert("jsonrpc".into(), JSONRPC_VERSION.into());
                object.insert(
                    "id".into(),
                    id.as_ref().map_or(Value::Null, RequestId::to_value),
                );
                object.insert(name.into(), outcome);
                Some(Message::Response(Response { id, object }))
            }
            _ => None,
        }
    }
}

/// Stores a member seen for the first time; a second one is left to the
/// long way (which keeps the last, as a JSON object does).
fn once<T, E: de::Error>(slot: &mut Option<T>, value: T) -> Result<(), E> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(E::custom("duplicate member")),
    }
}

impl<'de> Deserialize<'de> for Plain {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(PlainVisitor)
    }
}

struct PlainVisitor;

impl<'de> Visitor<'de> for PlainVisitor {
    type Value = Plain;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plain, A::Error> {
        let mut m = Members::default();
        while let Some(key) = map.next_key::<Key>()? {
            match key {
                Key::Jsonrpc => {
                    map.next_value::<Version>()?;
                    if std::mem::replace(&mut m.version, true) {
                        return Err(de::Error::custom("duplicate member"));
                    }
                }
                Key::Id => once(&mut m.id, map.next_value::<Id>()?)?,
                Key::Method => once(&mut m.method, map.next_value::<String>()?)?,
                Key::Params => once(&mut m.params, map.next_value()?)?,
                Key::Result => once(&mut m.result, map.next_value()?)?,
                Key::Error => once(&mut m.error, map.next_value()?)?,
                Key::Other(name) => {
                    let value = map.next_value()?;
                    if m.extra.insert(name, value).is_some() {
                        return Err(de::Error::custom("duplicate member"));
                    }
                }
            }
        }
        m.message()
            .map(Plain)
            .ok_or_else(|| de::Error::custom("not a plain message"))
    }
}

/// A member name.
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

/// The `jsonrpc` member, when it is exactly `"2.0"`.
struct Version;

impl<'de> Deserialize<'de> for Version {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct VersionVisitor;
        impl Visitor<'_> for VersionVisitor {
            type Value = Version;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"2.0\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Version, E> {
                if v == JSONRPC_VERSION {
                    Ok(Version)
                } else {
                    Err(E::custom("not 2.0"))
                }
            }
        }
        d.deserialize_str(VersionVisitor)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = Id;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, an integer or null")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Id, E> {
                Ok(Id::Valid(RequestId::Number(n)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Id, E> {
                i64::try_from(n)
                    .map(|n| Id::Valid(RequestId::Number(n)))
                    .map_err(|_| E::custom("id out of range"))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Id, E> {
                Ok(Id::Valid(RequestId::String(s.to_owned())))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Id, E> {
                Ok(Id::Valid(RequestId::String(s)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Id, E> {
                Ok(Id::Null)
            }
        }
        d.deserialize_any(IdVisitor)
    }
}
