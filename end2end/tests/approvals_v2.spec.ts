// Approvals v2 in Chromium: an approver edits the arguments before approving (the schema
// refuses a bad edit, the agent gets the edited payload); a rule is tried on history and
// then requires two people; several requests of one tool are decided together; and a
// request is approved on a phone-sized screen.
import { expect, test, APIRequestContext, Page } from '@playwright/test';
import { ALICE, BOB, agentToken, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

const auth = () => ({ Authorization: `Bearer ${agentToken()}` });

async function file(request: APIRequestContext, tool: string, key: string, args: object) {
  const response = await request.post('/api/v1/approvals', {
    headers: auth(),
    data: { run_id: `run-e2e-v2-${key}`, step_index: 1, tool, idempotency_key: key, agent: 'refund-agent', arguments: args },
  });
  expect(response.status()).toBe(201);
  return (await response.json()) as { id: string; payload_sha256: string; status: string };
}

async function policy(page: Page, tool: string, schema?: string) {
  await page.goto('/admin/policies');
  await waitForHydration(page);
  const form = page.getByTestId('save-policy');
  await form.getByLabel('Tool name or pattern').fill(tool);
  await form.getByLabel('Side effect').selectOption('irreversible');
  await form.getByLabel('Requires approval').check();
  if (schema) await form.getByLabel('Arguments JSON Schema (optional)').fill(schema);
  await form.getByRole('button', { name: 'Save policy' }).click();
  await expect(page.getByTestId('policy-table')).toContainText(tool);
}

test('an approver edits the arguments, the schema refuses a bad edit, and the agent gets the edited payload', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const tool = `refund_e2e_${Date.now()}`;
  await signIn(page, ALICE);
  await policy(page, tool, '{"type": "object", "properties": {"amount": {"type": "integer", "maximum": 100}}}');
  const created = await file(request, tool, `edit-${Date.now()}`, { order: 'o-1', amount: 500 });

  await page.goto(`/approvals/${created.id}`);
  await waitForHydration(page);
  await page.getByText('Edit the arguments before approving').click();
  const input = page.getByTestId('arguments-input');
  await expect(input).toHaveValue(/"amount": 500/);
  await input.fill('{"order": "o-1", "amount": 5000}');
  // The button says what it approves once the arguments are edited.
  await expect(page.getByTestId('approve-button')).toHaveText('Approve the edited payload');
  await page.getByRole('button', { name: 'Approve the edited payload' }).click();
  await expect(page.getByTestId('decide')).toContainText('do not match the tool\'s schema');
  await expect(page.getByTestId('approval-status')).toContainText('pending');

  await input.fill('{"order": "o-1", "amount": 50}');
  await page.getByTestId('respond-approve').fill('Approved 50, not 500.');
  await page.getByRole('button', { name: 'Approve the edited payload' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Approved with changes by alice');
  await expect(page.getByTestId('edit-changes')).toContainText('~ /amount: 500 → 50');
  await expect(page.getByTestId('edit-by')).toHaveText('alice');
  await expect(page.getByTestId('respond')).toContainText('Approved 50, not 500.');

  const seen = await (await request.get(`/api/v1/approvals/${created.id}`, { headers: auth() })).json();
  expect(seen.status).toBe('approved_with_changes');
  expect(seen.arguments).toEqual({ order: 'o-1', amount: 50 });
  expect(seen.original_payload_sha256).toBe(created.payload_sha256);
  // The refused edit's 400 is the only error the console saw.
  expect(errors.filter((e) => !e.includes('400 (Bad Request)'))).toEqual([]);
});

test('an edit typed while the page reloads after a refused approval keeps the button saying it approves the edit', async ({ page, request }) => {
  const tool = `refund_e2e_${Date.now()}`;
  await signIn(page, ALICE);
  await policy(page, tool, '{"type": "object", "properties": {"amount": {"type": "integer", "maximum": 100}}}');
  const created = await file(request, tool, `reload-${Date.now()}`, { order: 'o-1', amount: 500 });
  await page.goto(`/approvals/${created.id}`);
  await waitForHydration(page);
  await page.getByText('Edit the arguments before approving').click();
  const input = page.getByTestId('arguments-input');
  await input.fill('{"order": "o-1", "amount": 5000}');

  // The reload that follows the refusal is held back until the approver has typed, as a
  // slow network would: the page is rebuilt around an editor that already holds the edit.
  let release: () => void = () => {};
  const typed = new Promise<void>((resolve) => { release = resolve; });
  await page.route('**/fn/load_approval*', async (route) => { await typed; await route.continue(); });
  const reloaded = page.waitForResponse((r) => r.url().includes('/fn/load_approval'));
  await page.getByRole('button', { name: 'Approve the edited payload' }).click();
  await expect(page.getByTestId('decide')).toContainText('do not match the tool\'s schema');
  await input.fill('{"order": "o-1", "amount": 50}');
  await expect(page.getByTestId('approve-button')).toHaveText('Approve the edited payload');
  release();
  await reloaded;
  await page.unroute('**/fn/load_approval*');
  await waitForHydration(page);

  await expect(input).toHaveValue('{"order": "o-1", "amount": 50}');
  await expect(page.getByTestId('approve-button')).toHaveText('Approve the edited payload');
  await page.getByTestId('approve-button').click();
  await expect(page.getByTestId('outcome')).toContainText('Approved with changes by alice');
  const seen = await (await request.get(`/api/v1/approvals/${created.id}`, { headers: auth() })).json();
  expect(seen.status).toBe('approved_with_changes');
  expect(seen.arguments).toEqual({ order: 'o-1', amount: 50 });
});

test('a rule is tried on history, then two people approve what it sends them', async ({ page, browser, request }) => {
  const errors = failOnConsoleErrors(page);
  const tool = `wire_e2e_${Date.now()}`;
  await signIn(page, ALICE);
  await policy(page, tool);
  // History: alice denied a small wire that an auto-approve rule would have let through.
  const small = await file(request, tool, `h-${Date.now()}`, { to: 'acct-9', amount: 40 });
  await page.goto(`/approvals/${small.id}`);
  await waitForHydration(page);
  await page.getByTestId('deny-form').getByLabel(/Reason/).fill('unknown account');
  await page.getByRole('button', { name: 'Deny' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Denied by alice');

  await page.goto('/admin/rules');
  await waitForHydration(page);
  const trial = page.getByTestId('try-rule');
  await trial.getByLabel('Tool policy').selectOption(tool);
  await trial.getByLabel('When (CEL)').fill('args.amount < 100');
  await trial.getByLabel('Then').selectOption('auto_approve');
  await trial.getByRole('button', { name: 'Try on history' }).click();
  const report = page.getByTestId('rule-report');
  await expect(report.getByTestId('report-matched')).toHaveText('1');
  await expect(report.getByTestId('disagreements')).toContainText('"amount":40');
  await expect(report.getByTestId('disagreements')).toContainText('denied by alice');

  // A bad expression is refused with its position.
  const save = page.getByTestId('save-rule');
  await save.getByLabel('Name').fill(`two-${Date.now()}`);
  await save.getByLabel('Tool policy').selectOption(tool);
  await save.getByLabel('When (CEL)').fill('args.amount >>= 1000');
  await save.getByLabel('Then').selectOption('require_approval');
  await save.getByLabel('Approvers').fill('2');
  await save.getByLabel('Mode').selectOption('enforce');
  await save.getByRole('button', { name: 'Save rule' }).click();
  await expect(page.getByTestId('rule-form')).toContainText('line 1, column');
  // What was typed is kept after a refusal; only the expression changes.
  await expect(save.getByLabel('Approvers')).toHaveValue('2');
  await save.getByLabel('When (CEL)').fill('args.amount >= 1000');
  await save.getByRole('button', { name: 'Save rule' }).click();
  await expect(page.getByTestId('rule-table')).toContainText('require_approval (2 approvers)');

  const big = await file(request, tool, `big-${Date.now()}`, { to: 'acct-1', amount: 5000 });
  await page.goto(`/approvals/${big.id}`);
  await waitForHydration(page);
  await expect(page.getByTestId('approvals-needed')).toContainText('0 of 2 approvals');
  await page.getByRole('button', { name: 'Approve this exact payload' }).click();
  await expect(page.getByTestId('approvals-needed')).toContainText('1 of 2 approvals');
  await expect(page.getByTestId('approve-blocked')).toContainText('needs another person');
  await expect(page.getByTestId('approval-status')).toContainText('pending');

  const bobContext = await browser.newContext();
  const bob = await bobContext.newPage();
  await signIn(bob, BOB);
  await bob.goto(`/approvals/${big.id}`);
  await waitForHydration(bob);
  await expect(bob.getByTestId('approvals-needed')).toContainText('approved by alice');
  await bob.getByRole('button', { name: 'Approve this exact payload' }).click();
  await expect(bob.getByTestId('outcome')).toContainText('Approved by alice and bob');
  await bobContext.close();
  const seen = await (await request.get(`/api/v1/approvals/${big.id}`, { headers: auth() })).json();
  expect([seen.status, seen.approvals_given]).toEqual(['approved', 2]);
  expect(errors.filter((e) => !e.includes('400 (Bad Request)'))).toEqual([]);
});

test('several requests of one tool are decided together, each on its own hash', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const tool = `bulk_e2e_${Date.now()}`;
  const stamp = Date.now();
  const made = [];
  for (const amount of [10, 20, 30]) made.push(await file(request, tool, `b${amount}-${stamp}`, { order: 'o-7', amount }));

  await signIn(page, ALICE);
  await page.goto(`/approvals?tool=${tool}`);
  await waitForHydration(page);
  for (const m of made) await page.locator(`tr[data-approval="${m.id}"] input[type=checkbox]`).check();
  await page.getByRole('button', { name: 'Decide selected together' }).click();
  await expect(page).toHaveURL(/\/approvals\/bulk\?/);
  await waitForHydration(page);
  const table = page.getByTestId('bulk-table');
  await expect(table.locator('th.differs')).toHaveText(['amount']);
  await expect(page.getByTestId('bulk-same')).toContainText('o-7');
  await page.getByRole('button', { name: 'Approve these exact payloads' }).click();
  await expect(page.getByTestId('bulk-results').locator('li')).toHaveCount(3);
  await expect(page.getByTestId('bulk-results')).not.toContainText('refused');
  for (const m of made) {
    const seen = await (await request.get(`/api/v1/approvals/${m.id}`, { headers: auth() })).json();
    expect([seen.status, seen.payload_sha256]).toEqual(['approved', m.payload_sha256]);
  }
  expect(errors).toEqual([]);
});

test('a request is approved on a phone', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  await page.setViewportSize({ width: 390, height: 844 });
  const created = await file(request, 'send_email', `phone-${Date.now()}`, { to: 'ana@example.com', body: 'Invoice attached' });
  await signIn(page, ALICE);
  await page.goto('/approvals');
  await waitForHydration(page);
  await page.locator(`tr[data-approval="${created.id}"]`).getByRole('link', { name: 'Review' }).click();
  await waitForHydration(page);
  await expect(page.getByTestId('arguments')).toContainText('Invoice attached');
  const sideways = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  expect(sideways).toBe(false);
  await page.getByRole('button', { name: 'Approve this exact payload' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Approved by alice');
  expect(errors).toEqual([]);
});
