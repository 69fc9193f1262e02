"""What the adapters share: one run's guarded calls.

A framework asks at two places: its approval point (an interruption, a deferred tool
request, an interrupt, a permission callback) and its tool execution. Both are the same
ledger entry in Flightdeck. At the approval point ``decide`` asks (``POST /api/v1/calls``,
which files the approval and waits for the decision) and keeps the answer; when the
framework then runs the tool, ``execute`` takes that answer, runs exactly what was
approved (the approver's edit, if any) and reports the outcome. A tool without an
approval point is asked for in ``execute``. A call that succeeded before (a re-run) is
answered ``already_done`` and not run again: ``execute`` returns the cached response.

The step of a call is its position among the run's guarded calls (1, 2, ...), given in
the order the calls are first seen, so a re-run of the same run that makes the same calls
gets the same steps, hence the same keys. One GuardedRun per run id.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, Iterable, List, Mapping, Optional

from ..client import Call, CallDenied, Flightdeck, canonical_json

#: Largest cached response Flightdeck keeps (64 KiB of JSON); larger results are cut.
MAX_RESPONSE_CHARS = 60_000


@dataclass
class Decision:
    """What a person (or a policy) decided for one call.

    ``kind``: ``run`` (approved: run ``arguments``), ``done`` (it succeeded before: do
    not run; ``call.response`` is its result) or ``denied`` (do not run; tell the model
    ``message``). ``changed``: the approver edited the arguments."""

    kind: str
    call: Optional[Call] = None
    arguments: Optional[Dict[str, Any]] = None
    message: Optional[str] = None
    changed: bool = False

    @property
    def approved(self) -> bool:
        return self.kind in ("run", "done")


@dataclass
class _Pending:
    tool: str
    asked: Dict[str, Any]
    call: Call
    taken: bool = field(default=False)


def denial_message(tool: str, reason: Optional[str]) -> str:
    """What the model is told when a person refused the call."""
    why = reason or "no reason given"
    return f"Flightdeck: the call to {tool} was denied and did not run. Reason: {why}"


def done_message(tool: str, call: Call) -> str:
    """What the model is told when the call had already been done (a re-run)."""
    result = json.dumps(call.response, ensure_ascii=False) if call.response is not None else "none recorded"
    ext = f" (external id {call.external_id})" if call.external_id else ""
    return f"Flightdeck: {tool} was already done in this run{ext} and was not run again. Its result: {result}"


def cached(tool: str, call: Call) -> Any:
    """What a call already done returns: its cached result, or (when none was recorded,
    e.g. a person settled it) a sentence saying it was done."""
    return call.response if call.response is not None else done_message(tool, call)


def to_response(result: Any) -> Any:
    """The JSON Flightdeck caches for a later ``already_done``: the result if it is JSON,
    else its text; cut to fit."""
    try:
        text = json.dumps(result)
        value = result
    except (TypeError, ValueError):
        dump = getattr(result, "model_dump", None)
        try:
            value = dump(mode="json") if callable(dump) else str(result)
        except Exception:  # noqa: BLE001 - whatever the object does
            value = str(result)
        text = json.dumps(value)
    if len(text) > MAX_RESPONSE_CHARS:
        return {"truncated": text[:MAX_RESPONSE_CHARS]}
    return value


class GuardedRun:
    """One run's guarded calls (see the module's text).

    ``run_id``: stable across a re-run of the same work (the author's id, or the
    framework's thread or conversation id). ``tools``: the tool names to guard (None: all
    that reach the adapter). ``wait``: how long to wait for a person, in seconds.
    ``display``: a function ``(tool, arguments) -> [{"label", "value", "argument"?}]``
    for what the approver is shown beside the arguments."""

    def __init__(
        self,
        fd: Flightdeck,
        run_id: str,
        *,
        tools: Optional[Iterable[str]] = None,
        wait: float = 300.0,
        agent: Optional[str] = None,
        display: Optional[Callable[[str, Mapping[str, Any]], Any]] = None,
    ):
        if not run_id:
            raise ValueError("a guarded run needs a run id that a re-run repeats")
        self.fd = fd
        self.run_id = run_id
        self.tools = None if tools is None else frozenset(tools)
        self.wait = wait
        self.agent = agent
        self.display = display
        self._lock = threading.Lock()
        self._steps: Dict[str, int] = {}
        self._pending: Dict[str, _Pending] = {}
        self._order: List[str] = []

    def guards(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    def step_for(self, call_id: str, step: Optional[int] = None) -> int:
        """The call's step: ``step`` when the adapter knows the call's position from the
        framework's history, else its position among the run's calls, first seen first."""
        with self._lock:
            if call_id not in self._steps:
                self._steps[call_id] = step if step is not None else len(self._steps) + 1
            return self._steps[call_id]

    def _ask(self, tool: str, arguments: Mapping[str, Any], call_id: str, step: Optional[int] = None) -> Call:
        shown = self.display(tool, arguments) if self.display is not None else None
        return self.fd.ask(tool, arguments, run_id=self.run_id, step=self.step_for(call_id, step), wait=self.wait,
                           display=shown, agent=self.agent)

    def answer_now(self, tool: str, arguments: Mapping[str, Any], call_id: str, step: Optional[int] = None) -> Call:
        """Flightdeck's answer without waiting (``call.answer``, nothing raised): for a
        framework that pauses the run when a person must decide."""
        shown = self.display(tool, arguments) if self.display is not None else None
        return self.fd.answer(tool, arguments, run_id=self.run_id, step=self.step_for(call_id, step), wait=0,
                              display=shown, agent=self.agent)

    def keep(self, call_id: str, tool: str, arguments: Mapping[str, Any], call: Call) -> None:
        """Keeps an answer for the execution of this call (``take``)."""
        with self._lock:
            self._pending[call_id] = _Pending(tool, dict(arguments), call)
            self._order.append(call_id)

    # The approval point

    def decide(self, tool: str, arguments: Mapping[str, Any], call_id: str, *, can_edit: bool = True,
               step: Optional[int] = None) -> Decision:
        """Asks Flightdeck for this call and waits for the decision. With ``run`` the
        attempt is recorded as started: the framework must run the tool through
        ``execute`` (which reports). ``can_edit=False``: the framework cannot pass edited
        arguments to the tool, so an approval with changes is refused (not run, reported
        as an error, and the model told why)."""
        try:
            call = self._ask(tool, arguments, call_id, step)
        except CallDenied as denied:
            return Decision("denied", denied.call, message=denial_message(tool, denied.reason))
        if call.changed and not can_edit and not call.done:
            note = f" The approver's note: {call.message}" if call.message else ""
            message = (
                f"Flightdeck: an approver changed the arguments of {tool} to {canonical_json(call.arguments)}, "
                f"but this tool cannot be given edited arguments here, so it was not run.{note}"
            )
            call.complete(outcome="error", error="not run: the framework cannot pass the approver's edited arguments")
            return Decision("denied", call, message=message, changed=True)
        self.keep(call_id, tool, arguments, call)
        if call.done:
            return Decision("done", call, arguments=call.arguments, message=done_message(tool, call))
        return Decision("run", call, arguments=call.arguments, message=call.message, changed=call.changed)

    async def adecide(self, tool: str, arguments: Mapping[str, Any], call_id: str, *,
                      can_edit: bool = True, step: Optional[int] = None) -> Decision:
        return await asyncio.to_thread(lambda: self.decide(tool, arguments, call_id, can_edit=can_edit, step=step))

    # The execution

    def take(self, call_id: Optional[str] = None, tool: Optional[str] = None,
             arguments: Optional[Mapping[str, Any]] = None) -> Optional[Call]:
        """The answer ``decide`` kept for this call: by its id, or (for frameworks whose
        execution does not see the id) the oldest untaken one of this tool whose asked or
        approved arguments are these."""
        with self._lock:
            if call_id is not None and call_id in self._pending:
                pending = self._pending[call_id]
                if not pending.taken:
                    pending.taken = True
                    return pending.call
                return None
            if tool is None:
                return None
            for cid in self._order:
                p = self._pending[cid]
                if p.taken or p.tool != tool:
                    continue
                if arguments is None or dict(arguments) in (p.asked, p.call.arguments):
                    p.taken = True
                    return p.call
        return None

    def begin(self, tool: str, arguments: Mapping[str, Any], call_id: str, step: Optional[int] = None) -> Call:
        """The call to run now: the one ``decide`` kept, or a new ask (raises CallDenied)."""
        call = self.take(call_id, tool, arguments)
        return call if call is not None else self._ask(tool, arguments, call_id, step)

    def execute(self, tool: str, arguments: Mapping[str, Any], call_id: str,
                run: Callable[[Dict[str, Any]], Any], step: Optional[int] = None) -> Any:
        """Runs ``run(approved_arguments)`` once for this call and reports it; returns
        the cached response instead when it was already done."""
        call = self.begin(tool, arguments, call_id, step)
        if call.done:
            return cached(tool, call)
        try:
            result = run(call.arguments)
        except Exception as e:
            call.complete(outcome="error", error=f"{type(e).__name__}: {e}")
            raise
        report(call, result)
        return result

    async def aexecute(self, tool: str, arguments: Mapping[str, Any], call_id: str,
                       run: Callable[[Dict[str, Any]], Awaitable[Any]], step: Optional[int] = None) -> Any:
        """``execute`` for a coroutine function."""
        call = await asyncio.to_thread(self.begin, tool, arguments, call_id, step)
        if call.done:
            return cached(tool, call)
        try:
            result = await run(call.arguments)
        except Exception as e:
            await asyncio.to_thread(call.complete, "error", None, None, f"{type(e).__name__}: {e}")
            raise
        await asyncio.to_thread(report, call, result)
        return result


def report(call: Call, result: Any) -> None:
    """Reports a success with the result as the cached response (left out if refused)."""
    from ..client import FlightdeckError

    try:
        call.complete(outcome="ok", response=to_response(result))
    except FlightdeckError as e:
        if e.status != 400:
            raise
        call.complete(outcome="ok")
