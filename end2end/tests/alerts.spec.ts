// Alerts for on-call in Chromium: a tool call that ran under a forged approval fires the
// approval-violation alert within seconds (the test server evaluates every second); on-call
// sees it with its figure and the run behind it, follows the link to the run, comes back
// and acknowledges it. A viewer sees the alert but cannot acknowledge it. On-call then
// silences alerts like it from the alert's page and ends the silence from the list.
import { expect, test, APIRequestContext } from '@playwright/test';
import { ALICE, VICTOR, attr, exportSpans, failOnConsoleErrors, signIn, spanMaker, waitForHydration } from './helpers';

/// A run whose tool call names an approval that was never granted.
async function forgedApproval(request: APIRequestContext, runId: string, traceByte: string) {
  const span = spanMaker(traceByte);
  await exportSpans(request, 'payments-agent', [
    span('01', null, 'agent.run', [attr('run.id', runId), attr('run.terminal_reason', 'completed')]),
    span('02', '01', 'tool wire_money', [
      attr('tool.name', 'wire_money'),
      attr('tool.side_effect', 'irreversible'),
      attr('tool.outcome', 'ok'),
      attr('approval.id', `apr_forged_${runId}`),
    ]),
  ]);
}

test('a viewer sees alerts but cannot acknowledge them', async ({ page, request }) => {
  const runId = `run-e2e-alert-viewer-${Date.now()}`;
  await forgedApproval(request, runId, 'a2');
  await signIn(page, VICTOR);
  await page.goto('/alerts');
  const card = page.locator('article[data-rule="approval_violation"]', {
    has: page.locator(`a[href="/runs/${runId}"]`),
  });
  await expect(card).toBeVisible({ timeout: 30_000 });
  await expect(card.getByTestId('acknowledge')).toHaveCount(0);
  await expect(card).toContainText('Acknowledging needs the operator role.');
});

// Runs after the viewer's test: the same alert (one per rule) is still firing here.
test('on-call sees a firing alert, follows it to the run and acknowledges it', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-alert-${Date.now()}`;
  await forgedApproval(request, runId, 'a1');

  await signIn(page, ALICE);
  await page.goto('/alerts');
  await waitForHydration(page);
  // The page refreshes itself: the alert appears without a reload once evaluated.
  const card = page.locator('article[data-rule="approval_violation"]', {
    has: page.locator(`a[href="/runs/${runId}"]`),
  });
  await expect(card).toBeVisible({ timeout: 30_000 });
  await expect(card).toHaveAttribute('data-state', 'firing');
  await expect(card.locator('.badge.severity-page')).toHaveText('page');
  await expect(card.getByTestId('alert-title')).toContainText('ran without a valid approval');
  await expect(card).toContainText(`wire_money ran with unknown approval apr_forged_${runId}`);
  await expect(page.getByTestId('nav-alerts')).toBeVisible();
  await expect(page.getByTestId('last-evaluation')).toContainText('Rules last evaluated');

  await card.locator(`a[href="/runs/${runId}"]`).click();
  await expect(page).toHaveURL(new RegExp(`/runs/${runId}$`));
  await expect(page.getByRole('heading', { level: 1 })).toContainText(runId);

  await page.goBack();
  await waitForHydration(page);
  await expect(card).toBeVisible();
  await card.getByTestId('acknowledge').click();
  await expect(card).toHaveAttribute('data-state', 'acknowledged');
  await expect(card.getByTestId('acknowledged-by')).toContainText('Acknowledged by alice');
  await expect(card.getByTestId('acknowledge')).toHaveCount(0);
  expect(errors).toEqual([]);
});

// Runs after the two above: the approval-violation alert is still open.
test('on-call silences alerts like this one from its page and ends the silence from the list', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-alert-silence-${Date.now()}`;
  await forgedApproval(request, runId, 'a3');
  await signIn(page, ALICE);
  await page.goto('/alerts');
  const card = page.locator('article[data-rule="approval_violation"]').first();
  await expect(card).toBeVisible({ timeout: 30_000 });
  await card.locator('.alert-rule a').click();
  await expect(page).toHaveURL(/\/alerts\/alr_/);
  await waitForHydration(page);

  const form = page.getByTestId('silence-form');
  await expect(form.locator('select[name="rule"]')).toHaveValue('approval_violation');
  await expect(form.locator('input[name="agent"]')).toHaveValue('payments-agent');
  await form.locator('select[name="minutes"]').selectOption('60');
  await form.locator('textarea[name="reason"]').fill('forged approvals are a known test fixture');
  await form.getByTestId('create-silence').click();
  await expect(page.getByTestId('silence-created')).toContainText('Silenced rule “Tool ran without a valid approval”, agent payments-agent until');

  await page.goto('/alerts');
  await waitForHydration(page);
  const row = page.locator('[data-testid="silences"] tr[data-active="true"]', {
    hasText: 'forged approvals are a known test fixture',
  });
  await expect(row).toContainText('rule “Tool ran without a valid approval”');
  await expect(row).toContainText('alice');
  await row.getByTestId('end-silence').click();
  await expect(
    page.locator('[data-testid="silences"] tr[data-active="false"]', { hasText: 'forged approvals are a known test fixture' }),
  ).toContainText('ended by alice');
  expect(errors).toEqual([]);
});

// Runs after the silence test above ended its silence: the approval-violation alert is open.
test('a silence from an alert page must match it, keeps the chosen duration, and the page shows the timeline', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-alert-timeline-${Date.now()}`;
  await forgedApproval(request, runId, 'a4');
  await signIn(page, ALICE);
  await page.goto('/alerts');
  const card = page.locator('article[data-rule="approval_violation"]').first();
  await expect(card).toBeVisible({ timeout: 30_000 });
  // The count beside the list says what it counts.
  await expect(card.getByTestId('behind-it')).toHaveText(/^Behind it: \d+ runs?( and \d+ approval requests?)?$/);
  await card.locator('.alert-rule a').click();
  await expect(page).toHaveURL(/\/alerts\/alr_/);
  await waitForHydration(page);
  await expect(page.getByTestId('alert-timeline')).toContainText('Fired');

  const form = page.getByTestId('silence-form');
  await form.locator('select[name="minutes"]').selectOption('1440');
  await form.locator('input[name="agent"]').fill('someone-else');
  await form.locator('input[name="agent"]').blur();
  await form.locator('textarea[name="reason"]').fill('known forged approvals');
  await form.locator('textarea[name="reason"]').blur();
  await form.getByTestId('create-silence').click();
  await expect(form.locator('.error-box')).toContainText('would not match the alert it is made from');
  // What was chosen stays: after the refusal, and after a reload.
  await expect(form.locator('select[name="minutes"]')).toHaveValue('1440');
  await expect(form.locator('textarea[name="reason"]')).toHaveValue('known forged approvals');
  await page.reload();
  await waitForHydration(page);
  await expect(page.getByTestId('silence-form').locator('select[name="minutes"]')).toHaveValue('1440');
  await expect(page.getByTestId('silence-form').locator('textarea[name="reason"]')).toHaveValue('known forged approvals');

  await page.getByTestId('silence-form').locator('input[name="agent"]').fill('payments-agent');
  await page.getByTestId('silence-form').getByTestId('create-silence').click();
  await expect(page.getByTestId('silence-created')).toContainText('Silenced rule “Tool ran without a valid approval”, agent payments-agent until');
  // It matches the alert it was made from: the alert shows as silenced at once.
  await expect(page.getByTestId('silenced')).toContainText('Silenced:');
  await expect(page.getByTestId('alert-timeline')).toContainText('Silenced: further notifications held back by alice');
  await expect(page.getByTestId('silence-form').locator('select[name="minutes"]')).toHaveValue('1440');

  // Stored as chosen: a day.
  await page.goto('/alerts');
  const row = page.locator('[data-testid="silences"] tr[data-active="true"]', { hasText: 'known forged approvals' });
  await expect(row).toBeVisible();
  await row.getByTestId('end-silence').click();
  await expect(page.locator('[data-testid="silences"] tr[data-active="false"]', { hasText: 'known forged approvals' })).toContainText('ended by alice');
  // The refused submit's 400 is the one error the browser logs.
  expect(errors.filter((e) => !e.includes('status of 400'))).toEqual([]);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('a refused silence comes back with what was chosen', async ({ page, request }) => {
    await forgedApproval(request, `run-e2e-alert-nojs-${Date.now()}`, 'a5');
    await signIn(page, ALICE);
    await page.goto('/alerts');
    const card = page.locator('article[data-rule="approval_violation"]').first();
    await expect(card).toBeVisible({ timeout: 30_000 });
    await page.goto((await card.locator('.alert-rule a').getAttribute('href'))!);
    const form = page.getByTestId('silence-form');
    await form.locator('select[name="minutes"]').selectOption('10080');
    await form.locator('input[name="tool"]').fill('not_this_tool');
    await form.locator('textarea[name="reason"]').fill('a week of maintenance');
    await form.getByTestId('create-silence').click();
    await expect(page).toHaveURL(/minutes=10080/);
    await expect(page.locator('.error-box')).toContainText('not about the tool `not_this_tool` alone');
    await expect(page.getByTestId('silence-form').locator('select[name="minutes"]')).toHaveValue('10080');
    await expect(page.getByTestId('silence-form').locator('textarea[name="reason"]')).toHaveValue('a week of maintenance');
  });
});
