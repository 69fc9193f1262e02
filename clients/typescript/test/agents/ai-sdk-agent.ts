// A Vercel AI SDK agent (generateText) with one guarded tool (send_email, which appends a
// line to an outbox file) and the SDK's mock model: step 1 calls the tool, step 2 reads
// what the tool returned (or why it was denied) and answers. Run in-process by the tests,
// or as a child process (`node ai-sdk-agent.js`, settings in the environment) that the
// kill test kills after the tool ran and reported, while the model is on its next step.
import { appendFileSync } from "node:fs";
import { randomUUID } from "node:crypto";
import { pathToFileURL } from "node:url";
import * as ai7 from "ai";
import * as ai7test from "ai/test";
import { z } from "zod";
import { Flightdeck } from "../../src/index.js";
import { flightdeckAiSdk } from "../../src/ai-sdk.js";

type Event = Record<string, unknown>;

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** What the tool returned to the model (or why it was denied), as the model's prompt has it. */
function toolOutputs(prompt: Array<{ role: string; content: unknown }>): string[] {
  const out: string[] = [];
  for (const message of prompt) {
    if (message.role !== "tool" || !Array.isArray(message.content)) continue;
    for (const part of message.content as Array<Record<string, any>>) {
      if (part.type !== "tool-result") continue;
      const o = part.output;
      out.push(o.type === "execution-denied" ? `denied: ${o.reason}` : typeof o.value === "string" ? o.value : JSON.stringify(o.value));
    }
  }
  return out;
}

export interface Options {
  url: string;
  token: string;
  runId: string;
  outbox: string;
  to?: string;
  hang?: boolean;
  log?: (event: Event) => void;
  /** The package to run: "ai" (7, the default) or "ai-v6" (AI SDK 6, an alias). */
  ai?: "ai" | "ai-v6";
}

/** The AI SDK's generateText, stepCountIs, tool and its mock model, of the version asked. */
async function sdk(name: "ai" | "ai-v6" = "ai"): Promise<{ ai: typeof ai7; test: typeof ai7test }> {
  if (name === "ai") return { ai: ai7, test: ai7test };
  const [ai, test] = await Promise.all([import(name), import(`${name}/test`)]);
  return { ai, test };
}

export async function emailAgent(o: Options) {
  const log = o.log ?? (() => undefined);
  const { ai, test } = await sdk(o.ai);
  const { generateText, stepCountIs, tool } = ai;
  const fd = new Flightdeck(o.url, o.token);
  const guard = flightdeckAiSdk(fd, {
    runId: o.runId,
    agent: "ai-sdk-mailer",
    onWait: ({ answer }) => log({ event: "waiting", answer: answer.answer, approval: answer.call.approval_id }),
  });
  const tools = guard.tools(
    {
      send_email: tool({
        description: "Send an email",
        inputSchema: z.object({ to: z.string(), subject: z.string() }),
        execute: async ({ to, subject }) => {
          appendFileSync(o.outbox, JSON.stringify({ run: o.runId, to, subject }) + "\n");
          log({ event: "tool-ran", to, subject });
          return { id: `msg-${randomUUID().slice(0, 8)}`, to };
        },
      }),
    },
    {
      send_email: {
        display: (args: { to: string }) => [{ label: "To", value: args.to, argument: "to" }],
        externalId: (result: { id: string }) => result.id,
      },
    },
  );
  let seen: string[] = [];
  // A new call id in every process, as a real model gives: the step (the call's position
  // in the run) is what finds the earlier call on a re-run.
  const toolCallId = `call_${randomUUID()}`;
  let turn = 0;
  const model = new test.MockLanguageModelV3({
    doGenerate: async (options: { prompt: unknown }) => {
      const prompt = options.prompt as Array<{ role: string; content: unknown }>;
      const hasResult = toolOutputs(prompt).length > 0;
      turn++;
      if (!hasResult) {
        return {
          content: [
            {
              type: "tool-call",
              toolCallId,
              toolName: "send_email",
              input: JSON.stringify({ to: o.to ?? "ana@example.com", subject: "Invoice 77" }),
            },
          ],
          finishReason: { unified: "tool-calls", raw: "tool_calls" },
          usage,
          warnings: [],
        };
      }
      seen = toolOutputs(prompt);
      log({ event: "model-turn-2", seen, turn });
      if (o.hang) await new Promise((resolve) => setTimeout(resolve, 600_000));
      return {
        content: [{ type: "text", text: `done: ${seen.join(" | ")}` }],
        finishReason: { unified: "stop", raw: "stop" },
        usage,
        warnings: [],
      };
    },
  });
  const { result } = await guard.run(
    (messages) => generateText({ model, tools, messages, stopWhen: stepCountIs(5) }),
    [{ role: "user", content: "Send invoice 77 to Ana" }],
  );
  log({ event: "finished", output: result.text });
  return { output: result.text, seen };
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const env = process.env;
  emailAgent({
    url: env.FD_URL!,
    token: env.FD_TOKEN!,
    runId: env.FD_RUN_ID!,
    outbox: env.FD_OUTBOX!,
    hang: env.FD_HANG === "1",
    ai: env.FD_AI === "ai-v6" ? "ai-v6" : "ai",
    log: (event) => console.log(JSON.stringify(event)),
  }).then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
