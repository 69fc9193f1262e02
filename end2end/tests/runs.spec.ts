import { expect, test, APIRequestContext } from '@playwright/test';
import fs from 'node:fs';
import { dataDir } from '../playwright.config';
import { VICTOR, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

const token = () => fs.readFileSync(`${dataDir}/token`, 'utf8').trim();
const otlpURL = () => `http://127.0.0.1:${Number(process.env.FLIGHTDECK_E2E_PORT ?? 3917) + 1}/v1/traces`;

const attr = (key: string, value: string) => ({ key, value: { stringValue: value } });
const hex = (byte: string, n: number) => byte.repeat(n);

/// A run an attacker would like to see rendered as HTML: hostile text in the span name and
/// in the tool arguments, a duplicated email, and a budget stop so its bodies are kept.
async function sendHostileRun(request: APIRequestContext) {
  const trace = hex('e2', 16);
  const t0 = BigInt(Date.now()) * 1_000_000n;
  const span = (id: string, parent: string | null, name: string, attributes: object[], offsetMs: number) => ({
    traceId: trace,
    spanId: hex(id, 8),
    parentSpanId: parent ? hex(parent, 8) : '',
    name,
    kind: 1,
    startTimeUnixNano: String(t0 + BigInt(offsetMs) * 1_000_000n),
    endTimeUnixNano: String(t0 + BigInt(offsetMs + 40) * 1_000_000n),
    attributes,
  });
  const email = (id: string, ext: string, offset: number) =>
    span(id, '01', 'tool send_email <img src=x onerror=window.__xss=1>', [
      attr('tool.name', 'send_email'),
      attr('tool.side_effect', 'irreversible'),
      attr('tool.idempotency_key', 'k-e2e'),
      attr('tool.external_id', ext),
      attr('gen_ai.tool.call.arguments', JSON.stringify({ to: 'ops@example.com', body: '<script>window.__xss=1</script><img src=x onerror=window.__xss=1>' })),
      attr('gen_ai.tool.call.result', JSON.stringify({ id: ext })),
    ], offset);
  const body = {
    resourceSpans: [{
      resource: { attributes: [attr('service.name', 'e2e-agent')] },
      scopeSpans: [{
        spans: [
          span('01', null, 'agent.run', [attr('run.id', 'run-e2e-hostile'), attr('run.terminal_reason', 'budget')], 0),
          span('02', '01', 'step 1', [{ key: 'step.index', value: { intValue: '1' } }], 5),
          email('03', 'msg_e2e_1', 10),
          email('04', 'msg_e2e_2', 60),
        ],
      }],
    }],
  };
  const response = await request.post(otlpURL(), {
    headers: { Authorization: `Bearer ${token()}`, 'Content-Type': 'application/json' },
    data: body,
  });
  expect(response.status()).toBe(200);
}

test.beforeAll(async ({ request }) => {
  await sendHostileRun(request);
});

test('filter by reason and find a run by external id', async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  await signIn(page, VICTOR);
  await waitForHydration(page);
  await expect(page.getByTestId('run-table')).toBeVisible();
  await expect(page.getByTestId('count-budget')).toContainText('not finished');

  const filters = page.getByTestId('run-filters');
  await filters.getByLabel('Reason').selectOption('budget');
  await filters.getByRole('button', { name: 'Apply' }).click();
  await expect(page).toHaveURL(/terminal_reason=budget/);
  const reasons = page.getByTestId('run-table').locator('[data-reason]');
  await expect(reasons.first()).toHaveAttribute('data-reason', 'budget');
  for (const r of await reasons.all()) await expect(r).toHaveAttribute('data-reason', 'budget');

  await page.goto('/runs');
  await page.getByTestId('run-filters').getByLabel('Search').fill('msg_e2e_2');
  await page.getByTestId('run-filters').getByRole('button', { name: 'Apply' }).click();
  const rows = page.getByTestId('run-table').locator('tbody tr');
  await expect(rows).toHaveCount(1);
  await expect(rows.first()).toContainText('run-e2e-hostile');
  expect(errors).toEqual([]);
});

test('a link followed in the page leaves the form with the filters the list shows', async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  await signIn(page, VICTOR);
  await page.goto('/runs?q=send_email&until=2099-01-01T00%3A00%3A00Z');
  await waitForHydration(page);
  const filters = page.getByTestId('run-filters');
  await expect(page.getByTestId('time-filter')).toContainText('until 2099-01-01T00:00:00Z');
  await expect(filters.locator('input[name=until]')).toHaveValue('2099-01-01T00:00:00Z');

  // "any time" drops the limit in the page, without a reload: the form follows.
  await page.getByTestId('time-filter').getByRole('link', { name: 'any time' }).click();
  await expect(page).toHaveURL(/\/runs\?q=send_email$/);
  await expect(page.getByTestId('time-filter')).toHaveCount(0);
  await expect(filters.locator('input[name=until]')).toHaveCount(0);
  await expect(filters.getByLabel('Search')).toHaveValue('send_email');

  // Applying the form now keeps the search and adds no time limit back.
  await filters.getByLabel('Reason').selectOption('budget');
  await filters.getByRole('button', { name: 'Apply' }).click();
  await expect(page).toHaveURL(/terminal_reason=budget/);
  expect(page.url()).not.toContain('until=');
  await expect(page.getByTestId('run-table').locator('tbody tr').first()).toContainText('run-e2e-hostile');
  expect(errors).toEqual([]);
});

test('open a run: reason, duplicate callout, waterfall, tool span, agent text stays text', async ({ page }) => {
  let dialogs = 0;
  page.on('dialog', (d) => { dialogs += 1; d.dismiss(); });
  await signIn(page, VICTOR);
  await page.goto('/runs?q=run-e2e-hostile');
  await page.getByRole('link', { name: 'run-e2e-hostile' }).click();
  await expect(page).toHaveURL(/\/runs\/run-e2e-hostile/);
  await waitForHydration(page);

  await expect(page.getByTestId('terminal-reason')).toContainText('budget');
  await expect(page.getByTestId('terminal-reason')).toContainText('did not finish its task');
  await expect(page.getByTestId('duplicates')).toContainText(
    'send_email succeeded twice for key k-e2e: external ids msg_e2e_1 and msg_e2e_2');
  await expect(page.getByTestId('side-effects')).toContainText('msg_e2e_2');

  const waterfall = page.getByTestId('waterfall');
  const root = waterfall.locator('details.wf-node').first();
  await expect(root).toHaveAttribute('open', '');
  // the duration column of a row is part of its summary, not a link: clicking it folds
  const toggle = root.locator(':scope > summary .wf-duration');
  await toggle.click();
  await expect(root).not.toHaveAttribute('open', '');
  await expect(root.locator(':scope > .wf-children')).toBeHidden();
  await toggle.click();
  await expect(root).toHaveAttribute('open', '');

  const hostile = 'tool send_email <img src=x onerror=window.__xss=1>';
  await waterfall.getByRole('link', { name: hostile }).first().click();
  const panel = page.getByTestId('span-panel');
  await expect(panel).toBeVisible();
  await expect(panel.getByRole('heading', { name: hostile })).toBeVisible();
  await expect(panel.getByTestId('span-attributes')).toContainText('"tool.idempotency_key": "k-e2e"');
  await expect(panel.getByTestId('span-bodies')).toContainText('<script>window.__xss=1</script>');
  expect(await page.evaluate(() => (window as any).__xss)).toBeUndefined();
  expect(await page.locator('img[src="x"]').count()).toBe(0);
  expect(dialogs).toBe(0);
});

test('download a replay fixture', async ({ page }) => {
  await signIn(page, VICTOR);
  await page.goto('/runs/run-e2e-hostile');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    page.getByTestId('replay-download').click(),
  ]);
  expect(download.suggestedFilename()).toBe('run-e2e-hostile.replay.json');
  const fixture = JSON.parse(fs.readFileSync(await download.path(), 'utf8'));
  expect(fixture.format).toBe('flightdeck.replay_fixture');
  expect(fixture.version).toBe(1);
  expect(fixture.run.run_id).toBe('run-e2e-hostile');
  expect(fixture.tool_calls.map((c: any) => c.external_id)).toEqual(['msg_e2e_1', 'msg_e2e_2']);
  expect(fixture.tool_calls[0].arguments.body).toContain('<script>');
  expect(fixture.tool_calls[1].response).toEqual({ id: 'msg_e2e_2' });
});
