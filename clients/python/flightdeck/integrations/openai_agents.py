"""Flightdeck for the OpenAI Agents SDK (tested with openai-agents 0.24.0).

    fd = Flightdeck(url, token)                        # scopes: calls (and approvals)
    guard = FlightdeckApprovals(fd, run_id="order-77")  # a run id a re-run repeats
    agent = Agent("billing", tools=[guard.tool(function_tool(send_email, needs_approval=True))])
    result = await guard.run(agent, "Refund order 77")  # Runner.run, interruptions answered

A tool with ``needs_approval`` interrupts the run; ``run`` (or ``resolve`` on a result
of your own ``Runner.run``) asks Flightdeck for each interruption, waits for the person's
decision and calls ``state.approve`` or ``state.reject(rejection_message=reason)``, so
the model receives the reason. A guarded tool's execution (``tool(...)``) runs exactly
what was approved, once: the SDK's ``approve`` takes no arguments, but the guarded tool is
the one running the call, so an approver's edit reaches it. A call already done in this run
(a re-run after a crash) is approved and answered with its cached result, not run again.
Interruptions of tools not guarded here (hosted, MCP, shell tools) are plain approvals:
approved or denied; an edit cannot reach them, so it is refused and the model told why.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any, Callable, Iterable, Mapping, Optional

from agents import FunctionTool, Runner
from agents.tool_context import ToolContext

from ..client import CallDenied, Flightdeck
from ._common import Decision, GuardedRun, canonical_json, denial_message

__all__ = ["FlightdeckApprovals"]


def _arguments(text: Optional[str]) -> dict:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {"input": value}


class FlightdeckApprovals:
    """One run of an agent with Flightdeck deciding its approvals and guarding its tools."""

    def __init__(self, fd: Flightdeck, run_id: str, *, wait: float = 300.0, agent: Optional[str] = None,
                 display: Optional[Callable[[str, Mapping[str, Any]], Any]] = None):
        self.ledger = GuardedRun(fd, run_id, wait=wait, agent=agent, display=display)
        self._guarded: set = set()

    def tool(self, tool: FunctionTool) -> FunctionTool:
        """The function tool with its execution as a guarded call (a copy; keeps
        ``needs_approval``)."""
        original = tool.on_invoke_tool
        name = tool.name
        ledger = self.ledger

        async def invoke(ctx: ToolContext, input_json: str) -> Any:
            async def run(approved: dict) -> Any:
                return await original(ctx, json.dumps(approved))

            try:
                return await ledger.aexecute(name, _arguments(input_json), ctx.tool_call_id, run)
            except CallDenied as denied:
                return denial_message(name, denied.reason)

        guarded = copy.copy(tool)
        guarded.on_invoke_tool = invoke
        self._guarded.add(name)
        return guarded

    def tools(self, tools: Iterable[FunctionTool]) -> list:
        return [self.tool(t) for t in tools]

    async def decide(self, item: Any) -> Decision:
        """Flightdeck's decision for one interruption (a ToolApprovalItem)."""
        name, call_id = item.name, item.call_id
        args = _arguments(item.arguments)
        if name in self._guarded:
            return await self.ledger.adecide(name, args, call_id)
        return await asyncio.to_thread(self._plain_approval, name, args, call_id)

    def _plain_approval(self, name: str, args: dict, call_id: str) -> Decision:
        ledger = self.ledger
        fd = ledger.fd
        step = ledger.step_for(call_id)
        asked = fd.request_approval(name, args, run_id=ledger.run_id, step=step, agent=ledger.agent,
                                    idempotency_key=f"{ledger.run_id}:{step}:{name}")
        decided = fd.wait_approval(asked, wait=ledger.wait)
        if decided.status == "approved":
            return Decision("run", arguments=args)
        if decided.changed:
            return Decision("denied", changed=True, message=(
                f"Flightdeck: an approver changed the arguments of {name} to {canonical_json(decided.arguments)}, "
                "but this tool cannot be given edited arguments, so it was not run."
                + (f" The approver's note: {decided.respond}" if decided.respond else "")))
        if decided.pending:
            return Decision("denied", message=f"Flightdeck: nobody decided {name} in time; it was not run.")
        return Decision("denied", message=denial_message(name, decided.message or decided.status))

    async def resolve(self, result: Any) -> Any:
        """The run's state with every interruption of ``result`` decided in Flightdeck:
        pass it to ``Runner.run(agent, state)`` to continue."""
        state = result.to_state()
        for item in result.interruptions:
            decision = await self.decide(item)
            if decision.approved:
                state.approve(item)
            else:
                state.reject(item, rejection_message=decision.message)
        return state

    async def run(self, agent: Any, input: Any, **kwargs: Any) -> Any:
        """``Runner.run`` until the run ends, answering its interruptions from Flightdeck."""
        result = await Runner.run(agent, input, **kwargs)
        while result.interruptions:
            result = await Runner.run(agent, await self.resolve(result), **kwargs)
        return result
