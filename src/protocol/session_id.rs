//! Session ids: 128 bits from the system's CSPRNG, in visible ASCII.

use ring::rand::{SecureRandom, SystemRandom};
use std::sync::OnceLock;

/// Random bytes in a session id: 128 bits.
pub const SESSION_ID_BYTES: usize = 16;

/// A new session id: 128 bits from the system's CSPRNG (`ring`), as 32
/// lowercase hex digits, so only visible ASCII (0x21-0x7E) is ever used.
pub fn new_session_id() -> String {
    static RNG: OnceLock<SystemRandom> = OnceLock::new();
    let mut bytes = [0u8; SESSION_ID_BYTES];
    // SystemRandom only fails if the OS has no randomness at all; an id
    // without it would be guessable, so this is a fatal condition.
    RNG.get_or_init(SystemRandom::new)
        .fill(&mut bytes)
        .expect("the operating system's random source failed");
    let mut id = String::with_capacity(SESSION_ID_BYTES * 2);
    for b in bytes {
        id.push(char::from_digit((b >> 4).into(), 16).unwrap_or('0'));
        id.push(char::from_digit((b & 15).into(), 16).unwrap_or('0'));
    }
    id
}

/// Whether `id` may name a session: not empty, visible ASCII only
/// (0x21-0x7E), the spec's rule for `MCP-Session-Id`.
#[cfg_attr(not(all(feature = "http", feature = "client")), allow(dead_code))]
pub(crate) fn is_valid(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_graphic())
}

/// How a session is named in logs: the first 8 hex digits of the
/// SHA-256 of its id. Without bearer tokens the id is the capability to use
/// the session, so logs never carry it; the digest still lets an operator
/// follow one session through a log.
pub fn log_name(id: &str) -> String {
    LogName::of(id).as_str().to_owned()
}

/// [`log_name`] held inline (`#` and 8 hex digits): what a session keeps,
/// so that naming it in logs costs no allocation of its own.
#[derive(Clone, Copy)]
pub(crate) struct LogName([u8; 9]);

impl LogName {
    pub(crate) fn of(id: &str) -> LogName {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
        let mut out = [b'#'; 9];
        for (i, b) in digest.as_ref()[..4].iter().enumerate() {
            out[1 + 2 * i] = HEX[usize::from(b >> 4)];
            out[2 + 2 * i] = HEX[usize::from(b & 15)];
        }
        LogName(out)
    }

    pub(crate) fn as_str(&self) -> &str {
        // ASCII by construction.
        std::str::from_utf8(&self.0).unwrap_or("#")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_name_a_session_by_a_short_digest_not_its_id() {
        // #11 item 18.
        let id = new_session_id();
        let name = log_name(&id);
        assert_eq!(name.len(), 9);
        assert!(!id.contains(&name[1..]) || name[1..] != id[..8]);
        assert_eq!(name, log_name(&id), "stable");
        assert_ne!(name, log_name(&new_session_id()));
    }

    #[test]
    fn ids_are_128_bit_visible_ascii_and_distinct() {
        let a = new_session_id();
        let b = new_session_id();
        assert_eq!(a.len(), 32);
        assert!(is_valid(&a), "{a}");
        assert_ne!(a, b);
    }
}
