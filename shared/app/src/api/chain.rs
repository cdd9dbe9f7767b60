//! A run's dependency chain, as one run's view shows it: the same window's run of each
//! schedule it runs after (`upstream`) and of each schedule that runs after it
//! (`downstream`), with their statuses. One read of the schedule and one per related run.

use cronledger_aws::StoreError;
use cronledger_core::window::utc_text;
use cronledger_core::{Run, RunKey};
use serde_json::{json, Value};

use super::error::ApiResult;
use super::{views, Api};

impl Api {
    /// Adds `upstream` and `downstream` to `body` (a run's view) when its schedule has any.
    pub(crate) async fn add_chain(&self, run: &Run, body: &mut Value) -> ApiResult<()> {
        let store = &self.deps().store;
        let stored = match store.get_schedule(&run.key.schedule_id).await {
            Ok(stored) => stored,
            Err(StoreError::ScheduleNotFound(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let at = run.key.scheduled_for;
        for (field, ids) in [
            ("upstream", &stored.spec.after),
            ("downstream", &stored.downstream),
        ] {
            if ids.is_empty() {
                continue;
            }
            let mut related = Vec::with_capacity(ids.len());
            for id in ids {
                let key = RunKey::expected(id.clone(), at);
                let entry = match store.get_run(&key).await {
                    Ok(found) => json!({"schedule": id, "scheduled_for": utc_text(at),
                        "run_id": views::run_id(&found.key), "status": found.status}),
                    // Not recorded yet: it waits for its upstreams (or they for theirs).
                    Err(StoreError::RunNotFound(_)) => {
                        json!({"schedule": id, "scheduled_for": utc_text(at), "status": null})
                    }
                    Err(e) => return Err(e.into()),
                };
                related.push(entry);
            }
            if let Some(obj) = body.as_object_mut() {
                obj.insert(field.into(), Value::Array(related));
            }
        }
        Ok(())
    }
}
