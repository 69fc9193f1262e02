// Guarded calls in Chromium: an admin gives a tool a one-second call timeout; an agent's
// call starts and never reports, so the ledger opens an escalation; an operator settles it
// from the escalation page ("It happened", with the external id) and the run page lists
// the call; the agent's next ask is told already_done.
import { expect, test } from '@playwright/test';
import { ALICE, agentToken, attr, exportSpans, failOnConsoleErrors, signIn, spanMaker, waitForHydration } from './helpers';

test('an unknown outcome is settled from the escalation page', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-ledger-${Date.now()}`;
  const auth = { Authorization: `Bearer ${agentToken()}` };

  await signIn(page, ALICE);
  await page.goto('/admin/policies');
  await waitForHydration(page);
  const form = page.getByTestId('save-policy');
  await form.getByLabel('Tool name or pattern').fill('charge_card_e2e');
  await form.getByLabel('Side effect').selectOption('irreversible');
  await form.getByLabel('Call timeout (seconds)').fill('1');
  await form.getByRole('button', { name: 'Save policy' }).click();
  await expect(page.getByTestId('policy-table')).toContainText('timeout 1 s');

  // The run exists in the traces; its charge is asked for and never reported.
  const span = spanMaker('f7');
  await exportSpans(request, 'billing-agent', [span('01', null, 'agent.run', [attr('run.id', runId)])]);
  const call = { run_id: runId, step_index: 2, tool: 'charge_card_e2e', arguments: { amount: 500, order: 77 } };
  const first = await request.post('/api/v1/calls', { headers: auth, data: call });
  expect((await first.json()).answer).toBe('proceed');
  await new Promise((r) => setTimeout(r, 1_300));
  const unknown = await (await request.post('/api/v1/calls', { headers: auth, data: call })).json();
  expect(unknown.answer).toBe('outcome_unknown');

  await page.goto(`/escalations/${unknown.call.escalation_id}`);
  await waitForHydration(page);
  const open = page.getByTestId('unknown-call');
  await expect(open).toContainText(unknown.call.natural_key);
  await open.getByPlaceholder('external id, if known').fill('ch_e2e_9');
  await open.getByRole('button', { name: 'It happened' }).click();
  await expect(page.getByTestId('unknown-outcomes')).toHaveCount(0);
  await expect(page.getByTestId('ledger-done')).toContainText('ch_e2e_9');
  await expect(page.getByTestId('timeline')).toContainText('happened');

  await page.goto(`/runs/${runId}`);
  await waitForHydration(page);
  const calls = page.getByTestId('run-calls');
  await expect(calls).toContainText('charge_card_e2e');
  await expect(calls.getByTestId('call-row')).toContainText('succeeded');

  const after = await (await request.post('/api/v1/calls', { headers: auth, data: call })).json();
  expect(after.answer).toBe('already_done');
  expect(after.call.external_id).toBe('ch_e2e_9');
  expect(errors).toEqual([]);
});
