import { expect, test } from '@playwright/test';
import { ALICE, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

test('create an API token, use it, revoke it', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  await signIn(page, ALICE);
  await page.goto('/admin/tokens');
  await waitForHydration(page);

  const form = page.getByTestId('create-token');
  await form.getByLabel('Name').fill('browser-made-agent');
  await form.getByLabel('ingest').check();
  await form.getByLabel('read').check();
  await form.getByRole('button', { name: 'Create token' }).click();

  const secretBox = page.getByTestId('one-time-secret');
  await expect(secretBox).toContainText('API token browser-made-agent');
  const secret = (await secretBox.locator('code').innerText()).trim();
  expect(secret).toMatch(/^fdk_[0-9a-f]{64}$/);

  const row = page.getByTestId('token-table').locator('tr', { hasText: 'browser-made-agent' });
  await expect(row).toContainText('ingest, read');
  await expect(row).toContainText('active');

  const ok = await request.get('/api/v1/token', { headers: { Authorization: `Bearer ${secret}` } });
  expect(ok.status()).toBe(200);
  expect(await ok.json()).toMatchObject({ name: 'browser-made-agent', scopes: ['ingest', 'read'] });

  // the secret is not shown again
  await page.reload();
  await expect(page.getByTestId('one-time-secret')).toHaveCount(0);
  await expect(row).not.toContainText('never');

  await row.getByRole('button', { name: 'Revoke' }).click();
  await expect(row).toContainText('revoked');
  const refused = await request.get('/api/v1/token', { headers: { Authorization: `Bearer ${secret}` } });
  expect(refused.status()).toBe(401);

  await page.goto('/admin/audit');
  await expect(page.getByTestId('audit-table')).toContainText('token_revoked');
  await expect(page.getByTestId('audit-table')).toContainText('token_created');
  expect(errors).toEqual([]);
});
