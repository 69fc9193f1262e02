//! Argon2id password hashing with the crate's recommended parameters, and generation of
//! passwords for new and reset accounts.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use rand::Rng;

/// Hashes a password as a PHC string (`$argon2id$v=19$...`). CPU-heavy: call it from
/// `spawn_blocking` in async code.
pub fn hash(password: &str) -> String {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .expect("argon2 with default parameters cannot fail")
        .to_string()
}

/// Whether `password` matches the stored PHC string. A malformed hash never matches.
pub fn verify(password: &str, phc: &str) -> bool {
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok(),
        Err(_) => false,
    }
}

/// A hash of a password nobody has, verified against when a username does not exist so
/// that a wrong username takes as long as a wrong password.
pub fn dummy_hash() -> &'static str {
    static DUMMY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DUMMY.get_or_init(|| hash("flightdeck-timing-equaliser"))
}

/// A random 20-character password from an alphabet without look-alike characters.
pub fn generate() -> String {
    const ALPHABET: &[u8] = b"abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::thread_rng();
    (0..20).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char).collect()
}

/// The minimum a password chosen by a person must meet.
pub fn check_strength(password: &str) -> Result<(), String> {
    if password.chars().count() < 12 {
        return Err("passwords need at least 12 characters".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_argon2id_salted_and_verify() {
        let a = hash("correct horse battery");
        let b = hash("correct horse battery");
        assert!(a.starts_with("$argon2id$"), "{a}");
        assert_ne!(a, b, "each hash has its own salt");
        assert!(verify("correct horse battery", &a));
        assert!(!verify("correct horse batterY", &a));
        assert!(!verify("anything", "not a phc string"));
    }

    #[test]
    fn generated_passwords_are_long_and_distinct() {
        let a = generate();
        assert_eq!(a.len(), 20);
        assert_ne!(a, generate());
        assert!(check_strength(&a).is_ok());
        assert!(check_strength("short").is_err());
    }
}
