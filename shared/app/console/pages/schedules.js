// Schedules: every schedule with its description, state, next run, last result, success
// rate and failures in a row (the `health` GET /v1/schedules carries), worst first, with
// filters by owner and state.

import { all } from "../api.js";
import { h, link, table, timeCell, badge, percent } from "../ui.js";
import { describeSchedule, worstFirst } from "../words.js";

const filters = { owner: "", state: "" };

export async function schedulesPage(ctx) {
  const schedules = (await all("/v1/schedules?limit=200")).sort(worstFirst);
  const owners = [...new Set(schedules.map((s) => s.spec.owner).filter(Boolean))].sort();
  const states = [...new Set(schedules.map((s) => s.state))].sort();
  const body = h("div", { id: "schedule-table" });

  const draw = () => {
    const shown = schedules.filter((s) => (!filters.owner || s.spec.owner === filters.owner)
      && (!filters.state || s.state === filters.state));
    body.replaceChildren(table(shown, [
      ["Schedule", (s) => h("div", {}, link(`/schedules/${encodeURIComponent(s.id)}`, s.id),
        s.spec.name ? h("div", { class: "muted small" }, s.spec.name) : null)],
      ["When", (s) => describeSchedule(s)],
      ["State", (s) => badge(s.state)],
      ["Next run", (s) => timeCell(s.next_run_at, s.spec.timezone)],
      ["Last result", (s) => lastResult(s)],
      ["7-day success", (s) => successRate(s.health)],
      ["Failures in a row", (s) => failures(s.health)],
      ["Awaiting approval", (s) => (s.health ? String(s.health.awaiting_approval) : "—")],
      ["Owner", (s) => s.spec.owner || "—"],
    ], {
      empty: "No schedule matches these filters.",
      rowAttrs: (s) => ({ "data-schedule": s.id }),
    }));
  };

  const select = (label, key, values) => h("label", { class: "filter" }, `${label} `,
    h("select", {
      id: `filter-${key}`,
      onchange: (ev) => { filters[key] = ev.target.value; draw(); },
    }, h("option", { value: "" }, "all"),
    values.map((v) => h("option", { value: v, selected: filters[key] === v }, v))));

  draw();
  return [
    h("h1", {}, "Schedules"),
    h("p", { class: "muted" }, `${schedules.length} schedules, worst first: failures in a row, runs awaiting approval, a missed freshness objective, then the lowest 7-day success rate. Times in each schedule's zone, UTC below.`),
    h("div", { class: "filters" }, select("Owner", "owner", owners), select("State", "state", states)),
    body,
  ];
}

function lastResult(s) {
  const last = s.health && s.health.last_run;
  if (!last) return h("span", { class: "muted" }, "no run yet");
  return h("div", {}, badge(last.status), h("div", {}, timeCell(last.ended_at || last.scheduled_for, s.spec.timezone)));
}

function successRate(health) {
  if (!health) return "—";
  const c = health.counts_7d || {};
  return h("span", { title: `${c.succeeded || 0} succeeded, ${c.failed || 0} failed, ${c.skipped || 0} skipped (7 days)` },
    percent(health.success_rate_7d));
}

function failures(health) {
  if (!health) return "—";
  const n = health.consecutive_failures;
  return h("span", { class: n > 0 ? "bad" : "" }, String(n));
}
