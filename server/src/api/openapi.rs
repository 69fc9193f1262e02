//! The machine-readable description of the REST API (OpenAPI 3.1), generated from the
//! handlers' `#[utoipa::path]` annotations and the request and response types themselves,
//! so it cannot drift from what the handlers take and return. A test checks that every
//! route of the API's table is in it.

use super::{approvals, calls, escalations, mcp, replays, runs, silences};
use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Flightdeck agent API",
        description = "REST API for agents: authenticate with `Authorization: Bearer <token>`; each endpoint \
                       needs one token scope. Errors are {\"error\": {\"status\": N, \"message\": \"...\"}}."
    ),
    servers((url = "/api/v1")),
    paths(
        super::describe_token,
        runs::list,
        runs::get,
        runs::replay,
        approvals::create,
        approvals::get,
        approvals::cancel,
        escalations::file,
        escalations::get,
        calls::ask,
        calls::get,
        calls::complete,
        silences::create,
        silences::list,
        silences::get,
        silences::end,
        replays::record,
        mcp::tools,
        mcp::ask,
        mcp::complete,
        mcp::spans,
    ),
    modifiers(&BearerToken),
    tags(
        (name = "runs", description = "The canonical run model (scope `read`)"),
        (name = "approvals", description = "Per-call approval bound to the payload's hash (scope `approvals`)"),
        (name = "escalations", description = "Runs handed to a person (scope `escalations`)"),
        (name = "calls", description = "Guarded calls: the execution ledger (scope `calls`)"),
        (name = "alerts", description = "Alert silences (scope `alerts`)"),
        (name = "replays", description = "Results of regression tests run from replay fixtures (scope `replays`)"),
        (name = "mcp", description = "What `flightdeck mcp proxy` needs: tool decisions, the ledger, its spans (scope `mcp`)"),
        (name = "tokens", description = "The calling token (any scope)"),
    )
)]
pub struct ApiDoc;

/// Declares the `bearer` scheme every path's `security` names.
struct BearerToken;

impl Modify for BearerToken {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// `GET /api/v1/openapi.json` (no token needed).
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_of_the_api_is_described_with_its_method() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        let routes = super::super::routes();
        assert!(routes.len() >= 9, "the table lists the API's routes");
        for route in routes {
            let method = route.method.as_str().to_ascii_lowercase();
            let described = &doc["paths"][route.path][&method];
            assert!(described.is_object(), "{method} {} is not in openapi.json", route.path);
            let answers = &described["responses"];
            assert!(
                answers["200"].is_object() || answers["201"].is_object(),
                "{method} {} has no success answer",
                route.path
            );
        }
        let paths = doc["paths"].as_object().unwrap();
        let described: usize = paths.values().map(|p| p.as_object().unwrap().len()).sum();
        assert_eq!(described, super::super::routes().len(), "nothing is described that is not routed");
    }

    #[test]
    fn the_schemas_come_from_the_types() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let schemas = &doc["components"]["schemas"];
        let reasons = &schemas["TerminalReason"]["enum"];
        assert!(reasons.as_array().unwrap().iter().any(|r| r == "step_limit"), "{reasons}");
        assert!(schemas["RunSummary"]["properties"]["cost_source"].is_object());
        assert!(schemas["ApprovalRequest"]["properties"]["arguments"].is_object());
        assert!(schemas["AgentView"]["properties"]["payload_sha256"]["description"]
            .as_str()
            .unwrap()
            .contains("canonical JSON"));
        assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    }
}
