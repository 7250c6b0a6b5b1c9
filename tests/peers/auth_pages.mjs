// Drives eragate's built-in authorization server pages in Debian's chromium (playwright-core
// from $BROWSER_DIR), as a person would, without JavaScript on the pages: opens the
// authorization URL, checks the login form is labelled, signs in with a wrong password first
// (the page says so), then the right one, allows on the consent page, and captures the
// redirect to the client. Screenshots of both pages are saved. Prints ONE JSON object:
//   {"login_title", "labels": [...], "wrong_password_alert", "consent_title", "consent_text",
//    "redirect": "<the URL the browser was sent to>"}
// Usage: node auth_pages.mjs AUTHORIZE_URL USER PASSWORD LOGIN.png CONSENT.png
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const [url, user, password, loginShot, consentShot] = process.argv.slice(2);
const require = createRequire(join(process.env.BROWSER_DIR, "node_modules", "/"));
const { chromium } = require("playwright-core");

const profile = mkdtempSync(join(tmpdir(), "eragate-chromium-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: "/usr/bin/chromium",
  headless: true,
  javaScriptEnabled: false,
  viewport: { width: 900, height: 700 },
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = context.pages()[0] ?? (await context.newPage());
  // The test listens at the client's redirect URI.
  const callback = new URL(url).searchParams.get("redirect_uri");
  await page.goto(url, { waitUntil: "load", timeout: 20000 });
  const loginTitle = await page.title();
  const labels = await page.locator("label").allTextContents();
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill("not-the-password");
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: "Sign in" }).click()]);
  const alert = await page.getByRole("alert").textContent();
  await page.screenshot({ path: loginShot, fullPage: true });
  await page.getByLabel("Username").fill(user);
  await page.getByLabel("Password").fill(password);
  await Promise.all([page.waitForNavigation(), page.getByRole("button", { name: "Sign in" }).click()]);
  const consentTitle = await page.title();
  const consentText = await page.locator("main").innerText();
  await page.screenshot({ path: consentShot, fullPage: true });
  await Promise.all([page.waitForURL(`${callback}**`, { timeout: 20000 }),
    page.getByRole("button", { name: "Allow" }).click()]);
  const redirect = page.url();
  console.log(JSON.stringify({
    login_title: loginTitle, labels, wrong_password_alert: alert,
    consent_title: consentTitle, consent_text: consentText, redirect,
  }));
} finally {
  await context.close();
  rmSync(profile, { recursive: true, force: true });
}
