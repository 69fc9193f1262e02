// What operators see, true at a glance (issue 21), in Chromium at desktop and phone width:
// a standard agent's cost from prices and its unclassified tools, classified in one click;
// a span opening beside the waterfall without the page moving; the note box clearing; and
// the run list, a run, an approval request and an escalation on a 390 px phone.
import { expect, test, APIRequestContext, Page } from '@playwright/test';
import {
  ALICE,
  VICTOR,
  agentToken,
  attr,
  exportSpans,
  failOnConsoleErrors,
  signIn,
  spanMaker,
  waitForHydration,
} from './helpers';

const int = (key: string, value: number) => ({ key, value: { intValue: String(value) } });

/// A run sent with the OTel GenAI names only: chat steps with tokens and no cost, and the
/// same email sent twice through a tool nobody classified; `steps` makes the page tall.
async function sendGenAiRun(request: APIRequestContext, runId: string, traceByte: string, steps = 3) {
  const span = spanMaker(traceByte);
  const spans: object[] = [
    span('01', null, 'invoke_agent support', [attr('gen_ai.operation.name', 'invoke_agent'), attr('gen_ai.agent.name', 'support-genai'), attr('gen_ai.conversation.id', runId)]),
  ];
  for (let i = 0; i < steps; i++) {
    const id = (16 + i).toString(16).padStart(2, '0');
    spans.push(span(id, '01', 'chat claude-sonnet-4-5', [
      attr('gen_ai.operation.name', 'chat'),
      attr('gen_ai.request.model', 'claude-sonnet-4-5'),
      int('gen_ai.usage.input_tokens', 12_000),
      int('gen_ai.usage.cache_read.input_tokens', 10_000),
      int('gen_ai.usage.output_tokens', 400),
    ]));
  }
  const email = (id: string) => span(id, '01', `execute_tool ${runId}-mail`, [
    attr('gen_ai.operation.name', 'execute_tool'),
    attr('gen_ai.tool.name', `${runId}-mail`),
    attr('gen_ai.tool.call.arguments', JSON.stringify({ to: 'ana@example.com', body: 'refund done' })),
  ]);
  spans.push(email('e1'), email('e2'));
  await exportSpans(request, 'support-genai', spans);
}

async function noSidewaysScroll(page: Page) {
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  expect(scroll, `${page.url()} scrolls sideways`).toBeLessThanOrEqual(client + 1);
}

test('a standard agent run is priced, names its unclassified tool, and the admin classifies it in one click', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-genai-${Date.now()}`;
  await sendGenAiRun(request, runId, 'd1');
  await signIn(page, ALICE);
  await page.goto(`/runs/${runId}`);
  await waitForHydration(page);
  await expect(page.getByTestId('run-cost')).toContainText('derived from tokens');
  await expect(page.getByTestId('run-cost')).not.toContainText('$0.0000');
  await expect(page.getByTestId('prices-used')).toContainText('claude-sonnet-4-5');
  await expect(page.getByTestId('run-flags')).toContainText(`unclassified tool(s): ${runId}-mail`);
  await expect(page.getByTestId('possible-duplicates')).toContainText(`${runId}-mail`);
  await expect(page.getByTestId('side-effects')).toContainText('unclassified');

  await page.goto('/admin/tools');
  const row = page.locator(`tr[data-tool="${runId}-mail"]`);
  await expect(row).toContainText('unclassified');
  await expect(row).toContainText('suggested: irreversible');
  await row.getByRole('button', { name: 'irreversible' }).click();
  await expect(row).toContainText(`policy ${runId}-mail`);
  // The stored run is recomputed in the background: its possible duplicate becomes one.
  await expect(async () => {
    await page.goto(`/runs/${runId}`);
    await expect(page.getByTestId('duplicates')).toContainText(`${runId}-mail`, { timeout: 1000 });
  }).toPass({ timeout: 20_000 });
  expect(errors).toEqual([]);
});

test('a span opens beside the waterfall and the page does not move', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-tall-${Date.now()}`;
  await sendGenAiRun(request, runId, 'd2', 60);
  await page.setViewportSize({ width: 1400, height: 900 });
  await signIn(page, VICTOR);
  await page.goto(`/runs/${runId}`);
  await waitForHydration(page);
  await expect(page.getByTestId('span-placeholder')).toBeVisible();
  const rows = page.getByTestId('waterfall').locator('.wf-row');
  await expect(rows.nth(40)).toContainText('step');
  await expect(rows.nth(40)).toHaveAttribute('title', /chat claude-sonnet-4-5 · .* · unset/);
  await rows.nth(40).scrollIntoViewIfNeeded();
  const before = await page.evaluate(() => window.scrollY);
  expect(before).toBeGreaterThan(500);
  await rows.nth(40).locator('a.wf-name').click();
  const panel = page.getByTestId('span-panel');
  await expect(panel).toBeVisible();
  await expect(panel).toBeInViewport();
  await expect(rows.nth(40)).toHaveClass(/selected/);
  expect(Math.abs((await page.evaluate(() => window.scrollY)) - before)).toBeLessThan(5);
  await expect(page).toHaveURL(/span=/);
  expect(errors).toEqual([]);
});

test('a posted note leaves the note box empty', async ({ page, request }) => {
  const runId = `run-e2e-note-${Date.now()}`;
  const span = spanMaker('d3');
  await exportSpans(request, 'support-agent', [span('01', null, 'agent.run', [attr('run.id', runId), attr('escalation.reason', 'low confidence')])]);
  const filed = await request.post('/api/v1/escalations', {
    headers: { Authorization: `Bearer ${agentToken()}` },
    data: { run_id: runId, reason: 'Low Confidence', what_remains: ['check the invoice'] },
  });
  expect(filed.ok()).toBeTruthy();
  const { id } = (await filed.json()) as { id: string };
  await signIn(page, ALICE);
  await page.goto(`/escalations/${id}`);
  await waitForHydration(page);
  await expect(page.getByTestId('blocking')).toContainText('low confidence');
  // alice administers too: before claiming she is offered only the explicit override.
  await expect(page.getByTestId('override')).toContainText('Resolve without claiming it, as administrator');
  const box = page.getByTestId('timeline').getByLabel('Add a note');
  await box.fill('called the customer');
  await page.getByRole('button', { name: 'Add note' }).click();
  await expect(page.getByTestId('timeline')).toContainText('called the customer');
  await expect(box).toHaveValue('');
  await page.getByRole('button', { name: 'Claim' }).click();
  await expect(page.getByTestId('claimed-by')).toHaveText('Claimed by alice');
  await expect(page.getByTestId('override')).toHaveCount(0);
  await expect(page.getByTestId('open-items')).toContainText('check the invoice');
});

test.describe('on a phone', () => {
  test.use({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });

  test('the navigation folds and the run list and a run fit', async ({ page, request }) => {
    const errors = failOnConsoleErrors(page);
    const runId = `run-e2e-phone-${Date.now()}`;
    await sendGenAiRun(request, runId, 'd4');
    await signIn(page, VICTOR);
    await waitForHydration(page);
    const nav = page.getByRole('navigation', { name: 'Main' });
    await expect(nav.getByRole('link', { name: 'Trends' })).toBeHidden();
    await page.getByText('Menu', { exact: true }).click();
    await expect(nav.getByRole('link', { name: 'Trends' })).toBeVisible();
    await noSidewaysScroll(page);
    await expect(page.getByTestId('run-table')).toBeVisible();

    await page.goto(`/runs/${runId}`);
    await waitForHydration(page);
    await noSidewaysScroll(page);
    await page.getByTestId('waterfall').locator('a.wf-name').nth(1).click();
    const panel = page.getByTestId('span-panel');
    await expect(panel).toBeInViewport();
    await noSidewaysScroll(page);
    expect(errors).toEqual([]);
  });

  test('an approval request fits: payload, hash, Approve and Deny', async ({ page, request }) => {
    const created = await request.post('/api/v1/approvals', {
      headers: { Authorization: `Bearer ${agentToken()}` },
      data: {
        run_id: `run-e2e-phone-approval-${Date.now()}`,
        tool: 'wire_transfer',
        arguments: { iban: 'DE89370400440532013000', amount_eur: 1250, reference: 'invoice 2026-11 '.repeat(8) },
      },
    });
    expect(created.status()).toBe(201);
    const { id } = (await created.json()) as { id: string };
    await signIn(page, ALICE);
    await page.goto(`/approvals/${id}`);
    await waitForHydration(page);
    await noSidewaysScroll(page);
    for (const testid of ['payload', 'payload-sha']) {
      const box = await page.getByTestId(testid).boundingBox();
      expect(box!.x + box!.width).toBeLessThanOrEqual(391);
    }
    for (const name of ['Approve this exact payload', 'Deny']) {
      const button = page.getByRole('button', { name, exact: true });
      await button.scrollIntoViewIfNeeded();
      const box = await button.boundingBox();
      expect(box!.x).toBeGreaterThanOrEqual(0);
      expect(box!.x + box!.width).toBeLessThanOrEqual(391);
    }
  });

  test('an escalation fits', async ({ page, request }) => {
    const runId = `run-e2e-phone-esc-${Date.now()}`;
    const filed = await request.post('/api/v1/escalations', {
      headers: { Authorization: `Bearer ${agentToken()}` },
      data: {
        run_id: runId,
        reason: 'budget exceeded',
        blocking_fact: 'The refund needs a manager because it is over the 500 EUR limit set by finance',
        what_was_done: [{ tool: 'send_email', external_id: 'msg_'.padEnd(60, 'x'), description: 'told the customer' }],
        what_remains: ['refund order 77', 'tell the customer'],
      },
    });
    expect(filed.ok()).toBeTruthy();
    const { id } = (await filed.json()) as { id: string };
    await signIn(page, ALICE);
    await page.goto(`/escalations/${id}`);
    await waitForHydration(page);
    await expect(page.getByTestId('blocking')).toContainText('budget exceeded');
    await noSidewaysScroll(page);
  });
});

test('the navigation count follows a decision at once', async ({ page, request }) => {
  const created = await request.post('/api/v1/approvals', {
    headers: { Authorization: `Bearer ${agentToken()}` },
    data: { run_id: `run-e2e-navcount-${Date.now()}`, tool: 'send_email', arguments: { to: 'ana@example.com' } },
  });
  expect(created.status()).toBe(201);
  const { id } = (await created.json()) as { id: string };
  await signIn(page, ALICE);
  await page.goto(`/approvals/${id}`);
  await waitForHydration(page);
  const count = page.getByTestId('nav-approvals');
  await expect(count).toBeVisible();
  const before = Number(await count.textContent());
  await page.getByRole('button', { name: 'Approve this exact payload' }).click();
  await expect(page.getByTestId('outcome')).toBeVisible();
  // Well before the 15 s poll: the decision itself refreshes the count.
  if (before > 1) await expect(count).toHaveText(String(before - 1), { timeout: 5000 });
  else await expect(count).toHaveCount(0, { timeout: 5000 });
});
