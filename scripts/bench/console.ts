/**
 * The console's figures, against the compiled binary in headless Chromium (Debian's chromium,
 * puppeteer-core), with 1,000 flags in the project:
 *   - bytes of JavaScript and CSS on first load, gzipped as served (budget 300 KB);
 *   - time to the flag list being usable: from the navigation's start (Chromium's performance
 *     timing) to the list's table with its toggles in the page, median of the rounds;
 *   - toggle latency: from the click on a flag's switch to the switch showing the new state
 *     (the PUT answered and the row re-rendered), median and p95.
 * Usage: bun scripts/bench/console.ts [--rounds N] (dist/flagsvc, built when missing). Figures, not a test: exit 0.
 */
import puppeteer from "puppeteer-core";
import { benchBinary } from "../lib/binary";
import { startBinary, cleanup } from "../../test/e2e/binary";
import { callServer } from "../../test/helpers";
import { percentile } from "../lib/wrk";

const argv = process.argv.slice(2);
const roundsAt = argv.indexOf("--rounds");
const ROUNDS = roundsAt >= 0 ? Number(argv[roundsAt + 1]) : 7;
benchBinary(undefined, "console");
const FLAGS = 1000;
const BUDGET_KB = 300;
const KEY = `svc_admin_${"bch".repeat(12)}`;
const EMAIL = "bench@example.com";
const PASSWORD = "correct horse battery";

const srv = await startBinary({ env: { SVC_ADMIN_KEY: KEY, SVC_ADMIN_EMAIL: EMAIL, SVC_ADMIN_PASSWORD: PASSWORD } });
const browser = await puppeteer.launch({ executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium", headless: true, acceptInsecureCerts: true, args: ["--no-sandbox"] });
try {
  // 1,000 flags, 20 requests at a time.
  for (let i = 0; i < FLAGS; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, FLAGS - i) }, (_, j) =>
        callServer(srv.url, "POST", "/v1/projects/default/flags", { key: KEY, body: { key: `flag-${String(i + j).padStart(4, "0")}`, name: `Flag ${i + j}` } }),
      ),
    );
  }

  // Bytes on first load, as served with Accept-Encoding: gzip.
  const page = await (await fetch(`${srv.url}/`, { tls: { rejectUnauthorized: false } })).text();
  const sizes = { js: 0, css: 0, html: 0 };
  sizes.html = (await (await fetch(`${srv.url}/`, { headers: { "accept-encoding": "gzip" }, tls: { rejectUnauthorized: false }, decompress: false } as never)).arrayBuffer()).byteLength;
  for (const [, path, ext] of page.matchAll(/(?:src|href)="(\/assets\/chunk-[a-z0-9]+\.(js|css))"/g)) {
    const res = await fetch(`${srv.url}${path}`, { headers: { "accept-encoding": "gzip" }, tls: { rejectUnauthorized: false }, decompress: false } as never);
    sizes[ext as "js" | "css"] += (await res.arrayBuffer()).byteLength;
  }

  const tab = await browser.newPage();
  await tab.setViewport({ width: 1280, height: 900 });
  await tab.goto(`${srv.url}/`);
  await tab.waitForSelector("input[name=email]");
  await tab.type("input[name=email]", EMAIL);
  await tab.type("input[name=password]", PASSWORD);
  await tab.click("button[type=submit]");
  await tab.waitForSelector("nav[aria-label=Main]");

  const usable: number[] = [];
  const toggles: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // A fresh load each round (the chunks come from the cache, as on a return visit; the first round is a cold one).
    await tab.goto(`${srv.url}/projects/default/flags`);
    await tab.waitForSelector("table.flags [role=switch]");
    usable.push(await tab.evaluate(() => performance.now() - (performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming).startTime));
    toggles.push(
      await tab.evaluate(async () => {
        const sw = document.querySelector("tr[data-flag] td[data-env=production] [role=switch]") as HTMLButtonElement;
        const before = sw.getAttribute("aria-checked");
        const t0 = performance.now();
        sw.click();
        await new Promise<void>((done) => {
          const check = () => (document.querySelector("tr[data-flag] td[data-env=production] [role=switch]")!.getAttribute("aria-checked") !== before ? done() : requestAnimationFrame(check));
          check();
        });
        return performance.now() - t0;
      }),
    );
  }
  const kb = (n: number) => (n / 1024).toFixed(1);
  console.log(`console: first load, gzipped: JS ${kb(sizes.js)} KB + CSS ${kb(sizes.css)} KB = ${kb(sizes.js + sizes.css)} KB (budget ${BUDGET_KB} KB: ${sizes.js + sizes.css <= BUDGET_KB * 1024 ? "within" : "OVER"}); page ${kb(sizes.html)} KB`);
  console.log(`console: flag list usable with ${FLAGS} flags (navigation start to the table with its toggles), ${ROUNDS} rounds: median ${percentile(usable, 50).toFixed(0)} ms, first (cold) ${usable[0]!.toFixed(0)} ms, max ${Math.max(...usable).toFixed(0)} ms`);
  console.log(`console: toggle latency (click to the switch showing the new state), ${ROUNDS} rounds: median ${percentile(toggles, 50).toFixed(1)} ms, p95 ${percentile(toggles, 95).toFixed(1)} ms`);
} finally {
  await browser.close();
  await srv.stop();
  cleanup();
}
