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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_128_bit_visible_ascii_and_distinct() {
        let a = new_session_id();
        let b = new_session_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| (0x21..=0x7e).contains(&c)));
        assert_ne!(a, b);
    }
}
