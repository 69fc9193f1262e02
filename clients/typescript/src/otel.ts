// Span attributes through @opentelemetry/api when the application has it: an optional
// peer, loaded with a dynamic import so the package has no runtime dependency.

interface Span {
  isRecording(): boolean;
  setAttribute(key: string, value: string): unknown;
}
interface OtelApi {
  trace: { getActiveSpan(): Span | undefined };
}

let loaded: Promise<OtelApi | null> | undefined;

function otel(): Promise<OtelApi | null> {
  if (!loaded) {
    const name = "@opentelemetry/api"; // a variable: bundlers and tsc leave it optional
    loaded = import(name).then(
      (mod: OtelApi & { default?: OtelApi }) => (mod.trace ? mod : (mod.default ?? null)),
      () => null,
    );
  }
  return loaded;
}

/** Sets the ledger's attributes on the active span, when there is one and it records. */
export async function annotateSpan(attributes: Record<string, string | null | undefined>): Promise<void> {
  const api = await otel();
  const span = api?.trace.getActiveSpan();
  if (!span || !span.isRecording()) return;
  for (const [key, value] of Object.entries(attributes)) {
    if (value) span.setAttribute(key, value);
  }
}
