//! The operator's levers in a simulation, pulled at virtual instants: pause and resume a
//! schedule, the global kill switch, approving everything that awaits an operator, and
//! asking for a backfill (its caps included). Each
//! is the [`Operator`]'s own lever, as the api's routes call it, so a simulated approval is
//! the api's approval.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use cronledger_aws::{BackfillState, LaneQueue, LedgerStore, OpsStore};
use cronledger_core::window::utc_text;
use cronledger_core::{RunStatus, Trigger};

use super::agenda::Lever;
use super::config::BackfillAt;
use super::SimulateError;
use crate::api::{views, Actor, ApiConfig, ApiDeps, ApiError, Caller, Role};
use crate::clock::Clock;
use crate::operator::{BackfillStarted, Operator};
use crate::reconciler::Signals;
use cronledger_contract::{KillSwitchRequest, Note};

/// Who the simulator's operator actions are recorded as (audit log, change metadata).
pub const SIMULATOR_ACTOR: &str = "simulate";

pub(super) struct Levers {
    /// The levers, on the simulation's store, lanes and clock (reads go through its
    /// dependencies too).
    operator: Operator,
    actor: Actor,
    schedules: Vec<String>,
    /// The simulation's start: no run is older.
    since: DateTime<Utc>,
    /// Windows of the kill switch that are on now (they may overlap).
    kill_switch_windows: u32,
    /// Every lever pulled, when, and what it did (the report's `stats.levers`).
    pub pulled: Vec<String>,
    /// The backfills the configuration asks for ([`Lever::Backfill`] indexes them).
    pub backfills: Vec<BackfillAt>,
    /// The ids of those created.
    pub created_backfills: Vec<String>,
}

impl Levers {
    pub fn new(
        store: Arc<dyn LedgerStore>,
        ops: Arc<dyn OpsStore>,
        lanes: Arc<dyn LaneQueue>,
        clock: Arc<dyn Clock>,
        signals: Arc<dyn Signals>,
        schedules: Vec<String>,
        since: DateTime<Utc>,
    ) -> Levers {
        let operator = Operator::new(ApiDeps {
            store,
            ops,
            health: None,
            lanes,
            clock,
            system: None,
            signals: Some(signals),
            auditor: None,
            auth: Default::default(),
            config: ApiConfig::default(),
        });
        Levers {
            operator,
            actor: Actor {
                caller: Caller::new(SIMULATOR_ACTOR),
                role: Role::Operator,
            },
            schedules,
            since,
            kill_switch_windows: 0,
            pulled: Vec::new(),
            backfills: Vec::new(),
            created_backfills: Vec::new(),
        }
    }

    /// Whether the kill switch is on: no tick, no reconciler pass, no delivery.
    pub fn kill_switch_on(&self) -> bool {
        self.kill_switch_windows > 0
    }

    /// The kill switch goes on or off at `at`. The stored flag, which the ticker, the
    /// reconciler and the workers check, is set through the operator's lever (audited) when
    /// the first overlapping window opens and cleared when the last closes. The AWS-native
    /// half (the ticker's and the reconciler's schedules and the workers' event sources
    /// disabled) is the simulation loop not invoking them while [`Levers::kill_switch_on`].
    pub async fn set_kill_switch(
        &mut self,
        on: bool,
        at: DateTime<Utc>,
    ) -> Result<(), SimulateError> {
        let was_on = self.kill_switch_on();
        if on {
            self.kill_switch_windows += 1;
        } else {
            self.kill_switch_windows = self.kill_switch_windows.saturating_sub(1);
        }
        if was_on != self.kill_switch_on() {
            let request = KillSwitchRequest {
                engaged: on,
                note: format!("--kill-switch at {}", utc_text(at)),
            };
            self.operator
                .kill_switch(&self.actor, request)
                .await
                .map_err(|e| SimulateError::Invalid(format!("kill switch at {at}: {e:?}")))?;
        }
        let state = if on { "on" } else { "off" };
        self.pulled
            .push(format!("{} kill switch {state}", utc_text(at)));
        Ok(())
    }

    /// Pulls `lever` at `at`. An api refusal (a run approved meanwhile) is an error of the
    /// simulation's report, not the end of it.
    pub async fn pull(
        &mut self,
        lever: Lever,
        at: DateTime<Utc>,
        errors: &mut Vec<String>,
    ) -> Result<(), SimulateError> {
        match lever {
            Lever::KillSwitch(on) => self.set_kill_switch(on, at).await?,
            Lever::Pause(id) => {
                let note = note("paused by the simulator (--pause)");
                self.operator
                    .pause(&self.actor, &id, note, None)
                    .await
                    .map_err(|e| lever_failed("pause", &id, at, e))?;
                self.pulled.push(format!("{} paused {id}", utc_text(at)));
            }
            Lever::Resume(id) => {
                let note = note("resumed by the simulator (--resume)");
                self.operator
                    .resume(&self.actor, &id, note, None)
                    .await
                    .map_err(|e| lever_failed("resume", &id, at, e))?;
                self.pulled.push(format!("{} resumed {id}", utc_text(at)));
            }
            Lever::ApproveAll => self.approve_all(at, errors).await?,
            Lever::Backfill(n) => self.backfill(n, at, errors).await,
        }
        Ok(())
    }

    /// Asks for the `n`-th configured backfill; a refusal is an error of the report.
    async fn backfill(&mut self, n: usize, at: DateTime<Utc>, errors: &mut Vec<String>) {
        let Some(asked) = self.backfills.get(n).cloned() else {
            return;
        };
        let answer = self
            .operator
            .create_backfill(&self.actor, &asked.schedule, asked.request)
            .await;
        match answer {
            Ok(BackfillStarted::Created(view)) => {
                self.pulled.push(format!(
                    "{} backfill {} of {} ({} windows)",
                    utc_text(at),
                    view.id,
                    asked.schedule,
                    view.total
                ));
                self.created_backfills.push(view.id);
            }
            Ok(BackfillStarted::Plan(plan)) => self.pulled.push(format!(
                "{} backfill of {} planned ({} windows), not created",
                utc_text(at),
                asked.schedule,
                plan.size
            )),
            Err(e) => errors.push(format!(
                "backfill of {} at {}: {}: {}",
                asked.schedule,
                utc_text(at),
                e.code,
                e.message
            )),
        }
    }

    /// Resumes every paused backfill (the reconciler's proposals for long gaps: running one
    /// is the approval of the windows it holds), then approves every other MANUAL_REQUIRED
    /// run, each through the operator's lever.
    async fn approve_all(
        &mut self,
        at: DateTime<Utc>,
        errors: &mut Vec<String>,
    ) -> Result<(), SimulateError> {
        let note = || note("approved by the simulator (--approve-all-at)");
        let refused = |what: String, e: ApiError| format!("{what}: {}: {}", e.code, e.message);
        let mut resumed_groups: BTreeSet<String> = BTreeSet::new();
        let mut resumed = 0;
        for b in self.operator.deps().ops.open_backfills().await? {
            if b.state != BackfillState::Paused {
                continue;
            }
            let answer = self
                .operator
                .resume_backfill(&self.actor, &b.id, note())
                .await;
            match answer {
                Ok(_) => {
                    resumed += 1;
                    resumed_groups.extend(b.replay_group.clone());
                }
                Err(e) => errors.push(refused(format!("resume backfill {}", b.id), e)),
            }
        }
        let mut approved = 0;
        for id in &self.schedules {
            let waiting = self
                .operator
                .deps()
                .store
                .runs_between(id, self.since, at)
                .await?
                .into_iter()
                .filter(|r| r.status == RunStatus::ManualRequired)
                // A held window of a resumed proposal is the backfill's to run.
                .filter(|r| {
                    !(r.trigger == Trigger::CatchUp
                        && r.replay_group_id
                            .as_ref()
                            .is_some_and(|g| resumed_groups.contains(g)))
                });
            for run in waiting {
                let run_id = views::run_id(&run.key);
                let answer = self
                    .operator
                    .approve(&self.actor, id, &run_id, note())
                    .await;
                match answer {
                    Ok(_) => approved += 1,
                    Err(e) => errors.push(refused(format!("approve {id} {run_id}"), e)),
                }
            }
        }
        self.pulled.push(format!(
            "{} approved {approved} runs, resumed {resumed} backfills",
            utc_text(at)
        ));
        Ok(())
    }
}

fn note(text: &str) -> Note {
    Note {
        note: Some(text.into()),
    }
}

/// A lever the simulation cannot go on without (the store failed, say): the refusal, with
/// its cause when it has one (a server-side failure keeps it out of its message).
fn lever_failed(lever: &str, id: &str, at: DateTime<Utc>, e: ApiError) -> SimulateError {
    let cause = e.log_detail.as_deref().map(|d| format!(" ({d})"));
    SimulateError::Invalid(format!(
        "{lever} {id} at {}: {e}{}",
        utc_text(at),
        cause.unwrap_or_default()
    ))
}
