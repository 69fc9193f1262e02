// The client against a real Flightdeck (FLIGHTDECK_BIN): guarded calls run once, wait for
// a person who approves (with an edit) or denies, an unknown outcome waits for a person to
// settle it; plain approvals and escalations.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { CallDenied, CallOutcomeUnknown, Flightdeck, idempotencyKey } from "../src/index.js";
import { Flightdeck as Server, skipWithoutServer } from "./support/flightdeck.js";

const POLICIES = `
[[tool_policies]]
pattern = "send_email"
side_effect = "irreversible"
requires_approval = true

[[tool_policies]]
pattern = "create_ticket"
side_effect = "write"

[[tool_policies]]
pattern = "charge_card"
side_effect = "irreversible"
call_timeout_seconds = 1

[[tool_policies]]
pattern = "refund"
side_effect = "irreversible"
requires_approval = true
`;

describe("the client against a real Flightdeck", { skip: skipWithoutServer }, () => {
  let server: Server;
  let fd: Flightdeck;
  before(async () => {
    server = await Server.start(POLICIES);
    fd = new Flightdeck(server.url, server.token, { agent: "ts-test-agent" });
  });
  after(async () => {
    await server?.stop();
  });

  test("a guarded call runs once; asked again it is already done with the stored result, under the key the client derives", async () => {
    let runs = 0;
    const ask = { tool: "create_ticket", args: { title: "Refund 77", request_id: "r-1" }, runId: "run-once", step: 2 };
    const first = await fd.guarded(ask, async (call) => {
      runs++;
      assert.equal(call.answer, "proceed");
      assert.match(call.naturalKey, /^fd-[0-9a-f]{12}$/);
      return { id: "T-1", title: call.arguments.title };
    }, { externalId: (r) => r.id });
    assert.deepEqual(first, { id: "T-1", title: "Refund 77" });
    // A retry with another request id (a volatile field) is the same call.
    const again = await fd.guarded({ ...ask, args: { ...ask.args, request_id: "r-2" } }, async () => {
      runs++;
      return { id: "T-2", title: "twice" };
    });
    assert.deepEqual(again, { id: "T-1", title: "Refund 77" });
    assert.equal(runs, 1);
    const call = await fd.ask(ask);
    assert.ok(call.done);
    assert.equal(call.externalId, "T-1");
    assert.equal(call.idempotencyKey, await idempotencyKey("run-once", 2, "create_ticket", ask.args));
    assert.ok(call.entry.deduped >= 2);
  });

  test("a call that needs approval waits for the person, who sees the display and the agent, and runs what they edited", async () => {
    const args = { to: "ana@example.com", subject: "Invoice 77", body: "Dear Ana" };
    const display = [{ label: "To", value: "ana@example.com", argument: "to" }];
    const asked = fd.guarded({ tool: "send_email", args, runId: "run-edit", step: 1, display, wait: 60 }, async (call) => {
      assert.ok(call.changed);
      assert.equal(call.message, "Bo handles invoices");
      return { sent: call.arguments };
    });
    const pending = await server.pendingApproval("run-edit", "send_email");
    assert.deepEqual(JSON.parse(pending.arguments), args);
    assert.equal(pending.agent, "ts-test-agent");
    assert.deepEqual(pending.display, display);
    const edited = { ...args, to: "bo@example.com" };
    await server.decide(pending, "approve", { arguments: edited, respond: "Bo handles invoices" });
    assert.deepEqual(await asked, { sent: edited });
    const [entry] = await server.runCalls("run-edit");
    assert.equal(entry.entry.state, "succeeded");
    assert.equal(entry.entry.attempts, 1);
  });

  test("a denied call does not run and the client gets the approver's reason", async () => {
    let ran = false;
    const asked = fd.guarded({ tool: "send_email", args: { to: "cy@example.com" }, runId: "run-deny", step: 1, wait: 60 }, async () => {
      ran = true;
    });
    const pending = await server.pendingApproval("run-deny");
    await server.decide(pending, "deny", { reason: "not this customer", respond: "Ask billing first" });
    await assert.rejects(asked, (e: unknown) => {
      assert.ok(e instanceof CallDenied);
      assert.match(e.reason ?? "", /Ask billing first|not this customer/);
      return true;
    });
    assert.equal(ran, false);
  });

  test("an attempt that never reported is an unknown outcome until a person settles it", async () => {
    const ask = { tool: "charge_card", args: { order: "o-9", amount: 500 }, runId: "run-unknown", step: 1 };
    const first = await fd.ask(ask); // proceed: then the agent "dies" before running or reporting
    assert.equal(first.answer, "proceed");
    await new Promise((r) => setTimeout(r, 1500)); // past the policy's call_timeout_seconds
    const unknown = await fd.ask({ ...ask, wait: 1 }).catch((e) => e);
    assert.ok(unknown instanceof CallOutcomeUnknown, String(unknown));
    assert.ok(unknown.call.escalationId, "an escalation asks a person to settle it");
    // The re-run waits while the person looks, and is told it happened.
    let runs = 0;
    const rerun = fd.guarded({ ...ask, wait: 60 }, async () => {
      runs++;
    });
    await new Promise((r) => setTimeout(r, 300));
    await server.settle(first.id, true, "ch_123");
    await rerun;
    assert.equal(runs, 0);
    const done = await fd.ask(ask);
    assert.ok(done.done);
    assert.equal(done.externalId, "ch_123");
  });

  test("plain approvals: an edit comes back as the arguments to run; a denial with its reason; a cancel", async () => {
    const asked = fd.approval({ tool: "refund", args: { order: "o-1", amount: 500 }, runId: "run-approvals", step: 4, wait: 60 });
    const pending = await server.pendingApproval("run-approvals");
    await server.decide(pending, "approve", { arguments: { order: "o-1", amount: 50 }, respond: "50, not 500" });
    const approval = await asked;
    assert.equal(approval.status, "approved_with_changes");
    assert.ok(approval.approved && approval.changed);
    assert.deepEqual(approval.arguments, { order: "o-1", amount: 50 });
    assert.equal(approval.message, "50, not 500");

    const denied = fd.approval({ tool: "refund", args: { order: "o-2", amount: 5 }, runId: "run-approvals", wait: 60 });
    await server.decide(await server.pendingApproval("run-approvals"), "deny", { reason: "duplicate order" });
    const no = await denied;
    assert.equal(no.status, "denied");
    assert.equal(no.approved, false);
    assert.equal(no.reason, "duplicate order");

    const filed = await fd.requestApproval({ tool: "refund", args: { order: "o-3" }, runId: "run-approvals", idempotencyKey: "o-3" });
    assert.ok(filed.pending);
    const again = await fd.requestApproval({ tool: "refund", args: { order: "o-3" }, runId: "run-approvals", idempotencyKey: "o-3" });
    assert.equal(again.id, filed.id);
    assert.equal((await fd.cancelApproval(filed)).status, "cancelled");
    assert.equal((await fd.waitApproval(filed.id, 0)).status, "cancelled");
  });

  test("an escalation carries what was done (with the call's external id and key) and what remains", async () => {
    const call = await fd.ask({ tool: "create_ticket", args: { title: "Escalate me" }, runId: "run-escalate", step: 1 });
    await call.complete({ externalId: "T-9" });
    const escalation = await fd.escalate({
      runId: "run-escalate",
      reason: "insufficient_permission",
      blockingFact: "no refund rights",
      whatWasDone: [call, "told the customer"],
      whatRemains: ["refund order o-9", { description: "close T-9" }],
    });
    const read = await fd.escalation(escalation.id as string);
    assert.equal(read.open, true);
    const text = JSON.stringify(read);
    for (const want of ["T-9", call.idempotencyKey, "told the customer", "refund order o-9", "close T-9", "no refund rights"]) {
      assert.ok(text.includes(want), `${want} in ${text}`);
    }
  });
});
