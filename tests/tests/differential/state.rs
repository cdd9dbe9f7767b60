//! Reading a case's state back through the stores' own reads, and cleaning up after it.

use super::*;

/// What a case's requests named.
#[derive(Default)]
pub(crate) struct Touched {
    pub(crate) schedules: BTreeSet<String>,
    pub(crate) runs: BTreeSet<RunKey>,
    pub(crate) parents: BTreeSet<RunKey>,
    pub(crate) backfills: BTreeSet<String>,
}

impl Touched {
    pub(crate) fn note(&mut self, request: &Request) {
        match request {
            Request::CreateSchedule(spec, _) | Request::UpdateSchedule(spec, _, _) => {
                self.schedules.insert(spec.id.clone());
            }
            Request::Pause(id, _, _)
            | Request::Resume(id, _, _)
            | Request::Archive(id, _, _)
            | Request::Streak(id, _)
            | Request::CountOutcome(id, _, _, _) => {
                self.schedules.insert(id.clone());
            }
            Request::CreateRun(run) => {
                self.runs.insert(run.key.clone());
            }
            Request::Fire(fire) => {
                self.runs.insert(fire.run.key.clone());
            }
            Request::FireAll(fires) => {
                self.runs.extend(fires.iter().map(|f| f.run.key.clone()));
            }
            Request::Transition(key, _) => {
                self.runs.insert(key.clone());
            }
            Request::PutChildren(key, _) | Request::ChangeChild(key, _) => {
                self.runs.insert(key.clone());
                self.parents.insert(key.clone());
            }
            Request::CreateBackfill(b) | Request::PutBackfill(b) => {
                self.backfills.insert(b.id.clone());
                self.schedules.insert(b.schedule_id.clone());
            }
            Request::Claim(claim) => {
                self.schedules.insert(claim.run.schedule_id.clone());
            }
            Request::RecordAlert(alert, _) | Request::AlertPublished(alert, _) => {
                self.schedules.insert(alert.schedule.clone());
            }
        }
        // Every run's schedule: its history lists the run.
        let of_runs: Vec<String> = self.runs.iter().map(|k| k.schedule_id.clone()).collect();
        self.schedules.extend(of_runs);
    }
}

/// A read's result as compared: the value's `Debug` text, or the error's code.
pub(crate) fn shown<T: Debug>(result: &Result<T, StoreError>) -> String {
    match result {
        Ok(value) => format!("{value:?}"),
        Err(e) => format!("Err({})", e.code()),
    }
}

/// What one store holds for the case, and (for the table's clean-up) its runs and
/// schedules as read.
#[derive(Default)]
pub(crate) struct State {
    pub(crate) reads: BTreeMap<String, String>,
    pub(crate) runs: Vec<Run>,
    pub(crate) schedules: Vec<StoredSchedule>,
}

/// The case's items, read with reads that touch its own keys only.
pub(crate) async fn read_own(store: &dyn Store, touched: &Touched) -> State {
    let mut state = State::default();
    for key in &touched.runs {
        let read = store.get_run_with_attempts(key).await;
        state.reads.insert(format!("run {key}"), shown(&read));
        if let Ok((run, _)) = read {
            state.runs.push(run);
        }
    }
    for key in &touched.parents {
        let read = store.children_of(key, 0, 10, None).await;
        state
            .reads
            .insert(format!("children of {key}"), shown(&read));
    }
    for id in &touched.schedules {
        let read = store.get_schedule(id).await;
        state.reads.insert(format!("schedule {id}"), shown(&read));
        if let Ok(schedule) = read {
            state.schedules.push(schedule);
        }
        let audit = store.audit_log(id).await;
        state.reads.insert(format!("audit of {id}"), shown(&audit));
        let history = store.run_history(id, 20, None).await;
        state
            .reads
            .insert(format!("history of {id}"), shown(&history));
        let alerts = store.alerts_of(id, 20).await;
        state
            .reads
            .insert(format!("alerts of {id}"), shown(&alerts));
        let days = store.outcome_days(id, day(0), day(1)).await;
        state
            .reads
            .insert(format!("outcomes of {id}"), shown(&days));
    }
    for id in &touched.backfills {
        let read = store.get_backfill(id).await;
        state.reads.insert(format!("backfill {id}"), shown(&read));
    }
    state
}

/// The case's entries in the `due` and `active` indexes of its schedules' shards. These
/// reads see every case's entries on the shared table: they are filtered to the case's
/// schedules, and their requests are not compared.
pub(crate) async fn read_indexes(store: &dyn Store, names: &Names, state: &mut State) {
    let shards: BTreeSet<u32> = (0..SCHEDULES)
        .map(|s| shard_of(&names.schedule(s), SHARDS))
        .collect();
    for shard in shards {
        let due = store
            .due_schedules(shard, window(WINDOWS - 1) + Duration::hours(1), 1000)
            .await
            .map(|page| {
                page.into_iter()
                    .filter(|s| names.owns(&s.spec.id))
                    .map(|s| (s.spec.id, s.next_run_at))
                    .collect::<Vec<_>>()
            });
        state
            .reads
            .insert(format!("due in shard {shard}"), shown(&due));
        let active = store
            .active_runs(shard, None, 1000, None)
            .await
            .map(|page| {
                page.items
                    .into_iter()
                    .filter(|r| names.owns(&r.key.schedule_id))
                    .collect::<Vec<_>>()
            });
        state
            .reads
            .insert(format!("active in shard {shard}"), shown(&active));
    }
}

/// Takes the case's items out of the table's `due` and `active` indexes, so later cases'
/// index reads stay small: its schedules archived, its active runs ended.
pub(crate) async fn clean_up(store: &dyn Store, state: &State) {
    let at = t0() + Duration::days(1);
    for schedule in &state.schedules {
        if schedule.state != ScheduleState::Archived {
            let _ = store
                .archive_schedule(&schedule.spec.id, None, meta("cleanup", at))
                .await;
        }
    }
    for run in state.runs.iter().filter(|r| r.status.is_active()) {
        let event = match run.status {
            RunStatus::Running => RunEvent::Fail,
            RunStatus::Stalled => RunEvent::Cancel,
            _ => RunEvent::Skip,
        };
        let end = RunChange::decide(event, run.status, run.lease_epoch, at, None);
        let _ = store.transition_run(&run.key, &end).await;
    }
}
