//! A run's dependency chain, as one run's view shows it: the same window's run of each
//! schedule it runs after (`upstream`) and of each schedule that runs after it
//! (`downstream`), with their statuses. One read of the schedule and one per related run.

use cronledger_aws::StoreError;
use cronledger_contract::{RelatedRun, RunView};
use cronledger_core::{Run, RunKey};

use super::error::ApiResult;
use super::{views, Api};

impl Api {
    /// Adds `upstream` and `downstream` to `view` (a run's) when its schedule has any.
    pub(crate) async fn add_chain(&self, run: &Run, view: &mut RunView) -> ApiResult<()> {
        let store = &self.deps().store;
        let stored = match store.get_schedule(&run.key.schedule_id).await {
            Ok(stored) => stored,
            Err(StoreError::ScheduleNotFound(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let at = run.key.scheduled_for;
        let related_of = |ids: &[String]| {
            let ids = ids.to_vec();
            async move {
                if ids.is_empty() {
                    return Ok(None);
                }
                let mut related = Vec::with_capacity(ids.len());
                for id in ids {
                    let key = RunKey::expected(id.clone(), at);
                    related.push(match store.get_run(&key).await {
                        Ok(found) => RelatedRun {
                            schedule: id,
                            scheduled_for: at,
                            run_id: Some(views::run_id(&found.key)),
                            status: Some(found.status),
                        },
                        // Not recorded yet: it waits for its upstreams (or they for theirs).
                        Err(StoreError::RunNotFound(_)) => RelatedRun {
                            schedule: id,
                            scheduled_for: at,
                            run_id: None,
                            status: None,
                        },
                        Err(e) => return Err(e),
                    });
                }
                Ok(Some(related))
            }
        };
        view.upstream = related_of(&stored.spec.after).await?;
        view.downstream = related_of(&stored.downstream).await?;
        Ok(())
    }
}
