//! The ticker's fire in memory, as the DynamoDB store makes it (see `dynamo::fire`): the
//! run if absent, then the schedule moved on if unchanged and at the run's version, each
//! its own request under its own lock, and the run taken back when an edit, a pause or an
//! archive got between them.

use cronledger_core::RunStatus;

use super::super::capacity::Request;
use super::super::InMemoryStore;
use super::{may_advance, stored_run};
use crate::codec::schedule as schedule_codec;
use crate::error::StoreError;
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
        if self.advance_fired(fire) {
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

    /// The fire's UpdateItem: `next_run_at` moved on if unchanged, ACTIVE, and at the
    /// run's version.
    fn advance_fired(&self, fire: &Fire) -> bool {
        let mut tables = self.tables();
        self.charge_call("UpdateItem");
        let Some(schedule) = tables.schedules.get_mut(&fire.run.key.schedule_id) else {
            self.charge_schedule_write(None, None, Request::Standard);
            return false;
        };
        if !may_advance(schedule, fire.expected_next_run_at)
            || schedule.version != fire.run.schedule_version
        {
            self.charge_schedule_write(Some(schedule), None, Request::Standard);
            return false;
        }
        let before = schedule_codec::encode(schedule).ok();
        schedule.next_run_at = fire.next_run_at;
        self.charge_write(
            "UpdateItem",
            before.as_ref(),
            schedule_codec::encode(schedule).ok().as_ref(),
            Request::Standard,
        );
        true
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
        let as_written = stored.run.status == RunStatus::Pending
            && stored.run.lease_epoch == 0
            && stored.run.schedule_version == run.schedule_version;
        if !as_written {
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
