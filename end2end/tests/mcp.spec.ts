// The MCP gateway from the approver's side: an MCP client's tools/call through
// /mcp/e2e is held, the approver approves it from the inbox, and the upstream MCP server
// (the official Python SDK) receives exactly that call.
import { expect, test } from '@playwright/test';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { dataDir, mcpOutbox } from '../playwright.config';
import { ALICE, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

const port = Number(process.env.FLIGHTDECK_E2E_PORT ?? 3917);
const gateway = `http://127.0.0.1:${port}/mcp/e2e`;
const mcpToken = () => fs.readFileSync(`${dataDir}/mcp-token`, 'utf8').trim();

function pythonHasTheSdk(): boolean {
  try {
    execFileSync(process.env.FLIGHTDECK_PYTHON ?? 'python3', ['-c', 'import mcp.server.mcpserver'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/// One JSON-RPC POST to the gateway, as an MCP client sends it.
async function post(body: object, session?: string): Promise<Response> {
  const headers: Record<string, string> = {
    Authorization: `Bearer ${mcpToken()}`,
    Accept: 'application/json, text/event-stream',
    'Content-Type': 'application/json',
  };
  if (session) headers['Mcp-Session-Id'] = session;
  return fetch(gateway, { method: 'POST', headers, body: JSON.stringify(body) });
}

test('an approver approves an MCP gateway call from the inbox and the upstream receives it', async ({ page }) => {
  if (!pythonHasTheSdk()) {
    expect(process.env.CI, 'CI must run the MCP gateway test: set FLIGHTDECK_PYTHON').toBeFalsy();
    test.skip(true, 'FLIGHTDECK_PYTHON lacks server/tests/mcp/requirements.txt');
  }
  const errors = failOnConsoleErrors(page);
  await signIn(page, ALICE);
  // The policy that makes this server's send_email need a person.
  const saved = await page.request.post('/fn/save_policy', {
    form: { pattern: 'e2e/send_email', side_effect: 'irreversible', requires_approval: 'on' },
  });
  expect(saved.ok()).toBeTruthy();

  const init = await post({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'e2e-mcp-client', version: '1' } },
  });
  expect(init.status).toBe(200);
  const session = init.headers.get('mcp-session-id')!;
  expect(await init.text()).toContain('gateway-test-upstream');
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status).toBe(202);
  await (await post({ jsonrpc: '2.0', id: 2, method: 'tools/list' }, session)).text();

  const to = `ana-${Date.now()}@example.com`;
  // Held until someone decides: the answer comes on this request's SSE stream.
  const call = post({ jsonrpc: '2.0', id: 3, method: 'tools/call',
    params: { name: 'send_email', arguments: { to, body: 'The invoice is attached.' } } }, session).then((r) => r.text());

  await waitForHydration(page);
  await page.getByRole('link', { name: /Approvals/ }).first().click();
  const row = page.locator('tr[data-approval]', { hasText: 'e2e/send_email' }).filter({ hasText: 'e2e-mcp-client' }).first();
  await expect(row).toBeVisible();
  await row.getByRole('link', { name: 'Review' }).click();
  await expect(page.getByTestId('arguments')).toContainText(to);
  await expect(page.getByTestId('arguments')).toContainText('The invoice is attached.');
  await page.getByRole('button', { name: 'Approve this exact payload' }).click();
  await expect(page.getByTestId('outcome')).toContainText('Approved by alice');

  const answer = await call;
  expect(answer).toContain(`sent to ${to}`);
  const executed = fs.readFileSync(mcpOutbox, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  expect(executed.filter((e) => e.tool === 'send_email' && e.arguments.to === to)).toEqual([
    { tool: 'send_email', arguments: { to, body: 'The invoice is attached.' } },
  ]);
  await fetch(gateway, { method: 'DELETE', headers: { Authorization: `Bearer ${mcpToken()}`, 'Mcp-Session-Id': session } });
  expect(errors).toEqual([]);
});
