// DOM and formatting helpers shared by the pages. No framework: elements are built with h()
// and text is always set as text (never parsed as HTML), so nothing the API returns can
// inject markup.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "class") {
      el.className = value;
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/// The console's base path (`/console`, or `/STAGE/console` behind a stage prefix).
export const base = (() => {
  const at = location.pathname.indexOf("/console");
  return at >= 0 ? location.pathname.slice(0, at) + "/console" : "/console";
})();

/// The api's root, beside the console.
export const apiRoot = base.slice(0, -"/console".length);

export function link(path, ...children) {
  return h("a", { href: base + path, "data-nav": true }, ...children);
}

const ROLES = ["viewer", "operator", "admin"];

/// Whether `role` (the caller's, from /v1/whoami) is at least `needed`.
export function can(role, needed) {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed) && ROLES.indexOf(needed) >= 0;
}

const formatters = new Map();
function formatter(zone) {
  if (!formatters.has(zone)) {
    let f;
    try {
      f = new Intl.DateTimeFormat("en-CA", {
        timeZone: zone, year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short",
      });
    } catch {
      f = null; // a zone this browser does not know: UTC only
    }
    formatters.set(zone, f);
  }
  return formatters.get(zone);
}

function parts(date, zone) {
  const f = formatter(zone);
  if (!f) return null;
  const p = Object.fromEntries(f.formatToParts(date).map((x) => [x.type, x.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute} ${p.timeZoneName}`;
}

/// `2026-03-02 11:00 GMT+9 · 02:00 UTC`: the schedule's zone first, then UTC.
export function when(iso, zone) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const utc = iso.slice(0, 16).replace("T", " ") + " UTC";
  const local = zone && zone !== "UTC" ? parts(date, zone) : null;
  return local ? `${local} · ${utc.slice(11)}` : utc;
}

/// A time cell: the zone's time, UTC in the title and on a second line.
export function timeCell(iso, zone) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const date = new Date(iso);
  const local = zone && zone !== "UTC" ? parts(date, zone) : null;
  const utc = iso.slice(0, 16).replace("T", " ") + " UTC";
  return h("span", { class: "time", title: `${iso} (${relative(iso)})` },
    local ? [h("span", {}, local), h("span", { class: "utc" }, utc)] : utc);
}

export function relative(iso) {
  const ms = new Date(iso).getTime() - Date.now();
  if (Number.isNaN(ms)) return "";
  const abs = Math.abs(ms);
  const unit = abs < 90e3 ? [Math.round(abs / 1e3), "s"]
    : abs < 90 * 60e3 ? [Math.round(abs / 60e3), "min"]
      : abs < 36 * 3600e3 ? [Math.round(abs / 3600e3), "h"]
        : [Math.round(abs / 86400e3), "d"];
  return ms >= 0 ? `in ${unit[0]} ${unit[1]}` : `${unit[0]} ${unit[1]} ago`;
}

export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  const s = ms / 1000;
  if (s < 90) return `${s.toFixed(1)} s`;
  const m = Math.floor(s / 60);
  return m < 90 ? `${m}m ${Math.round(s % 60)}s` : `${Math.floor(m / 60)}h ${m % 60}m`;
}

export function percent(fraction) {
  return fraction === null || fraction === undefined ? "—" : `${(fraction * 100).toFixed(1)}%`;
}

/// A status as a coloured badge (the colour classes are in console.css).
export function badge(status, title) {
  if (!status) return h("span", { class: "muted" }, "—");
  return h("span", { class: `badge s-${status.toLowerCase()}`, title }, status.replaceAll("_", " "));
}

/// A run's status badge, and beside it a SUSPECT badge (its reason on hover) when the run
/// succeeded with a count outside its schedule's band.
export function runBadges(run, reasonTitle) {
  return h("span", {}, badge(run.status),
    run.quality ? [" ", badge(run.quality, reasonTitle(run.quality_reason))] : null);
}

/// A table: `columns` are [heading, cell(row)] pairs.
export function table(rows, columns, { empty = "Nothing here.", rowAttrs } = {}) {
  if (!rows.length) return h("p", { class: "muted empty" }, empty);
  return h("div", { class: "table-wrap" },
    h("table", {},
      h("thead", {}, h("tr", {}, columns.map(([name]) => h("th", { scope: "col" }, name)))),
      h("tbody", {}, rows.map((row) => h("tr", rowAttrs ? rowAttrs(row) : {},
        columns.map(([name, cell]) => h("td", { "data-label": name }, cell(row))))))));
}

/// Key/value pairs as a definition list.
export function facts(pairs) {
  return h("dl", { class: "facts" },
    pairs.filter(([, v]) => v !== undefined).flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v ?? "—")]));
}

export function section(title, ...children) {
  return h("section", {}, h("h2", {}, title), ...children);
}

export function button(label, onclick, attrs = {}) {
  return h("button", { type: "button", ...attrs, onclick }, label);
}

/// A message at the top of the page for a few seconds (errors stay until the next one).
export function flash(text, kind = "ok") {
  const box = document.getElementById("flash");
  box.replaceChildren(h("p", { class: `flash-${kind}` }, text));
  clearTimeout(flash.timer);
  if (kind === "ok") flash.timer = setTimeout(() => box.replaceChildren(), 6000);
}

export function errorText(e) {
  if (e && e.code) return `${e.code}: ${e.message}`;
  return String(e && e.message ? e.message : e);
}

/// Asks for a note (and, for dangerous actions, a typed confirmation) in the page's dialog.
/// Resolves to the note, or null when cancelled.
export function ask({ title, text = "", ok = "Confirm", type = null, noteRequired = false }) {
  const dialog = document.getElementById("dialog");
  const $ = (id) => document.getElementById(id);
  $("dialog-title").textContent = title;
  $("dialog-text").textContent = text;
  $("dialog-ok").textContent = ok;
  const note = $("dialog-note");
  const typed = $("dialog-confirm-input");
  const typedLabel = $("dialog-confirm-label");
  note.value = "";
  typed.value = "";
  typed.hidden = typedLabel.hidden = !type;
  if (type) typedLabel.textContent = `Type ${type} to confirm`;
  const okButton = $("dialog-ok");
  const ready = () => {
    okButton.disabled = (type && typed.value.trim() !== type) || (noteRequired && !note.value.trim());
  };
  ready();
  typed.oninput = note.oninput = ready;
  return new Promise((resolve) => {
    const done = (value) => {
      dialog.close();
      okButton.onclick = $("dialog-cancel").onclick = dialog.oncancel = null;
      resolve(value);
    };
    okButton.onclick = () => done(note.value.trim());
    $("dialog-cancel").onclick = () => done(null);
    dialog.oncancel = (ev) => { ev.preventDefault(); done(null); };
    dialog.showModal();
    (type ? typed : note).focus();
  });
}

/// Runs an action from a button: disables it while the call is out, reports the outcome,
/// then re-renders the page.
export async function act(btn, what, call, rerender) {
  btn.disabled = true;
  try {
    await call();
    flash(`${what}: done`);
    if (rerender) await rerender();
  } catch (e) {
    flash(`${what} failed — ${errorText(e)}`, "error");
    btn.disabled = false;
  }
}

/// Runs `tasks` (functions returning promises) at most `limit` at a time, in order.
export async function pool(tasks, limit = 6) {
  const results = new Array(tasks.length);
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) {
      const i = next++;
      results[i] = await tasks[i]();
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, worker));
  return results;
}
