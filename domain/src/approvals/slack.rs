//! Deciding from Slack: the Approve and Deny buttons on an `approval.requested` message,
//! and the checks on what Slack sends back when one is clicked.
//!
//! Slack signs every interactivity request: `X-Slack-Signature` is `v0=` and the hex of
//! HMAC-SHA256 over `v0:{X-Slack-Request-Timestamp}:{body}`, keyed with the app's signing
//! secret (<https://api.slack.com/authentication/verifying-requests-from-slack>). A request
//! older than five minutes, or one already handled, is refused. Each button carries the
//! request id and the hash of the payload the message showed, so a click decides exactly
//! that payload or nothing. Pure: the server's endpoint does the I/O.

use super::Approval;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

/// How far Slack's timestamp may be from ours, as Slack recommends.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;
/// The most argument text a message shows; longer payloads are decided in Flightdeck,
/// since a button must never approve what the message could not show.
pub const MAX_SHOWN_ARGUMENTS: usize = 2500;
/// The action ids of the two buttons.
pub const APPROVE: &str = "flightdeck_approve";
pub const DENY: &str = "flightdeck_deny";

/// The signature Slack would send for `body` at `timestamp`.
pub fn sign(secret: &str, timestamp: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Checks a request's signature and age; the error says which check failed.
pub fn verify(
    secret: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), String> {
    let timestamp = timestamp.ok_or("missing X-Slack-Request-Timestamp")?;
    let signature = signature.ok_or("missing X-Slack-Signature")?;
    let at: i64 = timestamp.trim().parse().map_err(|_| "X-Slack-Request-Timestamp is not a number")?;
    if (now - at).abs() > TOLERANCE_SECONDS {
        return Err(format!("the request is {} s from our clock; at most {TOLERANCE_SECONDS} s is accepted", now - at));
    }
    let given =
        signature.strip_prefix("v0=").and_then(|h| hex::decode(h).ok()).ok_or("X-Slack-Signature is not v0=<hex>")?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(b"v0:");
    mac.update(timestamp.as_bytes());
    mac.update(b":");
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&given).map_err(|_| "the signature does not match the body".to_string())
}

/// A button click, as far as Flightdeck reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Click {
    pub slack_user: String,
    pub slack_user_name: Option<String>,
    pub approve: bool,
    pub approval_id: String,
    pub payload_sha256: String,
    pub response_url: Option<String>,
}

/// Reads the form body Slack posts (`payload=<JSON>`): one block action on one of our
/// buttons, with its value `{approval id}:{payload hash}`.
pub fn parse_click(body: &[u8]) -> Result<Click, String> {
    let payload = form_urlencoded::parse(body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or("the body has no `payload` field")?;
    let payload: Value = serde_json::from_str(&payload).map_err(|e| format!("`payload` is not JSON: {e}"))?;
    if payload["type"] != "block_actions" {
        return Err(format!("only block_actions are handled, got {}", payload["type"]));
    }
    let action = payload["actions"].get(0).ok_or("no action in the payload")?;
    let approve = match action["action_id"].as_str() {
        Some(APPROVE) => true,
        Some(DENY) => false,
        other => return Err(format!("unknown action {other:?}")),
    };
    let value = action["value"].as_str().ok_or("the button carries no value")?;
    let (id, hash) = value.split_once(':').ok_or("the button's value is not id:hash")?;
    let slack_user = payload["user"]["id"].as_str().ok_or("no user in the payload")?.to_string();
    Ok(Click {
        slack_user,
        slack_user_name: payload["user"]["username"].as_str().map(str::to_string),
        approve,
        approval_id: id.to_string(),
        payload_sha256: hash.to_string(),
        response_url: payload["response_url"].as_str().map(str::to_string),
    })
}

/// The blocks an `approval.requested` message ends with: the exact arguments, and the two
/// buttons bound to their hash. `None` when the arguments are too long to show whole.
pub fn decision_blocks(id: &str, payload_sha256: &str, arguments: &str) -> Option<Vec<Value>> {
    let pretty = serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| arguments.to_string());
    if pretty.chars().count() > MAX_SHOWN_ARGUMENTS {
        return None;
    }
    let value = format!("{id}:{payload_sha256}");
    Some(vec![
        json!({ "type": "section", "text": { "type": "plain_text", "text": pretty, "emoji": false } }),
        json!({ "type": "actions", "block_id": "flightdeck_decision", "elements": [
            { "type": "button", "action_id": APPROVE, "style": "primary", "value": value,
              "text": { "type": "plain_text", "text": "Approve" } },
            { "type": "button", "action_id": DENY, "style": "danger", "value": value,
              "text": { "type": "plain_text", "text": "Deny" } },
        ]}),
    ])
}

/// The message that replaces the original once decided (or when a click was refused).
pub fn outcome_message(approval: Option<&Approval>, text: &str) -> Value {
    let mut blocks = vec![json!({ "type": "section", "text": { "type": "mrkdwn", "text": text, "verbatim": true } })];
    if let Some(a) = approval {
        blocks.push(json!({ "type": "context", "elements": [
            { "type": "mrkdwn", "text": format!("Flightdeck · {} · payload sha256 {}", a.id, a.payload_sha256) }
        ]}));
    }
    json!({ "replace_original": true, "text": text, "blocks": blocks })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slack's documented example request.
    const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
    const TS: &str = "1531420618";
    const BODY: &str = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";

    #[test]
    fn slacks_documented_example_verifies() {
        let expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";
        assert_eq!(sign(SECRET, TS, BODY.as_bytes()), expected);
        let now = TS.parse::<i64>().unwrap() + 10;
        assert_eq!(verify(SECRET, Some(TS), Some(expected), BODY.as_bytes(), now), Ok(()));
        let forged = BODY.replace("roadrunner", "coyote");
        assert!(verify(SECRET, Some(TS), Some(expected), forged.as_bytes(), now)
            .unwrap_err()
            .contains("does not match"));
        assert!(verify("other", Some(TS), Some(expected), BODY.as_bytes(), now).is_err());
        let late = now + 3600;
        assert!(verify(SECRET, Some(TS), Some(expected), BODY.as_bytes(), late)
            .unwrap_err()
            .contains("from our clock"));
        assert!(verify(SECRET, None, Some(expected), BODY.as_bytes(), now).unwrap_err().contains("Timestamp"));
        assert!(verify(SECRET, Some(TS), Some("abc"), BODY.as_bytes(), now).unwrap_err().contains("v0="));
    }

    #[test]
    fn a_click_is_read_from_the_form_body() {
        let payload = json!({
            "type": "block_actions", "user": {"id": "U1", "username": "ann"},
            "response_url": "https://hooks.slack.test/r/1",
            "actions": [{"action_id": APPROVE, "value": "apr_1:abc"}]
        });
        let body: String =
            form_urlencoded::Serializer::new(String::new()).append_pair("payload", &payload.to_string()).finish();
        let click = parse_click(body.as_bytes()).unwrap();
        assert_eq!((click.approve, click.approval_id.as_str(), click.payload_sha256.as_str()), (true, "apr_1", "abc"));
        assert_eq!(click.slack_user, "U1");
        assert!(parse_click(b"x=1").unwrap_err().contains("payload"));
    }

    #[test]
    fn buttons_are_only_offered_for_payloads_the_message_shows_whole() {
        let blocks = decision_blocks("apr_1", "abc", r#"{"amount":5}"#).unwrap();
        assert_eq!(blocks[0]["text"]["text"], "{\n  \"amount\": 5\n}");
        assert_eq!(blocks[1]["elements"][0]["value"], "apr_1:abc");
        assert_eq!(blocks[1]["elements"][1]["action_id"], DENY);
        let long = json!({ "body": "x".repeat(MAX_SHOWN_ARGUMENTS) }).to_string();
        assert!(decision_blocks("apr_1", "abc", &long).is_none());
    }
}
