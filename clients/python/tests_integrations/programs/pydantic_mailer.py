"""The Pydantic AI test agent: a FunctionModel asks to call one tool; ``send_email``
needs approval (``requires_approval``), ``post_note`` does not (and its policy needs no
person). As a program it is the agent a test kills and runs again:
``python pydantic_mailer.py RUN_ID OUTBOX TOOL [die-after-tool|die-in-tool]``."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import client, maybe_die_here, send  # noqa: E402
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.tools import DeferredToolRequests  # noqa: E402

from flightdeck.integrations.pydantic_ai import FlightdeckApprovals  # noqa: E402

EMAIL = {"to": "ana@example.com", "subject": "Refund 77"}


def build(fd, run_id, outbox, tool="send_email", die=None, decide_in_run=True):
    """The agent and the list of what the model was told for its tool call."""
    seen = []

    def model(messages, info: AgentInfo) -> ModelResponse:
        answers = [p for m in messages for p in getattr(m, "parts", [])
                   if isinstance(p, (ToolReturnPart, RetryPromptPart))]
        if not answers:
            return ModelResponse(parts=[ToolCallPart(tool, dict(EMAIL), tool_call_id="call_1")])
        seen.append(str(answers[-1].content))
        if die == "die-after-tool":
            maybe_die_here()
        return ModelResponse(parts=[TextPart("done")])

    approvals = FlightdeckApprovals(fd, run_id=run_id, wait=90, decide_in_run=decide_in_run)
    agent = Agent(FunctionModel(model), capabilities=[approvals], output_type=[str, DeferredToolRequests])
    agent.approvals = approvals

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, subject: str) -> str:
        """Send an email."""
        return send(outbox, to, subject)

    @agent.tool_plain
    def write_outbox(to: str, subject: str) -> str:
        """Write to the outbox (the framework does not ask; Flightdeck's policy does)."""
        return send(outbox, to, subject)

    @agent.tool_plain
    def post_note(to: str, subject: str) -> str:
        """Post a note (no approval anywhere)."""
        result = send(outbox, to, subject)
        if die == "die-in-tool":
            maybe_die_here()  # ran, never reported
        return result

    return agent, seen


if __name__ == "__main__":
    run_id, outbox, tool = sys.argv[1:4]
    die = sys.argv[4] if len(sys.argv) > 4 else None
    agent, seen = build(client(), run_id, outbox, tool, die)
    result = agent.run_sync("Send the refund email to Ana.")
    print(f"final: {result.output}; the model saw: {seen[-1]}", flush=True)
