// At a phone's width (390 px): the escalation queue, Admin → Users and Admin → Tokens are a
// card per row, their buttons on the card; no page of on-call, trends or admin scrolls
// sideways.
import { expect, test, Page } from '@playwright/test';
import { ALICE, agentToken, signIn } from './helpers';

test.use({ viewport: { width: 390, height: 844 } });

async function onScreen(page: Page, name: string) {
  const buttons = page.getByRole('button', { name, exact: true }).or(page.getByRole('link', { name, exact: true }));
  const count = await buttons.count();
  expect(count, `${name} on ${page.url()}`).toBeGreaterThan(0);
  for (let i = 0; i < count; i++) {
    const box = await buttons.nth(i).boundingBox();
    expect(box, name).not.toBeNull();
    expect(box!.x + box!.width, `${name} #${i} ends inside the screen`).toBeLessThanOrEqual(390);
  }
}

async function noSidewaysScroll(page: Page) {
  const wide = await page.evaluate(() => document.documentElement.scrollWidth > window.innerWidth + 1);
  expect(wide, `${page.url()} scrolls sideways`).toBe(false);
}

test('rows are cards with their buttons on the screen', async ({ page }) => {
  await signIn(page, ALICE);
  await page.goto('/admin/users');
  await onScreen(page, 'Reset password');
  await onScreen(page, 'Disable');
  await onScreen(page, 'Save roles');
  await page.goto('/admin/tokens');
  await onScreen(page, 'Revoke');
  await page.goto('/escalations');
  await expect(page.locator('tbody tr').first()).toBeVisible();
  await onScreen(page, 'Open');
  // the table's header row is hidden: each card labels its own fields
  await expect(page.locator('table.escalations thead')).toBeHidden();
  await expect(page.locator('tbody tr').first().locator('td[data-label="Reason"]')).toBeVisible();
  for (const path of ['/escalations', '/escalations?view=resolved', '/alerts', '/alerts?view=history', '/trends',
    '/trends?range=30d', '/admin', '/admin/users', '/admin/tokens', '/admin/tools', '/admin/policies', '/admin/prices',
    '/admin/rules', '/admin/webhooks', '/admin/audit', '/admin/alerts']) {
    await page.goto(path);
    await noSidewaysScroll(page);
  }
});

test('a long tool name or an unbroken preview does not widen the inbox past the screen', async ({ page, request }) => {
  // A <select> is as wide as its longest option: one long tool name among the
  // pending requests used to push the inbox to 698 px on a 390 px screen.
  const tool = `export_customer_records_to_the_quarterly_archive_${Date.now()}`;
  const res = await request.post('/api/v1/approvals', {
    headers: { Authorization: `Bearer ${agentToken()}` },
    // Compact JSON without a space is the preview of a tool with no display: one long word.
    data: { run_id: `run-e2e-phone-long-${Date.now()}`, tool,
      arguments: { iban: 'DE89370400440532013000', reference: 'invoice_2026_11_quarterly_settlement', amount_eur: 1250 } },
  });
  expect(res.status(), await res.text()).toBe(201);
  await signIn(page, ALICE);
  await page.goto('/approvals');
  await expect(page.locator(`tr:has(code:text-is("${tool}"))`)).toBeVisible();
  await expect(page.locator('select[name="tool"] option', { hasText: tool })).toHaveCount(1);
  await noSidewaysScroll(page);
  await onScreen(page, 'Apply');
});
