// The OpenAI Agents SDK (@openai/agents) adapter. A guarded tool's `needsApproval` asks
// Flightdeck: when the tool's policy needs a person the run stops on the SDK's own
// interruption; `run` waits for the decision in Flightdeck and approves or rejects the
// interruption (the approver's message is the rejection the model reads). The tool's
// execution is the guarded call: it runs once per run and step, with the arguments the
// approver approved. The SDK's approval cannot carry edited arguments, so an edit reaches
// the tool through the guarded call.

import {
  RunState,
  run as runAgent,
  tool as functionTool,
  type Agent,
  type FunctionTool,
  type RunResult,
  type RunToolApprovalItem,
  type ToolExecuteArgument,
  type ToolInputParameters,
  type ToolOptions,
  type ToolOutputSchema,
} from "@openai/agents";
import type { Flightdeck } from "./client.js";
import { Guard, type GuardOptions, type ToolGuard } from "./adapter.js";

export type { GuardOptions, ToolGuard } from "./adapter.js";

type AnyAgent = Agent<any, any>;
type RunInput = Parameters<typeof runAgent>[1];
type RunOptions = Parameters<typeof runAgent>[2];

const callIdOf = (item: RunToolApprovalItem): string | undefined => (item.rawItem as { callId?: string }).callId;

export class FlightdeckAgents {
  readonly guard: Guard;

  constructor(fd: Flightdeck, options: GuardOptions) {
    this.guard = new Guard(fd, options);
  }

  /** `tool(...)` with Flightdeck in front: the same options (a `name` is required), plus
   * `display` (fields shown to the approver) and `externalId` (from the result). */
  tool<
    TParameters extends ToolInputParameters = undefined,
    Context = unknown,
    Result = string,
    TOutputSchema extends ToolOutputSchema | undefined = undefined,
  >(
    options: ToolOptions<TParameters, Context, TOutputSchema> & ToolGuard<ToolExecuteArgument<TParameters>, unknown>,
  ): FunctionTool<Context, TParameters, Result> {
    const { display, externalId, execute, needsApproval, ...rest } = options as any;
    const name: string | undefined = rest.name;
    if (!name) throw new Error("a guarded tool needs a `name`");
    if (needsApproval !== undefined) {
      throw new Error(`${name}: Flightdeck's tool policy decides approval; do not set needsApproval`);
    }
    this.guard.tools.add(name);
    const guard = { display, externalId };
    return functionTool({
      ...rest,
      needsApproval: async (_ctx: unknown, input: object, callId?: string) =>
        this.guard.needsApproval(name, required(name, callId), input, guard),
      execute: async (input: object, ctx: unknown, details?: { toolCall?: { callId?: string } }) =>
        this.guard.execute(name, required(name, details?.toolCall?.callId), input, (args) => execute(args, ctx, details), guard),
    }) as unknown as FunctionTool<Context, TParameters, Result>;
  }

  /** `run(agent, input)` that resolves the guarded tools' interruptions with Flightdeck's
   * decisions and runs on until the agent finishes (or stops on an interruption that is
   * not a guarded tool's: then the result is returned for the caller to decide). */
  async run<TAgent extends AnyAgent>(agent: TAgent, input: RunInput, options?: RunOptions): Promise<RunResult<any, TAgent>> {
    if (input instanceof RunState) this.seed(input);
    let result = (await runAgent(agent, input, options as any)) as RunResult<any, TAgent>;
    for (;;) {
      this.seed(result.state);
      const decided = await this.decide(result.state, result.interruptions ?? []);
      if (decided === 0) return result;
      result = (await runAgent(agent, result.state, options as any)) as RunResult<any, TAgent>;
    }
  }

  /** Waits for Flightdeck's decision on each guarded interruption and approves or rejects
   * it on the state (for callers running their own loop). Returns how many it decided. */
  async decide(state: RunState<any, any>, interruptions: RunToolApprovalItem[] = state.getInterruptions()): Promise<number> {
    let decided = 0;
    for (const item of interruptions) {
      const callId = callIdOf(item);
      const decision = callId === undefined ? undefined : await this.guard.decide(callId);
      if (!decision) continue;
      if (decision.approve) state.approve(item);
      else state.reject(item, { message: decision.message });
      decided++;
    }
    return decided;
  }

  /** Numbers the guarded calls in a run's history (a state resumed in a new process). */
  seed(state: RunState<any, any>): void {
    const calls = (state.history as Array<{ type?: string; callId?: string; name?: string }>)
      .filter((item) => item.type === "function_call" && item.callId && item.name)
      .map((item) => ({ callId: item.callId!, tool: item.name! }));
    this.guard.seed(calls);
  }
}

function required(tool: string, callId: string | undefined): string {
  if (!callId) throw new Error(`${tool}: the SDK gave no tool call id`);
  return callId;
}

/** A Flightdeck adapter for one run of the OpenAI Agents SDK. */
export function flightdeckAgents(fd: Flightdeck, options: GuardOptions): FlightdeckAgents {
  return new FlightdeckAgents(fd, options);
}
