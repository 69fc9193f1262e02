"""The Pydantic AI adapter against a real Flightdeck, with Pydantic AI's FunctionModel."""

import threading
import time
import uuid

import pytest

pytest.importorskip("pydantic_ai")

from programs.common import lines  # noqa: E402
from programs.pydantic_mailer import EMAIL, build  # noqa: E402

SENT = "ana@example.com\tRefund 77"


@pytest.fixture
def run_id():
    return f"pa-{uuid.uuid4().hex[:8]}"


def run_agent(server, run_id, outbox, tool="send_email"):
    agent, seen = build(server.client(), run_id, outbox, tool)
    return agent.run_sync("Send the refund email to Ana."), seen


def test_an_approved_call_runs_once(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    request = approver.approve("send_email")
    assert request["arguments"] == '{"subject":"Refund 77","to":"ana@example.com"}'
    result, seen = agent.result()
    assert result.output == "done"
    assert lines(outbox) == [SENT]
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
    assert approver.run_calls(run_id)[0]["state"] == "denied"


def test_an_edited_call_runs_with_the_edited_arguments(server, approver, background, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox)
    approver.edit("send_email", dict(EMAIL, to="billing@example.com"), respond="to billing")
    result, seen = agent.result()
    assert lines(outbox) == ["billing@example.com\tRefund 77"]
    assert seen == ["sent to billing@example.com"]


def test_deferred_tool_requests_decided_after_the_run_ended(server, approver, background, tmp_path, run_id):
    """decide_in_run=False: the run ends with DeferredToolRequests; the capability's
    results() waits for Flightdeck's decisions and the next run continues with them."""
    import asyncio

    from pydantic_ai.tools import DeferredToolRequests

    outbox = str(tmp_path / "outbox")
    agent, seen = build(server.client(), run_id, outbox, decide_in_run=False)
    first = agent.run_sync("Send the refund email to Ana.")
    assert isinstance(first.output, DeferredToolRequests)
    assert [c.tool_name for c in first.output.approvals] == ["send_email"]
    decided = background(lambda: asyncio.run(agent.approvals.results(first.output, first.all_messages())))
    approver.edit("send_email", dict(EMAIL, subject="Refund 77 (corrected)"))
    second = agent.run_sync(message_history=first.all_messages(), deferred_tool_results=decided.result())
    assert second.output == "done"
    assert lines(outbox) == ["ana@example.com\tRefund 77 (corrected)"]


def test_a_tool_the_framework_does_not_mark_waits_for_the_policys_approval(server, approver, background, tmp_path,
                                                                          run_id):
    outbox = str(tmp_path / "outbox")
    agent = background(run_agent, server, run_id, outbox, "write_outbox")
    approver.approve("write_outbox")
    result, seen = agent.result()
    assert lines(outbox) == [SENT]
    assert seen == ["sent to ana@example.com"]


def test_a_run_killed_after_the_tool_ran_does_not_run_it_again(server, approver, programs, tmp_path, run_id):
    outbox = str(tmp_path / "outbox")
    args = [run_id, outbox, "send_email"]
    programs.run_and_kill("pydantic_mailer.py", args + ["die-after-tool"], during=lambda: approver.approve("send_email"))
    assert lines(outbox) == [SENT]
    said = programs.run("pydantic_mailer.py", args)
    assert "the model saw: sent to ana@example.com" in said, said
    assert lines(outbox) == [SENT], "sent once"
    [call] = approver.run_calls(run_id)
    assert (call["state"], call["attempts"], call["deduped"]) == ("succeeded", 1, 1)


def test_a_run_killed_before_it_reported_waits_for_a_person_to_settle(server, approver, programs, tmp_path, run_id):
    """The tool ran but the process died before reporting: the re-run is told the call is
    in progress, then (after the policy's 2 s call timeout) of unknown outcome, and waits
    until a person says it happened; then it is already done and does not run again."""
    outbox = str(tmp_path / "outbox")
    args = [run_id, outbox, "post_note"]
    programs.run_and_kill("pydantic_mailer.py", args + ["die-in-tool"])
    assert lines(outbox) == [SENT]
    [call] = approver.run_calls(run_id)
    assert call["state"] == "started"
    rerun = {}
    thread = threading.Thread(target=lambda: rerun.update(out=programs.run("pydantic_mailer.py", args)))
    thread.start()
    deadline = time.monotonic() + 30
    while approver.run_calls(run_id)[0]["state"] != "unknown":
        assert time.monotonic() < deadline, approver.run_calls(run_id)
        time.sleep(0.2)
    time.sleep(1)
    assert lines(outbox) == [SENT], "nothing runs while the outcome is unknown"
    approver.settle(call["id"], happened=True, external_id="note-1")
    thread.join(60)
    assert "was already done in this run (external id note-1)" in rerun.get("out", ""), rerun
    assert lines(outbox) == [SENT], "sent once"
    [call] = approver.run_calls(run_id)
    assert call["state"] == "succeeded" and call["external_id"] == "note-1"
