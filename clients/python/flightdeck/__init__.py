"""Flightdeck's agent client: guarded calls (the execution ledger), approvals and escalations.

Standard library only. See clients/python/README.md.
"""

from .client import (
    AlreadyDone,
    Approval,
    Call,
    CallDenied,
    CallOutcomeUnknown,
    Flightdeck,
    FlightdeckError,
    canonical_json,
    idempotency_key,
)

__all__ = [
    "AlreadyDone",
    "Approval",
    "Call",
    "CallDenied",
    "CallOutcomeUnknown",
    "Flightdeck",
    "FlightdeckError",
    "canonical_json",
    "idempotency_key",
]
