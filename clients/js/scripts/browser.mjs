// The browser test: headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core) opens
// browser/page.html, served at the collector's own origin by request interception, and the page
// perturbs values and posts them to the collector. Prints the page's outcome as one JSON line.
// Usage: node scripts/browser.mjs URL COLLECTION TOKEN SPEC DOMAIN N [BATCH]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const [url, collection, token, spec, domain, n, batch = '100'] = process.argv.slice(2);
const root = fileURLToPath(new URL('..', import.meta.url));
const origin = new URL(url).origin;
const profile = mkdtempSync(join(tmpdir(), 'lpc-chromium-'));
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync'];
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8' };

const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', headless: true, args: FLAGS, timeout: 60_000,
});
try {
  // only the page and the client's modules are served from disk; every other request goes to the collector
  await context.route(`${origin}/__client/**`, async (route) => {
    const path = new URL(route.request().url()).pathname.slice('/__client/'.length);
    const file = path === 'page.html' ? join(root, 'browser', 'page.html') : /^src\/[a-z]+\.js$/.test(path) ? join(root, path) : null;
    if (file === null) return route.fulfill({ status: 404, body: 'not found' });
    return route.fulfill({ status: 200, body: readFileSync(file), headers: { 'content-type': TYPES[file.slice(file.lastIndexOf('.'))] } });
  });
  const page = context.pages()[0] ?? await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const query = new URLSearchParams({ collection, token, spec, domain, n, batch });
  await page.goto(`${origin}/__client/page.html?${query}`);
  await page.waitForFunction(() => window.__result !== undefined, null, { timeout: 30_000 });
  const result = await page.evaluate(() => window.__result);
  if (errors.length) result.pageErrors = errors;
  process.stdout.write(`${JSON.stringify(result)}\n`);
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
