// Shared steps: signing in, and failing a test on any browser console error (a
// hydration mismatch or a panic in the wasm shows up there).
import { expect, Page } from '@playwright/test';

export const ALICE = { username: 'alice', password: 'alice-password-123' };
export const VICTOR = { username: 'victor', password: 'victor-password-123' };

export function failOnConsoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (msg) => {
    if (msg.type() === 'error') errors.push(msg.text());
  });
  page.on('pageerror', (err) => errors.push(err.message));
  return errors;
}

/// Waits until the wasm bundle has loaded and hydrated the page.
export async function waitForHydration(page: Page) {
  await page.locator('body[data-hydrated="true"]').waitFor({ state: 'attached', timeout: 30_000 });
}

export async function signIn(page: Page, user: { username: string; password: string }) {
  await page.goto('/login');
  await page.getByLabel('Username').fill(user.username);
  await page.getByLabel('Password').fill(user.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await expect(page).toHaveURL(/\/runs$/);
  await expect(page.getByTestId('username')).toHaveText(user.username);
}
