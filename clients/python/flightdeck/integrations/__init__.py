"""Framework adapters: each turns a framework's approval point into a Flightdeck approval
and its tool execution into a guarded call (docs/agents/).

- ``flightdeck.integrations.openai_agents``: OpenAI Agents SDK (``needs_approval``,
  interruptions, ``state.approve``/``reject``).
- ``flightdeck.integrations.pydantic_ai``: Pydantic AI (``requires_approval``, deferred
  tool requests), as a capability.
- ``flightdeck.integrations.langgraph``: LangGraph (``interrupt`` with agent-inbox's
  HumanInterrupt, resumed with a HumanResponse).
- ``flightdeck.integrations.claude_agent_sdk``: Claude Agent SDK (``can_use_tool`` with
  ``updated_input``, a PostToolUse hook to report).

Each module imports its framework only when imported itself; this package needs none.
The shared logic is ``GuardedRun`` (standard library only).
"""

from ._common import Decision, GuardedRun

__all__ = ["Decision", "GuardedRun"]
