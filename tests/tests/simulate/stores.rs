//! `simulate --store memory` (the default) and `--store dynamodb` tell the same story: the
//! example manifest's day with the README's six-hour outage gives the same ledger, entry by
//! entry, and the same summary on the in-memory ledger as on the emulator's table.

use std::sync::Arc;

use cronledger_app::simulate::{
    simulate, Outage, SimQueues, SimulationConfig, SimulationEnv, SimulationReport,
};
use cronledger_aws::{MemoryStore, RequestMeter};
use cronledger_core::spec::parse_manifest;
use cronledger_core::{ScheduleSpec, ValidationRules};
use cronledger_tests::t;

use super::{run_on, Queues};

/// The example manifest as `cronledger simulate` reads it (its local webhook placeholder on
/// the local runner's default port).
fn example_schedules(now: chrono::DateTime<chrono::Utc>) -> Vec<ScheduleSpec> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/schedules.yaml");
    let text = std::fs::read_to_string(path)
        .expect("the example manifest")
        .replace("${CRONLEDGER_LOCAL_URL}", "http://127.0.0.1:8089");
    parse_manifest(&text, &ValidationRules::local(), now).expect("the example validates")
}

/// The README's range and outage.
fn readme_day() -> SimulationConfig {
    let mut config = SimulationConfig::new(t("2026-11-29T00:00:00Z"), t("2026-11-29T12:00:00Z"));
    config.outages =
        vec![Outage::parse("2026-11-29T02:00:00Z..2026-11-29T08:00:00Z")
            .expect("the README's outage")];
    config
}

pub(super) async fn on_memory(
    specs: Vec<ScheduleSpec>,
    config: &SimulationConfig,
) -> SimulationReport {
    let memory = Arc::new(MemoryStore::new(1, RequestMeter::new()));
    let meter = memory.meter().clone();
    let env = SimulationEnv::on(memory, SimQueues::memory(), 1, Some(meter));
    simulate(&env, specs, config)
        .await
        .expect("simulation in memory")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_day_gives_the_same_ledger_on_both_stores() {
    let config = readme_day();
    let specs = example_schedules(config.from);
    let dynamodb = run_on(Queues::Memory, specs.clone(), config.clone()).await;
    let memory = on_memory(specs, &config).await;
    assert!(!dynamodb.ledger.is_empty());
    assert_eq!(
        serde_json::to_value(&memory.ledger).expect("json"),
        serde_json::to_value(&dynamodb.ledger).expect("json"),
        "the ledger, entry by entry"
    );
    assert_eq!(
        serde_json::to_value(&memory.summary).expect("json"),
        serde_json::to_value(&dynamodb.summary).expect("json")
    );
}
