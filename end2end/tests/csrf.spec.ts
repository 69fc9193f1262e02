import { expect, test } from '@playwright/test';
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { ALICE, signIn } from './helpers';

// A page on another origin that posts a form to Flightdeck, as a malicious site would.
function serveAttackerPage(target: string): Promise<http.Server> {
  const html = `<!doctype html><form id="f" method="post" action="${target}/fn/create_token">
    <input name="name" value="forged-by-attacker"><input name="scope_ingest" value="on">
    <button type="submit">win a prize</button></form>`;
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(html);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

test('a cross-site POST is refused and changes nothing', async ({ page, baseURL }) => {
  await signIn(page, ALICE);
  const attacker = await serveAttackerPage(baseURL!);
  try {
    const { port } = attacker.address() as AddressInfo;
    await page.goto(`http://localhost:${port}/`);
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().includes('/fn/create_token')),
      page.getByRole('button', { name: 'win a prize' }).click(),
    ]);
    expect(response.status()).toBe(403);
    await expect(page.locator('body')).toContainText('cross-site request refused');
  } finally {
    attacker.close();
  }
  await page.goto('/admin/tokens');
  await expect(page.getByTestId('username')).toHaveText('alice');
  await expect(page.locator('body')).not.toContainText('forged-by-attacker');
});
