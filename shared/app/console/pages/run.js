// A run: its attempts (times, worker, outcome, error), business window, idempotency key and
// result; the operator actions its status allows. A steps job's checkpoints (`steps`), a run's
// children progress (`children`) and upstream/downstream runs show when the API answers them.

import { get, post, enc } from "../api.js";
import { h, link, table, when, timeCell, badge, facts, section, button, ask, act, can, duration, runBadges } from "../ui.js";
import { reasonText, whyHeld, qualityText } from "../words.js";

export async function runPage(ctx, id, runId) {
  const path = `/v1/schedules/${enc(id)}/runs/${enc(runId)}`;
  const [run, schedule] = await Promise.all([get(path), get(`/v1/schedules/${enc(id)}`).catch(() => null)]);
  const zone = run.timezone || (schedule && schedule.spec.timezone) || "UTC";
  const result = run.result || {};
  const parts = [
    h("p", { class: "crumbs" }, link("/schedules", "Schedules"), " / ", link(`/schedules/${enc(id)}`, id), " / ", runId),
    h("h1", {}, `Run of ${when(run.scheduled_for, zone)} `, runBadges(run, qualityText)),
    run.reason ? h("p", { class: "lead" }, run.status === "MANUAL_REQUIRED" ? whyHeld(run) : reasonText(run.reason)) : null,
    actions(ctx, run, path),
    facts([
      ["Trigger", run.trigger],
      ["Window", h("span", {}, timeCell(run.window_start, zone), " → ", timeCell(run.window_end, zone))],
      ["Business date", run.business_date],
      ["Idempotency key", h("code", {}, run.idempotency_key)],
      ["Lane", run.lane || "—"],
      ["Schedule version", String(run.schedule_version ?? "—")],
      ["Attempts", String(run.attempts)],
      ["Replay group", run.replay_group_id || undefined],
      ["Range", run.range_end ? `${run.count} windows through ${when(run.range_end, zone)}` : undefined],
      ["Created", timeCell(run.created_at, zone)],
      ["Started", timeCell(run.started_at, zone)],
      ["Completed", timeCell(run.completed_at, zone)],
      ["Result count", result.count ?? undefined],
      ["Quality", run.quality ? h("span", { class: "quality" }, badge(run.quality, run.quality_reason),
        " ", run.quality_reason || "", ": ", qualityText(run.quality_reason)) : undefined],
      ["Checksum", result.checksum ? h("code", {}, result.checksum) : undefined],
      ["Error", result.error_code || result.message ? `${result.error_code || ""} ${result.message || ""}`.trim() : undefined],
    ]),
    section("Attempts", attempts(run, zone)),
  ];
  if (Array.isArray(run.steps)) parts.push(section("Steps", steps(run.steps, zone)));
  if (run.children && typeof run.children === "object") parts.push(section("Children", children(run.children)));
  for (const [key, title] of [["upstream", "Upstream runs"], ["downstream", "Downstream runs"]]) {
    if (Array.isArray(run[key])) parts.push(section(title, related(run[key], zone)));
  }
  return parts;
}

function actions(ctx, run, path) {
  const box = h("div", { class: "actions" });
  if (!can(ctx.role, "operator")) return box;
  const add = (label, action, text, allowed) => {
    if (!allowed.includes(run.status)) return;
    box.append(button(label, async (ev) => {
      const note = await ask({ title: `${label} this run`, text, ok: label });
      if (note !== null) await act(ev.target, label, () => post(`${path}/${action}`, { note }), ctx.rerender);
    }, { "data-action": action }));
  };
  add("Approve", "approve", whyHeld(run), ["MANUAL_REQUIRED"]);
  add("Reject", "reject", "The window will not run.", ["MANUAL_REQUIRED"]);
  add("Retry", "retry", "A new attempt of the same run.", ["FAILED", "STALLED"]);
  add("Cancel", "cancel", "The run will not start.", ["PENDING", "QUEUED", "RETRY_PENDING", "MANUAL_REQUIRED", "STALLED"]);
  return box;
}

function attempts(run, zone) {
  const rows = run.attempt_history || [];
  const note = run.attempts_unlisted ? h("p", { class: "muted small" }, `${run.attempts_unlisted} older attempts are not listed.`) : null;
  return [table(rows, [
    ["#", (a) => String(a.number)],
    ["Worker", (a) => a.worker || "—"],
    ["Started", (a) => timeCell(a.started_at, zone)],
    ["Finished", (a) => timeCell(a.finished_at, zone)],
    ["Took", (a) => duration(a.duration_ms)],
    ["Outcome", (a) => (a.outcome ? badge(a.outcome) : h("span", { class: "muted" }, "running"))],
    ["Left it", (a) => badge(a.status)],
    ["Error", (a) => (a.error ? `${a.error.code || ""} ${a.error.message || ""}`.trim() : "")],
  ], { empty: "No attempt yet." }), note];
}

function steps(items, zone) {
  return table(items, [
    ["Step", (s) => s.name],
    ["Status", (s) => badge(s.status)],
    ["Attempts", (s) => String(s.attempts ?? 0)],
    ["Started", (s) => timeCell(s.started_at, zone)],
    ["Ended", (s) => timeCell(s.ended_at, zone)],
    ["Output", (s) => (s.output === undefined || s.output === null ? "" : h("code", {}, JSON.stringify(s.output)))],
    ["Error", (s) => s.error_code || ""],
  ]);
}

// The run's children as it counts them: one line of progress.
function children(c) {
  const done = (c.succeeded || 0) + (c.failed || 0);
  return facts([
    ["Progress", `${done} of ${c.total} ended`],
    ["Succeeded", String(c.succeeded ?? 0)],
    ["Failed", String(c.failed ?? 0)],
    ["Running", String(c.running ?? 0)],
  ]);
}

function related(items, zone) {
  return table(items, [
    ["Schedule", (r) => link(`/schedules/${enc(r.schedule)}`, r.schedule)],
    ["Run", (r) => (r.run_id ? link(`/schedules/${enc(r.schedule)}/runs/${enc(r.run_id)}`, when(r.scheduled_for, zone)) : when(r.scheduled_for, zone))],
    ["Status", (r) => badge(r.status)],
  ]);
}
