// Backfills: every open backfill with a progress bar, rate and ETA; pause, resume, cancel
// (operator) and approve a held one (admin); verify against the ledger on demand.

import { all, get, post, enc } from "../api.js";
import { h, link, when, badge, facts, button, ask, act, can, pool, table, errorText } from "../ui.js";

export async function backfillsPage(ctx) {
  const open = await all("/v1/backfills?limit=200");
  const progress = await pool(open.map((b) => () => get(`/v1/backfills/${enc(b.id)}`).catch((e) => ({ ...b, error: e }))));
  return [
    h("h1", {}, "Backfills"),
    h("p", { class: "muted" }, progress.length ? `${progress.length} open (running or paused).` : ""),
    progress.length ? progress.map((b) => card(ctx, b)) : h("p", { class: "muted empty" }, "No open backfill. Start one with `cronledger backfill create` or POST /v1/schedules/{id}/backfills."),
  ];
}

function card(ctx, b) {
  const done = (b.succeeded || 0) + (b.failed || 0) + (b.skipped || 0);
  const total = b.total || 0;
  const share = total ? Math.min(1, done / total) : 0;
  const bar = h("div", { class: "bar", role: "progressbar", "aria-valuemin": "0", "aria-valuemax": String(total), "aria-valuenow": String(done), "aria-label": `${done} of ${total} windows done` },
    h("span", { class: "bar-ok" }), h("span", { class: "bar-failed" }));
  // Widths through the CSSOM: the CSP allows no inline style attributes.
  bar.children[0].style.width = `${total ? (100 * ((b.succeeded || 0) + (b.skipped || 0))) / total : 0}%`;
  bar.children[1].style.width = `${total ? (100 * (b.failed || 0)) / total : 0}%`;
  const verifyBox = h("div", { class: "verify" });
  return h("article", { class: "card", "data-backfill": b.id },
    h("h2", {}, `${b.id} `, badge(b.state), b.held ? h("span", { class: "warn small" }, ` ${b.held}`) : null),
    h("p", {}, link(`/schedules/${enc(b.schedule)}`, b.schedule), ` · ${when(b.from)} → ${when(b.to)}`),
    bar,
    h("p", { class: "small" }, `${done} of ${total} done (${(share * 100).toFixed(1)}%) · ${b.queued || 0} queued · ${b.running || 0} running · ${b.failed || 0} failed`),
    b.error ? h("p", { class: "flash-error" }, errorText(b.error)) : facts([
      ["Rate", b.rate_per_minute !== undefined ? `${b.rate_per_minute} windows/min` : undefined],
      ["ETA", b.eta ? when(b.eta) : "—"],
      ["Reprocess", b.reprocess],
      ["Created by", b.created_by],
      ["Note", b.note || undefined],
      ["Approval", b.approval_required ? (b.approval_reasons || []).join(", ") : b.approved_by ? `approved by ${b.approved_by}` : undefined],
      ["Estimate", estimateText(b.estimate)],
      ["Spent", b.spent ? `${usd(b.spent.cost_usd)} over ${b.spent.runs} runs, ${b.spent.target_calls} target calls` : undefined],
      ["Budget", budgetText(b.budget)],
      ["Paused by", b.pause_reason || undefined],
    ]),
    actions(ctx, b, verifyBox),
    verifyBox);
}

const usd = (x) => `$${Number(x || 0).toFixed(4)}`;

// What the backfill was estimated to cost when it was created (the api's `estimate`).
function estimateText(e) {
  if (!e) return undefined;
  return `${e.runs} runs, ${e.target_calls} target calls, ${Number(e.lambda_gb_seconds).toFixed(1)} Lambda GB-s, ${usd(e.cost_usd)}, done by ${when(e.finishes_at)}`;
}

function budgetText(budget) {
  const caps = [];
  if (budget && budget.max_cost_usd !== undefined) caps.push(`max ${usd(budget.max_cost_usd)}`);
  if (budget && budget.max_target_calls !== undefined) caps.push(`max ${budget.max_target_calls} target calls`);
  return caps.length ? caps.join(", ") : undefined;
}

function actions(ctx, b, verifyBox) {
  const box = h("div", { class: "actions" });
  const path = `/v1/backfills/${enc(b.id)}`;
  const add = (label, action, allowed, text) => box.append(button(label, async (ev) => {
    const note = await ask({ title: `${label} backfill ${b.id}`, text, ok: label, noteRequired: action === "approve" || (action === "resume" && b.pause_reason === "BUDGET") });
    if (note !== null) await act(ev.target, label, () => post(`${path}/${action}`, { note }), ctx.rerender);
  }, { "data-action": action, hidden: !allowed }));
  if (can(ctx.role, "operator")) {
    add("Pause", "pause", b.state === "RUNNING", "No more windows are released until it resumes.");
    add("Resume", "resume", b.state === "PAUSED" && !b.approval_required, b.pause_reason === "BUDGET" ? "Its budget paused it: resuming lifts the budget." : "");
    add("Cancel", "cancel", true, "Its runs not yet started are cancelled.");
  }
  if (can(ctx.role, "admin") && b.approval_required) {
    add("Approve", "approve", true, `Held: ${(b.approval_reasons || []).join(", ")}. Approving starts it.`);
  }
  box.append(button("Verify", async (ev) => {
    ev.target.disabled = true;
    try {
      const v = await get(`${path}/verify?limit=50`);
      verifyBox.replaceChildren(verification(v));
    } catch (e) {
      verifyBox.replaceChildren(h("p", { class: "flash-error" }, errorText(e)));
    }
    ev.target.disabled = false;
  }, { "data-action": "verify" }));
  return box;
}

function verification(v) {
  return h("div", {},
    facts([
      ["Expected windows", String(v.expected_windows)],
      ["Succeeded", String(v.succeeded)],
      ["Missing", String(v.missing)],
      ["Failed", String(v.failed)],
      ["Not run", String(v.not_run)],
      ["In flight", String(v.in_flight)],
      ["Complete", v.complete ? "yes" : "no"],
      ["Reported count", String(v.reported_count_total ?? "—")],
    ]),
    table(v.problems || [], [
      ["Window", (p) => when(p.scheduled_for)],
      ["Problem", (p) => p.problem],
      ["Statuses", (p) => (p.statuses || []).join(", ")],
    ], { empty: "No missing or failed window." }));
}
