//! Opaque-cursor pagination for the list methods, in deterministic key order.

use crate::jsonrpc::ErrorObject;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::ops::Bound;

const CURSOR_PREFIX: &str = "c1.";

/// A page as a list result: `items` under `key`, and `nextCursor` when
/// there is more.
pub(crate) fn paged(key: &str, items: Vec<Value>, next: Option<String>) -> Value {
    let mut m = Map::new();
    m.insert(key.into(), Value::Array(items));
    if let Some(n) = next {
        m.insert("nextCursor".into(), n.into());
    }
    Value::Object(m)
}

/// One page of `map` after `cursor`, and the cursor of the next page.
///
/// The cursor encodes the last key returned (hex, versioned), so paging stays
/// correct while entries are added or removed. An unreadable cursor is -32602.
pub(crate) fn page<'a, V>(
    map: &'a BTreeMap<String, V>,
    cursor: Option<&str>,
    size: usize,
) -> Result<(Vec<&'a V>, Option<String>), ErrorObject> {
    let start = match cursor {
        None => Bound::Unbounded,
        Some(c) => Bound::Excluded(decode(c).ok_or_else(|| {
            ErrorObject::invalid_params(format!(
                "invalid cursor: {}",
                crate::jsonrpc::excerpt(format!("{c:?}"))
            ))
        })?),
    };
    let mut it = map.range::<String, _>((start, Bound::Unbounded));
    let mut items = Vec::new();
    let mut last = None;
    for (k, v) in it.by_ref().take(size.max(1)) {
        items.push(v);
        last = Some(k);
    }
    let next = match (last, it.next()) {
        (Some(k), Some(_)) => Some(encode(k)),
        _ => None,
    };
    Ok((items, next))
}

fn encode(key: &str) -> String {
    let mut s = String::with_capacity(CURSOR_PREFIX.len() + key.len() * 2);
    s.push_str(CURSOR_PREFIX);
    for b in key.bytes() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn decode(cursor: &str) -> Option<String> {
    let hex = cursor.strip_prefix(CURSOR_PREFIX)?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_in_order_and_ends() {
        let map: BTreeMap<String, u32> = (0..5).map(|i| (format!("k{i}"), i)).collect();
        let (a, c) = page(&map, None, 2).unwrap();
        assert_eq!(a, vec![&0, &1]);
        let (b, c) = page(&map, c.as_deref(), 2).unwrap();
        assert_eq!(b, vec![&2, &3]);
        let (d, c) = page(&map, c.as_deref(), 2).unwrap();
        assert_eq!((d, c), (vec![&4], None));
        let (all, none) = page(&map, None, 10).unwrap();
        assert_eq!((all.len(), none), (5, None));
    }

    #[test]
    fn bad_cursor_is_invalid_params() {
        let map: BTreeMap<String, u32> = BTreeMap::new();
        for c in ["nope", "c1.zz", "c1.abc"] {
            assert_eq!(
                page(&map, Some(c), 2).unwrap_err().code,
                crate::jsonrpc::INVALID_PARAMS
            );
        }
    }
}
