// A big run, as operators meet them: 1,300 spans over many pages, 40 side effects, a
// failure that ended the run on the last page. The waterfall comes before the cost tables,
// the side-effect table is capped, "Failed in" opens the failing span on its page, the
// search finds a span by an attribute value and jumps to its page, the error stepper goes
// to it, a subtree zooms, Escape closes the panel, and the page is sent compressed.
import { expect, test } from '@playwright/test';
import { ALICE, agentToken, failOnConsoleErrors, otlpURL, signIn, waitForHydration } from './helpers';

const attr = (key: string, value: string) => ({ key, value: { stringValue: value } });

test('a 1,300-span run is navigable: failure, search, errors, zoom, Escape', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const runId = `run-e2e-big-${Date.now()}`;
  const trace = 'b1'.repeat(16);
  const t0 = BigInt(Date.now() - 20 * 60_000) * 1_000_000n;
  const id = (n: number) => n.toString(16).padStart(16, '0');
  const at = (ms: number) => String(t0 + BigInt(ms) * 1_000_000n);
  const spans: object[] = [{
    traceId: trace, spanId: id(1), parentSpanId: '', name: 'agent.run', kind: 1,
    startTimeUnixNano: at(0), endTimeUnixNano: at(1_300_000), attributes: [attr('run.id', runId)],
    status: { code: 2, message: 'the agent gave up' },
  }];
  // 130 steps of 10 spans: a model call, reads, and every 13th step a write.
  for (let step = 0; step < 130; step++) {
    const stepId = 1000 + step;
    const start = step * 10_000;
    const lastStep = step === 129;
    spans.push({
      traceId: trace, spanId: id(stepId), parentSpanId: id(1), name: `step ${step}`, kind: 1,
      startTimeUnixNano: at(start), endTimeUnixNano: at(start + 9_000),
      attributes: [attr('step.index', String(step))], ...(lastStep ? { status: { code: 2 } } : {}),
    });
    for (let k = 0; k < 9; k++) {
      const spanNo = 10_000 + step * 10 + k;
      const write = k === 0 && step % 3 === 0;
      const tool = write ? 'create_ticket' : step === 77 && k === 4 ? 'lookup_customer' : 'read_doc';
      const failing = lastStep && k === 8;
      spans.push({
        traceId: trace, spanId: id(spanNo), parentSpanId: id(stepId), name: `tool ${tool}`, kind: 1,
        startTimeUnixNano: at(start + k * 900), endTimeUnixNano: at(start + k * 900 + 800),
        attributes: [
          attr('tool.name', tool), attr('tool.side_effect', write ? 'write' : 'read'),
          ...(tool === 'lookup_customer' ? [attr('customer', 'ACME-4471')] : []),
        ],
        ...(failing ? {
          status: { code: 2, message: 'timezone lookup failed' },
          events: [{
            name: 'exception', timeUnixNano: at(start + k * 900 + 700),
            attributes: [attr('exception.type', 'ValueError'), attr('exception.message', 'unknown timezone Mars/Olympus'),
              attr('exception.stacktrace', 'Traceback (most recent call last):\n  File "agent.py", line 12, in tz\nValueError: unknown timezone')],
          }],
        } : {}),
      });
    }
  }
  const res = await request.post(otlpURL(), {
    headers: { Authorization: `Bearer ${agentToken()}`, 'Content-Type': 'application/json' },
    data: { resourceSpans: [{ resource: { attributes: [attr('service.name', 'big-agent')] }, scopeSpans: [{ spans }] }] },
  });
  expect(res.status()).toBe(200);

  await signIn(page, ALICE);
  const loaded = await page.goto(`/runs/${runId}`);
  expect(loaded!.headers()['content-encoding']).toBe('gzip');
  await waitForHydration(page);

  // The waterfall comes before the cost tables; the side-effect table shows ten of 44.
  const waterfall = await page.getByTestId('waterfall').boundingBox();
  const cost = await page.getByTestId('cost').boundingBox();
  expect(waterfall!.y).toBeLessThan(cost!.y);
  const effects = page.getByTestId('side-effects');
  await expect(effects.locator(':scope > table tbody tr')).toHaveCount(10);
  await expect(effects.getByTestId('side-effects-more')).toContainText('Show all 44 side effects');

  // "Failed in" names the failure that ended the run and opens it on its page.
  const failure = page.getByTestId('run-failure');
  await expect(failure).toContainText('unknown timezone Mars/Olympus');
  await failure.getByTestId('failure-span').click();
  await expect(page).toHaveURL(/page=3/);
  const panel = page.getByTestId('span-panel');
  await expect(panel).toContainText('tool read_doc');
  // Events are readable: their time, and the stack trace with its line breaks.
  await expect(panel.getByTestId('span-events')).toContainText('+700.0 ms');
  expect(await panel.getByTestId('stacktrace').innerText()).toContain('File "agent.py", line 12, in tz\nValueError');
  // Escape closes the panel.
  await page.keyboard.press('Escape');
  await expect(page.getByTestId('span-placeholder')).toBeVisible();

  // Search by an attribute value: the hit is on another page, one click away.
  await page.goto(`/runs/${runId}`);
  await waitForHydration(page);
  await page.getByRole('searchbox', { name: 'Find in this trace' }).fill('acme-4471');
  await page.getByTestId('trace-search').getByRole('button', { name: 'Find' }).click();
  const hits = page.getByTestId('trace-matches');
  await expect(hits).toContainText('1 span match “acme-4471”');
  await hits.getByRole('link', { name: 'tool lookup_customer' }).click();
  await expect(page).toHaveURL(/page=2/);
  await expect(page.getByTestId('span-panel')).toContainText('ACME-4471');

  // The error stepper goes from error to error, across pages.
  await expect(page.getByTestId('error-stepper')).toContainText('Errors: 3');
  await page.getByTestId('error-stepper').getByRole('link', { name: 'next Errors' }).click();
  await expect(page.getByTestId('span-panel')).toContainText('agent.run');

  // Zoom into the last step: its spans alone, on their own axis; and back out.
  await page.goto(`/runs/${runId}?page=3`);
  await waitForHydration(page);
  const lastStep = page.locator('.wf-row', { hasText: 'step 129' });
  await lastStep.getByRole('link', { name: 'zoom' }).click();
  await expect(page.getByTestId('zoomed')).toContainText('step 129');
  await expect(page.locator('.trace-tree h2')).toContainText('10 spans under step 129');
  await page.getByTestId('zoomed').getByRole('link', { name: 'Show the whole run' }).click();
  await expect(page.locator('.trace-tree h2')).toContainText('1301 spans');

  // Collapse all: only the root's row is shown.
  await page.getByTestId('collapse-all').click();
  await expect(page.locator('.waterfall > details.wf-node')).not.toHaveAttribute('open', '');
  expect(errors).toEqual([]);
});
