//! The cost model: what a simulated stretch of the fleet's life would cost on AWS, from what
//! was measured (consumed capacity, requests, invocations, durations, log bytes, metrics,
//! stored bytes), priced by [`prices::Prices`]. Pure arithmetic: the simulator measures,
//! this prices.

pub mod estimate;
pub mod prices;
pub mod provisioned;

use serde::Serialize;

pub use prices::{Price, Prices};

/// What a simulation consumed, as `stats.capacity` reports it (names pinned by the issue).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Capacity {
    /// DynamoDB write request units (corrected; see [`Corrections`]).
    pub wru: f64,
    /// DynamoDB read request units (corrected).
    pub rru: f64,
    /// SQS requests as billed (64 KB chunks), the way the deployed functions make them.
    pub sqs_requests: u64,
    pub lambda_invocations: u64,
    pub lambda_gb_seconds: f64,
    /// Bytes of the log lines the functions write (JSON logs and EMF documents).
    pub log_bytes: u64,
    /// Distinct custom metrics (namespace × name × dimension set and values) published.
    pub custom_metrics: u64,
    /// Job runs executed.
    pub runs: u64,
    /// The busiest simulated second's write units, table and indexes together.
    pub peak_wcu_per_s: f64,
    /// The busiest simulated second's read units, table and indexes together.
    pub peak_rcu_per_s: f64,
}

/// Where the emulator's consumed capacity is known to differ from DynamoDB's, and what the
/// model adds for it (measured against DynamoDB Local; see the module docs of
/// `cronledger_aws::memory::capacity` for the rules).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Corrections {
    /// Write calls answered without units (a failed condition: its error carries no
    /// capacity), charged the minimum one unit each (two in a transaction).
    pub unreported_writes: u64,
    pub added_wru: f64,
    /// Reads answered with 0 units (DynamoDB Local reports an empty Query as free; DynamoDB
    /// charges at least half a unit).
    pub unreported_reads: u64,
    pub added_rru: f64,
}

/// Everything the bill needs beyond `capacity`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Measured {
    pub capacity: Capacity,
    /// Bytes DynamoDB bills as storage (items and index entries, 100 bytes overhead each)
    /// that the simulation added, per run executed.
    pub stored_bytes_per_run: f64,
    /// Simulated time the figures cover, in hours (metrics are billed per hour they exist).
    pub hours: f64,
    /// EventBridge Scheduler invocations (ticker and reconciler) in those hours.
    pub scheduler_invocations: u64,
}

/// The bill per million runs, by item, in USD.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CostPerMillionRuns {
    pub dynamodb_writes: f64,
    pub dynamodb_reads: f64,
    /// Each run's items kept for [`STORAGE_DAYS`].
    pub dynamodb_storage: f64,
    pub sqs: f64,
    pub lambda_requests: f64,
    pub lambda_compute: f64,
    pub logs_ingestion: f64,
    /// Ingested logs kept for the template's default `LogRetentionDays`.
    pub logs_storage: f64,
    pub total: f64,
}

/// How long a run's items are priced as stored.
pub const STORAGE_DAYS: f64 = 30.0;
/// The template's default `LogRetentionDays`.
pub const LOG_RETENTION_DAYS: f64 = 30.0;
const GB: f64 = 1024.0 * 1024.0 * 1024.0;
const DAYS_PER_MONTH: f64 = 30.0;
const MINUTES_PER_MONTH: f64 = 43_200.0;

/// Prices `measured` per million runs (all zero when nothing ran): what grows with the work.
/// Custom metrics and the Scheduler's invocations do not (a bounded set of metric names, a
/// ticker every minute and a reconciler every 5 minutes whatever is due): they are in
/// [`monthly_fixed`], not spread over the runs, where they would make a small or sparse
/// fleet look expensive per run and the Scheduler would be counted twice.
pub fn cost_per_million_runs(measured: &Measured, prices: &Prices) -> CostPerMillionRuns {
    let c = &measured.capacity;
    if c.runs == 0 {
        return CostPerMillionRuns::default();
    }
    let per_million = 1e6 / c.runs as f64;
    let log_gb = c.log_bytes as f64 / GB;
    let mut bill = CostPerMillionRuns {
        dynamodb_writes: c.wru * prices.dynamodb_write_request_unit.usd * per_million,
        dynamodb_reads: c.rru * prices.dynamodb_read_request_unit.usd * per_million,
        dynamodb_storage: measured.stored_bytes_per_run / GB
            * prices.dynamodb_storage.usd
            * (STORAGE_DAYS / DAYS_PER_MONTH)
            * 1e6,
        sqs: c.sqs_requests as f64 * prices.sqs_request.usd * per_million,
        lambda_requests: c.lambda_invocations as f64 * prices.lambda_request.usd * per_million,
        lambda_compute: c.lambda_gb_seconds * prices.lambda_gb_second.usd * per_million,
        logs_ingestion: log_gb * prices.logs_ingestion.usd * per_million,
        logs_storage: log_gb
            * prices.logs_storage.usd
            * (LOG_RETENTION_DAYS / DAYS_PER_MONTH)
            * per_million,
        total: 0.0,
    };
    bill.total = bill.dynamodb_writes
        + bill.dynamodb_reads
        + bill.dynamodb_storage
        + bill.sqs
        + bill.lambda_requests
        + bill.lambda_compute
        + bill.logs_ingestion
        + bill.logs_storage;
    bill
}

/// `on_demand` with DynamoDB's request charges replaced by `plan`'s provisioned capacity held
/// for `hours` (see [`provisioned`]): the bill per million runs of the same fleet on a
/// provisioned table.
pub fn provisioned_per_million_runs(
    on_demand: &CostPerMillionRuns,
    plan: &provisioned::Provisioned,
    runs: u64,
    hours: f64,
    prices: &Prices,
) -> CostPerMillionRuns {
    if runs == 0 {
        return CostPerMillionRuns::default();
    }
    let per_million = 1e6 / runs as f64;
    let mut bill = on_demand.clone();
    bill.dynamodb_writes =
        plan.wcu * hours * prices.dynamodb_provisioned_wcu_hour.usd * per_million;
    bill.dynamodb_reads = plan.rcu * hours * prices.dynamodb_provisioned_rcu_hour.usd * per_million;
    bill.total = on_demand.total - on_demand.dynamodb_writes - on_demand.dynamodb_reads
        + bill.dynamodb_writes
        + bill.dynamodb_reads;
    bill
}

/// What the deployment costs a month with no run at all: the ticker every minute per ticker
/// schedule and the reconciler every 5 minutes (Scheduler, Lambda requests and compute),
/// the event source's empty long polls on the lanes, and the template's alarms.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MonthlyFixed {
    pub scheduler_usd: f64,
    pub lambda_usd: f64,
    pub sqs_polling_usd: f64,
    pub alarms_usd: f64,
    /// The custom metrics the functions publish (a fixed set of names and dimensions, each
    /// billed per metric-month once it is published at all).
    pub custom_metrics_usd: f64,
    pub total_usd: f64,
}

/// The deployment's shape, for [`monthly_fixed`].
#[derive(Debug, Clone, PartialEq)]
pub struct Deployment {
    /// Ticker schedules (one per group of shards).
    pub ticker_schedules: u32,
    /// GB-seconds of an idle ticker and reconciler invocation (memory × handler time).
    pub ticker_gb_seconds: f64,
    pub reconciler_gb_seconds: f64,
    /// Queues an SQS event source polls (the lanes; DLQs are not polled).
    pub polled_queues: u32,
    pub alarms: u32,
    /// Distinct custom metrics published.
    pub custom_metrics: u64,
}

/// Lambda's SQS event source keeps 5 pollers per queue long-polling (20 s) while the queue
/// is empty: about 3 receives a minute each.
/// <https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html>
const POLLERS_PER_QUEUE: f64 = 5.0;
const EMPTY_RECEIVES_PER_POLLER_MINUTE: f64 = 3.0;

pub fn monthly_fixed(d: &Deployment, prices: &Prices) -> MonthlyFixed {
    let ticks = MINUTES_PER_MONTH * d.ticker_schedules as f64;
    let passes = MINUTES_PER_MONTH / 5.0;
    let invocations = ticks + passes;
    let gb_seconds = ticks * d.ticker_gb_seconds + passes * d.reconciler_gb_seconds;
    let receives = d.polled_queues as f64
        * POLLERS_PER_QUEUE
        * EMPTY_RECEIVES_PER_POLLER_MINUTE
        * MINUTES_PER_MONTH;
    let mut fixed = MonthlyFixed {
        scheduler_usd: invocations * prices.scheduler_invocation.usd,
        lambda_usd: invocations * prices.lambda_request.usd
            + gb_seconds * prices.lambda_gb_second.usd,
        sqs_polling_usd: receives * prices.sqs_request.usd,
        alarms_usd: d.alarms as f64 * prices.alarm.usd,
        custom_metrics_usd: d.custom_metrics as f64 * prices.custom_metric.usd,
        total_usd: 0.0,
    };
    fixed.total_usd = fixed.scheduler_usd
        + fixed.lambda_usd
        + fixed.sqs_polling_usd
        + fixed.alarms_usd
        + fixed.custom_metrics_usd;
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn prices_each_item_per_million_runs() {
        let measured = Measured {
            capacity: Capacity {
                wru: 16.0,
                rru: 4.0,
                sqs_requests: 3,
                lambda_invocations: 1,
                lambda_gb_seconds: 0.0625,
                log_bytes: 2048,
                custom_metrics: 10,
                runs: 1,
                ..Capacity::default()
            },
            stored_bytes_per_run: 4096.0,
            hours: 730.0,
            scheduler_invocations: 2,
        };
        let bill = cost_per_million_runs(&measured, &Prices::us_east_1());
        assert!(
            close(bill.dynamodb_writes, 10.0),
            "16 WRU × $0.625/M × 1M runs"
        );
        assert!(close(bill.dynamodb_reads, 0.5));
        assert!(close(bill.sqs, 1.2));
        assert!(close(bill.lambda_requests, 0.2));
        assert!(close(bill.lambda_compute, 0.0625 * 0.0000133334 * 1e6));
        assert!(close(bill.dynamodb_storage, 4096.0 / GB * 0.25 * 1e6));
        assert!(close(bill.logs_ingestion, 2048.0 / GB * 0.5 * 1e6));
        assert!(close(bill.logs_storage, 2048.0 / GB * 0.03 * 1e6));
        let sum = bill.dynamodb_writes
            + bill.dynamodb_reads
            + bill.dynamodb_storage
            + bill.sqs
            + bill.lambda_requests
            + bill.lambda_compute
            + bill.logs_ingestion
            + bill.logs_storage;
        assert!(close(bill.total, sum));
    }

    #[test]
    fn spreads_the_period_over_its_runs() {
        let one = Measured {
            capacity: Capacity {
                wru: 10.0,
                custom_metrics: 4,
                runs: 10,
                ..Capacity::default()
            },
            hours: 1.0,
            ..Measured::default()
        };
        let bill = cost_per_million_runs(&one, &Prices::us_east_1());
        assert!(close(bill.dynamodb_writes, 0.625), "1 WRU per run");
        let none = Measured::default();
        assert_eq!(
            cost_per_million_runs(&none, &Prices::us_east_1()),
            CostPerMillionRuns::default()
        );
    }

    #[test]
    fn fixed_monthly_cost_counts_ticks_passes_polls_and_alarms() {
        let fixed = monthly_fixed(
            &Deployment {
                ticker_schedules: 1,
                ticker_gb_seconds: 0.0,
                reconciler_gb_seconds: 0.0,
                polled_queues: 5,
                alarms: 14,
                custom_metrics: 45,
            },
            &Prices::us_east_1(),
        );
        // 43,200 ticks + 8,640 passes.
        assert!(close(fixed.scheduler_usd, 51_840.0 * 1e-6));
        assert!(close(fixed.lambda_usd, 51_840.0 * 0.2e-6));
        // 5 queues × 5 pollers × 3 a minute × 43,200 minutes.
        assert!(close(fixed.sqs_polling_usd, 3_240_000.0 * 0.4e-6));
        assert!(close(fixed.alarms_usd, 1.4));
        assert!(close(fixed.custom_metrics_usd, 45.0 * 0.30));
        assert!(close(
            fixed.total_usd,
            fixed.scheduler_usd
                + fixed.lambda_usd
                + fixed.sqs_polling_usd
                + fixed.alarms_usd
                + fixed.custom_metrics_usd
        ));
    }
}
