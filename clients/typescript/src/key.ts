// The derived idempotency key, byte for byte the server's (app/src/ledger/key.rs) and the
// Python client's: SHA-256 hex of the canonical JSON of
// {"args": <arguments without volatile top-level fields>, "run", "step", "tool"}.
// Shared vectors: clients/testdata/idempotency-keys.json.

/** Fields left out of the key when the tool's policy names none. */
export const VOLATILE_FIELDS: readonly string[] = ["request_id", "timestamp", "now", "attempt", "trace_id"];

/** Orders strings by Unicode code point (as Python and Rust do), not by UTF-16 code
 * unit (JavaScript's default): they differ for characters above U+FFFF. */
export function compareCodePoints(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const x = a.codePointAt(i)!;
    const y = b.codePointAt(j)!;
    if (x !== y) return x < y ? -1 : 1;
    i += x > 0xffff ? 2 : 1;
    j += y > 0xffff ? 2 : 1;
  }
  return a.length - i === b.length - j ? 0 : a.length - i < b.length - j ? -1 : 1;
}

function write(value: unknown, out: string[]): void {
  if (Array.isArray(value)) {
    out.push("[");
    value.forEach((item, n) => {
      if (n > 0) out.push(",");
      write(item, out);
    });
    out.push("]");
  } else if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    out.push("{");
    Object.keys(record)
      .sort(compareCodePoints)
      .forEach((key, n) => {
        if (n > 0) out.push(",");
        out.push(JSON.stringify(key), ":");
        write(record[key], out);
      });
    out.push("}");
  } else {
    // Strings: JSON.stringify escapes exactly what Python's json.dumps(ensure_ascii=False)
    // does (", \, \b \f \n \r \t, other controls as lowercase \u00XX), the rest raw.
    out.push(JSON.stringify(value));
  }
}

/** Flightdeck's canonical JSON: keys sorted by code point at every level, no whitespace,
 * non-ASCII raw. The value is first passed through JSON (toJSON, undefined fields
 * dropped). Outside the contract, as in the notes: floats in exponent form, whole floats
 * (1.0 is 1 in JavaScript) and integers beyond 2^53. */
export function canonicalJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) throw new TypeError("canonicalJson: the value has no JSON form");
  const out: string[] = [];
  write(JSON.parse(text), out);
  return out.join("");
}

export interface KeyOptions {
  /** Top-level argument fields left out (the tool policy's `volatile_fields`). */
  volatile?: Iterable<string>;
  /** The policy's `run_wide_key`: the step is left out. */
  runWide?: boolean;
}

/** The canonical text whose SHA-256 is the derived key. */
export function keyMaterial(
  runId: string,
  step: number,
  tool: string,
  args: Record<string, unknown>,
  options: KeyOptions = {},
): string {
  const volatile = new Set(options.volatile ?? VOLATILE_FIELDS);
  const stable: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(args)) if (!volatile.has(k)) stable[k] = v;
  const material: Record<string, unknown> = { args: stable, run: runId, tool };
  if (!options.runWide) material.step = step;
  return canonicalJson(material);
}

async function subtle(): Promise<SubtleCrypto> {
  const found = (globalThis as { crypto?: Crypto }).crypto?.subtle;
  if (found) return found;
  // Node 18 without the global: the same Web Crypto from node:crypto.
  const name = "node:crypto";
  const mod = (await import(name)) as { webcrypto: Crypto };
  return mod.webcrypto.subtle;
}

/** Hex SHA-256 of the UTF-8 bytes of `text` (Web Crypto). */
export async function sha256Hex(text: string): Promise<string> {
  const digest = await (await subtle()).digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The key Flightdeck derives when an ask carries none. The server's key (returned in
 * `call.idempotency_key`) is authoritative. */
export async function idempotencyKey(
  runId: string,
  step: number,
  tool: string,
  args: Record<string, unknown>,
  options: KeyOptions = {},
): Promise<string> {
  return sha256Hex(keyMaterial(runId, step, tool, args, options));
}
