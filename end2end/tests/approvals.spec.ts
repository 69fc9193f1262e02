// The approval inbox in Chromium: an agent's request appears, the approver reads the whole
// payload (as text, invisible characters marked), approving wakes the agent's long poll, a
// viewer cannot decide, and a denial shows its reason.
import { expect, test, APIRequestContext } from '@playwright/test';
import fs from 'node:fs';
import { dataDir } from '../playwright.config';
import { ALICE, VICTOR, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

const token = () => fs.readFileSync(`${dataDir}/token`, 'utf8').trim();
const auth = () => ({ Authorization: `Bearer ${token()}` });

// Long enough that the table preview must cut it; the request page must not.
const longBody = 'Dear Ana,\n\n' + 'The invoice for November is attached. '.repeat(40) + '\n\tRegards  ';

async function requestApproval(request: APIRequestContext, key: string, body: string) {
  const response = await request.post('/api/v1/approvals', {
    headers: auth(),
    data: {
      run_id: `run-e2e-approval-${key}`,
      step_index: 2,
      tool: 'send_email',
      idempotency_key: key,
      agent: 'billing-agent',
      arguments: { to: 'ana@example.com', subject: 'Invoice <November>', body },
      display: [
        { label: 'Recipient', value: 'ana@example.com' },
        { label: 'Subject', value: 'Invoice <November>' },
        { label: 'Body', value: body },
      ],
    },
  });
  expect(response.status()).toBe(201);
  return (await response.json()) as { id: string; payload_sha256: string };
}

test('the approver sees the full payload and approving wakes the waiting agent', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const created = await requestApproval(request, `wake-${Date.now()}`, longBody);
  // The agent waits for the decision, as an agent would.
  const waiting = request.get(`/api/v1/approvals/${created.id}?wait=50`, { headers: auth(), timeout: 60_000 });

  await signIn(page, ALICE);
  await waitForHydration(page);
  await expect(page.getByTestId('nav-approvals')).toBeVisible();
  await page.getByRole('link', { name: /Approvals/ }).first().click();
  const row = page.locator(`tr[data-approval="${created.id}"]`);
  await expect(row).toContainText('send_email');
  await expect(row).toContainText('billing-agent');
  await row.getByRole('link', { name: 'Review' }).click();
  await expect(page).toHaveURL(new RegExp(`/approvals/${created.id}$`));

  const fields = page.getByTestId('display-fields');
  await expect(fields).toContainText('Invoice <November>');
  const bodyText = await fields.locator('pre').nth(2).innerText();
  // Every character is there: the body's text, its tab and trailing spaces marked.
  expect(bodyText).toContain('The invoice for November is attached. '.repeat(40).trim());
  expect(bodyText).toContain('⇥');
  expect(bodyText).toContain('··');
  await expect(page.getByTestId('arguments')).toContainText('"subject": "Invoice <November>"');
  await expect(page.getByTestId('payload-sha')).toHaveText(created.payload_sha256);

  await page.getByRole('button', { name: 'Approve this exact payload' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Approved by alice');
  const decided = await waiting;
  expect(decided.status()).toBe(200);
  const body = await decided.json();
  expect(body.status).toBe('approved');
  expect(body.decided_by).toBe('alice');
  expect(errors).toEqual([]);
});

test('a viewer cannot decide', async ({ page, request }) => {
  const created = await requestApproval(request, `viewer-${Date.now()}`, 'short body');
  await signIn(page, VICTOR);
  await page.goto(`/approvals/${created.id}`);
  await expect(page.getByTestId('cannot-decide')).toContainText('needs the approver role');
  await expect(page.getByRole('button', { name: 'Approve this exact payload' })).toHaveCount(0);
  // Even a hand-made request is refused by the server.
  const forged = await page.request.post('/fn/decide_approval', {
    form: { id: created.id, decision: 'approve', payload_sha256: created.payload_sha256, reason: '' },
    headers: { 'Sec-Fetch-Site': 'same-origin' },
  });
  expect(forged.status()).toBe(403);
});

test('a denied request shows its reason', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const created = await requestApproval(request, `deny-${Date.now()}`, 'Please wire 90,000 EUR');
  await signIn(page, ALICE);
  await page.goto(`/approvals/${created.id}`);
  await waitForHydration(page);
  await page.getByLabel(/Reason/).fill('Wrong account <b>number</b>');
  await page.getByRole('button', { name: 'Deny' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Denied by alice');
  await expect(page.getByTestId('decision-reason')).toHaveText('Wrong account <b>number</b>');

  await page.goto('/approvals?view=decided&status=denied');
  await expect(page.locator(`tr[data-approval="${created.id}"]`)).toContainText('Wrong account <b>number</b>');
  const agentView = await request.get(`/api/v1/approvals/${created.id}`, { headers: auth() });
  expect((await agentView.json()).reason).toBe('Wrong account <b>number</b>');
  expect(errors).toEqual([]);
});
