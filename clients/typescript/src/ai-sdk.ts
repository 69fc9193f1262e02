// The Vercel AI SDK (`ai`) adapter. A guarded tool's `needsApproval` asks Flightdeck:
// when the tool's policy needs a person, generateText/streamText stop with the SDK's own
// `tool-approval-request`; `decide` waits for the decision in Flightdeck and answers with
// `tool-approval-response` parts (a denial carries the approver's message, which the model
// reads). The tool's execution is the guarded call: it runs once per run and step, with
// the arguments the approver approved. The SDK's approval cannot carry edited arguments,
// so an edit reaches the tool through the guarded call. Only types are imported from `ai`.

import type { ModelMessage, Tool, ToolApprovalResponse, ToolExecutionOptions } from "ai";
import type { Flightdeck } from "./client.js";
import { Guard, type GuardOptions, type ToolGuard } from "./adapter.js";

export type { GuardOptions, ToolGuard } from "./adapter.js";

/** What `decide` reads of a generateText / streamText result (after it finished). */
export interface StepResult {
  content: ReadonlyArray<{ type: string; approvalId?: string; isAutomatic?: boolean; toolCall?: { toolCallId: string } }>;
  responseMessages?: ModelMessage[];
  response?: { messages?: ModelMessage[] };
}

/** The tool calls a conversation holds an approval request for. */
function requested(messages: readonly ModelMessage[] = []): Set<string> {
  const ids = new Set<string>();
  for (const message of messages) {
    if (message.role !== "assistant" || typeof message.content === "string") continue;
    for (const part of message.content) if (part.type === "tool-approval-request") ids.add(part.toolCallId);
  }
  return ids;
}

/** The guarded tools' calls in a conversation, oldest first. */
function toolCalls(messages: readonly ModelMessage[] = []): Array<{ callId: string; tool: string }> {
  const calls: Array<{ callId: string; tool: string }> = [];
  for (const message of messages) {
    if (message.role !== "assistant" || typeof message.content === "string") continue;
    for (const part of message.content) {
      if (part.type === "tool-call") calls.push({ callId: part.toolCallId, tool: part.toolName });
    }
  }
  return calls;
}

export class FlightdeckAiSdk {
  readonly guard: Guard;

  constructor(fd: Flightdeck, options: GuardOptions) {
    this.guard = new Guard(fd, options);
  }

  /** The tool with Flightdeck in front, under the name the model calls it by. */
  tool<T extends Tool<any, any>>(name: string, tool: T, guard: ToolGuard<any, any> = {}): T {
    const execute = tool.execute;
    if (!execute) throw new Error(`${name}: a guarded tool needs an execute function`);
    if (tool.needsApproval !== undefined) {
      throw new Error(`${name}: Flightdeck's tool policy decides approval; do not set needsApproval`);
    }
    this.guard.tools.add(name);
    return {
      ...tool,
      needsApproval: async (input: object, options: { toolCallId: string; messages?: ModelMessage[] }) => {
        this.guard.seed(toolCalls(options.messages));
        const held = requested(options.messages).has(options.toolCallId);
        return this.guard.needsApproval(name, options.toolCallId, input, guard, held);
      },
      execute: async (input: object, options: ToolExecutionOptions<any>) =>
        this.guard.execute(name, options.toolCallId, input, (args) => execute(args as never, options), guard),
    } as T;
  }

  /** Each tool of a tool set with Flightdeck in front (`guards`: display and external id
   * per tool). */
  tools<TOOLS extends Record<string, Tool<any, any>>>(
    tools: TOOLS,
    guards: { [K in keyof TOOLS]?: ToolGuard<any, any> } = {},
  ): TOOLS {
    const out: Record<string, Tool<any, any>> = {};
    for (const [name, tool] of Object.entries(tools)) out[name] = this.tool(name, tool, guards[name]);
    return out as TOOLS;
  }

  /** Waits for Flightdeck's decision on each guarded approval request of a result and
   * returns the `tool-approval-response` parts to send back (in a `tool` message). */
  async decide(result: StepResult): Promise<ToolApprovalResponse[]> {
    const responses: ToolApprovalResponse[] = [];
    for (const part of result.content) {
      if (part.type !== "tool-approval-request" || part.isAutomatic || !part.toolCall || !part.approvalId) continue;
      const decision = await this.guard.decide(part.toolCall.toolCallId);
      if (!decision) continue;
      responses.push(
        decision.approve
          ? { type: "tool-approval-response", approvalId: part.approvalId, approved: true }
          : { type: "tool-approval-response", approvalId: part.approvalId, approved: false, reason: decision.message },
      );
    }
    return responses;
  }

  /** Calls `step` (e.g. `(messages) => generateText({model, tools, messages})`) until no
   * guarded approval is pending, answering each with Flightdeck's decision. Returns the
   * last result and the whole conversation. */
  async run<R extends StepResult>(
    step: (messages: ModelMessage[]) => Promise<R>,
    messages: ModelMessage[],
  ): Promise<{ result: R; messages: ModelMessage[] }> {
    let history = [...messages];
    for (;;) {
      const result = await step(history);
      history = [...history, ...(result.responseMessages ?? result.response?.messages ?? [])];
      const responses = await this.decide(result);
      if (responses.length === 0) return { result, messages: history };
      history.push({ role: "tool", content: responses });
    }
  }
}

/** A Flightdeck adapter for one run of the Vercel AI SDK. */
export function flightdeckAiSdk(fd: Flightdeck, options: GuardOptions): FlightdeckAiSdk {
  return new FlightdeckAiSdk(fd, options);
}
