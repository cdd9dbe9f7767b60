//! The dependency checks a schedule written through the api gets against the stored ones
//! (a manifest gets them across its own schedules in the core): its upstreams exist and are
//! not archived, it closes no cycle, and it shares its window grid with its upstreams and
//! with the schedules that run after it. Reads only what it checks: each upstream's
//! ancestors (a cycle would pass through the schedule itself) and its listed dependents.
//! Archiving a schedule that others still run after is refused.

use std::collections::{BTreeSet, VecDeque};

use cronledger_aws::ledger::{ScheduleState, StoredSchedule};
use cronledger_aws::StoreError;
use cronledger_core::dependency::grid_mismatch;
use cronledger_core::error::{Code, Issue};
use cronledger_core::ScheduleSpec;

use super::error::{ApiError, ApiResult};
use super::Api;

/// Most ancestors one check reads; a deeper graph is refused rather than walked unbounded.
const MAX_ANCESTORS: usize = 1_000;

impl Api {
    /// Refuses `spec` when its dependencies would not hold; `downstream` is the stored
    /// schedule's list of dependents (none for a new one).
    pub(crate) async fn check_dependencies(
        &self,
        spec: &ScheduleSpec,
        downstream: &[String],
    ) -> ApiResult<()> {
        let store = &self.deps().store;
        let mut issues = Vec::new();
        let mut queue: VecDeque<String> = spec.after.iter().cloned().collect();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        while let Some(id) = queue.pop_front() {
            if !seen.insert(id.clone()) {
                continue;
            }
            if seen.len() > MAX_ANCESTORS {
                issues.push(Issue::new(
                    Code::ScheduleInvalidAfter,
                    "after",
                    format!("more than {MAX_ANCESTORS} schedules upstream"),
                ));
                break;
            }
            let direct = spec.after.contains(&id);
            if id == spec.id {
                issues.push(Issue::new(
                    Code::DependencyCycle,
                    "after",
                    format!("`{}` would run after itself through its upstreams", spec.id),
                ));
                continue;
            }
            match store.get_schedule(&id).await {
                Ok(up) if up.state != ScheduleState::Archived => {
                    if direct {
                        issues.extend(grid_mismatch(spec, &up.spec, "after"));
                    }
                    queue.extend(up.spec.after.iter().cloned());
                }
                Ok(_) | Err(StoreError::ScheduleNotFound(_)) => {
                    if direct {
                        issues.push(Issue::new(
                            Code::DependencyUnknownUpstream,
                            "after",
                            format!(
                                "`{}` runs after `{id}`, which is not an active schedule",
                                spec.id
                            ),
                        ));
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
        for dependent in self.active_dependents(&spec.id, downstream).await? {
            issues.extend(grid_mismatch(spec, &dependent.spec, "cron"));
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(ApiError::issues(&issues))
        }
    }

    /// Refuses to archive a schedule others still run after: their windows would wait for
    /// it forever. They are edited or archived first.
    pub(crate) async fn check_no_dependents(&self, id: &str) -> ApiResult<()> {
        let stored = self.deps().store.get_schedule(id).await?;
        let dependents: Vec<String> = self
            .active_dependents(id, &stored.downstream)
            .await?
            .into_iter()
            .map(|d| d.spec.id)
            .collect();
        if dependents.is_empty() {
            return Ok(());
        }
        Err(ApiError::conflict(
            "SCHEDULE_HAS_DEPENDENTS",
            format!(
                "`{id}` cannot be archived while {} run after it; edit or archive them first",
                dependents.join(", ")
            ),
        )
        .with_details(serde_json::json!({ "dependents": dependents })))
    }

    /// The schedules of `listed` (a `downstream` list, which may lag) that are not archived
    /// and still run after `id`.
    async fn active_dependents(
        &self,
        id: &str,
        listed: &[String],
    ) -> ApiResult<Vec<StoredSchedule>> {
        let mut found = Vec::new();
        for d in listed {
            match self.deps().store.get_schedule(d).await {
                Ok(s)
                    if s.state != ScheduleState::Archived
                        && s.spec.after.iter().any(|u| u == id) =>
                {
                    found.push(s)
                }
                Ok(_) | Err(StoreError::ScheduleNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(found)
    }
}
