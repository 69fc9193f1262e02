// The derived key against the shared vectors (clients/testdata/idempotency-keys.json),
// which the server's and the Python client's tests read too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { VOLATILE_FIELDS, canonicalJson, compareCodePoints, idempotencyKey, keyMaterial } from "../src/index.js";

interface Vector {
  name: string;
  run_id: string;
  step_index: number;
  tool: string;
  arguments: Record<string, unknown>;
  volatile_fields?: string[];
  run_wide: boolean;
  canonical: string;
  key: string;
}

const file = new URL("../../../testdata/idempotency-keys.json", import.meta.url);
const data = JSON.parse(readFileSync(file, "utf8")) as { default_volatile_fields: string[]; vectors: Vector[] };

test("the default volatile fields are the shared file's", () => {
  assert.deepEqual([...VOLATILE_FIELDS].sort(), [...data.default_volatile_fields].sort());
});

test("the shared vectors are all there", () => {
  assert.ok(data.vectors.length >= 20, `only ${data.vectors.length} vectors`);
});

for (const v of data.vectors) {
  test(`key vector: ${v.name}`, async () => {
    const options = { volatile: v.volatile_fields, runWide: v.run_wide };
    assert.equal(keyMaterial(v.run_id, v.step_index, v.tool, v.arguments, options), v.canonical);
    assert.equal(await idempotencyKey(v.run_id, v.step_index, v.tool, v.arguments, options), v.key);
  });
}

test("keys sort by code point, not by UTF-16 code unit", () => {
  const keys = ["\u{1F600}", "\uFF01", "z"];
  assert.deepEqual([...keys].sort(), ["z", "\u{1F600}", "\uFF01"]); // JavaScript's default
  assert.deepEqual([...keys].sort(compareCodePoints), ["z", "\uFF01", "\u{1F600}"]);
  assert.equal(compareCodePoints("ab", "abc"), -1);
  assert.equal(compareCodePoints("abc", "ab"), 1);
  assert.equal(compareCodePoints("a\u{1F600}", "a\u{1F600}"), 0);
});

test("canonical JSON drops undefined fields like JSON and uses toJSON", () => {
  assert.equal(canonicalJson({ b: undefined, a: [undefined, 1], d: new Date(0) }), '{"a":[null,1],"d":"1970-01-01T00:00:00.000Z"}');
  assert.throws(() => canonicalJson(undefined));
});
