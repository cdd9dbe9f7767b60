// The console's shell: signs in (auth.js), asks the API who the caller is, and routes
// `/console/...` paths to pages with the History API, so `/console/schedules/ID` (the link
// alerts carry) opens that schedule directly.

import { authenticate, signOut } from "./auth.js";
import { useToken, get } from "./api.js";
import { base, h, button, errorText } from "./ui.js";
import { schedulesPage } from "./pages/schedules.js";
import { schedulePage } from "./pages/schedule.js";
import { attentionPage } from "./pages/attention.js";
import { runPage } from "./pages/run.js";
import { backfillsPage } from "./pages/backfills.js";
import { systemPage } from "./pages/system.js";

const main = document.getElementById("main");

// [pattern, page name, render(ctx, ...params)]
const ROUTES = [
  [/^\/?$/, "schedules", schedulesPage],
  [/^\/schedules\/?$/, "schedules", schedulesPage],
  [/^\/schedules\/([^/]+)\/runs\/([^/]+)\/?$/, "run", runPage],
  [/^\/schedules\/([^/]+)\/?$/, "schedule", schedulePage],
  [/^\/attention\/?$/, "attention", attentionPage],
  [/^\/backfills\/?$/, "backfills", backfillsPage],
  [/^\/system\/?$/, "system", systemPage],
];

let ctx = null;
let firstRender = true;

async function render() {
  const path = location.pathname.slice(base.length);
  const found = ROUTES.find(([re]) => re.test(path));
  document.body.dataset.ready = "";
  if (!found) {
    main.replaceChildren(h("h1", {}, "Not found"), h("p", {}, `No console page at ${path}.`));
    document.body.dataset.ready = "missing";
    return;
  }
  const [re, name, page] = found;
  const params = path.match(re).slice(1).map(decodeURIComponent);
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.dataset.page === name || (name === "schedule" && a.dataset.page === "schedules")) {
      a.setAttribute("aria-current", "page");
    } else {
      a.removeAttribute("aria-current");
    }
  }
  try {
    const content = await page(ctx, ...params);
    main.replaceChildren(...[content].flat(Infinity).filter((c) => c !== null && c !== undefined));
  } catch (e) {
    main.replaceChildren(h("h1", {}, "Could not load this page"), h("p", { class: "flash-error" }, errorText(e)));
  }
  document.body.dataset.page = name;
  document.body.dataset.ready = name;
  if (firstRender) {
    firstRender = false;
    performance.mark("console-first-render");
  }
}

export function navigate(path) {
  history.pushState(null, "", base + path);
  render();
  main.focus({ preventScroll: true });
}

// Links inside the console change the page without a reload.
document.addEventListener("click", (ev) => {
  const a = ev.target.closest("a[data-nav]");
  if (!a || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
  ev.preventDefault();
  history.pushState(null, "", a.getAttribute("href"));
  render();
  main.focus({ preventScroll: true });
});
window.addEventListener("popstate", render);

async function start() {
  const token = await authenticate(main);
  if (token === undefined) {
    document.body.dataset.ready = "signin";
    return;
  }
  useToken(token, () => { signOut(); location.reload(); });
  let who;
  try {
    who = await get("/v1/whoami");
  } catch (e) {
    main.replaceChildren(h("h1", {}, "No access"),
      h("p", { class: "flash-error" }, errorText(e)),
      h("p", {}, "The API maps callers to roles with CRONLEDGER_API_AUTH (ApiAuthConfig); ask an admin for one."));
    document.body.dataset.ready = "denied";
    return;
  }
  const whoBox = document.getElementById("who");
  whoBox.replaceChildren(h("span", {}, `${who.principal} · `), h("strong", { id: "role" }, who.role));
  if (token) whoBox.append(" ", button("Sign out", () => { signOut(); location.assign(base); }, { class: "link" }));
  ctx = { role: who.role, principal: who.principal, rerender: render, navigate };
  await render();
}

start();
