// A screenshot of every page at desktop and phone width, for a reviewer to look at
// (end2end/artifacts/screenshots/<width>/<page>.png, kept by CI as an artifact), and on
// the way the promise that no page scrolls sideways on a phone. Runs last (`zz` order is
// not needed: it sends its own data and only reads).
import { expect, test, Page } from '@playwright/test';
import fs from 'node:fs';
import path from 'node:path';
import { ALICE, agentToken, attr, exportSpans, signIn, spanMaker, waitForHydration } from './helpers';

const OUT = path.join(__dirname, '..', 'artifacts', 'screenshots');

const VIEWPORTS = [
  { name: 'desktop', width: 1366, height: 900 },
  { name: 'phone', width: 390, height: 844 },
];

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
