// What the ledger's codes mean, in words an operator reads at 3 a.m., and the order of the
// schedules list (the same as `cronledger status`: worst first).

export const REASONS = {
  MISSED: "the window passed while nothing ran, and the misfire policy skips missed windows",
  OVERLAP: "an earlier run was still active (SKIP_NEW)",
  GRACE_EXPIRED: "found too late to start within the grace period",
  PAUSED: "the schedule was paused",
  DISABLED: "the schedule was disabled",
  ARCHIVED: "the schedule was archived before the run could start",
  ALREADY_DONE: "this window already succeeded",
  COALESCED: "folded into another run of the same catch-up (RUN_ONCE)",
  POLICY_MANUAL: "the misfire policy is MANUAL: a missed window waits for an operator",
  CAP_EXCEEDED: "more missed windows than max_auto_catch_up lets start on their own (cap)",
  SIDE_EFFECTS: "a side-effecting job past the immediate catch-up tier",
  GAP_TOO_LONG: "the gap is longer than the backfill tier",
  STALLED_NOT_IDEMPOTENT: "stalled, and the job is not declared idempotent: nobody knows whether it acted",
  WORKER_LOST: "the worker vanished mid-run (lease ran out); the job is not idempotent",
  QUEUED_BEHIND: "waiting for the active run to end (QUEUE_NEW)",
  LATE_AWAITING_PLAN: "reached a worker late; waits for the reconciler to plan its gap",
  HEARTBEAT_LOST: "the worker's heartbeat stopped",
  MAX_RUNTIME_EXCEEDED: "ran past max_runtime",
  RETRIES_EXHAUSTED: "every attempt failed",
  PERMANENT_ERROR: "the job reported a permanent error",
  REJECTED: "an operator rejected it",
  CANCELLED_BY_OPERATOR: "an operator cancelled it",
  APPROVAL_REQUIRED: "the schedule asks for approval of every run",
  APPROVAL_TIMEOUT: "nobody approved it within approval_timeout",
  AFFECTED_OVER_LIMIT: "the guarded job's dry run would touch more items than guard.max_affected",
  UPSTREAM_NOT_SUCCEEDED: "a schedule it runs after did not succeed for this window",
};

const QUALITY_REASONS = {
  BELOW_MIN: "its count is below the schedule's expect.min_count",
  ABOVE_MAX: "its count is above the schedule's expect.max_count",
  OUTSIDE_LEARNED_BAND: "its count is outside the band learned from the schedule's recent successes",
};

/// Why a run is SUSPECT, in words.
export function qualityText(code) {
  return code ? QUALITY_REASONS[code] || code : "";
}

export function reasonText(code) {
  return code ? REASONS[code] || code : "";
}

/// Why a held run waits, with the guard's count when the dry run reported one.
export function whyHeld(run) {
  const base = reasonText(run.reason) || "held for approval";
  const count = run.result && run.result.count;
  if (run.reason === "AFFECTED_OVER_LIMIT" && count !== undefined && count !== null) {
    return `${base} (dry run: ${count} items)`;
  }
  if (run.range_end) return `${base} — a range of ${run.count} windows through ${run.range_end}`;
  return base;
}

const DAYS = { "1-5": "weekdays", "MON-FRI": "weekdays", "0,6": "weekends", "SAT,SUN": "weekends" };

/// The API's own description (`describe`) when it has one, else a short reading of the cron.
export function describeSchedule(s) {
  if (s.describe) return s.describe;
  const spec = s.spec || {};
  const fields = String(spec.cron || "").replace(/^cron\(|\)$/g, "").trim().split(/\s+/);
  if (fields.length >= 5) {
    const [min, hour, , , dow] = fields;
    if (/^\d+$/.test(min) && /^\d+$/.test(hour)) {
      const at = `${hour.padStart(2, "0")}:${min.padStart(2, "0")}`;
      const days = DAYS[dow] || (dow === "*" || dow === "?" ? "every day" : `days ${dow}`);
      return `${days} at ${at} ${spec.timezone}`;
    }
  }
  return `${spec.cron} (${spec.timezone})`;
}

const PRIORITIES = ["CRITICAL", "HIGH", "NORMAL", "LOW"];

/// `cronledger status`'s order: failures in a row, runs awaiting approval, a missed freshness
/// objective, the lowest 7-day success rate; schedules without health after; archived last.
export function worstFirst(a, b) {
  const archived = (s) => (s.state === "ARCHIVED" ? 1 : 0);
  if (archived(a) !== archived(b)) return archived(a) - archived(b);
  const ha = a.health, hb = b.health;
  if (!ha || !hb) return (ha ? 0 : 1) - (hb ? 0 : 1) || a.id.localeCompare(b.id);
  const missed = (h) => (h.freshness && h.freshness.met === false ? 1 : 0);
  // No rate yet sorts after every rate.
  const rate = (h) => (h.success_rate_7d === null || h.success_rate_7d === undefined ? 2 : h.success_rate_7d);
  const priority = (h) => PRIORITIES.indexOf(h.priority);
  return (hb.consecutive_failures - ha.consecutive_failures)
    || (hb.awaiting_approval - ha.awaiting_approval)
    || (missed(hb) - missed(ha))
    || (rate(ha) - rate(hb))
    || (priority(ha) - priority(hb))
    || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/// Statuses an operator must look at.
export const ATTENTION = ["MANUAL_REQUIRED", "FAILED", "STALLED"];
