"""The Claude Agent SDK test agent: the bundled Claude Code CLI, on a local stand-in for
the Anthropic Messages API whose scripted model asks to call the in-process MCP tool
``send_email`` once. As a program it is the agent a test kills and runs again:
``python claude_mailer.py RUN_ID OUTBOX``."""

import asyncio
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from anthropic_standin import StandIn, offline_env  # noqa: E402
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, create_sdk_mcp_server, query, tool  # noqa: E402
from common import client, maybe_die_here, send  # noqa: E402

from flightdeck.integrations.claude_agent_sdk import FlightdeckPermissions  # noqa: E402

EMAIL = {"to": "ana@example.com", "subject": "Refund 77"}
TOOL = "mcp__outbox__send_email"


async def run(fd, run_id, outbox, die_after_tool=False):
    """Runs the agent; returns (the final result text, what the model saw, the stand-in)."""
    standin = StandIn(TOOL, dict(EMAIL), on_result=(lambda _text: maybe_die_here()) if die_after_tool else None)

    @tool("send_email", "Send an email", {"to": str, "subject": str})
    async def send_email(args):
        return {"content": [{"type": "text", "text": send(outbox, args["to"], args["subject"])}]}

    home = tempfile.mkdtemp(prefix="claude-home-")
    guard = FlightdeckPermissions(fd, run_id=run_id, tools=[TOOL], wait=90)
    options = guard.options(ClaudeAgentOptions(
        mcp_servers={"outbox": create_sdk_mcp_server("outbox", tools=[send_email])},
        env=offline_env(standin.url, home), cwd=home, model="claude-sonnet-4-5", setting_sources=[],
        max_turns=4))

    async def prompt():
        yield {"type": "user", "message": {"role": "user", "content": "Send the refund email to Ana."}}

    final = None
    try:
        async for message in query(prompt=prompt(), options=options):
            if isinstance(message, ResultMessage):
                final = message.result
    finally:
        standin.close()
    return final, standin.seen, standin


if __name__ == "__main__":
    final, seen, _ = asyncio.run(run(client(), sys.argv[1], sys.argv[2], die_after_tool=True))
    print(f"final: {final}; the model saw: {seen[-1]}", flush=True)
