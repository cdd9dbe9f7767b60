//! Run operations: conditional creation, guarded transitions and the listings.

use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    ReturnConsumedCapacity, ReturnValue, ReturnValuesOnConditionCheckFailure,
};
use chrono::{DateTime, Utc};
use cronledger_core::{Attempt, Run, RunKey, RunStatus, Trigger};

use super::schedules::QueryPage;
use super::values::{item_from_sdk, item_to_sdk, opt_item};
use super::{DynamoStore, Expr, Render};
use crate::codec::attempt as attempts;
use crate::codec::run as codec;
use crate::codec::schedule as schedule_codec;
use crate::error::StoreError;
use crate::item::{key, s, Item};
use crate::keys::{self, GSI2PK, GSI2SK, PK, SK};
use crate::ledger::{check_new_run, Created, Page, RecentRuns, RunChange, StoredSchedule};
use crate::{fire_plan, run_plan};

impl DynamoStore {
    pub(super) async fn create_run_impl(&self, run: &Run) -> Result<Created, StoreError> {
        check_new_run(run)?;
        let absent = fire_plan::create();
        let sent = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item_to_sdk(codec::encode(run, self.shards))))
            .set_condition_expression(absent.condition())
            .set_expression_attribute_names(absent.names())
            // The existing item comes back with the failure: found costs one request too.
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        let err = match sent {
            Ok(out) => {
                self.meter
                    .record_capacity("PutItem", out.consumed_capacity());
                return Ok(Created::New(run.clone()));
            }
            Err(err) => err,
        };
        match err.as_service_error() {
            Some(PutItemError::ConditionalCheckFailedException(failed)) => {
                match failed.item() {
                    Some(item) => Ok(Created::Existing(codec::decode(&item_from_sdk(item))?)),
                    // Emulators without ALL_OLD support: one more read.
                    None => Ok(Created::Existing(self.get_run_impl(&run.key).await?)),
                }
            }
            _ => Err(crate::error::store_request("PutItem", err)),
        }
    }

    pub(super) async fn get_run_impl(&self, run_key: &RunKey) -> Result<Run, StoreError> {
        match self.get_item(run_item_key(run_key)).await? {
            Some(item) => codec::decode(&item),
            None => Err(StoreError::RunNotFound(run_key.to_string())),
        }
    }

    /// The run and its attempt history, from the one item.
    pub(super) async fn get_run_with_attempts_impl(
        &self,
        run_key: &RunKey,
    ) -> Result<(Run, Vec<Attempt>), StoreError> {
        match self.get_item(run_item_key(run_key)).await? {
            Some(item) => Ok((codec::decode(&item)?, attempts::decode(&item)?)),
            None => Err(StoreError::RunNotFound(run_key.to_string())),
        }
    }

    pub(super) async fn transition_run_impl(
        &self,
        run_key: &RunKey,
        change: &RunChange,
    ) -> Result<Run, StoreError> {
        // Refused before any I/O.
        let to = change.target()?;
        let expr = run_plan::transition(run_key, change, to, self.shards)?;
        let sent = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(item_to_sdk(run_item_key(run_key))))
            .set_update_expression(expr.update())
            .set_condition_expression(expr.condition())
            .set_expression_attribute_names(expr.names())
            .set_expression_attribute_values(expr.values())
            .return_values(ReturnValue::AllNew)
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .return_consumed_capacity(ReturnConsumedCapacity::Indexes)
            .send()
            .await;
        let err = match sent {
            Ok(out) => {
                self.meter
                    .record_capacity("UpdateItem", out.consumed_capacity());
                return match opt_item(out.attributes()) {
                    Some(item) => codec::decode(&item),
                    None => self.get_run_impl(run_key).await,
                };
            }
            Err(err) => err,
        };
        let Some(UpdateItemError::ConditionalCheckFailedException(failed)) = err.as_service_error()
        else {
            return Err(crate::error::store_request("UpdateItem", err));
        };
        let stored = match opt_item(failed.item()) {
            Some(item) => Some(codec::decode(&item)?),
            None => match self.get_run_impl(run_key).await {
                Ok(run) => Some(run),
                Err(StoreError::RunNotFound(_)) => None,
                Err(e) => return Err(e),
            },
        };
        Err(run_plan::refusal(run_key, change, stored))
    }

    pub(super) async fn active_runs_impl(
        &self,
        shard: u32,
        status: Option<RunStatus>,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(GSI2PK, s(keys::active_pk(shard)));
        if let Some(status) = status {
            cond.begins_with(GSI2SK, s(keys::active_status_prefix(status)));
        }
        let (entries, next) = self
            .query_page(Some(keys::ACTIVE_INDEX), &cond, limit, cursor, true)
            .await?;
        let mut items = self.fetch_active(&entries).await?;
        items.retain(|r| status.is_none_or(|wanted| r.status == wanted));
        Ok(Page { items, next })
    }

    pub(super) async fn run_history_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<Page<Run>, StoreError> {
        let mut cond = Expr::new();
        cond.eq(PK, s(keys::schedule_pk(schedule_id)))
            .begins_with(SK, s(keys::RUN_PREFIX));
        let (items, next) = self.query_page(None, &cond, limit, cursor, false).await?;
        Ok(Page {
            items: decode_all(&items)?,
            next,
        })
    }

    pub(super) async fn recent_runs_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<RecentRuns, StoreError> {
        let mut expr = Expr::new();
        expr.eq(PK, s(keys::schedule_pk(schedule_id)))
            .begins_with(SK, s(keys::RUN_PREFIX));
        recent_runs_filter(&mut expr, at);
        let out = self.query(None, &expr, limit, None, false).await?;
        recent_runs_of(&out, &out.items)
    }

    /// The schedule's item and its newest runs in one descending query: the schedule's
    /// sort key follows every run's, so it comes first and the page follows it.
    pub(super) async fn schedule_with_recent_runs_impl(
        &self,
        schedule_id: &str,
        limit: u32,
        at: Option<DateTime<Utc>>,
    ) -> Result<(StoredSchedule, RecentRuns), StoreError> {
        let mut expr = Expr::new();
        expr.eq(PK, s(keys::schedule_pk(schedule_id))).between(
            SK,
            s(keys::RUN_PREFIX),
            s(keys::SCHEDULE_SK),
        );
        recent_runs_filter(&mut expr, at);
        expr.or_one_of(schedule_codec::TYPE, [s(schedule_codec::SCHEDULE_TYPE)]);
        let out = self
            .query(None, &expr, limit.saturating_add(1), None, false)
            .await?;
        let items = &out.items;
        let is_schedule = |item: &Item| {
            item.get(SK)
                .and_then(|sk| sk.as_s().ok())
                .map(String::as_str)
                == Some(keys::SCHEDULE_SK)
        };
        let stored = match items.first().filter(|item| is_schedule(item)) {
            Some(item) => schedule_codec::decode(item)?,
            None => return Err(StoreError::ScheduleNotFound(schedule_id.to_string())),
        };
        Ok((stored, recent_runs_of(&out, &items[1..])?))
    }

    pub(super) async fn pending_live_runs_impl(
        &self,
        shard: u32,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Run>, StoreError> {
        // One page of the shard's PENDING entries with windows in range (text order is time
        // order), live triggers only: catch-up runs wait there for their release.
        let prefix = keys::active_status_prefix(RunStatus::Pending);
        let low = format!("{prefix}{}", keys::index_time(from));
        let high = format!("{prefix}{}$", keys::index_time(to));
        let mut expr = Expr::new();
        expr.eq(GSI2PK, s(keys::active_pk(shard)))
            .between(GSI2SK, s(low), s(high));
        let (entries, _) = self
            .query_page(Some(keys::ACTIVE_INDEX), &expr, limit, None, true)
            .await?;
        Ok(self
            .fetch_active(&entries)
            .await?
            .into_iter()
            .filter(|r| matches!(r.trigger, Trigger::Scheduled | Trigger::Manual))
            .filter(|r| r.status == RunStatus::Pending)
            .filter(|r| from <= r.key.scheduled_for && r.key.scheduled_for <= to)
            .collect())
    }

    pub(super) async fn running_before_impl(
        &self,
        schedule_id: &str,
        before: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        // The shard's RUNNING entries through `before`'s second (text order is time order),
        // kept to this schedule's and to windows before `before`: few in a healthy system,
        // however long the schedule's history.
        let shard = keys::shard_of(schedule_id, self.shards);
        let prefix = keys::active_status_prefix(RunStatus::Running);
        let high = format!("{prefix}{}$", keys::index_time(before));
        let mut expr = Expr::new();
        expr.eq(GSI2PK, s(keys::active_pk(shard)))
            .between(GSI2SK, s(prefix), s(high));
        // The entry's sort key names the schedule: only its entries are fetched.
        let ours = format!("#{schedule_id}#{}", keys::RUN_PREFIX);
        let entries: Vec<Item> = self
            .query_all(Some(keys::ACTIVE_INDEX), &expr)
            .await?
            .into_iter()
            .filter(|e| {
                e.get(GSI2SK)
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|sk| sk.contains(&ours))
            })
            .collect();
        Ok(self
            .fetch_active(&entries)
            .await?
            .into_iter()
            .filter(|r| r.key.schedule_id == schedule_id && r.status == RunStatus::Running)
            .filter(|r| r.key.scheduled_for < before)
            .collect())
    }

    pub(super) async fn runs_between_impl(
        &self,
        schedule_id: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Run>, StoreError> {
        // Bounds on whole seconds without the `Z`, so every text form of an instant in
        // range (fractions, operator suffixes) sorts inside; exact bounds are applied after.
        let low = format!("{}{}", keys::RUN_PREFIX, keys::whole_second(from));
        let high = format!("{}{}~", keys::RUN_PREFIX, keys::whole_second(to));
        let mut cond = Expr::new();
        cond.eq(PK, s(keys::schedule_pk(schedule_id)))
            .between(SK, s(low), s(high));
        let runs = decode_all(&self.query_all(None, &cond).await?)?;
        Ok(runs
            .into_iter()
            .filter(|r| from <= r.key.scheduled_for && r.key.scheduled_for <= to)
            .collect())
    }
}

pub(super) fn run_item_key(run_key: &RunKey) -> Item {
    key(
        keys::schedule_pk(&run_key.schedule_id),
        keys::run_sk(run_key),
    )
}

impl DynamoStore {
    /// The runs behind `active` entries that are still active (the index lags the table).
    async fn fetch_active(&self, entries: &[Item]) -> Result<Vec<Run>, StoreError> {
        Ok(decode_all(&self.fetch_items(entries).await?)?
            .into_iter()
            .filter(|r| r.status.is_active())
            .collect())
    }
}

fn decode_all(items: &[Item]) -> Result<Vec<Run>, StoreError> {
    items.iter().map(codec::decode).collect()
}

/// Keeps the runs the newest-runs checks use: those in flight and, with `at`, those in
/// `at`'s second.
fn recent_runs_filter(expr: &mut Expr, at: Option<DateTime<Utc>>) {
    let active = RunStatus::ALL.iter().filter(|status| status.is_active());
    expr.or_one_of(codec::STATUS, active.map(|status| s(status.as_str())));
    if let Some(at) = at {
        expr.or_begins_with(codec::SCHEDULED_FOR, s(keys::whole_second(at)));
    }
}

/// The page `runs` came from, with how far back its read looked.
fn recent_runs_of(out: &QueryPage, runs: &[Item]) -> Result<RecentRuns, StoreError> {
    // Where the read stopped: the sort key of the last run it looked at, filtered or not.
    let stopped_at = out
        .last_key
        .as_ref()
        .and_then(|k| k.get(SK))
        .and_then(|sk| sk.as_s().ok());
    Ok(RecentRuns {
        runs: decode_all(runs)?,
        complete: out.last_key.is_none(),
        oldest_read: stopped_at.and_then(|sk| keys::run_sk_instant(sk)),
    })
}
