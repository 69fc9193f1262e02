import { expect, test } from '@playwright/test';
import { ALICE, VICTOR, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

test('sign in, see the shell, sign out', async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  await page.goto('/runs');
  await expect(page).toHaveURL(/\/login\?next=\/runs$/);
  await signIn(page, ALICE);
  await waitForHydration(page);

  const nav = page.getByRole('navigation', { name: 'Main' });
  for (const item of ['Runs', 'Approvals', 'Escalations', 'Alerts', 'Trends', 'Admin']) {
    await expect(nav.getByRole('link', { name: item })).toBeVisible();
  }
  await expect(page.locator('.role-chip')).toHaveText(['viewer', 'approver', 'operator', 'admin']);
  await expect(page.getByRole('heading', { name: 'Runs', exact: true })).toBeVisible();
  await expect(page.getByTestId('run-table')).toBeVisible();

  // client-side navigation keeps the shell and shows each area
  await nav.getByRole('link', { name: 'Alerts' }).click();
  await expect(page).toHaveURL(/\/alerts$/);
  await expect(page.getByRole('heading', { name: 'Alerts', exact: true })).toBeVisible();
  await expect(page.getByTestId('rules-summary')).toBeVisible();
  await nav.getByRole('link', { name: 'Escalations' }).click();
  await expect(page).toHaveURL(/\/escalations$/);
  await expect(page.getByRole('heading', { name: 'Escalations', exact: true })).toBeVisible();

  await page.getByRole('button', { name: 'Sign out' }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto('/runs');
  await expect(page).toHaveURL(/\/login\?next=\/runs$/);
  expect(errors).toEqual([]);
});

test('a wrong password is refused with a clear message', async ({ page }) => {
  await page.goto('/login');
  await page.getByLabel('Username').fill('victor');
  await page.getByLabel('Password').fill('not-his-password');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page.getByRole('alert')).toHaveText('wrong username or password');
  await expect(page).toHaveURL(/\/login/);
});

test('a viewer is refused an admin page', async ({ page }) => {
  await signIn(page, VICTOR);
  await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Admin' })).toHaveCount(0);
  const response = await page.goto('/admin/tokens');
  expect(response?.status()).toBe(403);
  await expect(page.getByTestId('forbidden')).toContainText('This page needs the admin role');
  await expect(page.getByTestId('forbidden')).toContainText('victor');
  await expect(page.getByTestId('create-token')).toHaveCount(0);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('signing in and creating a token work as plain form posts', async ({ page }) => {
    await signIn(page, ALICE);
    await page.goto('/admin/tokens');
    await page.getByTestId('create-token').getByLabel('Name').fill('no-js-agent');
    await page.getByTestId('create-token').getByLabel('read').check();
    await page.getByRole('button', { name: 'Create token' }).click();
    await expect(page.getByTestId('one-time-secret')).toContainText('API token no-js-agent');
    await expect(page.getByTestId('token-table')).toContainText('no-js-agent');
  });
});
