// An OpenAI Agents SDK agent with one guarded tool (send_email, which appends a line to an
// outbox file) and a scripted model: turn 1 calls the tool, turn 2 reads what the tool
// returned (or why it was rejected) and answers. Run in-process by the tests, or as a
// child process (`node openai-agent.js`, settings in the environment) that the kill test
// kills after the tool ran and reported, while the model is on its next turn.
import { appendFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import { Agent, Usage, setTracingDisabled, type Model, type ModelRequest, type ModelResponse } from "@openai/agents";
import { z } from "zod";
import { Flightdeck } from "../../src/index.js";
import { flightdeckAgents } from "../../src/openai-agents.js";

setTracingDisabled(true);

type Event = Record<string, unknown>;

/** A model that answers from a script, one function per turn. */
class ScriptedModel implements Model {
  readonly requests: ModelRequest[] = [];
  constructor(private readonly turns: Array<(request: ModelRequest) => Promise<ModelResponse["output"]>>) {}
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const turn = this.turns.shift();
    if (!turn) throw new Error("the script has no more turns");
    return { usage: new Usage(), output: await turn(request), responseId: randomUUID() };
  }
  getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not scripted");
  }
}

/** What the tool returned to the model (or the rejection it was given), by call id. */
function toolOutputs(request: ModelRequest): string[] {
  const items = (typeof request.input === "string" ? [] : request.input) as any[];
  return items
    .filter((item) => item.type === "function_call_result")
    .map((item) => (typeof item.output === "string" ? item.output : (item.output?.text ?? JSON.stringify(item.output))));
}

export interface Options {
  url: string;
  token: string;
  runId: string;
  outbox: string;
  to?: string;
  /** Hang on the model's second turn (the tool ran and reported) until killed. */
  hang?: boolean;
  log?: (event: Event) => void;
}

export async function emailAgent(o: Options) {
  const log = o.log ?? (() => undefined);
  const fd = new Flightdeck(o.url, o.token);
  const guard = flightdeckAgents(fd, {
    runId: o.runId,
    agent: "agents-sdk-mailer",
    onWait: ({ answer }) => log({ event: "waiting", answer: answer.answer, approval: answer.call.approval_id }),
  });
  const sendEmail = guard.tool({
    name: "send_email",
    description: "Send an email",
    parameters: z.object({ to: z.string(), subject: z.string() }),
    display: (args) => [{ label: "To", value: args.to, argument: "to" }],
    externalId: (result: any) => result.id,
    execute: async ({ to, subject }) => {
      appendFileSync(o.outbox, JSON.stringify({ run: o.runId, to, subject }) + "\n");
      log({ event: "tool-ran", to, subject });
      return { id: `msg-${randomUUID().slice(0, 8)}`, to };
    },
  });
  let seen: string[] = [];
  // A new call id in every process, as a real model gives: the step (the call's position
  // in the run) is what finds the earlier call on a re-run.
  const callId = `call_${randomUUID()}`;
  const model = new ScriptedModel([
    async () => [
      {
        type: "function_call",
        callId,
        name: "send_email",
        arguments: JSON.stringify({ to: o.to ?? "ana@example.com", subject: "Invoice 77" }),
        status: "completed",
      },
    ],
    async (request) => {
      seen = toolOutputs(request);
      log({ event: "model-turn-2", seen });
      if (o.hang) await new Promise((resolve) => setTimeout(resolve, 600_000));
      return [
        {
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: `done: ${seen.join(" | ")}` }],
        },
      ];
    },
  ]);
  const agent = new Agent({ name: "mailer", instructions: "Send the emails you are asked to.", model, tools: [sendEmail] });
  const result = await guard.run(agent, "Send invoice 77 to Ana");
  log({ event: "finished", output: result.finalOutput });
  return { output: result.finalOutput as string, seen, interruptions: result.interruptions?.length ?? 0 };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const env = process.env;
  emailAgent({
    url: env.FD_URL!,
    token: env.FD_TOKEN!,
    runId: env.FD_RUN_ID!,
    outbox: env.FD_OUTBOX!,
    hang: env.FD_HANG === "1",
    log: (event) => console.log(JSON.stringify(event)),
  }).then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
