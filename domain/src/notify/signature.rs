//! Signing outgoing webhooks the Standard Webhooks way (<https://www.standardwebhooks.com>),
//! so a receiver can tell Flightdeck's calls from a forger's and refuse a replayed one.
//!
//! Every delivery carries three headers:
//! - `webhook-id`: the delivery's id, the same on every retry (receivers drop repeats);
//! - `webhook-timestamp`: Unix seconds when this attempt was sent (receivers refuse old
//!   ones, five minutes is the usual tolerance);
//! - `webhook-signature`: `v1,` and the base64 of HMAC-SHA256 over
//!   `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the target's secret.
//!
//! A secret is `whsec_` and the base64 of 24 to 64 random bytes (`flightdeck
//! webhook-secret` makes one); the key is the decoded bytes. Pure: the worker signs, the
//! tests and the docs' receiver snippet verify.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The prefix every secret starts with.
pub const PREFIX: &str = "whsec_";
/// How far a timestamp may be from the receiver's clock, as the standard suggests.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

/// A target's signing key.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningSecret(Vec<u8>);

impl std::fmt::Debug for SigningSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningSecret(…)")
    }
}

/// From the config file's `secret = "whsec_..."`, checked as it is read.
impl<'de> serde::Deserialize<'de> for SigningSecret {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <String as serde::Deserialize>::deserialize(deserializer)?;
        SigningSecret::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl SigningSecret {
    /// Reads `whsec_<base64>`; says what is wrong otherwise (the secret itself is never
    /// repeated in the message).
    pub fn parse(text: &str) -> Result<SigningSecret, String> {
        let Some(encoded) = text.trim().strip_prefix(PREFIX) else {
            return Err(format!("a signing secret starts with `{PREFIX}` (make one with `flightdeck webhook-secret`)"));
        };
        let key = BASE64.decode(encoded).map_err(|_| format!("the part after `{PREFIX}` is not base64"))?;
        if !(24..=64).contains(&key.len()) {
            return Err(format!("a signing secret holds 24 to 64 bytes, this one {}", key.len()));
        }
        Ok(SigningSecret(key))
    }

    /// A new random secret, as text.
    pub fn generate() -> String {
        use rand::RngCore;
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        format!("{PREFIX}{}", BASE64.encode(key))
    }

    /// The `webhook-signature` value for one attempt.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        format!("v1,{}", BASE64.encode(self.mac(id, timestamp, body).finalize().into_bytes()))
    }

    fn mac(&self, id: &str, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        mac
    }

    /// What a receiver does: the timestamp within the tolerance of `now` and one of the
    /// space-separated `v1,` signatures right (compared in constant time).
    pub fn verify(&self, id: &str, timestamp: &str, signatures: &str, body: &[u8], now: i64) -> Result<(), String> {
        let at: i64 = timestamp.trim().parse().map_err(|_| "webhook-timestamp is not a number".to_string())?;
        if (now - at).abs() > TOLERANCE_SECONDS {
            return Err("webhook-timestamp is too far from now (a replay?)".into());
        }
        for signature in signatures.split(' ') {
            let Some(encoded) = signature.strip_prefix("v1,") else { continue };
            let Ok(given) = BASE64.decode(encoded) else { continue };
            if self.mac(id, at, body).verify_slice(&given).is_ok() {
                return Ok(());
            }
        }
        Err("no webhook-signature matches".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_the_standard_webhooks_reference_does() {
        // The example of the Standard Webhooks specification and its reference libraries.
        let secret = SigningSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(secret.sign(id, 1614265330, body), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        assert!(secret
            .verify(id, "1614265330", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, 1614265330)
            .is_ok());
    }

    #[test]
    fn a_forged_tampered_or_old_delivery_is_refused() {
        let secret = SigningSecret::parse(&SigningSecret::generate()).unwrap();
        let other = SigningSecret::parse(&SigningSecret::generate()).unwrap();
        let body = br#"{"event":"alert.firing"}"#;
        let good = secret.sign("msg_1", 1_000_000, body);
        assert!(secret.verify("msg_1", "1000000", &good, body, 1_000_100).is_ok());
        assert!(secret.verify("msg_1", "1000000", &format!("v1,bm9wZQ== {good}"), body, 1_000_000).is_ok());
        let forged = other.sign("msg_1", 1_000_000, body);
        assert!(secret.verify("msg_1", "1000000", &forged, body, 1_000_000).is_err(), "another key");
        assert!(secret.verify("msg_1", "1000000", &good, br#"{"event":"alert.resolved"}"#, 1_000_000).is_err());
        assert!(secret.verify("msg_2", "1000000", &good, body, 1_000_000).is_err(), "another id");
        let late = 1_000_000 + TOLERANCE_SECONDS + 1;
        assert!(secret.verify("msg_1", "1000000", &good, body, late).unwrap_err().contains("replay"));
    }

    #[test]
    fn secrets_are_checked_and_never_printed() {
        assert!(SigningSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap_err().contains("whsec_"));
        assert!(SigningSecret::parse("whsec_!!!").unwrap_err().contains("base64"));
        assert!(SigningSecret::parse("whsec_c2hvcnQ=").unwrap_err().contains("24 to 64"));
        let made = SigningSecret::generate();
        assert!(made.starts_with(PREFIX) && SigningSecret::parse(&made).is_ok());
        assert_eq!(format!("{:?}", SigningSecret::parse(&made).unwrap()), "SigningSecret(…)");
    }
}
