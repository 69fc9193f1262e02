// Both framework adapters with the framework's real package and a scripted model against a
// real Flightdeck (FLIGHTDECK_BIN), as the issue asks: an approved call runs once, a denied
// call does not run and the model receives the reason, an edited call runs with the edited
// arguments, and a run killed after the tool ran (and reported) and run again does not
// run it again.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Flightdeck as Server, skipWithoutServer } from "./support/flightdeck.js";
import * as openaiAgent from "./agents/openai-agent.js";
import * as aiSdkAgent from "./agents/ai-sdk-agent.js";
import { resumeAcrossProcesses } from "./agents/openai-resume.js";

const POLICIES = `
[[tool_policies]]
pattern = "send_email"
side_effect = "irreversible"
requires_approval = true

[[tool_policies]]
pattern = "create_ticket"
side_effect = "write"
`;

// The versions package.json pins: @openai/agents 0.20.0; ai 7.0.185 and ai 6.0.333 (as
// the alias ai-v6: AI SDK 7 declares Node 22+, 6 declares Node 18+).
const FRAMEWORKS = [
  { name: "OpenAI Agents SDK", module: openaiAgent, script: "agents/openai-agent.js", agent: "agents-sdk-mailer", ai: undefined },
  { name: "Vercel AI SDK 7", module: aiSdkAgent, script: "agents/ai-sdk-agent.js", agent: "ai-sdk-mailer", ai: "ai" as const },
  { name: "Vercel AI SDK 6", module: aiSdkAgent, script: "agents/ai-sdk-agent.js", agent: "ai-sdk-mailer", ai: "ai-v6" as const },
];

const lines = (file: string) => (existsSync(file) ? readFileSync(file, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);

describe("the framework adapters against a real Flightdeck", { skip: skipWithoutServer }, () => {
  let server: Server;
  let dir: string;
  before(async () => {
    server = await Server.start(POLICIES);
    dir = mkdtempSync(join(tmpdir(), "fd-ts-outbox-"));
  });
  after(async () => {
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const [n, fw] of FRAMEWORKS.entries()) {
    const agent = (runId: string, outbox: string) =>
      fw.module.emailAgent({ url: server.url, token: server.token, runId, outbox, ai: fw.ai });

    test(`${fw.name}: an approved call runs once; the approver saw the exact call`, async () => {
      const runId = `approve-${n}`;
      const outbox = join(dir, `${runId}.jsonl`);
      const run = agent(runId, outbox);
      const pending = await server.pendingApproval(runId, "send_email");
      assert.deepEqual(JSON.parse(pending.arguments), { to: "ana@example.com", subject: "Invoice 77" });
      assert.deepEqual(pending.display, [{ label: "To", value: "ana@example.com", argument: "to" }]);
      assert.equal(pending.agent, fw.agent);
      assert.equal(pending.step_index, 0);
      await server.decide(pending, "approve");
      const { seen } = await run;
      assert.deepEqual(lines(outbox).map((l) => l.to), ["ana@example.com"]);
      assert.equal(seen.length, 1);
      assert.match(seen[0], /"to":"ana@example.com"/);
      const [call] = await server.runCalls(runId);
      assert.equal(call.entry.state, "succeeded");
      assert.equal(call.entry.attempts, 1);
      assert.equal(call.entry.approval_id, pending.id);
      assert.match(call.entry.external_id, /^msg-/);
    });

    test(`${fw.name}: a denied call does not run and the model receives the approver's message`, async () => {
      const runId = `deny-${n}`;
      const outbox = join(dir, `${runId}.jsonl`);
      const run = agent(runId, outbox);
      await server.decide(await server.pendingApproval(runId), "deny", {
        reason: "wrong customer",
        respond: "Do not email Ana; ask billing who the contact is",
      });
      const { seen, output } = await run;
      assert.deepEqual(lines(outbox), []);
      assert.equal(seen.length, 1);
      assert.match(seen[0], /Do not email Ana; ask billing who the contact is/);
      assert.match(output, /ask billing/);
      const [call] = await server.runCalls(runId);
      assert.equal(call.entry.state, "denied");
    });

    test(`${fw.name}: an edited call runs with the edited arguments`, async () => {
      const runId = `edit-${n}`;
      const outbox = join(dir, `${runId}.jsonl`);
      const run = agent(runId, outbox);
      const pending = await server.pendingApproval(runId);
      await server.decide(pending, "approve", {
        arguments: { to: "bo@example.com", subject: "Invoice 77 (corrected)" },
        respond: "Bo handles invoices",
      });
      const { seen } = await run;
      assert.deepEqual(lines(outbox).map((l) => [l.to, l.subject]), [["bo@example.com", "Invoice 77 (corrected)"]]);
      assert.match(seen[0], /"to":"bo@example.com"/);
      const [call] = await server.runCalls(runId);
      assert.equal(call.entry.state, "succeeded");
    });

    test(`${fw.name}: a run killed after the tool ran and reported, run again, does not run it again`, async () => {
      const runId = `kill-${n}`;
      const outbox = join(dir, `${runId}.jsonl`);
      const script = fileURLToPath(new URL(fw.script, import.meta.url));
      const start = (hang: boolean) => {
        const child = spawn(process.execPath, [script], {
          env: { ...process.env, FD_URL: server.url, FD_TOKEN: server.token, FD_RUN_ID: runId, FD_OUTBOX: outbox, FD_HANG: hang ? "1" : "", FD_AI: fw.ai ?? "" },
          stdio: ["ignore", "pipe", "pipe"],
        });
        const events: Array<Record<string, any>> = [];
        let stderr = "";
        child.stderr!.on("data", (d) => (stderr += d));
        const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
          child.on("exit", (code, signal) => resolve({ code, signal })),
        );
        const reader = createInterface({ input: child.stdout! });
        return { child, events, exited, reader, stderr: () => stderr };
      };

      // First run: a person approves; the tool runs and reports; the process is killed
      // while the model is on its next turn (before the agent finished).
      const first = start(true);
      for await (const line of first.reader) {
        const event = JSON.parse(line);
        first.events.push(event);
        if (event.event === "waiting") await server.decide(await server.pendingApproval(runId), "approve");
        if (event.event === "model-turn-2") {
          first.child.kill("SIGKILL");
          break;
        }
      }
      const killed = await first.exited;
      assert.equal(killed.signal, "SIGKILL", first.stderr());
      assert.ok(!first.events.some((e) => e.event === "finished"));
      assert.equal(lines(outbox).length, 1);
      const [done] = await server.runCalls(runId);
      assert.equal(done.entry.state, "succeeded");

      // The re-run: the same run id; the model calls the tool again (with a new call id).
      const second = start(false);
      for await (const line of second.reader) second.events.push(JSON.parse(line));
      const rerun = await second.exited;
      assert.equal(rerun.code, 0, second.stderr());
      const kinds = second.events.map((e) => e.event);
      assert.ok(!kinds.includes("tool-ran"), `the tool ran again: ${kinds}`);
      assert.ok(!kinds.includes("waiting"), `a person was asked again: ${kinds}`);
      assert.ok(kinds.includes("finished"));
      assert.equal(lines(outbox).length, 1, "the email was sent once");
      // The model of the re-run received what the first run's tool returned.
      const turn2 = second.events.find((e) => e.event === "model-turn-2")!;
      assert.match(turn2.seen[0], new RegExp(done.entry.external_id));
      const [after] = await server.runCalls(runId);
      assert.equal(after.entry.attempts, 1);
      assert.equal(after.entry.deduped, 1);
      assert.equal((await server.runApprovals(runId)).length, 1, "one approval request in all");
    });
  }

  test("OpenAI Agents SDK: a run resumed from its serialized state in a new process keeps its steps and its approval", async () => {
    const runId = "resume-0";
    const done = resumeAcrossProcesses({ url: server.url, token: server.token, runId });
    const pending = await server.pendingApproval(runId, "send_email");
    assert.equal(pending.step_index, 1, "create_ticket was step 0");
    await server.decide(pending, "approve");
    const { tickets, emails } = await done;
    assert.equal(tickets, 1);
    assert.equal(emails, 1);
    assert.equal((await server.runApprovals(runId)).length, 1, "the resumed run asked no one again");
    const calls = (await server.runCalls(runId)).map((c) => [c.entry.tool, c.entry.step_index, c.entry.state]);
    assert.deepEqual(calls.sort(), [["create_ticket", 0, "succeeded"], ["send_email", 1, "succeeded"]]);
  });
});
