"""The LangGraph adapter against a real Flightdeck: a graph written for agent-inbox
(HumanInterrupt / HumanResponse), with langchain_core's GenericFakeChatModel."""

import json
import uuid

import pytest

pytest.importorskip("langgraph")

from programs.common import lines  # noqa: E402
from programs.langgraph_mailer import EMAIL, run  # noqa: E402

SENT = "ana@example.com\tRefund 77"


@pytest.fixture
def thread_id():
    return f"lg-{uuid.uuid4().hex[:8]}"


def test_the_inbox_shows_the_interrupt_and_an_approved_call_runs_once(server, approver, background, tmp_path,
                                                                       thread_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run, server.client(), thread_id, outbox)
    request = approver.approve("send_email")
    assert request["run_id"] == thread_id
    assert json.loads(request["arguments"]) == EMAIL
    shown = {f["label"]: f["value"] for f in request["display"]}
    assert shown["Description"] == "Send the refund email to ana@example.com"
    assert shown["Allowed"] == "accept, edit, respond"
    assert shown["to"] == "ana@example.com"
    result, seen = agent.result()
    assert result["messages"][-1].content == "done"
    assert lines(outbox) == [SENT]
    assert seen == ["sent to ana@example.com"]
    [call] = approver.run_calls(thread_id)
    assert (call["state"], call["attempts"], call["step_index"]) == ("succeeded", 1, 1)


def test_a_denied_call_does_not_run_and_the_model_gets_the_reason(server, approver, background, tmp_path, thread_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run, server.client(), thread_id, outbox)
    approver.deny("send_email", reason="Ana asked not to be emailed")
    result, seen = agent.result()
    assert lines(outbox) == []
    assert "Ana asked not to be emailed" in seen[0]


def test_an_edited_call_runs_with_the_edited_arguments(server, approver, background, tmp_path, thread_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run, server.client(), thread_id, outbox)
    approver.edit("send_email", dict(EMAIL, to="billing@example.com"))
    result, seen = agent.result()
    assert lines(outbox) == ["billing@example.com\tRefund 77"]
    assert seen == ["sent to billing@example.com"]


def test_an_edit_where_the_interrupt_allows_none_is_refused_clearly(server, approver, background, tmp_path,
                                                                     thread_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run, server.client(), thread_id, outbox, allow_edit=False)
    approver.edit("send_email", dict(EMAIL, to="billing@example.com"))
    result, seen = agent.result()
    assert lines(outbox) == []
    assert "cannot be given edited arguments" in seen[0] and "billing@example.com" in seen[0]
    [call] = approver.run_calls(thread_id)
    assert call["state"] == "failed"


def test_a_run_killed_after_the_tool_ran_does_not_run_it_again(server, approver, programs, tmp_path, thread_id):
    outbox = str(tmp_path / "outbox")
    programs.run_and_kill("langgraph_mailer.py", [thread_id, outbox], during=lambda: approver.approve("send_email"))
    assert lines(outbox) == [SENT]
    said = programs.run("langgraph_mailer.py", [thread_id, outbox])
    assert "the model saw: sent to ana@example.com" in said, said
    assert lines(outbox) == [SENT], "sent once"
    [call] = approver.run_calls(thread_id)
    assert (call["state"], call["attempts"], call["deduped"]) == ("succeeded", 1, 1)
