"""The client against a real Flightdeck: `server/tests/python_client.rs` starts one and
runs these with FLIGHTDECK_URL and FLIGHTDECK_TOKEN set (a token with the `calls`
scope; the approval and escalation tests skip themselves when it lacks `approvals` or
`escalations`), after giving `wire_money` a policy whose approvals expire after one
second. `WaitingProtocol` runs against a scripted stand-in and needs no Flightdeck."""

import http.server
import json
import os
import sys
import threading
import time
import unittest
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from flightdeck import CallDenied, Flightdeck, FlightdeckError, idempotency_key  # noqa: E402
from flightdeck.client import Call  # noqa: E402


def client() -> Flightdeck:
    return Flightdeck(os.environ["FLIGHTDECK_URL"], os.environ["FLIGHTDECK_TOKEN"])


class GuardedCalls(unittest.TestCase):
    def setUp(self):
        self.fd = client()
        self.run_id = f"py-{uuid.uuid4().hex[:8]}"

    def test_a_retry_is_told_already_done_with_the_cached_result(self):
        sent = []
        args = {"to": "ana@example.com", "subject": "Invoice 77", "request_id": "r-1"}
        with self.fd.guarded("send_email", args, run_id=self.run_id, step=3) as call:
            self.assertFalse(call.done)
            self.assertTrue(call.natural_key.startswith("fd-"))
            sent.append(call.natural_key)
            call.complete(external_id="msg_42", response={"message_id": "msg_42"})
        retry = dict(args, request_id="r-2")  # volatile: the same call
        with self.fd.guarded("send_email", retry, run_id=self.run_id, step=3) as call:
            self.assertTrue(call.done)
            self.assertEqual(call.external_id, "msg_42")
            self.assertEqual(call.response, {"message_id": "msg_42"})
        self.assertEqual(len(sent), 1)

    def test_the_derived_key_is_the_same_in_python_and_in_flightdeck(self):
        args = {"ticket": 7, "now": 123}
        with self.fd.guarded("close_ticket", args, run_id=self.run_id, step=1) as call:
            self.assertEqual(call.idempotency_key, idempotency_key(self.run_id, 1, "close_ticket", args))

    def test_the_decorator_runs_once_and_returns_the_cached_result_after(self):
        runs = []

        @self.fd.guard("create_ticket", external_id=lambda r: r["id"])
        def create_ticket(title):
            runs.append(title)
            return {"id": f"T-{len(runs)}", "title": title}

        first = create_ticket(title="Refund 77", run_id=self.run_id, step=2)
        again = create_ticket(title="Refund 77", run_id=self.run_id, step=2)
        self.assertEqual(runs, ["Refund 77"])
        self.assertEqual(first, again)

    def test_a_failure_is_reported_and_the_next_attempt_runs(self):
        with self.assertRaises(RuntimeError):
            with self.fd.guarded("charge_card", {"amount": 5}, run_id=self.run_id, step=4):
                raise RuntimeError("gateway timeout before sending")
        with self.fd.guarded("charge_card", {"amount": 5}, run_id=self.run_id, step=4) as call:
            self.assertFalse(call.done, "a failed attempt runs again")

    def test_an_approval_that_expires_is_a_denial(self):
        with self.assertRaises(CallDenied):
            with self.fd.guarded("wire_money", {"amount": 900}, run_id=self.run_id, step=5, wait=10):
                self.fail("a call without approval must not run")

    def test_display_fields_and_the_agent_name_are_sent_with_the_call(self):
        args = {"to": "di@example.com", "subject": "Hello"}
        display = [{"label": "Recipient", "value": "di@example.com", "argument": "to"}]
        with self.fd.guarded("send_email", args, run_id=self.run_id, step=6, display=display,
                             agent="billing-agent") as call:
            self.assertEqual(call.answer, "proceed")
            self.assertEqual(call.arguments, args)

    def test_refusals_carry_the_servers_message(self):
        with self.assertRaises(FlightdeckError) as refused:
            self.fd.ask("t", {}, run_id="", step=1)
        self.assertEqual(refused.exception.status, 400)
        self.assertIn("run_id", str(refused.exception))


class EditedApprovals(unittest.TestCase):
    """How the client reads an answer after an approver edited the arguments (the server
    side of the edit is tested in server/tests/approvals_v2.rs)."""

    def answer(self, **extra):
        entry = {"id": "call_1", "idempotency_key": "k", "natural_key": "fd-1", "approval_id": "apr_1",
                 "arguments": {"order": "o-9", "amount": 900}}
        return dict({"answer": "proceed", "call": entry}, **extra)

    def test_the_call_runs_the_edited_arguments_when_an_approver_changed_them(self):
        call = Call(None, self.answer(approved_arguments={"order": "o-9", "amount": 90}, message="90, not 900"))
        self.assertTrue(call.changed)
        self.assertEqual(call.arguments, {"order": "o-9", "amount": 90})
        self.assertEqual(call.message, "90, not 900")

    def test_without_an_edit_the_call_runs_what_it_asked(self):
        asked = {"order": "o-9", "amount": 900, "api_key": "sk-live-secret"}
        call = Call(None, self.answer(), asked)
        self.assertFalse(call.changed)
        self.assertEqual(call.arguments, asked, "the agent's own copy, not the ledger's redacted one")
        self.assertIsNone(call.message)


def needs_scope(test: unittest.TestCase, error: FlightdeckError, scope: str) -> None:
    if error.status == 403:
        test.skipTest(f"the test token lacks the `{scope}` scope")
    raise error


class PlainApprovals(unittest.TestCase):
    def test_a_request_waits_pending_then_is_cancelled(self):
        fd, run_id = client(), f"py-{uuid.uuid4().hex[:8]}"
        args = {"repo": "acme/site", "confirm": True}
        try:
            asked = fd.request_approval("delete_repo", args, run_id=run_id, step=1, agent="ops-agent",
                                        display=[{"label": "Repository", "value": "acme/site", "argument": "repo"}],
                                        idempotency_key=f"{run_id}/delete")
        except FlightdeckError as e:
            needs_scope(self, e, "approvals")
        self.assertTrue(asked.pending)
        again = fd.request_approval("delete_repo", args, run_id=run_id, step=1, idempotency_key=f"{run_id}/delete")
        self.assertEqual(again.id, asked.id, "the same key and payload return the same request")
        started = time.monotonic()
        still = fd.wait_approval(asked, wait=1)
        self.assertTrue(still.pending)
        self.assertLess(time.monotonic() - started, 10)
        cancelled = fd.cancel_approval(asked)
        self.assertEqual(cancelled.status, "cancelled")
        final = fd.wait_approval(asked.id, wait=30)
        self.assertEqual(final.status, "cancelled")
        self.assertFalse(final.approved)


class Escalations(unittest.TestCase):
    def test_an_escalation_carries_what_was_done_and_what_remains(self):
        fd, run_id = client(), f"py-{uuid.uuid4().hex[:8]}"
        with fd.guarded("send_email", {"to": "ed@example.com"}, run_id=run_id, step=1) as call:
            call.complete(external_id="msg_7")
        try:
            opened = fd.escalate(run_id, "insufficient_permission", what_was_done=[call, "looked up the order"],
                                 what_remains=["refund order 77", {"description": "tell the customer"}],
                                 blocking_fact="no refund rights", agent="billing-agent")
        except FlightdeckError as e:
            needs_scope(self, e, "escalations")
        read = fd.escalation(opened["id"])
        self.assertTrue(read["open"])
        self.assertEqual(read["what_was_done"][0]["external_id"], "msg_7")
        self.assertEqual(read["what_was_done"][0]["tool"], "send_email")
        self.assertEqual([r["description"] for r in read["what_remains"]], ["refund order 77", "tell the customer"])


class _Scripted(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next scripted (status, body) and records it."""

    def do_POST(self):  # noqa: N802 - the stdlib's name
        self._answer()

    def do_GET(self):  # noqa: N802
        self._answer()

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        server = self.server
        server.seen.append((self.command, self.path, body))
        status, answer = server.script.pop(0) if len(server.script) > 1 else server.script[0]
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def answer(name, **extra):
    entry = {"id": "call_1", "idempotency_key": "k", "natural_key": "fd-000000000001", "approval_id": "apr_1",
             "tool": "refund", "arguments": {"order": "o-9", "amount": 900}}
    return 200, dict({"answer": name, "call": entry}, **extra)


class WaitingProtocol(unittest.TestCase):
    """The waiting loop: the same keyed POST repeated with `wait`, never a GET."""

    def serve(self, *script):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
        server.script, server.seen = list(script), []
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        return server, Flightdeck(f"http://127.0.0.1:{server.server_address[1]}", "fdk_test", agent="refunds")

    def test_waiting_repeats_the_same_post_and_never_reads(self):
        server, fd = self.serve(answer("approval_required"), (503, {"error": {"status": 503, "message": "busy"}}),
                                answer("in_progress"),
                                answer("proceed", approved_arguments={"order": "o-9", "amount": 90}, message="90"))
        display = [{"label": "Amount", "value": "900", "argument": "amount"}]
        call = fd.ask("refund", {"order": "o-9", "amount": 900}, run_id="r", step=2, display=display, wait=120)
        self.assertEqual(call.arguments, {"order": "o-9", "amount": 90})
        self.assertEqual(len(server.seen), 4)
        first = dict(server.seen[0][2])
        for method, path, body in server.seen:
            self.assertEqual((method, path), ("POST", "/api/v1/calls"))
            self.assertTrue(1 <= body["wait"] <= 60, body["wait"])
            self.assertEqual(dict(body, wait=first["wait"]), first, "the same body each time")
        self.assertEqual(first["display"], display)
        self.assertEqual(first["agent"], "refunds")
        self.assertEqual(first["wait"], 60)

    def test_the_client_stops_waiting_at_its_own_deadline(self):
        server, fd = self.serve(answer("approval_required"))
        started = time.monotonic()
        with self.assertRaises(FlightdeckError) as waited:
            fd.ask("refund", {"order": "o-9"}, run_id="r", step=2, wait=0)
        self.assertIn("still approval_required", str(waited.exception))
        self.assertEqual([body["wait"] for _, _, body in server.seen], [0])
        self.assertLess(time.monotonic() - started, 5)

    def test_a_denial_carries_the_approvers_reason(self):
        _, fd = self.serve(answer("denied", message="not this customer"))
        with self.assertRaises(CallDenied) as denied:
            fd.ask("refund", {"order": "o-9"}, run_id="r", step=2)
        self.assertEqual(denied.exception.reason, "not this customer")
        self.assertIn("not this customer", str(denied.exception))

    def test_a_refusal_is_not_retried(self):
        server, fd = self.serve((400, {"error": {"status": 400, "message": "`run_id` is required"}}))
        with self.assertRaises(FlightdeckError) as refused:
            fd.ask("refund", {}, run_id="", step=2)
        self.assertEqual(refused.exception.status, 400)
        self.assertEqual(len(server.seen), 1)


if __name__ == "__main__":
    unittest.main()
