// Needs attention: runs held for approval (with why), FAILED and STALLED runs, across every
// schedule; approve, reject and retry with a note, and approve a whole replay group at once.
// There is no cross-schedule run listing in the API: this reads each schedule's runs filtered
// by status (three small pages a schedule, six requests at a time).

import { all, get, post, enc } from "../api.js";
import { h, link, table, when, badge, section, button, ask, act, can, pool, errorText } from "../ui.js";
import { whyHeld, reasonText, ATTENTION } from "../words.js";

const PER_STATUS = 50;

export async function attentionPage(ctx) {
  const schedules = await all("/v1/schedules?limit=200&health=false");
  const zones = Object.fromEntries(schedules.map((s) => [s.id, s.spec.timezone]));
  const tasks = schedules.filter((s) => s.state !== "ARCHIVED").flatMap((s) => ATTENTION.map((status) => () =>
    get(`/v1/schedules/${enc(s.id)}/runs?status=${status}&limit=${PER_STATUS}`).then((p) => p.items || [])));
  const runs = (await pool(tasks)).flat();
  const by = (status) => runs.filter((r) => r.status === status);
  const held = by("MANUAL_REQUIRED");
  return [
    h("h1", {}, "Needs attention"),
    h("p", { class: "muted" }, `${held.length} held for approval, ${by("FAILED").length} failed, ${by("STALLED").length} stalled.`),
    section("Held for approval", heldRuns(ctx, held, zones)),
    section("Failed", failedRuns(ctx, by("FAILED"), zones, "FAILED")),
    section("Stalled", failedRuns(ctx, by("STALLED"), zones, "STALLED")),
  ];
}

const runPath = (r) => `/v1/schedules/${enc(r.schedule)}/runs/${enc(r.run_id)}`;
const runLink = (r, zones) => link(`/schedules/${enc(r.schedule)}/runs/${enc(r.run_id)}`, when(r.scheduled_for, zones[r.schedule]));

function heldRuns(ctx, runs, zones) {
  const operator = can(ctx.role, "operator");
  const groups = new Map();
  for (const r of runs) {
    if (!r.replay_group_id) continue;
    groups.set(r.replay_group_id, [...(groups.get(r.replay_group_id) || []), r]);
  }
  const bulk = operator ? [...groups].filter(([, members]) => members.length > 1).map(([group, members]) =>
    h("p", { class: "group" }, `Replay group ${group}: ${members.length} held runs of ${members[0].schedule}. `,
      button(`Approve all ${members.length}`, async (ev) => {
        const note = await ask({ title: `Approve ${members.length} runs of replay group ${group}`, text: "Each run is approved in turn, with this note; a refused one is reported and the rest go on.", ok: "Approve all" });
        if (note === null) return;
        await act(ev.target, `Approve ${members.length} runs`, async () => {
          const failed = [];
          for (const r of members) {
            await post(`${runPath(r)}/approve`, { note }).catch((e) => failed.push(`${r.run_id}: ${errorText(e)}`));
          }
          if (failed.length) throw new Error(`${failed.length} refused — ${failed.join("; ")}`);
        }, ctx.rerender);
      }, { "data-action": "approve-group", "data-group": group }))) : [];
  return [bulk, table(runs, [
    ["Schedule", (r) => link(`/schedules/${enc(r.schedule)}`, r.schedule)],
    ["Window", (r) => runLink(r, zones)],
    ["Trigger", (r) => r.trigger],
    ["Why", (r) => h("span", { title: r.reason || "" }, whyHeld(r))],
    ["", (r) => (operator ? h("div", { class: "actions" },
      button("Approve", async (ev) => {
        const note = await ask({ title: `Approve ${r.schedule} ${r.run_id}`, text: whyHeld(r), ok: "Approve" });
        if (note !== null) await act(ev.target, "Approve", () => post(`${runPath(r)}/approve`, { note }), ctx.rerender);
      }, { "data-action": "approve", class: "primary" }),
      button("Reject", async (ev) => {
        const note = await ask({ title: `Reject ${r.schedule} ${r.run_id}`, text: "The window will not run (CANCELLED, reason REJECTED).", ok: "Reject" });
        if (note !== null) await act(ev.target, "Reject", () => post(`${runPath(r)}/reject`, { note }), ctx.rerender);
      }, { "data-action": "reject" })) : "")],
  ], { empty: "Nothing is waiting for approval.", rowAttrs: (r) => ({ "data-run": r.run_id, "data-schedule": r.schedule }) })];
}

function failedRuns(ctx, runs, zones, status) {
  const operator = can(ctx.role, "operator");
  return table(runs, [
    ["Schedule", (r) => link(`/schedules/${enc(r.schedule)}`, r.schedule)],
    ["Window", (r) => runLink(r, zones)],
    ["Status", (r) => badge(r.status)],
    ["Reason", (r) => reasonText(r.reason)],
    ["Attempts", (r) => String(r.attempts)],
    ["Error", (r) => (r.result && (r.result.error_code || r.result.message) ? `${r.result.error_code || ""} ${r.result.message || ""}` : "")],
    ["", (r) => (operator ? button("Retry", async (ev) => {
      const note = await ask({ title: `Retry ${r.schedule} ${r.run_id}`, text: "A new attempt of the same run, with the job of the version it was created under.", ok: "Retry" });
      if (note !== null) await act(ev.target, "Retry", () => post(`${runPath(r)}/retry`, { note }), ctx.rerender);
    }, { "data-action": "retry" }) : "")],
  ], { empty: status === "FAILED" ? "No failed runs." : "No stalled runs.", rowAttrs: (r) => ({ "data-run": r.run_id, "data-schedule": r.schedule }) });
}
