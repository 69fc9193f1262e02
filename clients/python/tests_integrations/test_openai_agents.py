"""The OpenAI Agents SDK adapter against a real Flightdeck, with the SDK's ScriptedModel."""

import asyncio
import uuid

import pytest

pytest.importorskip("agents")

from programs.common import lines  # noqa: E402
from programs.openai_mailer import EMAIL, build  # noqa: E402

from flightdeck.integrations.openai_agents import FlightdeckApprovals  # noqa: E402


def run_agent(server, run_id, outbox):
    guard = FlightdeckApprovals(server.client(), run_id=run_id, wait=60, agent="mailer-agent",
                                display=lambda tool, args: [{"label": "To", "value": args["to"], "argument": "to"}])
    agent, seen = build(guard, outbox)
    result = asyncio.run(guard.run(agent, "Send the refund email to Ana."))
    return result, seen


@pytest.fixture
def run_id():
    return f"oa-{uuid.uuid4().hex[:8]}"


def test_an_approved_call_runs_once(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    request = approver.approve("send_email")
    assert request["run_id"] == run_id
    assert request["arguments"] == '{"subject":"Refund 77","to":"ana@example.com"}'
    assert request["agent"] == "mailer-agent"
    assert request["display"] == [{"label": "To", "value": "ana@example.com", "argument": "to"}]
    result, seen = agent.result()
    assert result.final_output == "done"
    assert lines(outbox) == ["ana@example.com\tRefund 77"]
    assert seen == ["sent to ana@example.com"]
    [call] = approver.run_calls(run_id)
    assert (call["state"], call["attempts"], call["step_index"]) == ("succeeded", 1, 1)


def test_a_denied_call_does_not_run_and_the_model_gets_the_reason(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    approver.deny("send_email", reason="Ana asked not to be emailed")
    result, seen = agent.result()
    assert lines(outbox) == []
    assert "Ana asked not to be emailed" in seen[0]
    [call] = approver.run_calls(run_id)
    assert call["state"] == "denied"


def test_an_edited_call_runs_with_the_edited_arguments(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    approver.edit("send_email", dict(EMAIL, to="billing@example.com"), respond="to billing, not Ana")
    result, seen = agent.result()
    assert lines(outbox) == ["billing@example.com\tRefund 77"]
    assert seen == ["sent to billing@example.com"]


def test_a_run_killed_after_the_tool_ran_does_not_run_it_again(server, approver, programs, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    programs.run_and_kill("openai_mailer.py", [run_id, outbox], during=lambda: approver.approve("send_email"))
    assert lines(outbox) == ["ana@example.com\tRefund 77"]
    said = programs.run("openai_mailer.py", [run_id, outbox])
    assert "the model saw: sent to ana@example.com" in said, "the cached result, not a new send: " + said
    assert lines(outbox) == ["ana@example.com\tRefund 77"], "sent once"
    [call] = approver.run_calls(run_id)
    assert (call["state"], call["attempts"], call["deduped"]) == ("succeeded", 1, 1)
