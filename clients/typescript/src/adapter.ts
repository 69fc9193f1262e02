// What both framework adapters share: a framework's approval point asks the ledger (and
// turns `approval_required` into the framework's own approval request), the decision a
// person takes in Flightdeck approves or rejects it, and the tool's execution is the
// guarded call (run once, with the approved, possibly edited, arguments).
//
// The step of a call is its position among the guarded tools' calls in the run, in the
// order the framework shows them (first sight, or the history on a resume): a re-run of
// the same run makes the same calls in the same order, so it finds the same keys.

import {
  type AskOptions,
  type Call,
  type CallAnswer,
  type DisplayField,
  Flightdeck,
  FlightdeckError,
  storable,
} from "./client.js";

export interface GuardOptions {
  /** The run's id: the same on a re-run, so the ledger finds what was done. */
  runId: string;
  /** The agent's name, shown to approvers (default: the client's). */
  agent?: string;
  /** Seconds to wait for a person's decision (or another attempt) per call; default 3600. */
  wait?: number;
  /** Called when a call waits: for a person (`approval_required`, with
   * `answer.call.approval_id`), another attempt (`in_progress`) or a settlement
   * (`outcome_unknown`). */
  onWait?: (event: { tool: string; callId: string; answer: CallAnswer }) => void;
}

export interface ToolGuard<A, R> {
  /** The fields shown to the approver beside the arguments. */
  display?: (args: A) => DisplayField[];
  /** The external id to report, from the tool's result. */
  externalId?: (result: R) => string | undefined | null;
}

/** The framework's approval decision for a call. */
export type Decision = { approve: true } | { approve: false; message: string };

interface Record_ {
  step: number;
  tool: string;
  /** The latest answer seen for the call. */
  answer?: CallAnswer;
  /** A `proceed` or `already_done` the tool's execution is to use (an attempt held). */
  held?: CallAnswer;
  /** The framework holds the call for approval: its decision stands. */
  requested?: boolean;
  /** What the call was asked with, to ask again. */
  ask?: AskOptions;
}

export class Guard {
  readonly runId: string;
  readonly wait: number;
  private readonly calls = new Map<string, Record_>();
  private nextStep = 0;
  /** Tool names this guard wraps: only their calls are counted. */
  readonly tools = new Set<string>();

  constructor(
    readonly fd: Flightdeck,
    readonly options: GuardOptions,
  ) {
    this.runId = options.runId;
    this.wait = options.wait ?? 3600;
  }

  /** Numbers a call at first sight (synchronously, so parallel calls keep their order). */
  see(callId: string, tool: string): Record_ {
    let record = this.calls.get(callId);
    if (!record) {
      record = { step: this.nextStep++, tool };
      this.calls.set(callId, record);
    }
    return record;
  }

  /** Numbers the guarded calls of a history (oldest first) not seen yet: on a resume in a
   * new process the calls keep the steps they had. */
  seed(history: Iterable<{ callId: string; tool: string }>): void {
    for (const { callId, tool } of history) if (this.tools.has(tool)) this.see(callId, tool);
  }

  /** The framework's approval point: asks the ledger (without waiting). `proceed` and
   * `already_done` need no approval and are held for the execution; anything else
   * (approval_required, in_progress, outcome_unknown, denied) becomes the framework's
   * approval request, decided by `decide`. Once the framework holds a call for approval
   * (`requested`: its history shows the request) the answer stays true, since frameworks
   * ask again when they resume and refuse an approval for a call that "needs none"; the
   * execution's ask enforces Flightdeck's decision either way. */
  async needsApproval<A extends object>(
    tool: string,
    callId: string,
    args: A,
    guard: ToolGuard<A, any> = {},
    requested = false,
  ): Promise<boolean> {
    const record = this.see(callId, tool);
    if (requested) record.requested = true;
    if (record.requested) return true;
    if (record.held) return false;
    record.ask = this.askOptions(tool, record.step, args, guard);
    const answer = await this.fd.askRaw(record.ask, 0);
    record.answer = answer;
    if (answer.answer === "proceed" || answer.answer === "already_done") {
      record.held = answer;
      return false;
    }
    record.requested = true;
    return true;
  }

  /** Waits for the decision on a call the framework holds for approval: a read that never
   * starts an attempt (`GET /api/v1/calls/{id}`), so the attempt starts where the tool
   * runs. Undefined for calls this guard did not ask about. */
  async decide(callId: string): Promise<Decision | undefined> {
    const record = this.calls.get(callId);
    if (!record?.answer) return undefined;
    let answer = record.answer;
    if (isWaiting(answer)) {
      this.options.onWait?.({ tool: record.tool, callId, answer });
      answer = await this.fd.readCall(answer.call.id, this.wait);
      record.answer = answer;
    }
    switch (answer.answer) {
      case "ask_again": // approved (new protocol): the execution's ask is told `proceed`
        return { approve: true };
      case "proceed": // a server whose read still asks: the attempt is ours
      case "already_done":
        record.held = answer;
        return { approve: true };
      case "denied":
        // The read changes nothing: one ask records the denial on the ledger's entry.
        if (record.ask && answer.call.state !== "denied") await this.fd.askRaw(record.ask, 0);
        return { approve: false, message: answer.message ?? "Denied in Flightdeck." };
      default:
        throw new FlightdeckError(
          `${record.tool}: still ${answer.answer} after ${this.wait} s (call ${answer.call.id})`,
        );
    }
  }

  /** The tool's execution as the guarded call: runs `fn` once, with the approved
   * arguments, and reports; returns the stored result when it was already done. */
  async execute<A extends object, R>(
    tool: string,
    callId: string,
    args: A,
    fn: (args: A) => R | Promise<R>,
    guard: ToolGuard<A, R> = {},
  ): Promise<R | unknown> {
    const record = this.see(callId, tool);
    let answer = record.held;
    record.held = undefined;
    if (!answer) {
      const options = this.askOptions(tool, record.step, args, guard);
      answer = await this.fd.askRaw(options, 0);
      if (isWaiting(answer)) {
        this.options.onWait?.({ tool, callId, answer });
        answer = await this.fd.askRaw(options, this.wait);
      }
    }
    record.answer = answer;
    const call: Call = await this.fd.callOf(answer, args as Record<string, unknown>, this.wait);
    if (call.done) {
      return call.response ?? `Already done earlier (${call.externalId ?? call.naturalKey}); not run again.`;
    }
    return this.fd.perform(call, (c) => fn(c.arguments as A), {
      externalId: guard.externalId,
      response: storable,
    });
  }

  private askOptions<A extends object>(
    tool: string,
    step: number,
    args: A,
    guard: { display?: (args: A) => DisplayField[] },
  ): AskOptions {
    return {
      tool,
      args: args as Record<string, unknown>,
      runId: this.runId,
      step,
      display: guard.display?.(args),
      agent: this.options.agent,
    };
  }
}

function isWaiting(answer: CallAnswer): boolean {
  return answer.answer === "approval_required" || answer.answer === "in_progress" || answer.answer === "outcome_unknown";
}
