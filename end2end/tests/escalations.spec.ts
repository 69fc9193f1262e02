// The escalation queue in Chromium: an escalated run appears with its backlog age; an
// operator claims it, sees the side effect the agent did not mention highlighted, ticks the
// remaining items and resolves it; a viewer cannot claim.
import { expect, test, APIRequestContext } from '@playwright/test';
import {
  ALICE,
  VICTOR,
  attr,
  exportSpans,
  failOnConsoleErrors,
  agentToken,
  signIn,
  spanMaker,
  waitForHydration,
} from './helpers';

/// A run that sent two emails and escalated, reported by its traces and by the API; the
/// agent claims only the first email.
async function escalate(request: APIRequestContext, runId: string, traceByte: string) {
  const span = spanMaker(traceByte);
  const email = (id: string, key: string, ext: string) =>
    span(id, '01', 'tool send_email', [
      attr('tool.name', 'send_email'),
      attr('tool.side_effect', 'irreversible'),
      attr('tool.idempotency_key', key),
      attr('tool.external_id', ext),
    ]);
  await exportSpans(request, 'support-agent', [
    span('01', null, 'agent.run', [attr('run.id', runId), attr('escalation.reason', 'insufficient_permission')]),
    email('02', `${runId}-k1`, `${runId}-msg_1`),
    email('03', `${runId}-k2`, `${runId}-msg_2`),
  ]);
  const api = await request.post('/api/v1/escalations', {
    headers: { Authorization: `Bearer ${agentToken()}` },
    data: {
      run_id: runId,
      reason: 'insufficient_permission',
      blocking_fact: 'Refunds over 500 EUR need a manager',
      what_was_done: [{ tool: 'send_email', idempotency_key: `${runId}-k1`, description: 'told the customer' }],
      what_remains: ['refund order 77', { description: 'tell the customer it is done' }],
    },
  });
  expect(api.status()).toBe(200); // merged into the escalation the traces opened
  return (await api.json()) as { id: string };
}

test('an operator takes over an escalated run', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-esc-${Date.now()}`;
  const escalation = await escalate(request, runId, 'e5');

  await signIn(page, ALICE);
  await waitForHydration(page);
  await expect(page.getByTestId('nav-escalations')).toBeVisible();
  await page.goto('/escalations');
  const row = page.locator(`tr[data-run="${runId}"]`);
  await expect(row.locator('td.age')).toHaveText(/^\d+ (s|min)$/);
  await expect(row).toContainText('unclaimed');
  await row.getByRole('link', { name: 'Open' }).click();
  await expect(page).toHaveURL(new RegExp(`/escalations/${escalation.id}$`));
  await waitForHydration(page);

  await expect(page.getByTestId('blocking')).toContainText('Refunds over 500 EUR need a manager');
  const unclaimed = page.getByTestId('observed-not-claimed');
  await expect(unclaimed).toContainText(`${runId}-msg_2`);
  await expect(unclaimed).not.toContainText(`${runId}-msg_1`);
  await expect(page.getByTestId('claimed-and-observed')).toContainText(`${runId}-k1`);

  await page.getByRole('button', { name: 'Claim' }).click();
  await expect(page.getByTestId('claimed-by')).toHaveText('Claimed by alice');
  for (const item of ['refund order 77', 'tell the customer it is done']) {
    await page.getByRole('button', { name: `Mark “${item}” done` }).click();
    await expect(page.getByRole('button', { name: `Mark “${item}” not done` })).toHaveAttribute('aria-pressed', 'true');
  }
  const resolve = page.getByTestId('resolve');
  await resolve.getByLabel('Outcome').selectOption('completed_by_human');
  await resolve.getByLabel('Note (required)').fill('Manager refunded the order; customer told.');
  await resolve.getByRole('button', { name: 'Resolve' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Resolved as completed by human by alice');
  await expect(page.getByTestId('timeline')).toContainText('item done');

  const state = await request.get(`/api/v1/escalations/${escalation.id}`, { headers: { Authorization: `Bearer ${agentToken()}` } });
  const body = await state.json();
  expect(body.open).toBe(false);
  expect(body.outcome).toBe('completed_by_human');
  expect(errors).toEqual([]);
});

test('a viewer cannot claim', async ({ page, request }) => {
  const runId = `run-e2e-esc-viewer-${Date.now()}`;
  const escalation = await escalate(request, runId, 'e6');
  await signIn(page, VICTOR);
  await page.goto(`/escalations/${escalation.id}`);
  await expect(page.getByTestId('cannot-act')).toContainText('operator role');
  await expect(page.getByRole('button', { name: 'Claim' })).toHaveCount(0);
  const forged = await page.request.post('/fn/claim_escalation', {
    form: { id: escalation.id },
    headers: { 'Sec-Fetch-Site': 'same-origin' },
  });
  expect(forged.status()).toBe(403);
});

/// A run of `service` that needed a person `hoursAgo` hours ago: its `escalation` span event
/// says so, though its spans arrive now.
async function escalatedEarlier(request: APIRequestContext, service: string, runId: string, traceByte: string, reason: string, hoursAgo: number) {
  const needed = BigInt(Date.now() - hoursAgo * 3_600_000) * 1_000_000n;
  const hour = 3_600_000_000_000n;
  await exportSpans(request, service, [{
    traceId: traceByte.repeat(16),
    spanId: '01'.repeat(8),
    parentSpanId: '',
    name: 'agent.run',
    kind: 1,
    startTimeUnixNano: String(needed - hour),
    endTimeUnixNano: String(needed + 60_000_000_000n),
    attributes: [attr('run.id', runId)],
    events: [{ timeUnixNano: String(needed), name: 'escalation', attributes: [attr('escalation.reason', reason), attr('blocking_fact', 'the refund is over the limit')] }],
  }]);
}

test('the queue waits from when the run needed a person, reads reasons in words and filters', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const stamp = Date.now();
  const early = `run-e2e-esc-early-${stamp}`;
  const other = `run-e2e-esc-other-${stamp}`;
  await escalatedEarlier(request, 'refunds-agent', early, 'e7', 'budget exceeded', 2);
  await escalatedEarlier(request, 'refunds-agent', other, 'e8', 'low confidence', 0);
  await signIn(page, ALICE);
  await page.goto('/escalations');
  await waitForHydration(page);
  const row = page.locator(`tr[data-run="${early}"]`);
  await expect(row.locator('td.age')).toHaveText('2 h');
  await expect(row.locator('[data-reason="budget_exceeded"]')).toHaveText('budget exceeded');
  await expect(page.locator(`tr[data-run="${other}"] td.age`)).toHaveText(/^\d+ (s|min)$/);

  // Filter: reason and agent from the form; the address keeps them.
  const filters = page.getByTestId('queue-filters');
  await filters.getByLabel('Reason').selectOption('budget_exceeded');
  await filters.getByLabel('Agent').selectOption('refunds-agent');
  await filters.getByRole('button', { name: 'Filter' }).click();
  await expect(page).toHaveURL(/reason=budget_exceeded/);
  await expect(page).toHaveURL(/agent=refunds-agent/);
  await expect(page.locator(`tr[data-run="${early}"]`)).toBeVisible();
  await expect(page.locator(`tr[data-run="${other}"]`)).toHaveCount(0);
  await expect(page.getByTestId('queue-count')).toContainText('matching the filters');
  await page.reload();
  await expect(page.getByTestId('queue-filters').getByLabel('Reason')).toHaveValue('budget_exceeded');
  await page.goto('/escalations?age=1h&agent=refunds-agent');
  await expect(page.locator(`tr[data-run="${early}"]`)).toBeVisible();
  await expect(page.locator(`tr[data-run="${other}"]`)).toHaveCount(0);
  expect(errors).toEqual([]);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the queue filters through its form', async ({ page, request }) => {
    const runId = `run-e2e-esc-nojs-${Date.now()}`;
    await escalatedEarlier(request, 'nojs-agent', runId, 'e9', 'contradictory information', 1);
    await signIn(page, ALICE);
    await page.goto('/escalations');
    const filters = page.getByTestId('queue-filters');
    await filters.getByLabel('Agent').selectOption('nojs-agent');
    await filters.getByLabel('Waiting').selectOption('15m');
    await filters.getByRole('button', { name: 'Filter' }).click();
    await expect(page).toHaveURL(/agent=nojs-agent.*age=15m/);
    await expect(page.locator('tbody tr')).toHaveCount(1);
    await expect(page.locator(`tr[data-run="${runId}"] [data-reason]`)).toHaveText('contradictory information');
  });
});
