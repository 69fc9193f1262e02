// An OpenAI Agents SDK run interrupted for approval, serialized, and resumed from the
// string by a new agent, adapter and model (as another process would): the guarded calls
// keep their steps (create_ticket 0, send_email 1), so the resumed run waits for the same
// approval instead of filing another.
import { randomUUID } from "node:crypto";
import { Agent, RunState, Usage, run, setTracingDisabled, type Model, type ModelResponse } from "@openai/agents";
import { z } from "zod";
import { Flightdeck } from "../../src/index.js";
import { flightdeckAgents } from "../../src/openai-agents.js";

setTracingDisabled(true);

type Output = ModelResponse["output"];
const call = (name: string, args: object): Output => [
  { type: "function_call", callId: `call_${randomUUID()}`, name, arguments: JSON.stringify(args), status: "completed" },
];
const say = (text: string): Output => [
  { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] },
];

function model(turns: Output[]): Model {
  return {
    async getResponse() {
      const output = turns.shift();
      if (!output) throw new Error("the script has no more turns");
      return { usage: new Usage(), output, responseId: randomUUID() };
    },
    getStreamedResponse() {
      throw new Error("not scripted");
    },
  };
}

export async function resumeAcrossProcesses(o: { url: string; token: string; runId: string }) {
  let tickets = 0;
  let emails = 0;
  const build = (turns: Output[]) => {
    const guard = flightdeckAgents(new Flightdeck(o.url, o.token), { runId: o.runId, wait: 60 });
    const tools = [
      guard.tool({
        name: "create_ticket",
        description: "Open a ticket",
        parameters: z.object({ title: z.string() }),
        execute: async () => ({ id: `T-${++tickets}` }),
      }),
      guard.tool({
        name: "send_email",
        description: "Send an email",
        parameters: z.object({ to: z.string() }),
        execute: async () => ({ id: `msg-${++emails}` }),
      }),
    ];
    return { guard, agent: new Agent({ name: "support", instructions: "Help.", model: model(turns), tools }) };
  };
  // "Process" one: the SDK's own run stops on the interruption; the state is saved.
  const first = build([call("create_ticket", { title: "Refund 77" }), call("send_email", { to: "ana@example.com" })]);
  const stopped = await run(first.agent, "Refund order 77 and tell Ana");
  if (stopped.interruptions.length !== 1) throw new Error(`expected one interruption, got ${stopped.interruptions.length}`);
  const saved = stopped.state.toString();
  // "Process" two: nothing in memory but the saved string.
  const second = build([say("Refunded and told Ana.")]);
  const state = await RunState.fromString(second.agent, saved);
  const result = await second.guard.run(second.agent, state);
  return { output: result.finalOutput, tickets, emails };
}
