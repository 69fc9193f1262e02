// Shared steps: signing in, failing a test on any browser console error (a hydration
// mismatch or a panic in the wasm shows up there), and sending an agent's spans.
import { APIRequestContext, expect, Page } from '@playwright/test';
import fs from 'node:fs';
import { dataDir } from '../playwright.config';

export const ALICE = { username: 'alice', password: 'alice-password-123' };
export const VICTOR = { username: 'victor', password: 'victor-password-123' };
export const BOB = { username: 'bob', password: 'bob-password-123' };

export function failOnConsoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  return errors;
}

/// Waits until the wasm bundle has loaded and hydrated the page.
export async function waitForHydration(page: Page) {
  await page.locator('body[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 30_000 });
}

export async function signIn(page: Page, user: { username: string; password: string }) {
  await page.goto('/login');
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/runs$/);
  await expect(page.getByTestId('username')).toHaveText(user.username);
}

/// The agent token (ingest, read, approvals, escalations) the test setup wrote to the data directory.
export const agentToken = () => fs.readFileSync(`${dataDir}/token`, 'utf8').trim();
/// The test server's OTLP/HTTP receiver (the port after the UI's).
export const otlpURL = () => `http://127.0.0.1:${Number(process.env.FLIGHTDECK_E2E_PORT ?? 3917) + 1}/v1/traces`;
export const attr = (key: string, value: string) => ({ key, value: { stringValue: value } });

/// A span maker for one trace (all 16 bytes `traceByte`); every span runs 40 ms from now.
export function spanMaker(traceByte: string) {
  const t0 = BigInt(Date.now()) * 1_000_000n;
  return (id: string, parent: string | null, name: string, attributes: object[]) => ({
    traceId: traceByte.repeat(16),
    spanId: id.repeat(8),
    parentSpanId: parent ? parent.repeat(8) : '',
    name,
    kind: 1,
    startTimeUnixNano: String(t0),
    endTimeUnixNano: String(t0 + 40_000_000n),
    attributes,
  });
}

/// Exports `spans` of `service` over OTLP/HTTP JSON with the ingest token; expects 200.
export async function exportSpans(request: APIRequestContext, service: string, spans: object[]) {
  const res = await request.post(otlpURL(), {
    headers: { Authorization: `Bearer ${agentToken()}`, 'Content-Type': 'application/json' },
    data: { resourceSpans: [{ resource: { attributes: [attr('service.name', service)] }, scopeSpans: [{ spans }] }] },
  });
  expect(res.status()).toBe(200);
}
