// One schedule: its spec, the next 10 fire times with DST notes, a timeline of its recent
// windows, its run history with reasons, its audit log, and pause/resume with a note.

import { get, post, enc } from "../api.js";
import { h, link, table, timeCell, when, badge, facts, section, button, ask, act, can, percent, duration, runBadges } from "../ui.js";
import { describeSchedule, reasonText, qualityText } from "../words.js";

const HISTORY = 100;

export async function schedulePage(ctx, id) {
  const path = `/v1/schedules/${enc(id)}`;
  const [s, preview, runs, audit] = await Promise.all([
    get(path),
    get(`${path}/preview?count=10`),
    get(`${path}/runs?limit=${HISTORY}`),
    get(`${path}/audit?limit=200`),
  ]);
  const zone = s.spec.timezone;
  return [
    h("p", { class: "crumbs" }, link("/schedules", "Schedules"), " / ", id),
    h("h1", {}, s.spec.name ? `${s.spec.name} (${id})` : id, " ", badge(s.state)),
    h("p", { class: "lead" }, describeSchedule(s)),
    actions(ctx, s),
    healthFacts(s),
    section("Next fire times", nextFires(preview, zone)),
    section("Recent windows", timeline(runs.items, zone)),
    section("Run history", history(id, runs.items, zone)),
    section("Spec", specFacts(s)),
    section("Audit log", auditLog(audit, zone)),
  ];
}

function actions(ctx, s) {
  const box = h("div", { class: "actions", id: "schedule-actions" });
  const path = `/v1/schedules/${enc(s.id)}`;
  if (can(ctx.role, "admin") && s.state === "ACTIVE") {
    box.append(button("Pause", async (ev) => {
      const note = await ask({ title: `Pause ${s.id}`, text: "No window fires while paused; missed ones follow the misfire policy on resume.", ok: "Pause" });
      if (note !== null) await act(ev.target, "Pause", () => post(`${path}/pause`, { note }), ctx.rerender);
    }, { "data-action": "pause" }));
  }
  if (can(ctx.role, "admin") && s.state === "PAUSED") {
    box.append(button("Resume", async (ev) => {
      const note = await ask({ title: `Resume ${s.id}`, ok: "Resume" });
      if (note !== null) await act(ev.target, "Resume", () => post(`${path}/resume`, { note }), ctx.rerender);
    }, { "data-action": "resume" }));
  }
  if (can(ctx.role, "operator") && s.state !== "ARCHIVED") {
    box.append(button("Run now", async (ev) => {
      const note = await ask({ title: `Run ${s.id} now`, text: "Runs the latest occurrence at or before now (trigger MANUAL); an existing run of that window is reused.", ok: "Run now" });
      if (note === null) return;
      const key = crypto.randomUUID();
      await act(ev.target, "Run now", () => post(`${path}/runs`, { note }, { "Idempotency-Key": key }), ctx.rerender);
    }, { "data-action": "run-now" }));
  }
  return box;
}

function healthFacts(s) {
  const hl = s.health;
  if (!hl) return h("p", { class: "muted" }, "No health counters.");
  const c = hl.counts_7d || {};
  return facts([
    ["Next run", timeCell(s.next_run_at, s.spec.timezone)],
    ["Last window", s.ends_at ? timeCell(s.ends_at, s.spec.timezone) : undefined],
    ["Last result", hl.last_run ? h("span", {}, badge(hl.last_run.status), " ", when(hl.last_run.ended_at || hl.last_run.scheduled_for, s.spec.timezone)) : "no run yet"],
    ["7-day success", `${percent(hl.success_rate_7d)} (${c.succeeded || 0} ok, ${c.failed || 0} failed, ${c.skipped || 0} skipped)`],
    ["30-day success", percent(hl.success_rate_30d)],
    ["Failures in a row", String(hl.consecutive_failures)],
    ["Awaiting approval", String(hl.awaiting_approval)],
    // Of the successes among the newest runs read: a run past twice the p95 is SLOW_RUN.
    ["Duration p50 / p95", hl.duration_p50_ms == null ? undefined : `${duration(hl.duration_p50_ms)} / ${duration(hl.duration_p95_ms)}`],
    ["Freshness", hl.freshness ? `${percent(hl.freshness.attainment_30d)} within ${hl.freshness.within} (target ${percent(hl.freshness.target)})` : undefined],
  ]);
}

function nextFires(preview, zone) {
  return table(preview.fire_times || [], [
    ["Local", (f) => f.local],
    ["UTC", (f) => f.at.replace("T", " ").replace("Z", " UTC")],
    ["DST", (f) => (f.dst_note ? h("span", { class: "warn" }, f.dst_note) : "")],
    // An excluded date's window is recorded SKIPPED (EXCLUDED): shown, marked, not run.
    ["Calendar", (f) => (f.excluded ? h("span", { class: "muted" }, "excluded: skipped, not run") : "")],
  ], {
    empty: "It never fires again.",
    rowAttrs: (f) => ({ class: f.excluded ? "fire excluded" : "fire" }),
  });
}

/// The recent windows, oldest to newest, one cell each coloured by status; a range record (a
/// held catch-up of many windows) is one band with its count. Hover or focus for the reason.
function timeline(runs, zone) {
  if (!runs.length) return h("p", { class: "muted empty" }, "No windows yet.");
  const cells = [...runs].reverse().map((r) => {
    const range = r.range_end ? ` through ${when(r.range_end, zone)} (${r.count} windows)` : "";
    const reason = r.reason ? ` — ${reasonText(r.reason)}` : "";
    const label = `${when(r.scheduled_for, zone)}${range}: ${r.status}${reason}`;
    return h("li", {
      class: `cell s-${r.status.toLowerCase()}${r.range_end ? " band" : ""}`,
      title: label, "aria-label": label, tabindex: "0",
    }, r.range_end ? String(r.count) : "");
  });
  return h("div", {},
    h("ol", { class: "timeline", "aria-label": "recent windows, oldest first" }, cells),
    h("p", { class: "muted small" }, `The last ${runs.length} runs, oldest left; hover or focus a cell for its window, status and reason.`));
}

function history(id, runs, zone) {
  return table(runs, [
    ["Window", (r) => link(`/schedules/${enc(id)}/runs/${enc(r.run_id)}`, when(r.scheduled_for, zone))],
    ["Trigger", (r) => r.trigger],
    ["Status", (r) => runBadges(r, qualityText)],
    ["Reason", (r) => (r.reason ? h("span", { title: r.reason }, reasonText(r.reason))
      : r.quality_reason ? h("span", { title: r.quality_reason }, qualityText(r.quality_reason)) : "")],
    ["Attempts", (r) => String(r.attempts)],
    ["Result", (r) => (r.result && r.result.count !== undefined ? `${r.result.count} items` : "")],
  ], { empty: "No runs yet.", rowAttrs: (r) => ({ "data-run": r.run_id, "data-status": r.status }) });
}

function specFacts(s) {
  const spec = s.spec;
  const job = spec.job || {};
  const target = job.url || job.function || job.function_name || "";
  return facts([
    ["Cron", h("code", {}, spec.cron)],
    ["Time zone", spec.timezone],
    ["Misfire", spec.misfire],
    ["Overlap", spec.overlap],
    ["Grace", spec.grace],
    ["Auto catch-up cap", spec.max_auto_catch_up],
    ["Priority", spec.priority],
    ["Side effects", spec.side_effects === undefined ? undefined : String(spec.side_effects)],
    ["Idempotent", spec.idempotent === undefined ? undefined : String(spec.idempotent)],
    ["Max attempts", spec.max_attempts],
    ["Max runtime", spec.max_runtime],
    ["Approval", spec.approval],
    ["Owner", spec.owner],
    ["Job", `${job.type || "?"}${target ? ` → ${target}` : ""}`],
    ["Version", String(s.version)],
  ].map(([k, v]) => [k, v === undefined || v === null ? undefined : v]));
}

function auditLog(audit, zone) {
  const entries = [...(audit.entries || [])].reverse();
  return table(entries, [
    ["When", (e) => when(e.at, zone)],
    ["Action", (e) => e.action],
    ["By", (e) => e.actor],
    ["Note", (e) => e.reason || ""],
    ["Version", (e) => (e.version === null || e.version === undefined ? "" : String(e.version))],
  ], { empty: "No audit entries." });
}
