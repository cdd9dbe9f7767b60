//! The simulation's bill: the meter's DynamoDB figures and the [`Bill`]'s counts over the
//! simulated stretch, priced by the cost model, as `stats.capacity`,
//! `stats.cost_per_million_runs`, `stats.prices` and `stats.monthly_fixed_usd` report them.

use std::collections::BTreeMap;

use cronledger_aws::{CapacityTarget, MeterSnapshot, Units};
use serde::Serialize;

use super::bill::{Bill, FunctionUsage};
use crate::cost::{
    self, Capacity, Corrections, CostPerMillionRuns, Deployment, Measured, MonthlyFixed, Prices,
};

/// The template's `AWS::CloudWatch::Alarm` resources (a test holds it to the template).
pub const TEMPLATE_ALARMS: u32 = 20;
/// The lanes an SQS event source polls.
pub const POLLED_LANES: u32 = 5;

/// How the figures were arrived at: what the totals are made of.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CostDetail {
    /// What the model added for the emulator's known gaps (DynamoDB store only).
    pub corrections: Corrections,
    /// Consumed capacity per index (as reported, before corrections).
    pub index_units: BTreeMap<String, Units>,
    pub functions: BTreeMap<&'static str, FunctionUsage>,
    /// Billed storage the simulation added (in-memory store only; DynamoDB does not say).
    pub stored_bytes: u64,
    pub stored_bytes_per_run: f64,
    /// Simulated hours the figures cover.
    pub hours: f64,
    pub scheduler_invocations: u64,
    /// What the fleet's second-by-second profile needs provisioned, by table and index.
    pub provisioned: cost::provisioned::Provisioned,
    /// DynamoDB units and calls per run, by the store operation that made them: where a
    /// run's write units go.
    pub per_run_by_operation: BTreeMap<String, OperationShare>,
}

/// One store operation's share of a run's DynamoDB bill.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OperationShare {
    pub calls: f64,
    pub wru: f64,
    pub rru: f64,
}

/// [`OperationShare`]s of the DynamoDB usage in `used`, per run.
fn per_run_by_operation(used: &MeterSnapshot, runs: u64) -> BTreeMap<String, OperationShare> {
    let runs = runs.max(1) as f64;
    let mut out: BTreeMap<String, OperationShare> = BTreeMap::new();
    for ((scope, operation), usage) in &used.usage {
        if !operation.starts_with("DynamoDB.") {
            continue;
        }
        let share = out.entry(scope.clone()).or_default();
        share.calls += usage.calls as f64 / runs;
        share.wru += usage.write_units / runs;
        share.rru += usage.read_units / runs;
    }
    out
}

/// Everything the report says about cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Costing {
    pub capacity: Capacity,
    pub cost_per_million_runs: CostPerMillionRuns,
    /// The same bill on a provisioned table sized by `cost_detail.provisioned`.
    pub cost_per_million_runs_provisioned: CostPerMillionRuns,
    pub prices: Option<Prices>,
    pub monthly_fixed_usd: MonthlyFixed,
    pub cost_detail: CostDetail,
}

/// The counts between two meter snapshots.
fn since(before: &MeterSnapshot, after: &MeterSnapshot) -> MeterSnapshot {
    let mut delta = after.clone();
    for (key, was) in &before.usage {
        if let Some(now) = delta.usage.get_mut(key) {
            now.calls = now.calls.saturating_sub(was.calls);
            now.attempts = now.attempts.saturating_sub(was.attempts);
            now.read_units -= was.read_units;
            now.write_units -= was.write_units;
            now.billed_requests = now.billed_requests.saturating_sub(was.billed_requests);
            now.reported = now.reported.saturating_sub(was.reported);
        }
    }
    for (target, was) in &before.capacity {
        if let Some(now) = delta.capacity.get_mut(target) {
            now.read -= was.read;
            now.write -= was.write;
        }
    }
    delta.stored_bytes = after.stored_bytes.saturating_sub(before.stored_bytes);
    delta
}

/// Prices what `bill` and the meter counted over `hours` of simulated time in which
/// `runs` job runs executed.
pub fn costing(
    bill: &Bill,
    before: &MeterSnapshot,
    after: &MeterSnapshot,
    runs: u64,
    hours: f64,
    profile: &Profile,
) -> Costing {
    let used = since(before, after);
    // Only SDK responses report capacity: a meter with none is the in-memory store's.
    let emulator = used.usage.values().any(|u| u.reported > 0);
    let (mut capacity, corrections) = bill.capacity(&used, emulator, runs);
    let provisioned = cost::provisioned::provision(profile.dense());
    capacity.peak_wcu_per_s = provisioned.peak_wcu_per_s;
    capacity.peak_rcu_per_s = provisioned.peak_rcu_per_s;
    let stored_bytes_per_run = if runs == 0 {
        0.0
    } else {
        used.stored_bytes as f64 / runs as f64
    };
    // As deployed: the ticker every minute, the reconciler every 5 minutes.
    let scheduler_invocations = (hours * 60.0 + hours * 12.0).round() as u64;
    let measured = Measured {
        capacity: capacity.clone(),
        stored_bytes_per_run,
        hours,
        scheduler_invocations,
    };
    let prices = Prices::us_east_1();
    let functions = bill.functions();
    let gb_seconds_each = |function: &str| {
        functions.get(function).map_or(0.0, |u| {
            u.billed_ms as f64 / 1000.0 / u.invocations.max(1) as f64
                * super::bill::memory_gb(function)
        })
    };
    let monthly_fixed_usd = cost::monthly_fixed(
        &Deployment {
            ticker_schedules: 1,
            ticker_gb_seconds: gb_seconds_each("ticker"),
            reconciler_gb_seconds: gb_seconds_each("reconciler"),
            polled_queues: POLLED_LANES,
            alarms: TEMPLATE_ALARMS,
            custom_metrics: capacity.custom_metrics,
        },
        &prices,
    );
    let on_demand = cost::cost_per_million_runs(&measured, &prices);
    let cost_per_million_runs_provisioned =
        cost::provisioned_per_million_runs(&on_demand, &provisioned, runs, hours, &prices);
    Costing {
        cost_per_million_runs: on_demand,
        cost_per_million_runs_provisioned,
        capacity,
        prices: Some(prices),
        monthly_fixed_usd,
        cost_detail: CostDetail {
            corrections,
            index_units: used.by_index(),
            functions,
            stored_bytes: used.stored_bytes,
            stored_bytes_per_run,
            hours,
            scheduler_invocations,
            provisioned,
            per_run_by_operation: per_run_by_operation(&used, runs),
        },
    }
}

/// The units the meter recorded second by second, by target, over the simulated stretch.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub from: i64,
    pub to: i64,
    pub seconds: BTreeMap<CapacityTarget, BTreeMap<i64, Units>>,
}

impl Profile {
    /// Each target's `(write, read)` units for every second of the stretch, idle ones
    /// included (they refill the burst bucket).
    fn dense(&self) -> BTreeMap<String, Vec<(f64, f64)>> {
        let len = (self.to - self.from).max(0) as usize + 1;
        self.seconds
            .iter()
            .map(|(target, by_second)| {
                let mut profile = vec![(0.0, 0.0); len];
                for (second, units) in by_second {
                    let at = (second - self.from).clamp(0, len as i64 - 1) as usize;
                    profile[at].0 += units.write;
                    profile[at].1 += units.read;
                }
                let name = target.index.clone().unwrap_or_else(|| "table".into());
                (name, profile)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alarm_count_matches_the_template() {
        let template = include_str!("../../../../infra/template.yaml");
        let alarms = template.matches("Type: AWS::CloudWatch::Alarm").count();
        assert_eq!(alarms as u32, TEMPLATE_ALARMS);
    }
}
