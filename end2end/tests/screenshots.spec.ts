// A screenshot of every page at desktop and phone width, for a reviewer to look at
// (end2end/artifacts/screenshots/<width>/<page>.png, kept by CI as an artifact), and on
// the way the promise that no page scrolls sideways on a phone. Runs last (`zz` order is
// not needed: it sends its own data and only reads).
import { expect, test, APIRequestContext, Page } from '@playwright/test';
import fs from 'node:fs';
import path from 'node:path';
import { ALICE, agentToken, attr, exportSpans, signIn, spanMaker, waitForHydration } from './helpers';

const OUT = path.join(__dirname, '..', 'artifacts', 'screenshots');

const VIEWPORTS = [
  { name: 'desktop', width: 1366, height: 900 },
  { name: 'phone', width: 390, height: 844 },
];

/// Calls a server function as the signed-in page would.
async function fn(page: Page, endpoint: string, form: Record<string, string>) {
  const res = await page.request.post(`/fn/${endpoint}`, { form, headers: { 'sec-fetch-site': 'same-origin' } });
  expect(res.status(), `${endpoint}: ${await res.text()}`).toBe(200);
  return res;
}

/// The states a reviewer must see besides the lists: a two-person request another
/// approver edited, a bulk pick of two tools, a big run opened at its failure, and an
/// escalation with two calls of unknown outcome to settle. Returns their pages.
async function states(page: Page, request: APIRequestContext, tag: string): Promise<[string, string][]> {
  const headers = { Authorization: `Bearer ${agentToken()}` };
  const tool = `refund_shots_${tag}`;
  await fn(page, 'save_policy', { pattern: tool, side_effect: 'irreversible', requires_approval: 'on', call_timeout_seconds: '1' });
  await fn(page, 'save_rule', { name: `two-${tag}`, tool_pattern: tool, expression: 'true', action: 'require_approval', approvers: '2', mode: 'enforce' });
  const filed = await (await request.post('/api/v1/approvals', {
    headers, data: { run_id: `run-shots-2p-${tag}`, tool, arguments: { order: 'o-77', amount: 120, archive_first: false } },
  })).json();
  // Alice edits and approves; the screenshot is what the second approver reads.
  await fn(page, 'decide_approval', { id: filed.id, decision: 'approve', payload_sha256: filed.payload_sha256,
    arguments: '{"order": "o-77", "amount": 120, "archive_first": true}' });
  const other = await (await request.post('/api/v1/approvals', {
    headers, data: { run_id: `run-shots-2p-${tag}`, tool: 'send_email', arguments: { to: 'bo@example.com', body: 'Line one\n'.repeat(80) } },
  })).json();
  // Two calls of unknown outcome in one run.
  const calls = [1, 2].map((step) => ({ run_id: `run-shots-unknown-${tag}`, step_index: step, tool: 'notify_shots', arguments: { step } }));
  await fn(page, 'save_policy', { pattern: 'notify_shots', side_effect: 'write', call_timeout_seconds: '1' });
  for (const c of calls) await request.post('/api/v1/calls', { headers, data: c });
  await new Promise((r) => setTimeout(r, 1_200));
  let escalation = '';
  for (const c of calls) escalation = (await (await request.post('/api/v1/calls', { headers, data: c })).json()).call.escalation_id;
  return [
    ['approval-two-person-edited', `/approvals/${filed.id}`],
    ['approvals-bulk-two-tools', `/approvals/bulk?id=${filed.id}&id=${other.id}`],
    ['escalation-settle', `/escalations/${escalation}`],
  ];
}

/// The first link on `from` whose href matches `pattern`, as a path.
async function firstLink(page: Page, from: string, pattern: RegExp): Promise<string | null> {
  await page.goto(from);
  const hrefs = await page.locator('a[href]').evaluateAll((as) => as.map((a) => a.getAttribute('href') ?? ''));
  return hrefs.find((h) => pattern.test(h)) ?? null;
}

for (const vp of VIEWPORTS) {
  test(`every page at ${vp.name} width`, async ({ page, request }) => {
    test.setTimeout(180_000);
    // Something on every page: an approval request and an escalation of our own.
    const runId = `run-e2e-shots-${vp.name}-${Date.now()}`;
    const span = spanMaker(vp.name === 'desktop' ? 'c1' : 'c2');
    await exportSpans(request, 'shots-agent', [span('01', null, 'agent.run', [attr('run.id', runId), attr('escalation.reason', 'low confidence')])]);
    const headers = { Authorization: `Bearer ${agentToken()}` };
    await request.post('/api/v1/approvals', { headers, data: { run_id: runId, tool: 'send_email', arguments: { to: 'ana@example.com', body: 'hello' } } });
    await request.post('/api/v1/escalations', { headers, data: { run_id: runId, reason: 'low_confidence', what_remains: ['check it'] } });

    await page.setViewportSize({ width: vp.width, height: vp.height });
    await signIn(page, ALICE);
    const pages: [string, string | null][] = [
      ['runs', '/runs'],
      ['run', await firstLink(page, '/runs', /^\/runs\/[^?]+$/)],
      ['approvals', '/approvals'],
      ['approval', await firstLink(page, '/approvals', /^\/approvals\/[^/?]+$/)],
      ['escalations', '/escalations'],
      ['escalation', await firstLink(page, '/escalations', /^\/escalations\/[^/?]+$/)],
      ['alerts', '/alerts'],
      ['alert', await firstLink(page, '/alerts', /^\/alerts\/[^/?]+$/)],
      ['trends', '/trends'],
      ['admin', '/admin'],
      ['admin-users', '/admin/users'],
      ['admin-tokens', '/admin/tokens'],
      ['admin-tools', '/admin/tools'],
      ['admin-policies', '/admin/policies'],
      ['admin-prices', '/admin/prices'],
      ['admin-webhooks', '/admin/webhooks'],
      ['admin-alerts', '/admin/alerts'],
      ['admin-audit', '/admin/audit'],
    ];
    const run = pages[1][1];
    if (run) pages.splice(2, 0, ['run-span', await firstLink(page, run, /[?&]span=/)]);
    pages.push(...(await states(page, request, vp.name)));
    // A failed run opened where it failed, as its "Failed in" link opens it.
    const failed = await firstLink(page, '/runs?terminal_reason=error', /^\/runs\/[^?]+$/);
    if (failed) {
      await page.goto(failed);
      const at = page.getByTestId('failure-span');
      if (await at.count()) pages.push(['run-at-its-failure', await at.getAttribute('href')]);
    }
    const dir = path.join(OUT, vp.name);
    fs.mkdirSync(dir, { recursive: true });
    const sideways: string[] = [];
    for (const [name, url] of pages) {
      if (!url) continue; // nothing of that kind in the data (an alert, say)
      const response = await page.goto(url.replace(/&amp;/g, '&'));
      expect(response?.status(), url).toBe(200);
      await waitForHydration(page);
      await page.screenshot({ path: path.join(dir, `${name}.png`), fullPage: true });
      const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      if (scroll > client + 1) sideways.push(`${url} (${scroll} > ${client})`);
    }
    await page.context().clearCookies();
    await page.goto('/login');
    await page.screenshot({ path: path.join(dir, 'login.png'), fullPage: true });
    expect(sideways, 'pages that scroll sideways').toEqual([]);
  });
}
