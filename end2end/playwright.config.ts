// Browser tests: a real Flightdeck server (the binary `cargo xtask test` just built, on a
// fresh SQLite database) driven in Debian's headless Chromium.
import { defineConfig } from '@playwright/test';
import fs from 'node:fs';

const port = Number(process.env.FLIGHTDECK_E2E_PORT ?? 3917);
const bin = process.env.FLIGHTDECK_BIN ?? '../target/debug/flightdeck';

// A fixed data directory, emptied at every start, so tests can read the token the seed
// step created.
export const dataDir = `${__dirname}/.e2e-data`;

// The MCP gateway's test upstream (server/tests/mcp/upstream.py on the official Python SDK),
// served at /mcp/e2e: FLIGHTDECK_PYTHON names an interpreter with
// server/tests/mcp/requirements.txt installed (mcp.spec.ts skips without one, outside CI).
export const mcpOutbox = `${dataDir}/mcp-outbox.jsonl`;
const mcpConfig = `${__dirname}/.e2e-flightdeck.toml`;
fs.writeFileSync(
  mcpConfig,
  [
    '[[mcp_servers]]',
    'name = "e2e"',
    `command = ${JSON.stringify(process.env.FLIGHTDECK_PYTHON ?? 'python3')}`,
    `args = ${JSON.stringify([`${__dirname}/../server/tests/mcp/upstream.py`, '--outbox', mcpOutbox])}`,
    '',
  ].join('\n'),
);

// Known users, created before the server starts: an admin with every role, a viewer and a
// second approver (two-person approvals);
// an agent token for sending traces and reading runs; and demo runs to browse.
const seed = [
  `rm -rf "${dataDir}" && mkdir -p "${dataDir}"`,
  `"${bin}" token create e2e-agent --scope ingest,read,approvals,escalations,calls > "${dataDir}/token"`,
  `"${bin}" token create e2e-mcp --scope mcp > "${dataDir}/mcp-token"`,
  `"${bin}" demo --runs 30`,
  `printf 'alice-password-123\\n' | "${bin}" user add --role admin,approver,operator,viewer alice`,
  `printf 'victor-password-123\\n' | "${bin}" user add --role viewer victor`,
  `printf 'bob-password-123\\n' | "${bin}" user add --role approver,viewer bob`,
].join(' && ');

export default defineConfig({
  testDir: './tests',
  timeout: 60_000,
  expect: { timeout: 15_000 },
  // One server, one database: tests run one at a time and each uses its own names.
  workers: 1,
  fullyParallel: false,
  forbidOnly: !!process.env.CI,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.FLIGHTDECK_CHROMIUM ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--disable-quic',
        '--no-first-run',
      ],
    },
  },
  webServer: {
    command:
      `sh -c 'export FLIGHTDECK_DATA_DIR="${dataDir}" FLIGHTDECK_ALERT_INTERVAL_SECONDS=1 && ${seed.replace(/'/g, "'\\''")} && ` +
      `exec "${bin}" --config "${mcpConfig}" serve --listen 127.0.0.1:${port} --otlp-http-listen 127.0.0.1:${port + 1} --otlp-grpc-listen 127.0.0.1:${port + 2}'`,
    url: `http://127.0.0.1:${port}/readyz`,
    timeout: 120_000,
    reuseExistingServer: false,
    stdout: 'ignore',
    stderr: 'pipe',
  },
});
