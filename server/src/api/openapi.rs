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
                "Run": {
                    "type": "object",
                    "description": "One agent run in the canonical model. Times are RFC 3339 UTC.",
                    "properties": {
                        "run_id": {"type": "string"},
                        "agent": {"type": ["string", "null"]},
                        "trigger": {"type": "string", "enum": ["user", "schedule", "webhook", "retry", "unknown"]},
                        "terminal_reason": {"type": "string",
                            "enum": ["completed", "step_limit", "budget", "error", "escalated", "running"]},
                        "started_at": {"type": ["string", "null"], "format": "date-time"},
                        "ended_at": {"type": ["string", "null"], "format": "date-time"},
                        "wall_clock_ms": {"type": ["integer", "null"]},
                        "cost": {"type": "number"},
                        "input_tokens": {"type": "integer"},
                        "output_tokens": {"type": "integer"},
                        "cache_tokens": {"type": "integer"},
                        "steps": {"type": "integer"},
                        "tool_calls": {"type": "integer"},
                        "trace_ids": {"type": "array", "items": {"type": "string"}},
                        "duplicate_side_effects": {"type": "integer",
                            "description": "Extra successful executions of write/irreversible calls with the same idempotency key (or tool and argument hash)"},
                        "deduped_calls": {"type": "integer"},
                        "completed_without_read": {"type": "boolean"},
                        "approval_violations": {"type": "integer"},
                        "escalation_reason": {"type": ["string", "null"]}
                    }
                },
                "Approval": {
                    "type": "object",
                    "description": "An approval request as the agent sees it. Every status but pending is final.",
                    "properties": {
                        "id": {"type": "string"},
                        "status": {"type": "string", "enum": ["pending", "approved", "denied", "expired", "cancelled"]},
                        "run_id": {"type": "string"},
                        "tool": {"type": "string"},
                        "payload_sha256": {"type": "string",
                            "description": "SHA-256 of the canonical JSON (sorted keys, no whitespace) of {\"arguments\": ..., \"tool\": ...}"},
                        "created_at": {"type": "string", "format": "date-time"},
                        "expires_at": {"type": "string", "format": "date-time"},
                        "decided_by": {"type": ["string", "null"]},
                        "decided_at": {"type": ["string", "null"], "format": "date-time"},
                        "reason": {"type": ["string", "null"], "description": "Why it was denied"}
                    }
                },
                "ApprovalRequest": {
                    "type": "object",
                    "required": ["run_id", "tool", "arguments"],
                    "additionalProperties": false,
                    "properties": {
                        "run_id": {"type": "string", "maxLength": 200},
                        "step_index": {"type": "integer", "minimum": 0},
                        "tool": {"type": "string", "maxLength": 200},
                        "arguments": {"description": "Any JSON: exactly what the tool will be called with"},
                        "display": {"type": "array", "maxItems": 50, "items": {"type": "object",
                            "required": ["label", "value"], "properties": {"label": {"type": "string"}, "value": {}}}},
                        "idempotency_key": {"type": "string", "maxLength": 200},
                        "expires_in": {"type": "integer", "minimum": 1, "maximum": 604800},
                        "agent": {"type": "string"}
                    }
                },
                "Escalation": {
                    "type": "object",
                    "description": "A run handed to a person. Once resolved, outcome, resolution_note and (handed_back) instructions say what happened.",
                    "properties": {
                        "id": {"type": "string"}, "run_id": {"type": "string"},
                        "reason": {"type": "string", "enum": ["insufficient_permission", "contradictory_information",
                            "budget_exceeded", "low_confidence", "approval_required_by_policy", "other"]},
                        "reason_text": {"type": ["string", "null"]}, "blocking_fact": {"type": ["string", "null"]},
                        "what_was_done": {"type": "array", "items": {"type": "object", "properties": {
                            "tool": {"type": ["string", "null"]}, "description": {"type": ["string", "null"]},
                            "external_id": {"type": ["string", "null"]}, "idempotency_key": {"type": ["string", "null"]},
                            "at": {"type": ["string", "null"]}}}},
                        "what_remains": {"type": "array", "items": {"type": "object", "properties": {
                            "description": {"type": "string"}, "done": {"type": "boolean"}, "done_by": {"type": ["string", "null"]}}}},
                        "from_api": {"type": "boolean"}, "from_trace": {"type": "boolean"},
                        "open": {"type": "boolean"}, "opened_at": {"type": "string", "format": "date-time"},
                        "claimed_by": {"type": ["string", "null"]},
                        "outcome": {"type": ["string", "null"], "enum": ["completed_by_human", "handed_back", "abandoned", null]},
                        "resolution_note": {"type": ["string", "null"]}, "instructions": {"type": ["string", "null"]}
                    }
                },
                "RunDetail": {
                    "allOf": [{"$ref": "#/components/schemas/Run"}, {"type": "object", "properties": {
                        "step_list": {"type": "array", "items": {"type": "object", "properties": {
                            "index": {"type": "integer"}, "span_id": {"type": "string"},
                            "stop_reason": {"type": ["string", "null"]}, "model_id": {"type": ["string", "null"]},
                            "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                            "cache_tokens": {"type": "integer"}}}},
                        "tool_call_list": {"type": "array", "items": {"type": "object", "properties": {
                            "trace_id": {"type": "string"}, "span_id": {"type": "string"},
                            "step_index": {"type": ["integer", "null"]}, "tool": {"type": "string"},
                            "side_effect": {"type": "string", "enum": ["none", "read", "write", "irreversible", "unknown"]},
                            "idempotency_key": {"type": ["string", "null"]}, "attempt": {"type": "integer"},
                            "outcome": {"type": "string", "enum": ["ok", "error", "deduped", "denied", "timeout", "unknown"]},
                            "latency_ms": {"type": ["integer", "null"]}, "external_id": {"type": ["string", "null"]},
                            "args_sha256": {"type": ["string", "null"]}, "approval_id": {"type": ["string", "null"]},
                            "started_at": {"type": ["string", "null"], "format": "date-time"}}}},
                        "duplicates": {"type": "array", "items": {"type": "object", "properties": {
                            "tool": {"type": "string"}, "key": {"type": "string"}, "count": {"type": "integer"},
                            "external_ids": {"type": "array", "items": {"type": "string"}}}}}
                    }}]
                },
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "object", "properties": {
                        "status": {"type": "integer"}, "message": {"type": "string"}}}}
                }
            }
        },
        "security": [{"bearer": []}],
        "paths": {
            "/escalations": {
                "post": {
                    "summary": "Hand a run to a person (scope escalations)",
                    "security": [{"bearer": []}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object",
                        "required": ["run_id", "reason"], "additionalProperties": false,
                        "properties": {"run_id": {"type": "string"}, "reason": {"type": "string"}, "reason_text": {"type": "string"},
                            "what_was_done": {"type": "array", "maxItems": 200}, "what_remains": {"type": "array", "maxItems": 200},
                            "blocking_fact": {"type": "string"}, "idempotency_key": {"type": "string"}, "agent": {"type": "string"}}}}}},
                    "responses": {
                        "201": {"description": "Opened", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Escalation"}}}},
                        "200": {"description": "Merged into the escalation the run's traces opened, or a repeat", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Escalation"}}}},
                        "400": {"description": "A field is missing, unknown or too large", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                        "422": {"description": "Same key with another body, or the run already has an open API escalation", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
            "/escalations/{id}": {
                "get": {
                    "summary": "Read an escalation's state and resolution (scope escalations)",
                    "security": [{"bearer": []}],
                    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "responses": {
                        "200": {"description": "The escalation", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Escalation"}}}},
                        "404": {"description": "No such escalation", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
            "/approvals": {
                "post": {
                    "summary": "Request approval for one tool call (scope approvals)",
                    "security": [{"bearer": []}],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ApprovalRequest"}}}},
                    "responses": {
                        "201": {"description": "Created, pending", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Approval"}}}},
                        "200": {"description": "The existing request with this idempotency key and payload", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Approval"}}}},
                        "400": {"description": "A field is missing or invalid", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                        "422": {"description": "The idempotency key was used for a different payload", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
            "/approvals/{id}": {
                "get": {
                    "summary": "Read a request; with wait, long-poll until it is final (scope approvals)",
                    "security": [{"bearer": []}],
                    "parameters": [
                        {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "wait", "in": "query", "schema": {"type": "integer", "minimum": 0, "maximum": 60},
                         "description": "Seconds to wait while pending (larger values are capped at 60)"}
                    ],
                    "responses": {
                        "200": {"description": "The request (final, or still pending when the wait ran out)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Approval"}}}},
                        "404": {"description": "No such request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
            "/approvals/{id}/cancel": {
                "post": {
                    "summary": "Cancel a pending request (scope approvals)",
                    "security": [{"bearer": []}],
                    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "responses": {
                        "200": {"description": "The request after cancelling (a final one unchanged)", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Approval"}}}},
                        "404": {"description": "No such request", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
            "/runs": {
                "get": {
                    "summary": "List runs, newest first (scope `read`)",
                    "parameters": [
                        {"name": "terminal_reason", "in": "query", "schema": {"type": "string"}},
                        {"name": "agent", "in": "query", "schema": {"type": "string"}},
                        {"name": "since", "in": "query", "description": "RFC 3339; runs started at or after", "schema": {"type": "string", "format": "date-time"}},
                        {"name": "until", "in": "query", "description": "RFC 3339; runs started before", "schema": {"type": "string", "format": "date-time"}},
                        {"name": "flag", "in": "query", "schema": {"type": "string", "enum": ["duplicates", "no_read", "approval_violation"]}},
                        {"name": "cursor", "in": "query", "description": "next_cursor of the previous page", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}}
                    ],
                    "responses": {
                        "200": {"description": "A page of runs", "content": {"application/json": {"schema": {
                            "type": "object", "properties": {
                                "runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}},
                                "next_cursor": {"type": "string"}}}}}},
                        "400": {"description": "A parameter is invalid; the message names it",
                                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
            "/runs/{run_id}": {
                "get": {
                    "summary": "One run with its steps, tool calls and duplicate side effects (scope `read`)",
                    "parameters": [{"name": "run_id", "in": "path", "required": true, "schema": {"type": "string"}}],
                    "responses": {
                        "200": {"description": "The run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunDetail"}}}},
                        "404": {"description": "No such run", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
                    }
                }
            },
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
