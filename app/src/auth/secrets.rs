//! API token secrets: generated with enough entropy that a fast hash (SHA-256) is a safe
//! way to store and look them up.

use rand::RngCore;
use sha2::{Digest, Sha256};

/// Every secret starts with this, so a leaked one is easy to recognise in a scan.
pub const TOKEN_PREFIX: &str = "fdk_";

/// A new secret (`fdk_` and 32 random bytes in hex) and the prefix shown in listings.
pub fn generate_token() -> (String, String) {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let secret = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
    let prefix = secret[..TOKEN_PREFIX.len() + 8].to_string();
    (secret, prefix)
}

pub fn sha256_hex(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_prefixed_and_hash_stably() {
        let (a, prefix) = generate_token();
        let (b, _) = generate_token();
        assert_ne!(a, b);
        assert!(a.starts_with("fdk_") && a.len() == 4 + 64);
        assert!(a.starts_with(&prefix) && prefix.len() == 12);
        assert_eq!(sha256_hex(&a), sha256_hex(&a));
        assert_ne!(sha256_hex(&a), sha256_hex(&b));
        assert_eq!(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
