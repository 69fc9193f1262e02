// The HTTP client: guarded calls (the execution ledger), plain approvals and escalations.
// A guarded call asks Flightdeck before a tool with a side effect runs (POST /api/v1/calls,
// repeated with `wait` while a person decides or another attempt holds the key), skips it
// when it was already done (returning the stored result), and reports afterwards
// (POST /api/v1/calls/{id}/complete). The same surface as clients/python.

import { annotateSpan } from "./otel.js";

/** What the ledger tells an ask. `ask_again` only comes from the read-only
 * `GET /api/v1/calls/{id}`: an ask would now be told `proceed`. */
export type Answer =
  | "proceed"
  | "already_done"
  | "in_progress"
  | "outcome_unknown"
  | "approval_required"
  | "denied"
  | "ask_again";

/** Answers that mean "not yet": the client asks again until its deadline. */
export const WAITING_ANSWERS: readonly Answer[] = ["approval_required", "in_progress", "outcome_unknown"];

/** The longest one request may ask the server to hold it (the server's limit). */
export const MAX_WAIT_SECONDS = 60;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A ledger entry as the server returns it (docs/ledger.md). */
export interface LedgerEntry {
  id: string;
  idempotency_key: string;
  natural_key: string;
  run_id: string;
  step_index: number;
  tool: string;
  arguments: Record<string, unknown>;
  state: "awaiting_approval" | "started" | "succeeded" | "failed" | "unknown" | "not_done" | "denied";
  attempts: number;
  deduped: number;
  external_id?: string | null;
  response?: unknown;
  error?: string | null;
  verified_by?: string | null;
  approval_id?: string | null;
  escalation_id?: string | null;
  settled_by?: string | null;
  created_at?: string;
  started_at?: string;
  completed_at?: string | null;
  [field: string]: unknown;
}

export interface CallAnswer {
  answer: Answer;
  call: LedgerEntry;
  /** With `proceed` after an approver edited the arguments: run these. */
  approved_arguments?: Record<string, unknown>;
  /** The approver's message (with a denial or an edit), or the denial's reason. */
  message?: string;
}

/** One labelled field shown to the approver beside the arguments. */
export interface DisplayField {
  label: string;
  value: string;
  /** The argument this field shows (`to`, `message.to`). */
  argument?: string;
}

export class FlightdeckError extends Error {
  /** The HTTP status, when Flightdeck answered. */
  readonly status?: number;
  constructor(message: string, status?: number) {
    super(message);
    this.name = "FlightdeckError";
    this.status = status;
  }
}

/** A person refused the call (or its approval expired or was cancelled): do not run it.
 * `reason` is the approver's message. */
export class CallDenied extends FlightdeckError {
  readonly reason?: string;
  readonly call: Call;
  constructor(message: string, reason: string | undefined, call: Call) {
    super(message);
    this.name = "CallDenied";
    this.reason = reason;
    this.call = call;
  }
}

/** An earlier attempt never reported and no person has settled it yet: nothing runs. */
export class CallOutcomeUnknown extends FlightdeckError {
  readonly call: Call;
  constructor(message: string, call: Call) {
    super(message);
    this.name = "CallOutcomeUnknown";
    this.call = call;
  }
}

export interface Report {
  outcome?: "ok" | "error";
  externalId?: string;
  /** What a later `already_done` returns (any JSON, at most 64 KiB). */
  response?: unknown;
  error?: string;
  verifiedBy?: "read_before_write";
}

/** One guarded call: what Flightdeck answered, and the report afterwards. */
export class Call {
  readonly answer: Answer;
  readonly entry: LedgerEntry;
  readonly id: string;
  readonly tool: string;
  readonly idempotencyKey: string;
  /** `fd-` and 12 hex digits: plant it in what the call creates. */
  readonly naturalKey: string;
  readonly approvalId?: string;
  readonly escalationId?: string;
  /** What to run: the arguments asked with, or the approver's edit (`changed`). The
   * approval binds the edited payload's hash: running the original is a violation. */
  readonly arguments: Record<string, unknown>;
  readonly changed: boolean;
  /** The approver's message to the agent, if any. */
  readonly message?: string;
  externalId?: string;
  /** With `already_done`: what the successful attempt reported. */
  response: unknown;
  completed = false;

  constructor(
    private readonly client: Flightdeck,
    answer: CallAnswer,
    asked?: Record<string, unknown>,
  ) {
    const entry = answer.call;
    this.answer = answer.answer;
    this.entry = entry;
    this.id = entry.id;
    this.tool = entry.tool;
    this.idempotencyKey = entry.idempotency_key;
    this.naturalKey = entry.natural_key;
    this.approvalId = entry.approval_id ?? undefined;
    this.escalationId = entry.escalation_id ?? undefined;
    this.changed = answer.approved_arguments != null;
    // Unedited: the arguments as the agent holds them (the ledger keeps a redacted copy).
    this.arguments = answer.approved_arguments ?? asked ?? entry.arguments;
    this.message = answer.message ?? undefined;
    this.externalId = entry.external_id ?? undefined;
    this.response = entry.response ?? null;
  }

  /** It succeeded before: use `externalId` and `response`; do not run it. */
  get done(): boolean {
    return this.answer === "already_done";
  }

  /** Reports how the call ended (only after `proceed`). */
  async complete(report: Report = {}): Promise<LedgerEntry> {
    const body: Record<string, unknown> = { outcome: report.outcome ?? "ok" };
    if (report.externalId != null) body.external_id = report.externalId;
    if (report.response !== undefined) body.response = report.response;
    if (report.error != null) body.error = report.error;
    if (report.verifiedBy != null) body.verified_by = report.verifiedBy;
    const entry = (await this.client.request("POST", `/api/v1/calls/${this.id}/complete`, body)) as LedgerEntry;
    this.completed = true;
    this.externalId = entry.external_id ?? undefined;
    this.response = entry.response ?? null;
    await annotate(this, body.outcome === "ok" ? "ok" : "error");
    return entry;
  }
}

/** A plain approval request and its decision. */
export class Approval {
  readonly view: Record<string, unknown>;
  readonly id: string;
  /** pending, approved, approved_with_changes, denied, expired or cancelled. */
  readonly status: string;
  readonly payloadSha256?: string;
  readonly changed: boolean;
  /** What to run once approved: the approver's edit when `changed`. */
  readonly arguments: unknown;
  readonly reason?: string;
  readonly respond?: string;
  readonly changes?: string;
  readonly escalationId?: string;

  constructor(view: Record<string, unknown>, asked?: unknown) {
    this.view = view;
    this.id = view.id as string;
    this.status = view.status as string;
    this.payloadSha256 = (view.payload_sha256 as string) ?? undefined;
    this.changed = this.status === "approved_with_changes";
    this.arguments = this.changed && view.arguments != null ? view.arguments : asked;
    this.reason = (view.reason as string) ?? undefined;
    this.respond = (view.respond as string) ?? undefined;
    this.changes = (view.changes as string) ?? undefined;
    this.escalationId = (view.escalation_id as string) ?? undefined;
  }
  get pending(): boolean {
    return this.status === "pending";
  }
  /** Approved as asked or with changes: run `arguments`. */
  get approved(): boolean {
    return this.status === "approved" || this.status === "approved_with_changes";
  }
  /** What the agent should be told: the approver's message, else the reason. */
  get message(): string | undefined {
    return this.respond ?? this.reason;
  }
}

export interface AskOptions {
  tool: string;
  args: Record<string, unknown>;
  runId: string;
  /** The step: with the run, the tool and the arguments, what makes the key. A re-run
   * must give the same step to the same call. */
  step: number;
  idempotencyKey?: string;
  /** How long to wait, in seconds, while a person decides or another attempt holds the
   * key (default 300). */
  wait?: number;
  display?: DisplayField[];
  agent?: string;
}

export interface GuardedOptions<T> {
  /** The external id to report, from the tool's result. */
  externalId?: (result: T) => string | undefined | null;
  /** What to store for a later `already_done` (default: the result, when it is JSON
   * of at most 64 KiB). */
  response?: (result: T) => unknown;
}

export interface ApprovalOptions {
  tool: string;
  args: unknown;
  runId: string;
  step?: number;
  display?: DisplayField[];
  idempotencyKey?: string;
  /** Seconds; may shorten the policy's expiry, never lengthen it. */
  expiresIn?: number;
  agent?: string;
}

export interface DoneItem {
  tool?: string;
  description?: string;
  external_id?: string;
  idempotency_key?: string;
  at?: string;
}

export interface EscalationOptions {
  runId: string;
  /** insufficient_permission, contradictory_information, budget_exceeded, low_confidence,
   * approval_required_by_policy, or other (with `reasonText`). */
  reason: string;
  /** Calls (their tool, external id and key are sent), items or text. */
  whatWasDone?: Array<Call | DoneItem | string>;
  whatRemains?: Array<string | { description: string }>;
  reasonText?: string;
  blockingFact?: string;
  idempotencyKey?: string;
  agent?: string;
}

export interface ClientOptions {
  /** The agent's name, sent with every call, approval and escalation that names none. */
  agent?: string;
  /** Seconds one HTTP request may take (default 70; a held request takes up to 60). */
  timeout?: number;
  /** Another fetch (tests, proxies). Default: the platform's. */
  fetch?: typeof fetch;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A connection to Flightdeck's agent API. The token needs the scopes of what is used:
 * `calls` (guarded calls), `approvals` (plain approvals), `escalations`. */
export class Flightdeck {
  readonly url: string;
  readonly agent?: string;
  private readonly timeout: number;
  private readonly fetcher: typeof fetch;

  constructor(
    url: string,
    private readonly token: string,
    options: ClientOptions = {},
  ) {
    this.url = url.replace(/\/+$/, "");
    this.agent = options.agent;
    this.timeout = options.timeout ?? 70;
    this.fetcher = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  /** One request to the API; refusals become FlightdeckError with the server's message. */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response: Response;
    try {
      response = await this.fetcher(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.timeout * 1000),
      });
    } catch (e) {
      throw new FlightdeckError(`${method} ${path}: cannot reach Flightdeck: ${(e as Error).message}`);
    }
    const text = await response.text().catch(() => "");
    if (!response.ok) {
      let message = response.statusText;
      try {
        message = JSON.parse(text).error.message ?? message;
      } catch {
        // not Flightdeck's error body
      }
      throw new FlightdeckError(`${method} ${path}: ${response.status} ${message}`, response.status);
    }
    return text ? JSON.parse(text) : null;
  }

  private hold(left: number): number {
    return Math.max(0, Math.min(MAX_WAIT_SECONDS, this.timeout - 5, Math.ceil(left)));
  }

  // Guarded calls (scope `calls`)

  /** Asks before a call and waits (up to `wait` seconds) while a person approves it or
   * another attempt holds it: the same keyed POST repeated, each held by the server up to
   * 60 s, which never starts a second attempt while one is started. Returns a Call to run
   * (`proceed`) or to skip (`call.done`); throws CallDenied, CallOutcomeUnknown (the wait
   * ran out on an unknown outcome) or FlightdeckError. */
  async ask(options: AskOptions): Promise<Call> {
    const wait = options.wait ?? 300;
    return this.callOf(await this.askRaw(options, wait), options.args, wait);
  }

  /** The Call for an answer to run or skip; throws CallDenied, CallOutcomeUnknown, or
   * FlightdeckError for an answer still waiting. Sets the span's attributes. */
  async callOf(answer: CallAnswer, args?: Record<string, unknown>, waited?: number): Promise<Call> {
    const call = new Call(this, answer, args);
    if (call.answer === "denied") {
      await annotate(call, "denied");
      const why = call.message ? `: ${call.message}` : "";
      throw new CallDenied(`${call.tool}: denied (${call.approvalId ?? "no approval"})${why}`, call.message, call);
    }
    if (call.answer === "outcome_unknown") {
      throw new CallOutcomeUnknown(
        `${call.tool}: an earlier attempt never reported; a person must settle call ${call.id}`,
        call,
      );
    }
    if (call.answer !== "proceed" && call.answer !== "already_done") {
      const after = waited === undefined ? "" : ` after ${waited} s`;
      throw new FlightdeckError(`${call.tool}: still ${call.answer}${after}`);
    }
    if (call.done) await annotate(call, "deduped");
    return call;
  }

  /** The ask without interpretation: the answer once it is final or `wait` seconds have
   * passed (0: answer at once). The adapters use it. */
  async askRaw(options: AskOptions, wait: number): Promise<CallAnswer> {
    const body: Record<string, unknown> = {
      run_id: options.runId,
      step_index: options.step,
      tool: options.tool,
      arguments: options.args,
    };
    if (options.idempotencyKey != null) body.idempotency_key = options.idempotencyKey;
    if (options.display != null) body.display = options.display;
    const agent = options.agent ?? this.agent;
    if (agent != null) body.agent = agent;
    const deadline = Date.now() + wait * 1000;
    let answer: CallAnswer | undefined;
    for (;;) {
      body.wait = this.hold((deadline - Date.now()) / 1000);
      try {
        answer = (await this.request("POST", "/api/v1/calls", body)) as CallAnswer;
      } catch (e) {
        // Asking again is safe (the POST is keyed): ride out a restart or an overload
        // while waiting, but not a refusal or a first failure.
        const status = (e as FlightdeckError).status;
        const transient = status === undefined || status === 429 || status >= 500;
        if (answer === undefined || !transient || Date.now() + 1000 >= deadline) throw e;
        await sleep(1000);
        continue;
      }
      if (!WAITING_ANSWERS.includes(answer.answer) || Date.now() >= deadline) return answer;
    }
  }

  /** Reads a call without changing the ledger (`GET /api/v1/calls/{id}`), waiting up to
   * `wait` seconds (at most 60 per request) while the answer is a waiting one. Where an
   * ask would start an attempt the answer is `ask_again`. */
  async readCall(id: string, wait = 0): Promise<CallAnswer> {
    const deadline = Date.now() + wait * 1000;
    for (;;) {
      const seconds = this.hold((deadline - Date.now()) / 1000);
      const answer = (await this.request("GET", `/api/v1/calls/${id}?wait=${seconds}`)) as CallAnswer;
      if (!WAITING_ANSWERS.includes(answer.answer) || Date.now() >= deadline) return answer;
    }
  }

  /** `await fd.guarded({tool, args, runId, step}, async (call) => ...)` runs the function
   * only when it should, with `call.arguments` (what was approved, possibly edited), and
   * reports `ok` with its result (or `error` if it threw) unless it called
   * `call.complete` itself. When the call was already done the function does not run and
   * the stored response is returned. */
  async guarded<T>(
    options: AskOptions,
    fn: (call: Call) => T | Promise<T>,
    report: GuardedOptions<T> = {},
  ): Promise<T> {
    return this.perform(await this.ask(options), fn, report);
  }

  /** Runs `fn` for a call that was answered `proceed` and reports how it ended (unless
   * `fn` called `call.complete`); for a call already done returns the stored response. */
  async perform<T>(call: Call, fn: (call: Call) => T | Promise<T>, report: GuardedOptions<T> = {}): Promise<T> {
    if (call.done) return call.response as T;
    let result: T;
    try {
      result = await fn(call);
    } catch (e) {
      if (!call.completed) {
        const err = e as Error;
        await call.complete({ outcome: "error", error: `${err?.name ?? "Error"}: ${err?.message ?? String(e)}` });
      }
      throw e;
    }
    if (!call.completed) {
      await call.complete({
        outcome: "ok",
        externalId: report.externalId?.(result) ?? undefined,
        response: report.response ? report.response(result) : storable(result),
      });
    }
    return result;
  }

  // Plain approvals (scope `approvals`)

  /** Files an approval request for one tool call and returns it pending; the same
   * `idempotencyKey` and payload return the same request. */
  async requestApproval(options: ApprovalOptions): Promise<Approval> {
    const body: Record<string, unknown> = { run_id: options.runId, tool: options.tool, arguments: options.args };
    if (options.step != null) body.step_index = options.step;
    if (options.idempotencyKey != null) body.idempotency_key = options.idempotencyKey;
    if (options.expiresIn != null) body.expires_in = options.expiresIn;
    if (options.display != null) body.display = options.display;
    const agent = options.agent ?? this.agent;
    if (agent != null) body.agent = agent;
    return new Approval((await this.request("POST", "/api/v1/approvals", body)) as Record<string, unknown>, options.args);
  }

  /** Waits (up to `wait` seconds, 60 per request) until the request is decided, expires
   * or is cancelled; still `pending` when the wait ran out. */
  async waitApproval(approval: Approval | string, wait = 300): Promise<Approval> {
    const id = typeof approval === "string" ? approval : approval.id;
    const asked = typeof approval === "string" ? undefined : approval.arguments;
    const deadline = Date.now() + wait * 1000;
    for (;;) {
      const seconds = this.hold((deadline - Date.now()) / 1000);
      const view = (await this.request("GET", `/api/v1/approvals/${id}?wait=${seconds}`)) as Record<string, unknown>;
      const current = new Approval(view, asked);
      if (!current.pending || Date.now() >= deadline) return current;
    }
  }

  /** Files a request and waits for the decision. Check `.approved`, run `.arguments`. */
  async approval(options: ApprovalOptions & { wait?: number }): Promise<Approval> {
    return this.waitApproval(await this.requestApproval(options), options.wait ?? 300);
  }

  /** Cancels a pending request (a decided one is returned unchanged). */
  async cancelApproval(approval: Approval | string): Promise<Approval> {
    const id = typeof approval === "string" ? approval : approval.id;
    return new Approval((await this.request("POST", `/api/v1/approvals/${id}/cancel`, {})) as Record<string, unknown>);
  }

  // Escalations (scope `escalations`)

  /** Hands the run to a person, saying what was done (with external ids and keys, so
   * nothing fires twice) and what remains. Returns the escalation. */
  async escalate(options: EscalationOptions): Promise<Record<string, unknown>> {
    const body: Record<string, unknown> = {
      run_id: options.runId,
      reason: options.reason,
      what_was_done: (options.whatWasDone ?? []).map(doneItem),
      what_remains: options.whatRemains ?? [],
    };
    if (options.reasonText != null) body.reason_text = options.reasonText;
    if (options.blockingFact != null) body.blocking_fact = options.blockingFact;
    if (options.idempotencyKey != null) body.idempotency_key = options.idempotencyKey;
    const agent = options.agent ?? this.agent;
    if (agent != null) body.agent = agent;
    return (await this.request("POST", "/api/v1/escalations", body)) as Record<string, unknown>;
  }

  /** The escalation's state (`open`, `outcome`, `resolution_note`, and for `handed_back`
   * the `instructions` to follow). */
  async escalation(id: string): Promise<Record<string, unknown>> {
    return (await this.request("GET", `/api/v1/escalations/${id}`)) as Record<string, unknown>;
  }
}

function doneItem(item: Call | DoneItem | string): DoneItem {
  if (item instanceof Call) {
    const done: DoneItem = { tool: item.tool, idempotency_key: item.idempotencyKey };
    if (item.externalId) done.external_id = item.externalId;
    return done;
  }
  return typeof item === "string" ? { description: item } : item;
}

const MAX_RESPONSE_BYTES = 64 * 1024;

/** The result as JSON to store, or null when it has no JSON form or is too large. */
export function storable(value: unknown): unknown {
  try {
    const text = JSON.stringify(value);
    if (text === undefined || new TextEncoder().encode(text).length > MAX_RESPONSE_BYTES) return null;
    return JSON.parse(text);
  } catch {
    return null;
  }
}

async function annotate(call: Call, outcome: "ok" | "error" | "deduped" | "denied"): Promise<void> {
  await annotateSpan({
    "tool.idempotency_key": call.idempotencyKey,
    "tool.outcome": outcome,
    "tool.external_id": call.externalId,
    "approval.id": call.approvalId,
  });
}
