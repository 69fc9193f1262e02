"""The client against a real Flightdeck: `server/tests/python_client.rs` starts one and
runs these with FLIGHTDECK_URL and FLIGHTDECK_TOKEN set (a token with the `calls`
scope), after giving `wire_money` a policy whose approvals expire after one second."""

import os
import sys
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

    def test_refusals_carry_the_servers_message(self):
        with self.assertRaises(FlightdeckError) as refused:
            self.fd.ask("t", {}, run_id="", step=1)
        self.assertEqual(refused.exception.status, 400)
        self.assertIn("run_id", str(refused.exception))


if __name__ == "__main__":
    unittest.main()


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
