// System: whether automatic firing is on, the ticker's and reconciler's EventBridge schedules
// (in AWS), the kill switch (admin, with a typed confirmation) and the system audit log.

import { get, post } from "../api.js";
import { h, when, facts, section, table, button, ask, act, can } from "../ui.js";

const CONFIRM = "STOP ALL FIRING";

export async function systemPage(ctx) {
  const [status, audit] = await Promise.all([get("/v1/system"), get("/v1/system/audit?limit=20")]);
  const ks = status.kill_switch;
  return [
    h("h1", {}, "System"),
    h("p", { class: "lead", id: "firing" }, status.automatic_firing
      ? h("span", {}, h("span", { class: "badge s-success" }, "ON"), " Automatic firing is on.")
      : h("span", {}, h("span", { class: "badge s-failed" }, "OFF"), status.kill_switch_engaged ? " The kill switch is engaged: nothing fires, plans, releases or starts." : " Some automatic schedule is missing or disabled.")),
    section("Kill switch", facts([
      ["State", status.kill_switch_engaged ? "ENGAGED" : "released"],
      ["Since", ks ? when(ks.since) : "never set"],
      ["By", ks ? ks.actor : undefined],
      ["Note", ks ? ks.note : undefined],
    ]), killSwitch(ctx, status)),
    section("Ticker and reconciler", table(status.schedules || [], [
      ["EventBridge schedule", (s) => s.name],
      ["Exists", (s) => (s.exists ? "yes" : h("span", { class: "bad" }, "MISSING"))],
      ["Enabled", (s) => (s.enabled ? "yes" : h("span", { class: "bad" }, "DISABLED"))],
    ], { empty: "No EventBridge schedules here (the local runner ticks and reconciles every minute itself, honouring the stored kill switch)." })),
    section("System audit log", table(audit.entries || [], [
      ["When", (e) => when(e.at)],
      ["Action", (e) => e.action],
      ["By", (e) => e.actor],
      ["Note", (e) => e.note],
    ], { empty: "No system actions yet." })),
  ];
}

function killSwitch(ctx, status) {
  if (!can(ctx.role, "admin")) {
    return h("p", { class: "muted small" }, "Only an admin may engage or release the kill switch.");
  }
  const engaged = status.kill_switch_engaged;
  return h("div", { class: "actions" }, button(engaged ? "Release the kill switch" : "Engage the kill switch", async (ev) => {
    const note = await ask(engaged
      ? { title: "Release the kill switch", text: "Automatic firing resumes: the ticker, the reconciler and the workers start again. Missed windows follow each schedule's misfire policy.", ok: "Release", type: "RELEASE", noteRequired: true }
      : { title: "Engage the kill switch", text: "Stops ALL automatic firing: no tick, catch-up, release or start until released. Runs in progress finish.", ok: "Engage", type: CONFIRM, noteRequired: true });
    if (note !== null) await act(ev.target, "Kill switch", () => post("/v1/system/kill-switch", { engaged: !engaged, note }), ctx.rerender);
  }, { class: engaged ? "primary" : "danger", "data-action": "kill-switch" }));
}
