// A real Flightdeck for the integration tests: the binary named by FLIGHTDECK_BIN on free
// ports with a fresh data dir and the tests' [[tool_policies]], an agent token, and a
// person (alice, an approver and operator) who decides over HTTP as the web page does.
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const BIN = process.env.FLIGHTDECK_BIN;
/** Skip integration tests (with a reason) when no binary is named. */
export const skipWithoutServer = BIN ? false : "FLIGHTDECK_BIN is not set";

const PASSWORD = "pw-long-enough-123";

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface PendingApproval {
  id: string;
  run_id: string;
  step_index: number | null;
  tool: string;
  arguments: string;
  display: Array<{ label: string; value: string; argument?: string }>;
  payload_sha256: string;
  status: string;
  agent: string | null;
  [field: string]: unknown;
}

export class Flightdeck {
  private cookie = "";
  private constructor(
    readonly url: string,
    readonly token: string,
    readonly dataDir: string,
    readonly env: NodeJS.ProcessEnv,
    private readonly child: ChildProcess,
    readonly log: string[],
  ) {}

  /** Starts a Flightdeck with `policies` (TOML) as its config file. */
  static async start(policies: string): Promise<Flightdeck> {
    if (!BIN) throw new Error("FLIGHTDECK_BIN is not set");
    const dataDir = mkdtempSync(join(tmpdir(), "fd-ts-"));
    const site = join(dataDir, "site");
    mkdirSync(site);
    const env = { ...process.env, FLIGHTDECK_DATA_DIR: dataDir, FLIGHTDECK_SITE_ROOT: site, RUST_LOG: "warn" };
    const config = join(dataDir, "flightdeck.toml");
    writeFileSync(config, policies);
    const run = (args: string[], input?: string) =>
      execFileSync(BIN!, ["--config", config, ...args], { env, input, encoding: "utf8", stdio: ["pipe", "pipe", "pipe"] });
    const token = run(["token", "create", "agent", "--scope", "calls,approvals,escalations,read,ingest"]).trim();
    run(["user", "add", "--role", "admin,approver,operator,viewer", "alice"], `${PASSWORD}\n`);
    const [port, http, grpc] = [await freePort(), await freePort(), await freePort()];
    const child = spawn(
      BIN,
      [
        "--config", config, "serve",
        "--listen", `127.0.0.1:${port}`,
        "--otlp-http-listen", `127.0.0.1:${http}`,
        "--otlp-grpc-listen", `127.0.0.1:${grpc}`,
      ],
      { env, stdio: ["ignore", "pipe", "pipe"] },
    );
    const log: string[] = [];
    child.stdout!.on("data", (d) => log.push(String(d)));
    child.stderr!.on("data", (d) => log.push(String(d)));
    const url = `http://127.0.0.1:${port}`;
    const fd = new Flightdeck(url, token, dataDir, env, child, log);
    const deadline = Date.now() + 90_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`flightdeck exited (${child.exitCode}):\n${log.join("")}`);
      const ready = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
      if (ready) break;
      if (Date.now() > deadline) {
        await fd.stop();
        throw new Error(`flightdeck not ready after 90 s:\n${log.join("")}`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    await fd.signIn();
    return fd;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null) {
      const exited = new Promise((r) => this.child.once("exit", r));
      this.child.kill("SIGTERM");
      const timer = setTimeout(() => this.child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  private async signIn(): Promise<void> {
    const response = await fetch(`${this.url}/fn/login`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", "sec-fetch-site": "same-origin" },
      body: new URLSearchParams({ username: "alice", password: PASSWORD, next: "/runs" }),
    });
    const cookies = response.headers.getSetCookie().map((c) => c.split(";")[0]);
    if (cookies.length === 0) throw new Error(`sign-in set no cookie: ${response.status} ${await response.text()}`);
    this.cookie = cookies.join("; ");
  }

  /** A server function as the signed-in person (`/fn/NAME`, form fields). */
  async fn(name: string, fields: Record<string, string | undefined>): Promise<any> {
    const form = new URLSearchParams();
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) form.set(k, v);
    const response = await fetch(`${this.url}/fn/${name}`, {
      method: "POST",
      redirect: "manual",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        accept: "application/json",
        "sec-fetch-site": "same-origin",
        cookie: this.cookie,
      },
      body: form,
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`/fn/${name}: ${response.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  /** The run's approval requests as the approver's pages load them. */
  async runApprovals(runId: string): Promise<PendingApproval[]> {
    const [approvals] = await this.fn("load_run_approvals", { run_id: runId });
    return approvals;
  }

  /** Waits until the run has a pending request (of `tool`, when given) and returns it. */
  async pendingApproval(runId: string, tool?: string, timeoutMs = 30_000): Promise<PendingApproval> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = (await this.runApprovals(runId)).find((a) => a.status === "pending" && (!tool || a.tool === tool));
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no pending approval in run ${runId}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Decides a request as alice: approve (optionally with edited arguments) or deny. */
  async decide(
    approval: PendingApproval,
    decision: "approve" | "deny",
    options: { reason?: string; respond?: string; arguments?: unknown } = {},
  ): Promise<any> {
    return this.fn("decide_approval", {
      id: approval.id,
      decision,
      payload_sha256: approval.payload_sha256,
      reason: options.reason,
      respond: options.respond,
      arguments: options.arguments === undefined ? undefined : JSON.stringify(options.arguments),
    });
  }

  /** The run's ledger entries as the run page loads them. */
  async runCalls(runId: string): Promise<Array<{ entry: Record<string, any> }>> {
    return this.fn("load_run_calls", { run_id: runId });
  }

  /** Settles a call of unknown outcome as an operator (confirming, as the page asks for
   * a tool that cannot be undone, that they checked). */
  async settle(callId: string, happened: boolean, externalId?: string): Promise<void> {
    await this.fn("settle_call", { id: callId, happened: happened ? "yes" : "no", external_id: externalId, confirm: "yes" });
  }
}
