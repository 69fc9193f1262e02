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
  await open.getByTestId('settle-happened').getByLabel('External id, if known').fill('ch_e2e_9');
  // The tool cannot be undone: the operator confirms they checked.
  await open.getByTestId('settle-happened').getByRole('checkbox').check();
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

test('two unknown calls are settled each with its own answer, and nothing typed for one reaches the other', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-two-unknown-${Date.now()}`;
  const auth = { Authorization: `Bearer ${agentToken()}` };
  await signIn(page, ALICE);
  await page.goto('/admin/policies');
  await waitForHydration(page);
  const form = page.getByTestId('save-policy');
  await form.getByLabel('Tool name or pattern').fill('notify_e2e');
  await form.getByLabel('Side effect').selectOption('write');
  await form.getByLabel('Call timeout (seconds)').fill('1');
  await form.getByRole('button', { name: 'Save policy' }).click();
  await expect(page.getByTestId('policy-table')).toContainText('notify_e2e');

  const span = spanMaker('f8');
  await exportSpans(request, 'notifier', [span('01', null, 'agent.run', [attr('run.id', runId)])]);
  const call = (step: number) => ({ run_id: runId, step_index: step, tool: 'notify_e2e', arguments: { step, text: `line one\nline ${step}` } });
  for (const step of [1, 2]) {
    expect((await (await request.post('/api/v1/calls', { headers: auth, data: call(step) })).json()).answer).toBe('proceed');
  }
  await new Promise((r) => setTimeout(r, 1_300));
  const unknown = [];
  for (const step of [1, 2]) {
    const answer = await (await request.post('/api/v1/calls', { headers: auth, data: call(step) })).json();
    expect(answer.answer).toBe('outcome_unknown');
    unknown.push(answer.call);
  }
  expect(unknown[1].escalation_id).toBe(unknown[0].escalation_id);

  await page.goto(`/escalations/${unknown[0].escalation_id}`);
  await waitForHydration(page);
  // Both calls are in the headline and the checklist, each with its arguments.
  await expect(page.getByTestId('unknown-headline')).toContainText('2 calls of unknown outcome');
  await expect(page.getByTestId('what-remains')).toContainText(unknown[0].natural_key);
  await expect(page.getByTestId('what-remains')).toContainText(unknown[1].natural_key);
  const first = page.locator(`[data-call="${unknown[0].id}"]`);
  const second = page.locator(`[data-call="${unknown[1].id}"]`);
  await expect(first.getByTestId('unknown-call-arguments')).toContainText('line 1');
  await expect(second.getByTestId('unknown-call-arguments')).toContainText('line 2');

  await first.getByLabel('External id, if known').fill('msg_first');
  await first.getByRole('button', { name: 'It happened' }).click();
  await expect(page.locator(`[data-call="${unknown[0].id}"]`)).toHaveCount(0);
  // The second call's form is its own: nothing typed for the first is in it.
  await expect(second.getByLabel('External id, if known')).toHaveValue('');
  await second.getByRole('button', { name: 'It did not' }).click();
  await expect(page.getByTestId('unknown-outcomes')).toHaveCount(0);

  // What was stored: the first happened with its id, the second did not, with none.
  const firstAnswer = await (await request.post('/api/v1/calls', { headers: auth, data: call(1) })).json();
  expect([firstAnswer.answer, firstAnswer.call.external_id]).toEqual(['already_done', 'msg_first']);
  const secondRead = await (await request.get(`/api/v1/calls/${unknown[1].id}`, { headers: auth })).json();
  expect([secondRead.answer, secondRead.call.state, secondRead.call.external_id]).toEqual(['ask_again', 'not_done', null]);
  // Settling ticked both checklist items.
  await expect(page.getByTestId('what-remains').locator('li.done')).toHaveCount(2);
  expect(errors).toEqual([]);
});
