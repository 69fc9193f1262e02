"""Flightdeck for the Claude Agent SDK (tested with claude-agent-sdk 0.2.184, which
bundles the Claude Code CLI 2.1.327 as a native binary: no Node needed).

    fd = Flightdeck(url, token)                               # scope: calls
    guard = FlightdeckPermissions(fd, run_id="order-77")       # a run id a re-run repeats
    options = guard.options(ClaudeAgentOptions(mcp_servers=..., allowed_tools=[...]))
    async for message in query(prompt=messages(), options=options): ...

The approval point is ``can_use_tool``: each guarded tool call the CLI asks about is asked
in Flightdeck and waits for the person's decision. Approved: ``PermissionResultAllow``
with ``updated_input`` set to what was approved, so an approver's edit reaches the tool.
Denied: ``PermissionResultDeny`` with the reason, which the model receives. A call that
succeeded before (a re-run) is not run again: it is denied with a message carrying its
cached result. The execution is reported from a ``PostToolUse`` hook (``ok`` with the
tool's response) or a ``PostToolUseFailure`` hook (``error``).

``can_use_tool`` is only asked for tools the CLI would prompt for: leave guarded tools
out of ``allowed_tools`` and do not bypass permissions. The step is the call's position
among the run's guarded calls (first seen first), so a re-run with the same prompt and
run id reproduces it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, Callable, Dict, Iterable, Mapping, Optional

from claude_agent_sdk import HookMatcher, PermissionResultAllow, PermissionResultDeny

from ..client import Flightdeck
from ._common import GuardedRun, report

__all__ = ["FlightdeckPermissions"]


class FlightdeckPermissions:
    """``can_use_tool`` and the reporting hooks for one run.

    ``tools``: tool names to guard (e.g. ``mcp__outbox__send_email``; None: every tool
    the CLI asks about). ``fallback``: the ``can_use_tool`` to use for the others (default:
    allow)."""

    def __init__(self, fd: Flightdeck, run_id: str, *, tools: Optional[Iterable[str]] = None,
                 wait: float = 300.0, agent: Optional[str] = None,
                 display: Optional[Callable[[str, Mapping[str, Any]], Any]] = None,
                 fallback: Optional[Callable[..., Any]] = None):
        self.ledger = GuardedRun(fd, run_id, tools=tools, wait=wait, agent=agent, display=display)
        self.fallback = fallback

    async def can_use_tool(self, tool_name: str, tool_input: Dict[str, Any], context: Any) -> Any:
        if not self.ledger.guards(tool_name):
            if self.fallback is not None:
                return await self.fallback(tool_name, tool_input, context)
            return PermissionResultAllow()
        decision = await self.ledger.adecide(tool_name, tool_input, context.tool_use_id)
        if decision.kind == "run":
            return PermissionResultAllow(updated_input=dict(decision.arguments))
        if decision.kind == "done":
            # Used: nothing will report it.
            self.ledger.take(context.tool_use_id)
        return PermissionResultDeny(message=decision.message or "denied")

    async def _reported(self, hook_input: Dict[str, Any], tool_use_id: Optional[str], _context: Any) -> Dict[str, Any]:
        call = self.ledger.take(tool_use_id or hook_input.get("tool_use_id"))
        if call is None or call.done:
            return {}
        if hook_input.get("hook_event_name") == "PostToolUseFailure":
            error = str(hook_input.get("error") or "the tool failed")
            await asyncio.to_thread(call.complete, "error", None, None, error)
        else:
            await asyncio.to_thread(report, call, hook_input.get("tool_response"))
        return {}

    def hooks(self) -> Dict[str, list]:
        return {"PostToolUse": [HookMatcher(hooks=[self._reported])],
                "PostToolUseFailure": [HookMatcher(hooks=[self._reported])]}

    def options(self, options: Any) -> Any:
        """``options`` (ClaudeAgentOptions) with this ``can_use_tool`` and the hooks added
        to its own."""
        hooks = {k: list(v) for k, v in (options.hooks or {}).items()}
        for event, matchers in self.hooks().items():
            hooks.setdefault(event, []).extend(matchers)
        return dataclasses.replace(options, can_use_tool=self.can_use_tool, hooks=hooks)
