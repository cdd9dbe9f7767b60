//! The dependency checks a schedule written through the api gets against the stored ones
//! (a manifest gets them across its own schedules in the core): its upstreams exist and are
//! not archived, it closes no cycle, and it shares its window grid with its upstreams and
//! with the schedules that run after it. Reads only what it checks: each upstream's
//! ancestors (a cycle would pass through the schedule itself) and its listed dependents.
//! Archiving a schedule that others still run after is refused. A schedule with `after` and
//! no `cron` (or `timezone`) takes it from its stored upstreams when it is written, and keeps
//! it: it is stored with the grid it inherited.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use cronledger_aws::StoreError;
use cronledger_core::dependency::{grid_mismatch, MAX_UPSTREAMS};
use cronledger_core::error::{Code, Issue};
use cronledger_core::spec::{valid_id, validate_with_upstreams, Grid, UpstreamGrid};
use cronledger_core::ScheduleSpec;
use cronledger_ledger::ledger::{ScheduleState, StoredSchedule};
use serde_json::Value;

use super::error::{ApiError, ApiResult};
use super::Api;

/// Most ancestors one check reads; a deeper graph is refused rather than walked unbounded.
const MAX_ANCESTORS: usize = 1_000;

impl Api {
    /// Validates a schedule document with the core's rules, every problem at once; with
    /// `after` and no `cron` or `timezone`, it inherits them from its stored upstreams.
    pub(crate) async fn validate(&self, doc: &Value) -> ApiResult<ScheduleSpec> {
        let grids = self.inherited_grids(doc).await?;
        let rules = &self.deps().config.rules;
        validate_with_upstreams(doc, "", rules, self.now(), &mut |id| {
            grids.get(id).cloned().unwrap_or(UpstreamGrid::Unknown)
        })
        .map_err(|issues| {
            let id = doc
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| valid_id(id));
            placed_issues(issues, id)
        })
    }

    /// The stored grids of the upstreams `doc` would inherit its grid from: read only when
    /// it has `after` and leaves `cron` or `timezone` out.
    async fn inherited_grids(&self, doc: &Value) -> ApiResult<BTreeMap<String, UpstreamGrid>> {
        let mut grids = BTreeMap::new();
        let left_out = |name: &str| matches!(doc.get(name), None | Some(Value::Null));
        if !left_out("cron") && !left_out("timezone") {
            return Ok(grids);
        }
        let upstreams = doc
            .get("after")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|id| valid_id(id))
            .take(MAX_UPSTREAMS);
        for id in upstreams {
            let grid = match self.deps().store.get_schedule(id).await {
                Ok(up) if up.state != ScheduleState::Archived => {
                    UpstreamGrid::Known(Grid::of(&up.spec))
                }
                Ok(_) | Err(StoreError::ScheduleNotFound(_)) => UpstreamGrid::Unknown,
                Err(e) => return Err(e.into()),
            };
            grids.insert(id.to_string(), grid);
        }
        Ok(grids)
    }

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
            Err(placed_issues(issues, Some(&spec.id)))
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

/// A refusal whose issues name the schedule they are in (`id` beside each `field`).
fn placed_issues(issues: Vec<Issue>, id: Option<&str>) -> ApiError {
    let placed: Vec<Issue> = issues
        .into_iter()
        .map(|issue| issue.in_schedule(id, None))
        .collect();
    ApiError::issues(&placed)
}
