"""The Claude Agent SDK adapter against a real Flightdeck: the SDK's bundled Claude Code
CLI on a local stand-in for the Anthropic Messages API (no network, no key)."""

import asyncio
import json
import uuid

import pytest

pytest.importorskip("claude_agent_sdk")

from programs.claude_mailer import EMAIL, TOOL, run  # noqa: E402
from programs.common import lines  # noqa: E402

SENT = "ana@example.com\tRefund 77"


@pytest.fixture
def run_id():
    return f"cl-{uuid.uuid4().hex[:8]}"


def run_agent(server, run_id, outbox):
    return asyncio.run(run(server.client(), run_id, outbox))


def test_an_approved_call_runs_once(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    request = approver.approve(TOOL)
    assert json.loads(request["arguments"]) == EMAIL
    final, seen, standin = agent.result()
    assert final == "done"
    assert lines(outbox) == [SENT]
    assert seen[0].startswith("sent to ana@example.com")
    [call] = approver.run_calls(run_id)
    assert (call["state"], call["attempts"], call["step_index"]) == ("succeeded", 1, 1)
    assert call["response"] == [{"type": "text", "text": "sent to ana@example.com"}]
    assert all(r["path"].startswith("/v1/messages") for r in standin.requests), "the CLI spoke only to the stand-in"


def test_a_denied_call_does_not_run_and_the_model_gets_the_reason(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    approver.deny(TOOL, reason="Ana asked not to be emailed")
    final, seen, _ = agent.result()
    assert lines(outbox) == []
    assert "Ana asked not to be emailed" in seen[0]


def test_an_edited_call_runs_with_the_edited_arguments(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    approver.edit(TOOL, dict(EMAIL, to="billing@example.com"))
    final, seen, _ = agent.result()
    assert lines(outbox) == ["billing@example.com\tRefund 77"]
    assert seen[0].startswith("sent to billing@example.com")


def test_a_run_killed_after_the_tool_ran_does_not_run_it_again(server, approver, programs, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    programs.run_and_kill("claude_mailer.py", [run_id, outbox], during=lambda: approver.approve(TOOL))
    assert lines(outbox) == [SENT]
    said = programs.run("claude_mailer.py", [run_id, outbox])
    assert "was already done in this run" in said and "sent to ana@example.com" in said, said
    assert lines(outbox) == [SENT], "sent once"
    [call] = approver.run_calls(run_id)
    assert (call["state"], call["attempts"], call["deduped"]) == ("succeeded", 1, 1)
