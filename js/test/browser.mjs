// Test driver: serve files over HTTP on 127.0.0.1 and drive headless Chromium with
// playwright-core, WebGPU on (SwiftShader where there is no GPU). Prints one JSON line.
//
//   node test/browser.mjs jobs ROOT JOBS_URL            run jobs (see run-jobs.mjs) in a page
//   node test/browser.mjs page ROOT PAGE_URL SHOT.png   open a page, wait for window.mimirDemo,
//                                                       save a screenshot
//
// ROOT is served at /; a URL path under /_abs/ maps to the absolute file path after it, so a
// test's temporary directory needs no copying. WebGPU needs a secure context, which
// http://127.0.0.1 is. CHROMIUM (default /usr/bin/chromium) names the browser;
// MIMIR_CHROMIUM_FLAGS (space-separated) replaces the WebGPU flags below.
import { createReadStream, statSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { chromium } from 'playwright-core';

const FLAGS = (process.env.MIMIR_CHROMIUM_FLAGS ?? '--enable-unsafe-webgpu --enable-features=Vulkan')
  .split(/\s+/).filter(Boolean);
const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.json': 'application/json',
  '.wgsl': 'text/plain', '.css': 'text/css', '.png': 'image/png',
};

const HARNESS = `<!doctype html><meta charset="utf-8"><title>mimir-host jobs</title>
<script type="module">
import { load } from '/js/src/index.js';
const TYPED = { float32: Float32Array, float16: Float32Array, int32: Int32Array, uint32: Uint32Array, bool_: Uint32Array };
window.runJobs = async (url) => {
  const { jobs } = await (await fetch(url)).json();
  const programs = new Map();
  const results = [];
  for (const job of jobs) {
    try {
      let program = programs.get(job.manifest);
      if (!program) {
        program = await load(job.manifest);
        programs.set(job.manifest, program);
      }
      const dtypes = Object.fromEntries(program.manifest.buffers.map((b) => [b.name, b.dtype]));
      const inputs = {};
      for (const [name, values] of Object.entries(job.inputs)) {
        const T = TYPED[dtypes[name]];
        inputs[name] = job.typed && T ? T.from(values, (v) => (typeof v === 'boolean' ? Number(v) : v)) : values;
      }
      const outputs = await program.run(inputs, job.sizes ?? {});
      results.push({
        outputs: Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, Array.from(v, (x) => (Number.isNaN(x) ? 'nan' : x === Infinity ? 'inf' : x === -Infinity ? '-inf' : x))])),
        types: Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, v.constructor.name])),
      });
    } catch (err) {
      results.push({ error: err.name, message: err.message });
    }
  }
  const info = [...programs.values()][0]?.device.adapterInfo ?? {};
  return { results, adapter: { vendor: info.vendor, architecture: info.architecture } };
};
window.harnessReady = true;
</script>`;

function serve(root) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const pathname = decodeURIComponent(url.pathname);
    if (pathname === '/_harness.html') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(HARNESS);
      return;
    }
    const file = pathname.startsWith('/_abs/')
      ? path.resolve('/', pathname.slice('/_abs/'.length))
      : path.resolve(root, `.${pathname}`);
    if (!pathname.startsWith('/_abs/') && !file.startsWith(path.resolve(root) + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    let stat;
    try {
      stat = statSync(file);
    } catch {
      res.writeHead(404).end();
      return;
    }
    if (!stat.isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': TYPES[path.extname(file)] ?? 'application/octet-stream', 'cache-control': 'no-store' });
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function main() {
  const [mode, root, target, shot] = process.argv.slice(2);
  const server = await serve(root);
  const origin = `http://127.0.0.1:${server.address().port}`;
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: FLAGS, headless: true,
  });
  const console_ = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1000, height: 640 } });
    page.on('console', (m) => console_.push(`${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => console_.push(`pageerror: ${e.message}`));
    let out;
    if (mode === 'jobs') {
      await page.goto(`${origin}/_harness.html`);
      await page.waitForFunction(() => window.harnessReady === true, null, { timeout: 60000 });
      out = await page.evaluate((url) => window.runJobs(url), target);
    } else if (mode === 'page') {
      await page.goto(`${origin}${target}`);
      await page.waitForFunction(() => window.mimirDemo && window.mimirDemo.state !== 'running', null, { timeout: 300000 });
      out = await page.evaluate(() => window.mimirDemo);
      if (shot) await page.screenshot({ path: shot, fullPage: true });
    } else {
      throw new Error(`unknown mode ${mode}`);
    }
    out.browser = browser.version();
    out.console = console_;
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } finally {
    await browser.close();
    server.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
