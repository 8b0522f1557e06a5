//! Locks that survive a panic of another holder, and the hash map of the
//! request path.
//!
//! A handler that panics while holding one of our locks has already been
//! turned into a -32603 answer; the data behind the lock is still
//! consistent (no lock here spans a user callback), so the poison flag is
//! ignored rather than spread to every later caller.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// A hash map for the tables every request goes through (requests in
/// flight, sessions, streams): foldhash, seeded at random for each table,
/// instead of std's SipHash (a few hundred instructions a lookup, about 3 %
/// of a stdio call). Make one with `FastMap::default()`.
pub(crate) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Locks `m`, ignoring poison.
pub(crate) fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read-locks `l`, ignoring poison.
pub(crate) fn read<T: ?Sized>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

/// Write-locks `l`, ignoring poison.
pub(crate) fn write<T: ?Sized>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|p| p.into_inner())
}
