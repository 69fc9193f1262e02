// The client's protocol against a scripted fetch (no server): the waiting loop repeats
// the same keyed POST, errors keep the server's message and status, guarded() runs the
// function only on `proceed` and reports, and the span gets the ledger's attributes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { AsyncLocalStorage } from "node:async_hooks";
import { context, trace, ROOT_CONTEXT, type Context, type ContextManager, type Span } from "@opentelemetry/api";
import { CallDenied, CallOutcomeUnknown, Flightdeck, FlightdeckError, type CallAnswer } from "../src/index.js";

interface Sent {
  method: string;
  path: string;
  body: any;
}

/** A fetch that answers from a script and records what was sent. */
function scripted(answers: Array<(sent: Sent) => { status?: number; body: unknown }>) {
  const sent: Sent[] = [];
  const fetcher = (async (url: string, init: RequestInit) => {
    const s: Sent = {
      method: init.method ?? "GET",
      path: url.replace(/^http:\/\/fd\.test/, ""),
      body: init.body ? JSON.parse(init.body as string) : undefined,
    };
    sent.push(s);
    const next = answers.shift();
    if (!next) throw new Error(`unexpected request ${s.method} ${s.path}`);
    const { status = 200, body } = next(s);
    return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
  }) as unknown as typeof fetch;
  return { sent, fd: new Flightdeck("http://fd.test/", "fdk_test", { fetch: fetcher, agent: "billing-agent" }) };
}

function entry(fields: Record<string, unknown> = {}) {
  return {
    id: "call_1",
    idempotency_key: "k".repeat(64),
    natural_key: "fd-0123456789ab",
    run_id: "run-1",
    step_index: 3,
    tool: "send_email",
    arguments: { to: "ana@example.com" },
    state: "started",
    attempts: 1,
    deduped: 0,
    ...fields,
  };
}
const answer = (a: CallAnswer["answer"], fields: Record<string, unknown> = {}, extra: Record<string, unknown> = {}) =>
  () => ({ body: { answer: a, call: entry(fields), ...extra } });
const ask = { tool: "send_email", args: { to: "ana@example.com" }, runId: "run-1", step: 3 };

test("waiting repeats the same POST with wait until the answer is final", async () => {
  const { sent, fd } = scripted([
    answer("approval_required", { state: "awaiting_approval", approval_id: "apr_1" }),
    answer("approval_required", { state: "awaiting_approval", approval_id: "apr_1" }),
    answer("proceed", { approval_id: "apr_1" }, { approved_arguments: { to: "bo@example.com" }, message: "Bo, not Ana" }),
  ]);
  const call = await fd.ask({ ...ask, display: [{ label: "To", value: "ana@example.com", argument: "to" }] });
  assert.equal(sent.length, 3);
  for (const s of sent) {
    assert.equal(s.method, "POST");
    assert.equal(s.path, "/api/v1/calls");
    assert.ok(s.body.wait > 0 && s.body.wait <= 60, `wait ${s.body.wait}`);
    assert.deepEqual({ ...s.body, wait: 0 }, { ...sent[0].body, wait: 0 });
  }
  assert.deepEqual(sent[0].body.display, [{ label: "To", value: "ana@example.com", argument: "to" }]);
  assert.equal(sent[0].body.agent, "billing-agent");
  assert.equal(sent[0].body.step_index, 3);
  assert.equal(call.answer, "proceed");
  assert.ok(call.changed);
  assert.deepEqual(call.arguments, { to: "bo@example.com" });
  assert.equal(call.message, "Bo, not Ana");
  assert.equal(call.approvalId, "apr_1");
});

test("a denial throws CallDenied with the approver's message; unknown outcomes throw CallOutcomeUnknown", async () => {
  const { fd } = scripted([
    answer("denied", { state: "denied", approval_id: "apr_2" }, { message: "not this customer" }),
    answer("outcome_unknown", { state: "unknown" }),
  ]);
  await assert.rejects(fd.ask(ask), (e: unknown) => {
    assert.ok(e instanceof CallDenied);
    assert.equal(e.reason, "not this customer");
    assert.match(e.message, /send_email: denied \(apr_2\): not this customer/);
    return true;
  });
  await assert.rejects(fd.ask({ ...ask, wait: 0 }), CallOutcomeUnknown);
});

test("a refusal keeps the server's message and status; a transient failure while waiting is ridden out", async () => {
  const { fd } = scripted([() => ({ status: 400, body: { error: { status: 400, message: "`tool` is required" } } })]);
  await assert.rejects(fd.ask(ask), (e: unknown) => {
    assert.ok(e instanceof FlightdeckError);
    assert.equal(e.status, 400);
    assert.match(e.message, /POST \/api\/v1\/calls: 400 `tool` is required/);
    return true;
  });
  const flaky = scripted([
    answer("in_progress"),
    () => ({ status: 503, body: { error: { status: 503, message: "restarting" } } }),
    answer("already_done", { state: "succeeded", external_id: "msg_1", response: { id: "msg_1" } }),
  ]);
  const call = await flaky.fd.ask({ ...ask, wait: 30 });
  assert.ok(call.done);
  assert.equal(flaky.sent.length, 3);
});

test("guarded() runs the function on proceed and reports ok with its result; not when already done", async () => {
  const { sent, fd } = scripted([
    answer("proceed"),
    (s) => ({ body: entry({ state: "succeeded", external_id: s.body.external_id, response: s.body.response }) }),
    answer("already_done", { state: "succeeded", external_id: "msg_42", response: { id: "msg_42" } }),
  ]);
  let runs = 0;
  const send = async () => {
    runs++;
    return { id: "msg_42" };
  };
  const first = await fd.guarded(ask, send, { externalId: (r) => r.id });
  assert.deepEqual(first, { id: "msg_42" });
  assert.equal(sent[1].path, "/api/v1/calls/call_1/complete");
  assert.deepEqual(sent[1].body, { outcome: "ok", external_id: "msg_42", response: { id: "msg_42" } });
  const second = await fd.guarded(ask, send);
  assert.deepEqual(second, { id: "msg_42" });
  assert.equal(runs, 1);
});

test("guarded() reports an error and rethrows it", async () => {
  const { sent, fd } = scripted([answer("proceed"), () => ({ body: entry({ state: "failed" }) })]);
  await assert.rejects(
    fd.guarded(ask, async () => {
      throw new TypeError("550 mailbox unavailable");
    }),
    TypeError,
  );
  assert.deepEqual(sent[1].body, { outcome: "error", error: "TypeError: 550 mailbox unavailable" });
});

test("the active span gets tool.idempotency_key, tool.outcome, tool.external_id and approval.id", async () => {
  const storage = new AsyncLocalStorage<Context>();
  const manager: ContextManager = {
    active: () => storage.getStore() ?? ROOT_CONTEXT,
    with: (ctx, fn, thisArg, ...args) => storage.run(ctx, () => fn.call(thisArg, ...args)),
    bind: (_ctx, target) => target,
    enable() {
      return this;
    },
    disable() {
      return this;
    },
  };
  context.setGlobalContextManager(manager);
  const spans: Array<Record<string, unknown>> = [];
  const span = (): Span => {
    const attributes: Record<string, unknown> = {};
    spans.push(attributes);
    return {
      isRecording: () => true,
      setAttribute(key: string, value: unknown) {
        attributes[key] = value;
        return this;
      },
    } as unknown as Span;
  };
  const inSpan = <T>(fn: () => Promise<T>) => context.with(trace.setSpan(context.active(), span()), fn);
  const { fd } = scripted([
    answer("proceed", { approval_id: "apr_9" }),
    () => ({ body: entry({ state: "succeeded", external_id: "msg_7", approval_id: "apr_9" }) }),
    answer("already_done", { state: "succeeded", external_id: "msg_7" }),
    answer("denied", { state: "denied", approval_id: "apr_3" }, { message: "no" }),
    answer("proceed"),
    () => ({ body: entry({ state: "failed" }) }),
  ]);
  await inSpan(() => fd.guarded(ask, async () => ({ id: "msg_7" }), { externalId: (r) => r.id }));
  await inSpan(() => fd.guarded(ask, async () => assert.fail("must not run")));
  await inSpan(() => fd.guarded(ask, async () => null)).catch(() => undefined);
  await inSpan(() =>
    fd.guarded(ask, async () => {
      throw new Error("boom");
    }),
  ).catch(() => undefined);
  const key = "k".repeat(64);
  assert.deepEqual(spans, [
    { "tool.idempotency_key": key, "tool.outcome": "ok", "tool.external_id": "msg_7", "approval.id": "apr_9" },
    { "tool.idempotency_key": key, "tool.outcome": "deduped", "tool.external_id": "msg_7" },
    { "tool.idempotency_key": key, "tool.outcome": "denied", "approval.id": "apr_3" },
    { "tool.idempotency_key": key, "tool.outcome": "error" },
  ]);
  context.disable();
});
