//! `POST /slack/interactivity`: Slack's request when someone clicks Approve or Deny on an
//! `approval.requested` message. Verified (signature, timestamp window, replay), the Slack
//! user mapped to the Flightdeck user an administrator linked, and the decision taken
//! through the same service as the inbox's, bound to the hash the message showed. The
//! message is then replaced with the outcome through Slack's `response_url`.

use app::errors::AppError;
use app::services::approvals::{decide, DecisionInput};
use app::state::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::Router;
use domain::approvals::slack::{self, Click};
use domain::models::CurrentUser;
use std::sync::Arc;
use store::{slack as links, users};

/// What the endpoint needs from the configuration.
#[derive(Clone)]
pub struct SlackSettings {
    /// The Slack app's signing secret; without one the endpoint answers 404.
    pub signing_secret: Option<String>,
    /// The only place a `response_url` may point to (Slack's own hooks by default), so a
    /// signed request cannot make Flightdeck post anywhere else.
    pub response_url_prefix: String,
}

/// The longest body read: Slack's block actions are a few kilobytes.
const MAX_BODY: usize = 64 * 1024;

pub fn router(settings: SlackSettings) -> Router<AppState> {
    Router::new()
        .route("/slack/interactivity", post(interactivity))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
        .layer(axum::Extension(Arc::new(settings)))
}

async fn interactivity(
    State(state): State<AppState>,
    axum::Extension(settings): axum::Extension<Arc<SlackSettings>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let Some(secret) = settings.signing_secret.as_deref() else {
        return (StatusCode::NOT_FOUND, "Slack interactivity is not configured (set slack_signing_secret)".into());
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let now = chrono::Utc::now().timestamp();
    let signature = header("x-slack-signature");
    if let Err(why) = slack::verify(secret, header("x-slack-request-timestamp"), signature, &body, now) {
        tracing::warn!(%why, "refused a Slack request");
        return (StatusCode::UNAUTHORIZED, format!("refused: {why}"));
    }
    let keep_ms = 2 * slack::TOLERANCE_SECONDS * 1000;
    match links::first_sight(&state.db, signature.unwrap_or_default(), keep_ms).await {
        Ok(true) => {}
        Ok(false) => return (StatusCode::CONFLICT, "refused: this request was already handled (a replay)".into()),
        Err(e) => {
            tracing::error!(error = %e, "could not record a Slack request");
            return (StatusCode::SERVICE_UNAVAILABLE, "try again".into());
        }
    }
    let click = match slack::parse_click(&body) {
        Ok(click) => click,
        Err(why) => return (StatusCode::BAD_REQUEST, format!("refused: {why}")),
    };
    let text = match decide_click(&state, &click).await {
        Ok(text) => text,
        Err(text) => text,
    };
    let decided = store::approvals::get(&state.db, &click.approval_id).await.ok().flatten();
    let message = slack::outcome_message(decided.as_ref(), &text);
    if let Some(url) = click.response_url.as_deref() {
        if url.starts_with(&settings.response_url_prefix) {
            let url = url.to_string();
            tokio::spawn(async move { update_message(&url, &message).await });
        } else {
            tracing::warn!(%url, "a Slack response_url outside the allowed prefix was not called");
        }
    }
    (StatusCode::OK, String::new())
}

/// The decision for a click, as the sentence the Slack message is replaced with.
async fn decide_click(state: &AppState, click: &Click) -> Result<String, String> {
    let who = format!("<@{}>", click.slack_user);
    let Some(username) = links::user_for(&state.db, &click.slack_user).await.map_err(|e| e.to_string())? else {
        return Err(format!(
            "{who} is not linked to a Flightdeck user; an administrator links Slack users under Admin → Users. \
             Nothing was decided."
        ));
    };
    let user = users::by_username(&state.db, &username).await.map_err(|e| e.to_string())?;
    let Some(user) = user.filter(|u| u.disabled_at.is_none()) else {
        return Err(format!("{who}'s Flightdeck account is disabled or gone. Nothing was decided."));
    };
    let me = CurrentUser { id: user.id, username: user.username.clone(), roles: user.roles() };
    let input = DecisionInput {
        id: click.approval_id.clone(),
        choice: if click.approve { domain::approvals::Choice::Approve } else { domain::approvals::Choice::Deny },
        payload_sha256: click.payload_sha256.clone(),
        reason: (!click.approve).then(|| format!("denied in Slack by {}", me.username)),
        respond: None,
        arguments: None,
    };
    match decide(&state.db, &state.approvals, &state.redactor, &me, input, Some("slack")).await {
        Ok(a) if a.status.is_final() => Ok(format!("*{}* by {} ({who}) in Slack.", a.status, me.username)),
        Ok(a) => Ok(format!(
            "Approved by {} ({who}): {} of {} approvals; another person must approve it.",
            me.username,
            a.approved_by.len(),
            a.required_approvals
        )),
        Err(AppError::Forbidden(role)) => Err(format!("{} lacks the {role} role. Nothing was decided.", me.username)),
        Err(e) => Err(format!("Not recorded: {e}")),
    }
}

async fn update_message(url: &str, message: &serde_json::Value) {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build();
    let Ok(client) = client else { return };
    match client.post(url).json(message).send().await {
        Ok(r) if r.status().is_success() => {}
        Ok(r) => tracing::warn!(status = %r.status(), "Slack did not take the message update"),
        Err(e) => tracing::warn!(error = %e, "could not update the Slack message"),
    }
}
