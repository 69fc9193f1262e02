"""The OpenAI Agents SDK test agent: a scripted model asks to send one email; the tool,
with ``needs_approval``, appends to an outbox. Run as a program it is the agent a test
kills and runs again: ``python openai_mailer.py RUN_ID OUTBOX``."""

import asyncio
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from agents import Agent, function_tool, set_tracing_disabled  # noqa: E402
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call  # noqa: E402
from common import client, maybe_die_here, send  # noqa: E402

from flightdeck.integrations.openai_agents import FlightdeckApprovals  # noqa: E402

set_tracing_disabled(True)

EMAIL = {"to": "ana@example.com", "subject": "Refund 77"}


def tool_output(call) -> str:
    """What the model was given for its tool call (the last function_call_output)."""
    outputs = [i for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return str(outputs[-1]["output"]) if outputs else ""


def build(guard: FlightdeckApprovals, outbox: str, die_after_tool: bool = False):
    seen = []

    def finish(call):
        seen.append(tool_output(call))
        if die_after_tool:
            maybe_die_here()
        return [assistant_message("done")]

    model = ScriptedModel([[function_call("send_email", EMAIL, call_id="call_send_1")], ModelStep.respond(finish)])

    @function_tool(needs_approval=True)
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        return send(outbox, to, subject)

    agent = Agent(name="mailer", instructions="Send the refund email.", model=model, tools=[guard.tool(send_email)])
    return agent, seen


async def main(run_id: str, outbox: str) -> None:
    guard = FlightdeckApprovals(client(), run_id=run_id, wait=120)
    agent, seen = build(guard, outbox, die_after_tool=True)
    result = await guard.run(agent, "Send the refund email to Ana.")
    print(f"final: {result.final_output}; the model saw: {seen[-1]}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
