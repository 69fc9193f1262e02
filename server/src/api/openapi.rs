//! The machine-readable description of the REST API (OpenAPI 3.1), grown by each feature.

use axum::Json;
use serde_json::{json, Value};

pub async fn document() -> Json<Value> {
    Json(json!({
        "openapi": "3.1.0",
        "info": {
            "title": "Flightdeck agent API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "REST API for agents: authenticate with `Authorization: Bearer <token>`; \
                            each endpoint needs one token scope. Errors are \
                            {\"error\": {\"status\": N, \"message\": \"...\"}}."
        },
        "servers": [{"url": "/api/v1"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "object", "properties": {
                        "status": {"type": "integer"}, "message": {"type": "string"}}}}
                }
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/token": {
                "get": {
                    "summary": "Describe the calling token (any scope)",
                    "responses": {
                        "200": {"description": "The token", "content": {"application/json": {"schema": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "integer"},
                                "name": {"type": "string"},
                                "scopes": {"type": "array", "items": {"type": "string",
                                    "enum": ["ingest", "approvals", "escalations", "read"]}}
                            }}}}},
                        "401": {"description": "Missing, unknown or revoked token",
                                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            }
        }
    }))
}
