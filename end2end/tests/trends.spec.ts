// The trends page in Chromium over the demo data (`flightdeck demo --runs 30`, all started
// in the last quarter hour): every chart is an SVG image with its legend, the range links
// switch the window, and the server-rendered page shows the same charts with JavaScript off.
import { expect, test, Page } from '@playwright/test';
import { VICTOR, failOnConsoleErrors, signIn, waitForHydration } from './helpers';

const CHARTS: { id: string; legend: RegExp }[] = [
  { id: 'chart-reasons', legend: /\d+ runs?/ },
  { id: 'chart-tool-calls', legend: /finished runs: \d+ runs?/ },
  { id: 'chart-no-read', legend: /completed without a read tool/ },
  { id: 'chart-duplicates', legend: /deduplicated calls: \d+ calls?/ },
  { id: 'chart-cost', legend: /p95: [\d.]+ USD/ },
  { id: 'chart-cost-agent', legend: /[\d.]+ USD/ },
  { id: 'chart-cost-model', legend: /[\d.]+ USD/ },
  { id: 'chart-escalations', legend: /opened: \d+ escalations?/ },
  { id: 'chart-approvals', legend: /requested: \d+ approvals?/ },
];

async function expectCharts(page: Page) {
  for (const { id, legend } of CHARTS) {
    const chart = page.getByTestId(id);
    await expect(chart).toBeVisible();
    await expect(chart).toHaveAttribute('role', 'img');
    await expect(chart.locator('g.legend text').first()).toBeVisible();
    await expect(chart.locator('g.legend')).toContainText(legend);
    // axes: at least the zero tick on y and a caption with the unit
    await expect(chart.locator('text.tick.y').first()).toHaveText(/^0(\.0+)?$/); // 0 or 0.0, by the axis' step
    await expect(chart.locator('text.caption.x')).not.toBeEmpty();
  }
}

test('the trends page shows the charts for demo data', async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  await signIn(page, VICTOR);
  await page.goto('/trends');
  await waitForHydration(page);
  await expect(page.getByRole('heading', { name: 'Trends', level: 1 })).toBeVisible();
  await expectCharts(page);
  // the demo runs are there to count
  await expect(page.getByTestId('chart-reasons').locator('rect.bar').first()).toBeVisible();
  await expect(page.getByTestId('chart-tool-calls').locator('g.legend')).toContainText(/p99: \d+/);
  await expect(page.getByTestId('chart-tool-calls').locator('g.legend')).toContainText(/max: \d+/);

  await page.getByRole('link', { name: 'Last 7 days' }).click();
  await expect(page).toHaveURL(/\/trends\?range=7d$/);
  await expect(page.getByRole('link', { name: 'Last 7 days' })).toHaveAttribute('aria-current', 'page');
  await expect(page.getByTestId('chart-reasons').locator('text.caption.x')).toHaveText('6-hour bucket (UTC)');
  await expectCharts(page);
  expect(errors).toEqual([]);
});

test('one agent\'s trends, and a bar opens the runs behind it', async ({ page }) => {
  const errors = failOnConsoleErrors(page);
  await signIn(page, VICTOR);
  await page.goto('/trends?range=24h');
  await waitForHydration(page);
  const filter = page.getByTestId('trends-filter');
  // The agent that cost most in the range (the first of the cost-by-agent legend).
  const key = await page.getByTestId('chart-cost-agent').locator('g.legend-item').first().getAttribute('data-series');
  expect(key).toMatch(/^agent:/);
  const agent = key!.slice('agent:'.length);
  await filter.getByLabel('Agent').selectOption(agent!);
  await filter.getByRole('button', { name: 'Show' }).click();
  await expect(page).toHaveURL(new RegExp(`agent=${agent}`));
  await expect(page.locator('.trends-summary')).toContainText(`of ${agent} started`);
  await expect(page.getByRole('link', { name: 'Last 7 days' })).toHaveAttribute('href', `/trends?range=7d&agent=${agent}`);
  // A bar of the cost by agent opens that agent's runs of its hour, costliest first.
  const bar = page.getByTestId('chart-cost-agent').locator('a').first();
  const href = await bar.getAttribute('href');
  expect(href).toContain(`agent=${agent}`);
  expect(href).toContain('since=');
  await bar.click();
  await expect(page).toHaveURL(/\/runs\?.*since=/);
  await expect(page.getByTestId('time-filter')).toContainText('Started from');
  await expect(page.locator('table.runs tbody tr').first()).toBeVisible();
  expect(errors).toEqual([]);
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the charts are drawn on the server', async ({ page }) => {
    await signIn(page, VICTOR);
    await page.goto('/trends?range=30d');
    await expect(page.getByRole('link', { name: 'Last 30 days' })).toHaveAttribute('aria-current', 'page');
    await expectCharts(page);
  });
});
