//! The ticker's fire in memory, as the DynamoDB store makes it (see `dynamo::fire`): the
//! run if absent, then the schedule moved on if unchanged and at the run's version, each
//! its own request under its own lock, and the run taken back when an edit, a pause or an
//! archive got between them.

use super::super::capacity::Request;
use super::super::InMemoryStore;
use super::stored_run;
use crate::error::StoreError;
use crate::expr::eval;
use crate::fire_plan;
use crate::keys;
use crate::ledger::{check_fire_batch, fire_still_planned, Created, Fire, FireOutcome};

impl InMemoryStore {
    pub(in crate::memory) fn fire_impl(&self, fire: &Fire) -> Result<FireOutcome, StoreError> {
        let run = &fire.run;
        if let Created::Existing(existing) = self.create_run_impl(run)? {
            return Ok(FireOutcome::Lost {
                existing: Some(Box::new(existing)),
                schedule_moved: false,
            });
        }
        let advance = fire_plan::advance_fired(fire, self.shards);
        if self.update_schedule_item(&mut self.tables(), &run.key.schedule_id, &advance)? {
            return Ok(FireOutcome::Created);
        }
        let id = &run.key.schedule_id;
        let still_planned = fire_still_planned(self.get_schedule_impl(id), fire)?;
        if still_planned || !self.take_back(fire) {
            return Ok(FireOutcome::Created);
        }
        Ok(FireOutcome::Lost {
            existing: None,
            schedule_moved: true,
        })
    }

    pub(in crate::memory) fn fire_all_impl(
        &self,
        fires: &[Fire],
    ) -> Result<Vec<FireOutcome>, StoreError> {
        check_fire_batch(fires)?;
        fires.iter().map(|fire| self.fire_impl(fire)).collect()
    }

    /// The DeleteItem that takes a fire's run back while it is as the fire wrote it.
    fn take_back(&self, fire: &Fire) -> bool {
        let run = &fire.run;
        let mut tables = self.tables();
        self.charge_call("DeleteItem");
        let Some(stored) = stored_run(&tables, &run.key) else {
            self.charge_write("DeleteItem", None, None, Request::Standard);
            return false;
        };
        let item = self.stored_item(&tables.run_items, stored);
        if !eval::all_hold(&fire_plan::take_back(run).conditions, Some(&item)) {
            self.charge_write("DeleteItem", Some(&item), None, Request::Standard);
            return false;
        }
        let status = stored.run.status;
        self.charge_delete("DeleteItem", &item);
        tables
            .active
            .replace(&run.key, Some(status), None, self.shards);
        if let Some(by_sk) = tables.runs.get_mut(&run.key.schedule_id) {
            by_sk.remove(&keys::run_sk(&run.key));
        }
        tables.run_items.forget(&run.key);
        true
    }
}
