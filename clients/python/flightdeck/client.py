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
import math
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Sequence, TypeVar

VOLATILE_FIELDS = frozenset({"request_id", "timestamp", "now", "attempt", "trace_id"})

F = TypeVar("F", bound=Callable[..., Any])


def canonical_json(value: Any) -> str:
    """Flightdeck's canonical JSON: keys sorted by code point, no whitespace, non-ASCII
    kept as is (what the server hashes; see clients/testdata/idempotency-keys.json)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key_material(
    run_id: str,
    step_index: int,
    tool: str,
    args: Mapping[str, Any],
    volatile: Iterable[str] = VOLATILE_FIELDS,
    run_wide: bool = False,
) -> str:
    """The canonical text whose SHA-256 is the derived key."""
    volatile = frozenset(volatile)
    stable = {k: v for k, v in args.items() if k not in volatile}
    material: Dict[str, Any] = {"run": run_id, "tool": tool, "args": stable}
    if not run_wide:
        material["step"] = step_index
    return canonical_json(material)


def idempotency_key(
    run_id: str,
    step_index: int,
    tool: str,
    args: Mapping[str, Any],
    volatile: Iterable[str] = VOLATILE_FIELDS,
    run_wide: bool = False,
) -> str:
    """The key Flightdeck derives when an ask carries none (the article's function).
    ``volatile``: the top-level fields left out (the tool policy's ``volatile_fields``);
    ``run_wide``: the policy's ``run_wide_key`` (the step left out)."""
    text = key_material(run_id, step_index, tool, args, volatile, run_wide)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class FlightdeckError(Exception):
    """Flightdeck refused a request (the message says why) or could not be reached."""

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        self.status = status


class CallDenied(FlightdeckError):
    """A person refused the call (or its approval expired): do not run it. ``reason`` is
    the approver's message (the denial's reason), ``call`` the ledger's answer."""

    def __init__(self, message: str, reason: Optional[str] = None, call: Optional["Call"] = None):
        super().__init__(message)
        self.reason = reason
        self.call = call


class CallOutcomeUnknown(FlightdeckError):
    """An earlier attempt never reported; a person must settle it before anything runs."""


class AlreadyDone(Exception):
    """Raised inside ``with guarded(...)`` only if the body calls ``call.require_run()``."""


#: Answers that mean "not yet": the client asks again (the same POST) until its deadline.
WAITING_ANSWERS = ("approval_required", "in_progress", "outcome_unknown")

#: The longest one request may ask the server to hold it (the server's limit).
MAX_WAIT_SECONDS = 60

Display = Sequence[Mapping[str, Any]]


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
        self.entry: Dict[str, Any] = entry
        approved = answer.get("approved_arguments")
        self.changed: bool = approved is not None
        # Unedited: the arguments as the agent holds them (the ledger keeps a redacted copy).
        self.arguments: Dict[str, Any] = (
            approved if approved is not None else dict(asked) if asked is not None else entry.get("arguments")
        )
        self.message: Optional[str] = answer.get("message")
        self.id: str = entry["id"]
        self.tool: Optional[str] = entry.get("tool")
        self.idempotency_key: str = entry["idempotency_key"]
        self.natural_key: str = entry["natural_key"]
        self.approval_id: Optional[str] = entry.get("approval_id")
        self.escalation_id: Optional[str] = entry.get("escalation_id")
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

    def require_run(self) -> None:
        """Raises AlreadyDone when the call succeeded before (for bodies that would rather
        not check ``done``)."""
        if self.done:
            raise AlreadyDone(f"{self.tool or 'call'} {self.id} was already done ({self.external_id})")

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


class Approval:
    """A plain approval request (``POST /api/v1/approvals``) and its decision.

    ``status``: pending, approved, approved_with_changes, denied, expired or cancelled.
    ``arguments``: what to run once approved (the approver's edit when ``changed``).
    ``reason``: why it was denied; ``respond``: the approver's message to the agent."""

    def __init__(self, view: Dict[str, Any], asked: Optional[Mapping[str, Any]] = None):
        self.view = view
        self.id: str = view["id"]
        self.status: str = view["status"]
        self.payload_sha256: Optional[str] = view.get("payload_sha256")
        self.changed: bool = self.status == "approved_with_changes"
        edited = view.get("arguments")
        self.arguments: Any = edited if self.changed and edited is not None else (
            dict(asked) if asked is not None else None)
        self.reason: Optional[str] = view.get("reason")
        self.respond: Optional[str] = view.get("respond")
        self.changes: Optional[str] = view.get("changes")
        self.escalation_id: Optional[str] = view.get("escalation_id")

    @property
    def pending(self) -> bool:
        return self.status == "pending"

    @property
    def approved(self) -> bool:
        """Approved as asked or with changes: run ``arguments``."""
        return self.status in ("approved", "approved_with_changes")

    @property
    def message(self) -> Optional[str]:
        """What the agent should be told: the approver's message, else the reason."""
        return self.respond or self.reason


class _Guarded:
    def __init__(self, client: "Flightdeck", tool: str, arguments: Mapping[str, Any], run_id: str, step: int,
                 key: Optional[str], wait: float, display: Optional[Display] = None, agent: Optional[str] = None):
        self._client, self._tool, self._arguments = client, tool, dict(arguments)
        self._run_id, self._step, self._key, self._wait = run_id, step, key, wait
        self._display, self._agent = display, agent
        self.call: Optional[Call] = None

    def __enter__(self) -> Call:
        self.call = self._client.ask(self._tool, self._arguments, self._run_id, self._step, self._key, self._wait,
                                     display=self._display, agent=self._agent)
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


def _held_seconds(left: float, limit: float) -> int:
    """Seconds to ask the server to hold one request: what is left of the deadline,
    rounded up, at most 60 and at most the HTTP timeout less a margin."""
    return int(max(0, min(MAX_WAIT_SECONDS, limit, math.ceil(left))))


class Flightdeck:
    """A connection to Flightdeck's agent API. The token needs the scopes of what is used:
    `calls` (guarded calls), `approvals` (plain approval requests), `escalations`.

    ``agent``: the agent's name, sent with every call, approval and escalation that does
    not name one (shown to approvers, used by approval rules)."""

    def __init__(self, url: str, token: str, timeout: float = 70.0, agent: Optional[str] = None):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.agent = agent

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        request.add_header("Accept", "application/json")
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
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise FlightdeckError(f"{method} {path}: cannot reach Flightdeck: {reason}") from None

    def _hold_limit(self) -> float:
        return max(0.0, self.timeout - 5)

    # Guarded calls (scope `calls`)

    def answer(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        run_id: str,
        step: int,
        idempotency_key: Optional[str] = None,
        wait: float = 0.0,
        display: Optional[Display] = None,
        agent: Optional[str] = None,
    ) -> Call:
        """Flightdeck's answer for a call, whatever it is (``call.answer``; nothing is
        raised for a denial or a wait): the same keyed POST, repeated while the answer is
        a waiting one, until ``wait`` seconds have passed. ``ask`` is this plus the
        exceptions; frameworks that pause a run for a person use ``wait=0``."""
        body: Dict[str, Any] = {"run_id": run_id, "step_index": step, "tool": tool, "arguments": dict(arguments)}
        if idempotency_key is not None:
            body["idempotency_key"] = idempotency_key
        if display is not None:
            body["display"] = [dict(field) for field in display]
        if agent or self.agent:
            body["agent"] = agent or self.agent
        deadline = time.monotonic() + wait
        answer = None
        while True:
            body["wait"] = _held_seconds(deadline - time.monotonic(), self._hold_limit())
            try:
                answer = self._request("POST", "/api/v1/calls", body)
            except FlightdeckError as e:
                # Asking again is safe (the POST is keyed): ride out a restart or an
                # overload while waiting, but not a refusal or a first failure.
                transient = e.status is None or e.status == 429 or e.status >= 500
                if answer is None or not transient or time.monotonic() + 1 >= deadline:
                    raise
                time.sleep(1)
                continue
            if answer["answer"] not in WAITING_ANSWERS or time.monotonic() >= deadline:
                break
        return Call(self, answer, arguments)

    def ask(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        run_id: str,
        step: int,
        idempotency_key: Optional[str] = None,
        wait: float = 300.0,
        display: Optional[Display] = None,
        agent: Optional[str] = None,
    ) -> Call:
        """Asks before a call and waits (up to ``wait`` seconds) while a person approves
        it or another attempt holds it. Returns a Call to run (``proceed``) or to skip
        (``call.done``); raises CallDenied, or CallOutcomeUnknown when the wait ran out
        on an unknown outcome.

        Waiting is the same keyed POST repeated, each held by the server up to 60 s until
        the answer changes: it never starts a second attempt while one is started.
        ``display``: ``[{"label", "value", "argument"?}]`` shown to the approver;
        ``agent``: the agent's name (default: the client's)."""
        call = self.answer(tool, arguments, run_id, step, idempotency_key, wait, display, agent)
        return _settled(call, tool, wait)

    def guarded(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        run_id: str,
        step: int,
        idempotency_key: Optional[str] = None,
        wait: float = 300.0,
        display: Optional[Display] = None,
        agent: Optional[str] = None,
    ) -> _Guarded:
        """``with fd.guarded(tool, args, run_id=..., step=...) as call:`` runs the body
        only when it should: check ``call.done`` first. Leaving the block reports ``ok``
        (or ``error`` if it raised) unless the body called ``call.complete`` itself."""
        return _Guarded(self, tool, arguments, run_id, step, idempotency_key, wait, display, agent)

    def guard(self, tool: str, external_id: Optional[Callable[[Any], Optional[str]]] = None,
              wait: float = 300.0, display: Optional[Callable[..., Display]] = None,
              agent: Optional[str] = None) -> Callable[[F], F]:
        """A decorator: ``@fd.guard("send_email", external_id=lambda r: r["id"])``. The
        decorated function is called with its arguments as keywords plus ``run_id=`` and
        ``step=``; when the call was already done it is not run and the cached result is
        returned. ``display``, if given, is called with the arguments (as keywords) and
        returns the fields shown to the approver."""

        def decorate(func: F) -> F:
            @functools.wraps(func)
            def wrapper(*, run_id: str, step: int, **arguments: Any) -> Any:
                shown = display(**arguments) if display is not None else None
                with self.guarded(tool, arguments, run_id=run_id, step=step, wait=wait, display=shown,
                                  agent=agent) as call:
                    if call.done:
                        return call.response
                    # An approver may have edited the arguments: run what was approved.
                    result = func(**(call.arguments if call.changed else arguments))
                    ext = external_id(result) if external_id else None
                    call.complete(outcome="ok", external_id=ext, response=_jsonable(result))
                    return result

            return wrapper  # type: ignore[return-value]

        return decorate

    # Plain approvals (scope `approvals`)

    def request_approval(
        self,
        tool: str,
        arguments: Any,
        run_id: str,
        step: Optional[int] = None,
        display: Optional[Display] = None,
        idempotency_key: Optional[str] = None,
        expires_in: Optional[int] = None,
        agent: Optional[str] = None,
    ) -> Approval:
        """Files an approval request for one tool call (``POST /api/v1/approvals``) and
        returns it pending; the same ``idempotency_key`` and payload return the same
        request."""
        body: Dict[str, Any] = {"run_id": run_id, "tool": tool, "arguments": arguments}
        for key, value in (("step_index", step), ("idempotency_key", idempotency_key),
                           ("expires_in", expires_in), ("agent", agent or self.agent)):
            if value is not None:
                body[key] = value
        if display is not None:
            body["display"] = [dict(field) for field in display]
        return Approval(self._request("POST", "/api/v1/approvals", body), arguments)

    def wait_approval(self, approval: Any, wait: float = 300.0, asked: Optional[Mapping[str, Any]] = None) -> Approval:
        """Waits (up to ``wait`` seconds, 60 per request) until the request is decided,
        expires or is cancelled, and returns it (still ``pending`` when the wait ran out).
        ``approval``: an Approval or its id."""
        if isinstance(approval, Approval):
            asked = approval.arguments if asked is None else asked
            approval_id = approval.id
        else:
            approval_id = str(approval)
        deadline = time.monotonic() + wait
        while True:
            seconds = _held_seconds(deadline - time.monotonic(), self._hold_limit())
            current = Approval(self._request("GET", f"/api/v1/approvals/{approval_id}?wait={seconds}"), asked)
            if not current.pending or time.monotonic() >= deadline:
                return current

    def approval(self, tool: str, arguments: Any, run_id: str, wait: float = 300.0, **options: Any) -> Approval:
        """Files a request and waits for the decision: ``request_approval`` then
        ``wait_approval``. Check ``.approved`` and run ``.arguments``."""
        return self.wait_approval(self.request_approval(tool, arguments, run_id, **options), wait=wait)

    def cancel_approval(self, approval: Any) -> Approval:
        """Cancels a pending request (a decided one is returned unchanged)."""
        approval_id = approval.id if isinstance(approval, Approval) else str(approval)
        return Approval(self._request("POST", f"/api/v1/approvals/{approval_id}/cancel", {}))

    # Escalations (scope `escalations`)

    def escalate(
        self,
        run_id: str,
        reason: str,
        what_was_done: Iterable[Any] = (),
        what_remains: Iterable[Any] = (),
        reason_text: Optional[str] = None,
        blocking_fact: Optional[str] = None,
        idempotency_key: Optional[str] = None,
        agent: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Hands the run to a person (``POST /api/v1/escalations``). ``reason``:
        insufficient_permission, contradictory_information, budget_exceeded,
        low_confidence, approval_required_by_policy or other (with ``reason_text``).
        ``what_was_done``: Calls (their tool, external id and key are sent), dicts
        (``tool``, ``description``, ``external_id``, ``idempotency_key``) or text;
        ``what_remains``: text or ``{"description": ...}``. Returns the escalation."""
        body: Dict[str, Any] = {
            "run_id": run_id,
            "reason": reason,
            "what_was_done": [_done_item(item) for item in what_was_done],
            "what_remains": [item if isinstance(item, str) else dict(item) for item in what_remains],
        }
        for key, value in (("reason_text", reason_text), ("blocking_fact", blocking_fact),
                           ("idempotency_key", idempotency_key), ("agent", agent or self.agent)):
            if value is not None:
                body[key] = value
        return self._request("POST", "/api/v1/escalations", body)

    def escalation(self, escalation_id: str) -> Dict[str, Any]:
        """The escalation's state (``open``, ``outcome``, ``resolution_note``, and for
        ``handed_back`` the ``instructions`` to follow)."""
        return self._request("GET", f"/api/v1/escalations/{escalation_id}")


def _settled(call: Call, tool: str, wait: float) -> Call:
    """The call to run or skip, or the exception its answer means."""
    if call.answer == "denied":
        _annotate_span(call, "denied")
        why = f": {call.message}" if call.message else ""
        raise CallDenied(f"{tool}: denied ({call.approval_id or 'no approval'}){why}", call.message, call)
    if call.answer == "outcome_unknown":
        raise CallOutcomeUnknown(f"{tool}: an earlier attempt never reported; a person must settle call {call.id}")
    if call.answer in WAITING_ANSWERS:
        raise FlightdeckError(f"{tool}: still {call.answer} after {wait:.0f} s")
    if call.done:
        _annotate_span(call, "deduped")
    return call


def _done_item(item: Any) -> Dict[str, Any]:
    if isinstance(item, Call):
        done = {"tool": item.tool, "external_id": item.external_id, "idempotency_key": item.idempotency_key}
        return {k: v for k, v in done.items() if v is not None}
    if isinstance(item, str):
        return {"description": item}
    return dict(item)


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
