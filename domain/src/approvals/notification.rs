//! How an approval request becomes a notification (pure): what an approver needs to see
//! in a webhook, Slack or PagerDuty message to decide whether to open it now.

use super::Approval;
use crate::notify::{Event, EventKind};

/// The `approval.requested` webhook event: what an approver needs to decide whether to
/// open the request now.
pub fn requested_event(a: &Approval) -> Event {
    let mut fields = vec![
        ("Tool".to_string(), a.tool.clone()),
        ("Side effect".to_string(), a.side_effect.to_string()),
        ("Run".to_string(), a.run_id.clone()),
        ("Agent".to_string(), a.agent.clone().unwrap_or_else(|| "unknown".into())),
    ];
    fields.extend(a.display.iter().take(3).map(|f| (f.label.clone(), f.value.clone())));
    Event {
        kind: EventKind::ApprovalRequested,
        title: format!("Approval requested: {}", a.tool),
        summary: format!(
            "Expires at {}. Decide on the exact payload in Flightdeck.",
            a.expires_at.format("%Y-%m-%d %H:%M UTC")
        ),
        link_path: format!("/approvals/{}", crate::url::encode(&a.id)),
        fields,
        data: serde_json::json!({
            "id": a.id, "run_id": a.run_id, "tool": a.tool, "payload_sha256": a.payload_sha256,
            "expires_at": a.expires_at, "agent": a.agent, "step_index": a.step_index,
            "arguments": a.arguments, "required_approvals": a.required_approvals,
        }),
    }
}
