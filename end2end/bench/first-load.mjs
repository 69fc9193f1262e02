// First load: cold-cache time from navigation to a hydrated page in headless Chromium,
// plus what the bundle weighs on the wire. Starts its own server on a fresh database,
// so one command reproduces the figure:
//
//   cargo xtask first-load            (builds the release server and bundle, then runs this)
//   node bench/first-load.mjs [--runs N] [--json]    (from end2end/, against a built tree)
//
// "Interactive" is `<body data-hydrated="true">`, which `hydrate()` sets once the wasm has
// attached the app; an init script (run by the browser before any page script, outside the
// page's CSP) timestamps that attribute with a MutationObserver, relative to navigation
// start. Each run uses a new browser context (an empty HTTP cache) and clears the browser
// cache through CDP as well. The page is /login: it needs no account, and every page loads
// the same bundle.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1] : fallback;
};
const runs = Number(flag('--runs', '7'));
const bin = process.env.FLIGHTDECK_BIN ?? path.join(root, 'target/release/flightdeck');
const siteRoot = process.env.FLIGHTDECK_SITE_ROOT ?? path.join(root, 'target/site');
const executablePath = process.env.FLIGHTDECK_CHROMIUM ?? '/usr/bin/chromium';

// The profiles measured: none, and a modest office link (10 Mbit/s down, 40 ms RTT) on
// which the bytes on the wire, not the CPU, decide.
const profiles = [
  { name: 'unthrottled', conditions: null },
  {
    name: '10 Mbit/s, 40 ms RTT',
    conditions: { offline: false, latency: 40, downloadThroughput: 10e6 / 8, uploadThroughput: 10e6 / 8 },
  },
];

const freePort = () =>
  new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });

async function startServer() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'flightdeck-first-load-'));
  const [ui, http, grpc] = [await freePort(), await freePort(), await freePort()];
  const server = spawn(
    bin,
    ['serve', '--listen', `127.0.0.1:${ui}`, '--otlp-http-listen', `127.0.0.1:${http}`, '--otlp-grpc-listen', `127.0.0.1:${grpc}`],
    {
      env: { ...process.env, FLIGHTDECK_DATA_DIR: dataDir, FLIGHTDECK_SITE_ROOT: siteRoot, RUST_LOG: 'warn' },
      // Its log (with the first start's one-time password) is shown only if it fails.
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let log = '';
  server.stderr.on('data', (chunk) => (log += chunk));
  const base = `http://127.0.0.1:${ui}`;
  for (let i = 0; i < 300; i++) {
    if (server.exitCode !== null) throw new Error(`${bin} exited with ${server.exitCode}:\n${log}`);
    try {
      if ((await fetch(`${base}/readyz`)).ok) {
        return { base, stop: () => (server.kill('SIGTERM'), fs.rmSync(dataDir, { recursive: true, force: true })) };
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  server.kill('SIGKILL');
  throw new Error('the server did not become ready within 30 s');
}

// Runs in the page before its own scripts: note when hydration marks the body.
function markHydration() {
  const seen = () => {
    if (document.body && document.body.getAttribute('data-hydrated') === 'true') {
      window.__fdHydratedAt = performance.now();
      return true;
    }
    return false;
  };
  const observer = new MutationObserver(() => seen() && observer.disconnect());
  observer.observe(document, { subtree: true, childList: true, attributes: true, attributeFilter: ['data-hydrated'] });
}

async function measureOnce(browser, base, conditions) {
  const context = await browser.newContext();
  await context.addInitScript(markHydration);
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.clearBrowserCache');
  if (conditions) await cdp.send('Network.emulateNetworkConditions', conditions);
  // Bytes as Chromium received them (headers and body), per request.
  const wire = new Map();
  cdp.on('Network.loadingFinished', (e) => wire.set(e.requestId, e.encodedDataLength));
  const urls = new Map();
  cdp.on('Network.responseReceived', (e) =>
    urls.set(e.requestId, { url: e.response.url, encoding: e.response.headers['content-encoding'] ?? e.response.headers['Content-Encoding'] }),
  );

  await page.goto(`${base}/login`, { waitUntil: 'commit' });
  await page.waitForFunction(() => window.__fdHydratedAt !== undefined, null, { timeout: 120_000, polling: 50 });
  const timing = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    return { hydrated: window.__fdHydratedAt, domContentLoaded: nav.domContentLoadedEventEnd, load: nav.loadEventEnd };
  });
  const assets = {};
  for (const [id, { url, encoding }] of urls) {
    const kind = url.match(/\.(wasm|js|css)(\?|$)/)?.[1];
    if (kind) assets[kind] = { url: new URL(url).pathname, wire: wire.get(id) ?? 0, encoding: encoding ?? 'identity' };
  }
  await context.close();
  return { ...timing, assets };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const server = await startServer();
const browser = await chromium.launch({
  executablePath,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--disable-quic',
    '--no-first-run',
  ],
});
const results = [];
try {
  // One unmeasured load so the server's first-render work and the OS file cache are warm:
  // what is measured is the browser's cold cache, not the server's.
  await measureOnce(browser, server.base, null);
  for (const profile of profiles) {
    const samples = [];
    for (let i = 0; i < runs; i++) samples.push(await measureOnce(browser, server.base, profile.conditions));
    const last = samples[samples.length - 1];
    results.push({
      profile: profile.name,
      runs,
      hydratedMs: Math.round(median(samples.map((s) => s.hydrated))),
      hydratedMinMs: Math.round(Math.min(...samples.map((s) => s.hydrated))),
      hydratedMaxMs: Math.round(Math.max(...samples.map((s) => s.hydrated))),
      domContentLoadedMs: Math.round(median(samples.map((s) => s.domContentLoaded))),
      assets: last.assets,
    });
  }
} finally {
  await browser.close();
  server.stop();
}

if (args.includes('--json')) {
  console.log(JSON.stringify(results, null, 2));
} else {
  const kb = (n) => `${(n / 1024).toFixed(0)} KiB`;
  console.log(`\nChromium ${browser.version()}, cold cache, /login, median of ${runs} runs (min–max)\n`);
  console.log('| network | load → hydrated | DOMContentLoaded | wasm on the wire | js | css |');
  console.log('|---|---|---|---|---|---|');
  for (const r of results) {
    const a = (k) => (r.assets[k] ? `${kb(r.assets[k].wire)} (${r.assets[k].encoding})` : '–');
    console.log(
      `| ${r.profile} | ${r.hydratedMs} ms (${r.hydratedMinMs}–${r.hydratedMaxMs}) | ${r.domContentLoadedMs} ms | ${a('wasm')} | ${a('js')} | ${a('css')} |`,
    );
  }
  for (const r of results.slice(0, 1)) {
    for (const [k, v] of Object.entries(r.assets)) console.log(`  ${k}: ${v.url}`);
  }
}
