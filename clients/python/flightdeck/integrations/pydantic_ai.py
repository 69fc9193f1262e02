"""Flightdeck for Pydantic AI (tested with pydantic-ai-slim 2.68.0), as a capability.

    fd = Flightdeck(url, token)                                  # scope: calls
    agent = Agent(model, capabilities=[FlightdeckApprovals(fd, run_id="order-77")])

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, subject: str) -> str: ...

The approval point: a tool call the framework defers for approval (``requires_approval``
or ``ApprovalRequired``) is asked in Flightdeck and waits there for the person's
decision, inside the run (``handle_deferred_tool_calls``): approved is ``ToolApproved``
(with ``override_args`` when the approver edited the arguments, so the edit reaches the
tool), denied is ``ToolDenied`` with the reason, which the model receives. With
``decide_in_run=False`` the run ends with ``DeferredToolRequests`` instead (put it in the
agent's ``output_type``); ``await approvals.results(result.output, result.all_messages())``
waits for the decisions and returns the ``DeferredToolResults`` to continue with
(``agent.run(message_history=..., deferred_tool_results=...)``, in the same process).

The execution (``wrap_tool_execute``): each guarded tool call runs once and is reported;
a call that succeeded before (a re-run) returns its cached result without running. A tool
without ``requires_approval`` whose Flightdeck policy needs a person is deferred
(``ApprovalRequired``) and then decided the same way.

The run id: ``run_id`` if given, else the run's ``conversation_id`` (pass
``conversation_id=`` to ``agent.run`` so a re-run repeats it). The step: the tool call's
position among the tool calls of the message history, which a resume keeps and a re-run
of the same conversation repeats.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import ApprovalRequired
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from ..client import Flightdeck
from ._common import GuardedRun, denial_message

__all__ = ["FlightdeckApprovals"]


def tool_call_position(messages: Iterable[Any], tool_call_id: str) -> Optional[int]:
    """1 + the number of tool calls before this one in the history, or None."""
    position = 0
    for message in messages or ():
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    position += 1
                    if part.tool_call_id == tool_call_id:
                        return position
    return None


@dataclass
class FlightdeckApprovals(AbstractCapability[Any]):
    """Flightdeck decides the run's approvals and guards its tool calls.

    ``tools``: the tool names to guard (None: every tool). ``wait``: seconds to wait for
    a person. ``display(tool, args)``: the fields shown to the approver."""

    fd: Flightdeck
    run_id: Optional[str] = None
    tools: Optional[List[str]] = None
    wait: float = 300.0
    agent: Optional[str] = None
    display: Optional[Callable[[str, Mapping[str, Any]], Any]] = None
    decide_in_run: bool = True
    _runs: Dict[str, GuardedRun] = field(default_factory=dict, repr=False)

    @classmethod
    def get_serialization_name(cls) -> Optional[str]:
        return None

    def ledger(self, run_id: str) -> GuardedRun:
        if run_id not in self._runs:
            self._runs[run_id] = GuardedRun(self.fd, run_id, tools=self.tools, wait=self.wait, agent=self.agent,
                                            display=self.display)
        return self._runs[run_id]

    def _run_of(self, ctx: Any) -> GuardedRun:
        run_id = self.run_id or getattr(ctx, "conversation_id", None) or getattr(ctx, "run_id", None)
        return self.ledger(run_id)

    async def results(self, requests: DeferredToolRequests, messages: Iterable[Any],
                      run_id: Optional[str] = None) -> DeferredToolResults:
        """Flightdeck's decisions for the approval requests (waits for the person)."""
        ledger = self.ledger(run_id or self.run_id) if (run_id or self.run_id) else None
        if ledger is None:
            raise ValueError("pass run_id (the run's conversation id) to decide outside a run")
        return await self._decide(ledger, requests, list(messages))

    async def _decide(self, ledger: GuardedRun, requests: DeferredToolRequests, messages: List[Any]) -> DeferredToolResults:
        approvals: Dict[str, Any] = {}
        for part in requests.approvals:
            if not ledger.guards(part.tool_name):
                continue
            step = tool_call_position(messages, part.tool_call_id)
            decision = await ledger.adecide(part.tool_name, part.args_as_dict(), part.tool_call_id, step=step)
            if decision.kind == "denied":
                approvals[part.tool_call_id] = ToolDenied(decision.message)
            elif decision.changed:
                approvals[part.tool_call_id] = ToolApproved(override_args=decision.arguments)
            else:
                approvals[part.tool_call_id] = ToolApproved()
        return DeferredToolResults(approvals=approvals)

    async def handle_deferred_tool_calls(self, ctx: Any, *, requests: DeferredToolRequests) -> Optional[DeferredToolResults]:
        if not self.decide_in_run:
            return None
        results = await self._decide(self._run_of(ctx), requests, list(ctx.messages))
        return results if results.approvals else None

    async def wrap_tool_execute(self, ctx: Any, *, call: ToolCallPart, tool_def: Any, args: Dict[str, Any],
                                handler: Any) -> Any:
        ledger = self._run_of(ctx)
        if not ledger.guards(call.tool_name):
            return await handler(args)
        step = tool_call_position(ctx.messages, call.tool_call_id)
        asked = call.args_as_dict()
        kept = ledger.take(call.tool_call_id)
        if kept is None:
            now = await asyncio.to_thread(ledger.answer_now, call.tool_name, asked, call.tool_call_id, step)
            if now.answer == "approval_required":
                raise ApprovalRequired(metadata={"flightdeck_call": now.id, "approval_id": now.approval_id})
            if now.answer == "denied":
                return denial_message(call.tool_name, now.message)
            if now.answer in ("proceed", "already_done"):
                ledger.keep(call.tool_call_id, call.tool_name, asked, now)
        else:
            ledger.keep(call.tool_call_id, call.tool_name, asked, kept)
        # The framework's args already carry an approver's edit (override_args).
        return await ledger.aexecute(call.tool_name, asked, call.tool_call_id, lambda _approved: handler(args), step)
