//! One shard's tick: read the fire mark and the catalog, plan the windows of
//! (`fired_through`, now + lookahead], write their runs, move the mark, send.
//!
//! - **The run is the only write per window.** Each is put where no item is, QUEUED when it
//!   is to be sent (PENDING only while it waits: QUEUE_NEW, a pause), so a racing ticker or
//!   the reconciler that recorded the window first wins and nothing else moves per fire.
//! - **The mark moves only as read.** `fired_through` moves conditioned on its old value and
//!   on the catalog's version: a lagging or racing ticker, the reconciler's fence or a
//!   schedule change under the tick makes the move fail, and the tick reads the mark again,
//!   takes back the runs it wrote under a definition that changed (deleted while still as
//!   written: never started, never sent), and fires what is left of its range.
//! - **Sent after the mark, then marked sent.** The runs go to their lanes once the mark
//!   moved, then `sent_through` follows. A ticker that dies in between leaves
//!   `sent_through` behind `fired_through`: the next tick sends that range's runs again (the
//!   ones never started), and a window found already recorded but never started is sent
//!   again too (a racing ticker may have died before sending it). A copy too many is a
//!   duplicate delivery, which the worker acknowledges.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, TimeDelta, Utc};
use cronledger_aws::StoreError;
use cronledger_core::calendar::CalendarSet;
use cronledger_core::{Run, RunKey, RunStatus, Trigger};
use cronledger_ledger::fire_mark::FireMark;
use cronledger_ledger::ledger::{Created, StoredSchedule};
use futures_util::stream::{self, StreamExt};

use super::windows::{self, Firing, TickPlan, Window};
use super::{TickReport, Ticker};
use crate::faults::CrashPoint;
use crate::metrics::Metric;

/// Mark moves a tick tries when other writers keep moving the mark under it.
const MARK_TRIES: usize = 4;
/// How long after its fire time a run never started is taken as never sent.
const SEND_DEADLINE: TimeDelta = TimeDelta::seconds(30);
/// How far back a shard's first tick starts.
const FIRST_TICK_REACH: TimeDelta = TimeDelta::hours(1);
/// How far before `fired_through` a tick looks for runs a dead ticker never sent; older
/// ones are the reconciler's (its QUEUED-too-long rule).
const RESEND_HORIZON: TimeDelta = TimeDelta::minutes(15);

/// A shard as one tick read it.
#[derive(Clone)]
pub struct ShardTick {
    pub mark: FireMark,
    pub firing: Arc<Vec<Firing>>,
    pub plan: TickPlan,
    /// Where the tick's range starts (the mark, or before a shard's first tick one lookahead
    /// back).
    pub from: DateTime<Utc>,
    /// Windows in (`sent_through`, `fired_through`]: their runs may not have been sent.
    pub unsent: Vec<Window>,
    /// The calendars the shard's schedules name, as they are now (empty, and not read,
    /// when no schedule of the shard names one).
    pub calendars: Arc<CalendarSet>,
}

impl ShardTick {
    /// Whether it fires a window due already (not only ahead of time).
    pub fn fires_due_windows(&self, now: DateTime<Utc>) -> bool {
        !self.unsent.is_empty() || self.plan.windows.iter().any(|w| w.fire_at <= now)
    }
}

/// How a tick's writes of one range went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writes {
    Done,
    /// The mark moved since the tick read it: nothing written, the range is read again.
    Interrupted,
}

/// The range a tick moved the mark over: (`from`, `to`], and where `sent_through` stood
/// after the move.
struct Moved {
    from: Option<DateTime<Utc>>,
    to: DateTime<Utc>,
    sent: DateTime<Utc>,
}

/// A run this tick wrote, with what it needs after the mark moved.
struct Written {
    run: Run,
    stored: StoredSchedule,
    fire_at: DateTime<Utc>,
    send: bool,
    /// Below the mark (see [`Window::below_mark`]): sent by its writer whatever the move.
    below_mark: bool,
    /// An injected crash after its write: never sent by this tick, which then leaves
    /// `sent_through` behind for the next tick to send it.
    crashed: bool,
}

/// A shard's catalog at one version, as the ticker plans from it.
type VersionedCatalog = (u64, Arc<Vec<Firing>>);

/// The shards' catalogs a warm ticker keeps, each at the version it was read at.
#[derive(Default)]
pub struct CatalogCache(Mutex<HashMap<u32, VersionedCatalog>>);

impl CatalogCache {
    fn get(&self, shard: u32) -> Option<VersionedCatalog> {
        let cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        cache.get(&shard).cloned()
    }

    fn put(&self, shard: u32, version: u64, firing: Arc<Vec<Firing>>) {
        let mut cache = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        cache.insert(shard, (version, firing));
    }
}

impl Ticker {
    /// The shard's catalog at the mark's version: cached while the version holds, read
    /// (strongly consistent) when it moved, seeded from the schedules on a table older than
    /// catalogs.
    async fn catalog(
        &self,
        mark: &mut FireMark,
        errors: &mut Vec<String>,
    ) -> Result<Arc<Vec<Firing>>, StoreError> {
        if mark.catalog_version == 0 {
            let seeded = self.store.seed_catalog(mark.shard).await?;
            tracing::info!(
                shard = mark.shard,
                seeded,
                "catalog seeded from the schedules"
            );
            *mark = self.store.fire_mark(mark.shard).await?;
        }
        if let Some((version, firing)) = self.catalogs.get(mark.shard) {
            if version == mark.catalog_version {
                return Ok(firing);
            }
        }
        let entries = self.store.shard_catalog(mark.shard).await?;
        let mut firing = Vec::with_capacity(entries.len());
        for stored in entries.into_iter().filter(|s| s.fires()) {
            match self.schedules.get(&stored) {
                Ok(schedule) => firing.push(Firing { stored, schedule }),
                Err(e) => errors.push(format!("{}: {e}", stored.id())),
            }
        }
        let firing = Arc::new(firing);
        self.catalogs
            .put(mark.shard, mark.catalog_version, firing.clone());
        Ok(firing)
    }

    /// Reads the shard's mark and catalog and plans its tick.
    pub(super) async fn plan_shard(
        &self,
        shard: u32,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        errors: &mut Vec<String>,
    ) -> Result<ShardTick, StoreError> {
        let mut mark = self.store.fire_mark(shard).await?;
        let firing = self.catalog(&mut mark, errors).await?;
        let calendars = self.calendars_for(&firing).await?;
        Ok(self.plan_from(mark, firing, calendars, now, until))
    }

    /// The stored calendars, read (one Query) only when a schedule of the shard names one:
    /// an edit to a calendar changes the windows fired after it, never one already written.
    async fn calendars_for(&self, firing: &[Firing]) -> Result<Arc<CalendarSet>, StoreError> {
        if firing.iter().all(|f| f.stored.spec.calendars.is_empty()) {
            return Ok(Arc::default());
        }
        Ok(Arc::new(self.store.calendars().await?))
    }

    fn plan_from(
        &self,
        mark: FireMark,
        firing: Arc<Vec<Firing>>,
        calendars: Arc<CalendarSet>,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> ShardTick {
        let cap = self.config.max_windows_per_schedule;
        // Before a shard's first tick: an hour back (each schedule fires from its first fire
        // time, and what is past its grace is only passed over).
        let from = mark.fired_through.unwrap_or(now - FIRST_TICK_REACH);
        // The mark's last move was a tick at about `fired_through - lookahead`: a schedule
        // changed since may have windows that tick passed over without knowing it.
        let changed_since = mark
            .fired_through
            .map(|f| f - self.config.lookahead.as_delta() - windows::CHANGE_MARGIN);
        let plan = windows::plan(&firing, from, changed_since, now, until, cap);
        let unsent = match (mark.unsent_after(), mark.fired_through) {
            (Some(sent), Some(fired)) if sent < fired => {
                let since = sent.max(fired - RESEND_HORIZON);
                // Past its grace or not: the run exists, only its send is in doubt.
                let plan = windows::plan(&firing, since, None, now, fired, usize::MAX);
                let mut unsent = plan.windows;
                unsent.extend(plan.left_for_reconciler);
                unsent.sort_by_key(|w| (w.fire_at, w.schedule));
                unsent
            }
            _ => Vec::new(),
        };
        ShardTick {
            mark,
            firing,
            plan,
            from,
            unsent,
            calendars,
        }
    }

    /// Fires one shard's planned windows (see the module docs).
    pub(super) async fn fire_shard(
        &self,
        tick: ShardTick,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> TickReport {
        let mut report = TickReport {
            next_fire_at: tick.plan.next_fire_at,
            ..TickReport::default()
        };
        let shard = tick.mark.shard;
        let first_mark = tick.mark.clone();
        let mut to_send: BTreeMap<RunKey, (Run, DateTime<Utc>)> = BTreeMap::new();
        // Fire times `sent_through` must stay before: runs not known to be sent.
        let mut holds: Vec<DateTime<Utc>> = Vec::new();
        self.resend_unsent(&tick, now, &mut to_send, &mut holds, &mut report)
            .await;
        let mut written: Vec<Written> = Vec::new();
        let mut tick = tick;
        // Schedules with a window this tick wrote (or found written), over its attempts.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut moved: Option<Moved> = None;
        for _ in 0..MARK_TRIES {
            // Runs of this range found recorded and never started: sent by whoever moves the
            // mark over the range (a racing ticker that wrote them and lost the move does not).
            let mut found = BTreeMap::new();
            let writes = self
                .write_windows(&tick, now, &mut written, &mut found, &mut report)
                .await;
            if writes == Writes::Done {
                seen.extend(
                    tick.plan
                        .windows
                        .iter()
                        .map(|w| tick.firing[w.schedule].stored.id().to_string()),
                );
            }
            self.leave_for_reconciler(&tick, &mut report);
            let moved_under = writes == Writes::Interrupted;
            if !moved_under
                && tick.plan.windows.is_empty()
                && tick.plan.left_for_reconciler.is_empty()
            {
                // Nothing in the range: the mark stays (a tick writes nothing), and the next
                // tick's range starts where this one's did.
                break;
            }
            let move_result = if moved_under {
                Ok(false)
            } else {
                self.store
                    .move_fired_mark(&tick.mark, tick.from, tick.plan.fired_through)
                    .await
            };
            match move_result {
                Ok(true) => {
                    let sent = tick.mark.unsent_after().unwrap_or(tick.from);
                    moved = Some(Moved {
                        from: tick.mark.fired_through,
                        to: tick.plan.fired_through,
                        sent,
                    });
                    to_send.append(&mut found);
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    report.error(&format!("shard {shard}"), e);
                    break;
                }
            }
            match self
                .reread(&tick, now, until, &mut written, &mut report)
                .await
            {
                Ok(Some(next)) => tick = next,
                Ok(None) => break,
                Err(e) => {
                    report.error(&format!("shard {shard}"), e);
                    break;
                }
            }
        }
        for w in &written {
            self.after_created(&w.stored, &w.run, &mut report, now)
                .await;
            // A run of a range another ticker moved the mark over is that ticker's to send
            // (it found it recorded); one under the reconciler's fence is sent by the next
            // tick (the fence leaves `sent_through` behind).
            let in_moved = moved
                .as_ref()
                .is_some_and(|m| m.from.is_none_or(|from| w.fire_at > from) && w.fire_at <= m.to);
            if w.send && !w.crashed && (in_moved || w.below_mark) {
                to_send.insert(w.run.key.clone(), (w.run.clone(), w.fire_at));
            }
        }
        report.due_schedules = seen.len() as u32;
        let created: BTreeSet<RunKey> = written.iter().map(|w| w.run.key.clone()).collect();
        let runs: Vec<(Run, DateTime<Utc>)> = to_send.into_values().collect();
        let results = self.enqueue_all(&runs).await;
        for ((run, fire_at), sent) in runs.iter().zip(&results) {
            if !*sent {
                holds.push(*fire_at);
            }
            if created.contains(&run.key) {
                report.count_send(*sent);
            } else if *sent {
                report.redispatched += 1;
                self.metrics
                    .count_for(&run.key.schedule_id, Metric::LostDispatchesResent, 1);
            }
        }
        // An injected crash after the sends of runs this tick wrote, or after a run's write:
        // as if the ticker died there, those runs are not known to be sent.
        holds.extend(
            runs.iter()
                .filter(|(run, _)| created.contains(&run.key))
                .filter(|(run, _)| self.crashes(CrashPoint::AfterSend, run))
                .map(|(_, fire_at)| *fire_at),
        );
        holds.extend(written.iter().filter(|w| w.crashed).map(|w| w.fire_at));
        // `sent_through` follows, to this tick's move or (no move) to the mark as read, but
        // stops just before the first run not known to be sent: the next tick sends that one
        // again once it is due and still not started.
        let (from, target) = match moved {
            Some(m) => (Some(m.sent), Some(m.to)),
            None => (first_mark.sent_through, first_mark.fired_through),
        };
        // The sends in doubt are looked at again once past their deadline.
        report.resend_at = holds.iter().min().map(|first| *first + SEND_DEADLINE);
        let to = match holds.iter().min() {
            Some(first) => target.map(|t| t.min(*first - TimeDelta::seconds(1))),
            None => target,
        };
        if let Some(to) = to.filter(|to| from.is_none_or(|f| *to > f)) {
            if let Err(e) = self.store.move_sent_mark(shard, from, to).await {
                report.error(&format!("shard {shard}"), e);
            }
        }
        report
    }

    /// Runs of (`sent_through`, `fired_through`] that a dead ticker may not have sent: the
    /// ones still never started are sent again.
    /// A run still not started this long after its fire time is taken as not sent.
    async fn resend_unsent(
        &self,
        tick: &ShardTick,
        now: DateTime<Utc>,
        to_send: &mut BTreeMap<RunKey, (Run, DateTime<Utc>)>,
        holds: &mut Vec<DateTime<Utc>>,
        report: &mut TickReport,
    ) {
        for window in &tick.unsent {
            let firing = &tick.firing[window.schedule];
            let key = RunKey::expected(
                firing.stored.id(),
                firing.schedule.occurrence_at(window.fire_at),
            );
            match self.store.get_run(&key).await {
                // Sent with a delay, it may simply not be due yet: only one past its send
                // deadline is sent again; until then `sent_through` waits before it.
                Ok(run) if never_started(&run) && window.fire_at > now - SEND_DEADLINE => {
                    holds.push(window.fire_at);
                }
                Ok(run) if never_started(&run) => {
                    to_send.insert(key, (run, window.fire_at));
                }
                Ok(_) | Err(StoreError::RunNotFound(_)) => {}
                Err(e) => {
                    holds.push(window.fire_at);
                    report.error(firing.stored.id(), e);
                }
            }
        }
    }

    /// Writes the run of each planned window not written yet.
    async fn write_windows(
        &self,
        tick: &ShardTick,
        now: DateTime<Utc>,
        written: &mut Vec<Written>,
        to_send: &mut BTreeMap<RunKey, (Run, DateTime<Utc>)>,
        report: &mut TickReport,
    ) -> Writes {
        let done: BTreeSet<RunKey> = written.iter().map(|w| w.run.key.clone()).collect();
        let pending: Vec<Window> = tick
            .plan
            .windows
            .iter()
            .filter(|w| {
                let f = &tick.firing[w.schedule];
                !done.contains(&RunKey::expected(
                    f.stored.id(),
                    f.schedule.occurrence_at(w.fire_at),
                ))
            })
            .copied()
            .collect();
        // The mark again, right before the writes: a fence (or another ticker) that moved it
        // since the tick read it takes this range away, and the move below fails.
        if !pending.is_empty() {
            match self.store.fire_mark(tick.mark.shard).await {
                Ok(now_mark)
                    if now_mark.fired_through == tick.mark.fired_through
                        && now_mark.catalog_version == tick.mark.catalog_version => {}
                Ok(_) => return Writes::Interrupted,
                Err(e) => {
                    report.error(&format!("shard {}", tick.mark.shard), e);
                    return Writes::Interrupted;
                }
            }
        }
        // The futures are made first: a closure mapping a stream would make the ticker's
        // future too general to be `Send`.
        let writes: Vec<_> = pending
            .iter()
            .map(|w| self.write_window(tick, *w, now))
            .collect();
        let outcomes: Vec<_> = stream::iter(writes)
            .buffered(self.config.concurrency.max(1))
            .collect()
            .await;
        for (window, outcome) in pending.iter().zip(outcomes) {
            let id = tick.firing[window.schedule].stored.id();
            match outcome {
                Ok((Created::New(run), send)) => {
                    // An injected crash "kills" the ticker for this run: written, never sent.
                    let crashed = self.crashes(CrashPoint::AfterRunWrite, &run);
                    written.push(Written {
                        run,
                        stored: tick.firing[window.schedule].stored.clone(),
                        fire_at: window.fire_at,
                        send,
                        below_mark: window.below_mark,
                        crashed,
                    });
                }
                // Below the mark, a run found written is an earlier tick's, which sent it (or
                // left `sent_through` behind for it).
                Ok((Created::Existing(_), _)) if window.below_mark => {}
                Ok((Created::Existing(existing), _)) => {
                    report.lost_race += 1;
                    if never_started(&existing) {
                        to_send.insert(existing.key.clone(), (existing, window.fire_at));
                    }
                }
                Err(e) => report.error(id, e),
            }
        }
        Writes::Done
    }

    async fn write_window(
        &self,
        tick: &ShardTick,
        window: Window,
        now: DateTime<Utc>,
    ) -> Result<(Created, bool), StoreError> {
        let firing = &tick.firing[window.schedule];
        let (mut run, send) = self
            .window_run(
                &firing.stored,
                &firing.schedule,
                &tick.calendars,
                window.fire_at,
                now,
            )
            .await?;
        if send {
            // Written QUEUED: the send follows the mark (see the module docs).
            run.status = RunStatus::Queued;
            run.queued_at = Some(now);
        }
        let created = self.store.create_run(&run).await?;
        Ok((created, send))
    }

    fn leave_for_reconciler(&self, tick: &ShardTick, report: &mut TickReport) {
        for window in &tick.plan.left_for_reconciler {
            let id = tick.firing[window.schedule].stored.id();
            report.left_for_reconciler += 1;
            self.metrics
                .count_for(id, Metric::WindowsLeftForReconciler, 1);
        }
    }

    /// After a failed mark move: the mark as it is now, the catalog at its version, the runs
    /// written under a definition that changed taken back, and the rest of the range
    /// planned. `None` when nothing is left to fire.
    async fn reread(
        &self,
        tick: &ShardTick,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
        written: &mut Vec<Written>,
        report: &mut TickReport,
    ) -> Result<Option<ShardTick>, StoreError> {
        let mut mark = self.store.fire_mark(tick.mark.shard).await?;
        let firing = if mark.catalog_version == tick.mark.catalog_version {
            tick.firing.clone()
        } else {
            let firing = self.catalog(&mut mark, &mut report.errors).await?;
            self.take_back_changed(&firing, written, report).await?;
            firing
        };
        if mark.fired_through.is_some_and(|f| f >= until) {
            return Ok(None);
        }
        let calendars = self.calendars_for(&firing).await?;
        let next = self.plan_from(mark, firing, calendars, now, until);
        Ok(Some(ShardTick {
            unsent: Vec::new(),
            ..next
        }))
    }

    /// Deletes the runs this tick wrote whose schedule is no longer as planned (edited,
    /// stopped, archived), while they are as written.
    async fn take_back_changed(
        &self,
        firing: &[Firing],
        written: &mut Vec<Written>,
        report: &mut TickReport,
    ) -> Result<(), StoreError> {
        let current: BTreeMap<&str, u64> = firing
            .iter()
            .map(|f| (f.stored.id(), f.stored.version))
            .collect();
        let mut kept = Vec::with_capacity(written.len());
        for w in written.drain(..) {
            let planned =
                current.get(w.run.key.schedule_id.as_str()) == Some(&w.run.schedule_version);
            if planned || !self.store.take_back_run(&w.run).await? {
                kept.push(w);
            } else {
                report.lost_race += 1;
                tracing::debug!(run = %w.run.key, "run taken back: its schedule changed under the tick");
            }
        }
        *written = kept;
        Ok(())
    }
}

/// A run of the ticker's never started and never taken (QUEUED, attempt 0): one a ticker
/// may have written without sending.
fn never_started(run: &Run) -> bool {
    run.trigger == Trigger::Scheduled
        && run.status == RunStatus::Queued
        && run.attempts == 0
        && run.lease_epoch == 0
}
