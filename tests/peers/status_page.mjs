// Opens eragate's status page in Debian's chromium (driven by playwright-core from
// $BROWSER_DIR), waits until it shows the upstream `expect`, saves a full-page
// screenshot, and prints ONE JSON object with what the page shows:
//   {"title", "ready", "upstreams": [{"name", "era", "health", "members": [[cells...]]}],
//    "revisions": [{"revision", "count", "era"}], "tiles": {...},
//    "pins": [[upstream, mode, kind, name, change]...] (the definition pins card's rows)}
// Usage: node status_page.mjs URL SCREENSHOT.png EXPECTED_UPSTREAM
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, screenshot, expect] = process.argv.slice(2);
const require = createRequire(join(process.env.BROWSER_DIR, "node_modules", "/"));
const { chromium } = require("playwright-core");

const profile = mkdtempSync(join(tmpdir(), "eragate-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1180, height: 760 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  await page.goto(url, { waitUntil: "load", timeout: 20000 });
  const card = page.locator(`section.upstream[data-upstream="${expect}"]`);
  await card.waitFor({ timeout: 20000 });
  // A refresh after the traffic: the revisions panel shows a count.
  await page.locator(".rev .count").first().waitFor({ timeout: 20000 });
  await page.screenshot({ path: screenshot, fullPage: true });
  const shown = await page.evaluate(() => ({
    title: document.title,
    ready: document.getElementById("ready").textContent,
    tiles: Object.fromEntries([...document.querySelectorAll(".tile")].map(t =>
      [t.querySelector(".label").textContent, t.querySelector(".value").textContent])),
    upstreams: [...document.querySelectorAll("section.upstream")].map(card => ({
      name: card.dataset.upstream,
      era: card.querySelector(".badge.era").textContent,
      health: card.querySelector(".card-head .badge:last-child").textContent,
      members: [...card.querySelectorAll("tbody tr")].map(row => [...row.cells].map(c => c.textContent)),
    })),
    pins: [...document.querySelectorAll("#pin-rows tr")].map(row => [...row.cells].map(c => c.textContent)),
    revisions: [...document.querySelectorAll(".rev")].map(r => ({
      revision: r.querySelector(".name").textContent,
      count: Number(r.querySelector(".count").textContent),
      era: r.querySelector(".era-name").textContent,
    })),
  }));
  console.log(JSON.stringify(shown));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
