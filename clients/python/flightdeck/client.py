"""The HTTP client and the guarded-call context manager and decorator.

A guarded call asks Flightdeck before a tool with a side effect runs
(``POST /api/v1/calls``), waits while a person approves it or another attempt holds
it, skips it when it was already done (returning the cached result), and reports the
outcome afterwards (``POST /api/v1/calls/{id}/complete``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Mapping, Optional, TypeVar

VOLATILE_FIELDS = frozenset({"request_id", "timestamp", "now", "attempt", "trace_id"})

F = TypeVar("F", bound=Callable[..., Any])


def idempotency_key(
    run_id: str,
    step_index: int,
    tool: str,
    args: Mapping[str, Any],
    volatile: frozenset = VOLATILE_FIELDS,
    run_wide: bool = False,
) -> str:
    """The key Flightdeck derives when an ask carries none (the article's function)."""
    stable = {k: v for k, v in args.items() if k not in volatile}
    material: Dict[str, Any] = {"run": run_id, "tool": tool, "args": stable}
    if not run_wide:
        material["step"] = step_index
    text = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class FlightdeckError(Exception):
    """Flightdeck refused a request (the message says why) or could not be reached."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class CallDenied(FlightdeckError):
    """A person refused the call (or its approval expired): do not run it."""


class CallOutcomeUnknown(FlightdeckError):
    """An earlier attempt never reported; a person must settle it before anything runs."""


class AlreadyDone(Exception):
    """Raised inside ``with guarded(...)`` only if the body calls ``call.require_run()``."""


class Call:
    """One guarded call: what Flightdeck answered, and the report afterwards.

    ``arguments`` is what to run: the arguments asked with, or, when an approver edited
    them before approving, the edited ones (``changed`` is then true). Approval binds the
    edited payload's hash, so running the original arguments would be a violation.
    ``message`` is the approver's note to the agent, if any."""

    def __init__(self, client: "Flightdeck", answer: Dict[str, Any], asked: Optional[Mapping[str, Any]] = None):
        self._client = client
        self._answer = answer
        entry = answer["call"]
        approved = answer.get("approved_arguments")
        self.changed: bool = approved is not None
        # Unedited: the arguments as the agent holds them (the ledger keeps a redacted copy).
        self.arguments: Dict[str, Any] = (
            approved if approved is not None else dict(asked) if asked is not None else entry.get("arguments")
        )
        self.message: Optional[str] = answer.get("message")
        self.id: str = entry["id"]
        self.idempotency_key: str = entry["idempotency_key"]
        self.natural_key: str = entry["natural_key"]
        self.approval_id: Optional[str] = entry.get("approval_id")
        self.external_id: Optional[str] = entry.get("external_id")
        self.response: Any = entry.get("response")
        self.completed = False

    @property
    def answer(self) -> str:
        return self._answer["answer"]

    @property
    def done(self) -> bool:
        """It succeeded before: use ``external_id`` and ``response``; do not run it."""
        return self.answer == "already_done"

    def complete(
        self,
        outcome: str = "ok",
        external_id: Optional[str] = None,
        response: Any = None,
        error: Optional[str] = None,
        verified_by: Optional[str] = None,
    ) -> Dict[str, Any]:
        body: Dict[str, Any] = {"outcome": outcome}
        for key, value in (
            ("external_id", external_id),
            ("response", response),
            ("error", error),
            ("verified_by", verified_by),
        ):
            if value is not None:
                body[key] = value
        entry = self._client._request("POST", f"/api/v1/calls/{self.id}/complete", body)
        self.completed = True
        self.external_id = entry.get("external_id")
        self.response = entry.get("response")
        _annotate_span(self, "ok" if outcome == "ok" else "error")
        return entry


class _Guarded:
    def __init__(self, client: "Flightdeck", tool: str, arguments: Mapping[str, Any], run_id: str, step: int,
                 key: Optional[str], wait: float):
        self._client, self._tool, self._arguments = client, tool, dict(arguments)
        self._run_id, self._step, self._key, self._wait = run_id, step, key, wait
        self.call: Optional[Call] = None

    def __enter__(self) -> Call:
        self.call = self._client.ask(self._tool, self._arguments, self._run_id, self._step, self._key, self._wait)
        return self.call

    def __exit__(self, exc_type, exc, tb) -> bool:
        call = self.call
        if call is None or call.done or call.completed:
            return False
        if exc is not None:
            call.complete(outcome="error", error=f"{exc_type.__name__}: {exc}")
        else:
            call.complete(outcome="ok")
        return False


class Flightdeck:
    """A connection to Flightdeck's agent API with a token holding the `calls` scope."""

    def __init__(self, url: str, token: str, timeout: float = 70.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _request(self, method: str, path: str, body: Any = None) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read())["error"]["message"]
            except Exception:  # noqa: BLE001 - any unreadable body
                message = e.reason
            raise FlightdeckError(f"{method} {path}: {e.code} {message}", e.code) from None
        except urllib.error.URLError as e:
            raise FlightdeckError(f"{method} {path}: cannot reach Flightdeck: {e.reason}") from None

    def ask(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        run_id: str,
        step: int,
        idempotency_key: Optional[str] = None,
        wait: float = 300.0,
    ) -> Call:
        """Asks before a call and waits (up to ``wait`` seconds) while a person approves
        it or another attempt holds it. Returns a Call to run (``proceed``) or to skip
        (``call.done``); raises CallDenied, or CallOutcomeUnknown when the wait ran out
        on an unknown outcome."""
        body: Dict[str, Any] = {"run_id": run_id, "step_index": step, "tool": tool, "arguments": dict(arguments)}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        answer = self._request("POST", "/api/v1/calls", body)
        deadline = time.monotonic() + wait
        while answer["answer"] in ("approval_required", "in_progress", "outcome_unknown"):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            seconds = max(1, min(60, int(left)))
            answer = self._request("GET", f"/api/v1/calls/{answer['call']['id']}?wait={seconds}")
        call = Call(self, answer, arguments)
        if call.answer == "denied":
            _annotate_span(call, "denied")
            why = f": {call.message}" if call.message else ""
            raise CallDenied(f"{tool}: denied ({call.approval_id or 'no approval'}){why}")
        if call.answer == "outcome_unknown":
            raise CallOutcomeUnknown(f"{tool}: an earlier attempt never reported; a person must settle call {call.id}")
        if call.answer in ("approval_required", "in_progress"):
            raise FlightdeckError(f"{tool}: still {call.answer} after {wait:.0f} s")
        if call.done:
            _annotate_span(call, "deduped")
        return call

    def guarded(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        run_id: str,
        step: int,
        idempotency_key: Optional[str] = None,
        wait: float = 300.0,
    ) -> _Guarded:
        """``with fd.guarded(tool, args, run_id=..., step=...) as call:`` runs the body
        only when it should: check ``call.done`` first. Leaving the block reports ``ok``
        (or ``error`` if it raised) unless the body called ``call.complete`` itself."""
        return _Guarded(self, tool, arguments, run_id, step, idempotency_key, wait)

    def guard(self, tool: str, external_id: Optional[Callable[[Any], Optional[str]]] = None,
              wait: float = 300.0) -> Callable[[F], F]:
        """A decorator: ``@fd.guard("send_email", external_id=lambda r: r["id"])``. The
        decorated function is called with its arguments as keywords plus ``run_id=`` and
        ``step=``; when the call was already done it is not run and the cached result is
        returned."""

        def decorate(func: F) -> F:
            @functools.wraps(func)
            def wrapper(*, run_id: str, step: int, **arguments: Any) -> Any:
                with self.guarded(tool, arguments, run_id=run_id, step=step, wait=wait) as call:
                    if call.done:
                        return call.response
                    # An approver may have edited the arguments: run what was approved.
                    result = func(**(call.arguments if call.changed else arguments))
                    ext = external_id(result) if external_id else None
                    call.complete(outcome="ok", external_id=ext, response=_jsonable(result))
                    return result

            return wrapper  # type: ignore[return-value]

        return decorate


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return None


def _annotate_span(call: Call, outcome: str) -> None:
    """Sets the ledger's attributes on the current OpenTelemetry span, when the
    opentelemetry package is installed and a span is recording."""
    try:
        from opentelemetry import trace  # type: ignore
    except ImportError:
        return
    span = trace.get_current_span()
    if not span.is_recording():
        return
    span.set_attribute("tool.idempotency_key", call.idempotency_key)
    span.set_attribute("tool.outcome", outcome)
    if call.external_id:
        span.set_attribute("tool.external_id", call.external_id)
    if call.approval_id:
        span.set_attribute("approval.id", call.approval_id)
