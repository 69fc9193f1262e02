// Flightdeck's agent client: guarded calls (the execution ledger), approvals and
// escalations. No runtime dependencies: the platform's fetch and Web Crypto.
// See README.md; adapters: "@flightdeck/client/openai-agents", "@flightdeck/client/ai-sdk".

export * from "./client.js";
export { VOLATILE_FIELDS, canonicalJson, compareCodePoints, idempotencyKey, keyMaterial, sha256Hex } from "./key.js";
export type { KeyOptions } from "./key.js";
