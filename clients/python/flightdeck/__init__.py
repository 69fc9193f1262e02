"""Flightdeck's agent client: guarded calls (the execution ledger) and approvals.

Standard library only. See clients/python/README.md.
"""

from .client import (
    AlreadyDone,
    Call,
    CallDenied,
    CallOutcomeUnknown,
    Flightdeck,
    FlightdeckError,
    idempotency_key,
)

__all__ = [
    "AlreadyDone",
    "Call",
    "CallDenied",
    "CallOutcomeUnknown",
    "Flightdeck",
    "FlightdeckError",
    "idempotency_key",
]
