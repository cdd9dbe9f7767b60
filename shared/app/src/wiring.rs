//! Assembling the components in one place: the ticker, worker, reconciler, backfill releaser,
//! api and auditor (its builder is in [`crate::auditor`]), each with its store, lanes, kill
//! switch, alerts (counted in its own metrics), health counters and backfills. The
//! functions, `cronledger local` and the simulator
//! all build through [`Components`], so a feature wired for one is wired for all; what
//! differs between them (job targets, configs, signals, the simulator's faults and clocks,
//! the reconciler's ticker check) is passed in or added after.

use std::collections::BTreeSet;
use std::sync::Arc;

use cronledger_aws::notify::notifier_from_env;
use cronledger_aws::{
    AlertStore, HealthStore, LaneQueue, LedgerStore, Notifier, OpsStore, ReleaseStateStore,
};
use serde::Serialize;

use crate::alerting::Alerter;
use crate::api::system::SystemControl;
use crate::api::{Api, ApiConfig, ApiDeps, AuthConfig};
use crate::auditor::AuditorConfig;
use crate::backfill::BackfillReleaser;
use crate::clock::{Clock, SystemClock};
use crate::deployment::Connected;
use crate::jobs::JobTargets;
use crate::kill_switch::KillSwitchCheck;
use crate::metrics::Metrics;
use crate::reconciler::{Reconciler, ReconcilerConfig, Signals};
use crate::ticker::{Ticker, TickerConfig};
use crate::worker::{Worker, WorkerConfig};

/// Every store one ledger (one table) serves.
pub trait LedgerStores:
    LedgerStore + ReleaseStateStore + OpsStore + AlertStore + HealthStore + 'static
{
}

impl<S> LedgerStores for S where
    S: LedgerStore + ReleaseStateStore + OpsStore + AlertStore + HealthStore + 'static
{
}

/// What the components are built on.
#[derive(Clone)]
pub struct Deps {
    pub store: Arc<dyn LedgerStore>,
    pub control: Arc<dyn ReleaseStateStore>,
    /// Backfills (the reconciler stores the ones it proposes for long gaps) and the kill
    /// switch's flag.
    pub ops: Arc<dyn OpsStore>,
    /// Where alerts are recorded before they are published.
    pub alerts: Arc<dyn AlertStore>,
    /// The schedules' outcome counters.
    pub health: Arc<dyn HealthStore>,
    pub lanes: Arc<dyn LaneQueue>,
    /// Where alerts are published.
    pub notifier: Arc<dyn Notifier>,
    /// The worker's and the api's clock.
    pub clock: Arc<dyn Clock>,
    /// `None`: nothing checks the switch (the simulator without kill-switch windows, which
    /// then reads nothing for it).
    pub kill_switch: Option<Arc<KillSwitchCheck>>,
}

impl Deps {
    /// Every store on one ledger (one table, as deployed), the kill switch checked.
    pub fn on<S: LedgerStores>(
        ledger: Arc<S>,
        lanes: Arc<dyn LaneQueue>,
        notifier: Arc<dyn Notifier>,
        clock: Arc<dyn Clock>,
    ) -> Deps {
        Deps {
            store: ledger.clone(),
            control: ledger.clone(),
            ops: ledger.clone(),
            alerts: ledger.clone(),
            kill_switch: Some(Arc::new(KillSwitchCheck::new(ledger.clone()))),
            health: ledger,
            lanes,
            notifier,
            clock,
        }
    }

    /// As the functions run: the deployment's table and queues, alerts to SNS (the topic
    /// the environment names), the system clock.
    pub fn deployed(connected: &Connected) -> Deps {
        Deps::on(
            connected.ledger.clone(),
            connected.lanes.clone(),
            notifier_from_env(&connected.clients),
            Arc::new(SystemClock),
        )
    }
}

/// Something a component is wired with (see [`Components`]'s test: every environment's
/// components have the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum Feature {
    /// Checks the kill switch before it acts.
    KillSwitch,
    /// Raises (the ticker: records) alerts.
    Alerts,
    /// Counts the alerts it raises in its own metrics, which its function publishes.
    AlertMetrics,
    /// Counts outcomes on the schedules' health.
    Health,
    /// Stores the backfills proposed for long gaps.
    Backfills,
}

/// A component's features, from what it holds (each component's `features()`).
pub(crate) fn features_of(
    metrics: &Metrics,
    kill_switch: bool,
    alerter: Option<&Arc<Alerter>>,
    others: &[(Feature, bool)],
) -> BTreeSet<Feature> {
    let mut features = BTreeSet::new();
    if kill_switch {
        features.insert(Feature::KillSwitch);
    }
    if let Some(alerter) = alerter {
        features.insert(Feature::Alerts);
        if alerter.metrics().same_as(metrics) {
            features.insert(Feature::AlertMetrics);
        }
    }
    features.extend(others.iter().filter(|(_, on)| *on).map(|(f, _)| *f));
    features
}

/// Builds every component from one [`Deps`].
#[derive(Clone)]
pub struct Components {
    deps: Deps,
}

impl Components {
    pub fn build(deps: Deps) -> Components {
        Components { deps }
    }

    pub fn deps(&self) -> &Deps {
        &self.deps
    }

    /// An alerter of its own for each component, counting into that component's metrics
    /// (which its function flushes).
    fn alerter(&self, metrics: &Metrics) -> Arc<Alerter> {
        Arc::new(
            Alerter::new(self.deps.alerts.clone(), self.deps.notifier.clone())
                .counting_into(metrics.clone()),
        )
    }

    pub fn ticker(&self, config: TickerConfig) -> Ticker {
        let ticker = Ticker::new(self.deps.store.clone(), self.deps.lanes.clone(), config)
            .with_kill_switch_opt(self.deps.kill_switch.clone())
            .with_health(self.deps.health.clone());
        let alerter = self.alerter(ticker.metrics());
        ticker.with_alerts(alerter)
    }

    pub fn worker(&self, jobs: JobTargets, config: WorkerConfig) -> Worker {
        let worker = Worker::new(
            self.deps.store.clone(),
            self.deps.lanes.clone(),
            jobs,
            self.deps.clock.clone(),
            config,
        )
        .with_kill_switch_opt(self.deps.kill_switch.clone())
        .with_health(self.deps.health.clone());
        let alerter = self.alerter(worker.metrics());
        worker.with_alerts(alerter)
    }

    pub fn reconciler(&self, signals: Arc<dyn Signals>, config: ReconcilerConfig) -> Reconciler {
        let reconciler = Reconciler::new(
            self.deps.store.clone(),
            self.deps.control.clone(),
            self.deps.lanes.clone(),
            signals,
            config,
        )
        .with_kill_switch_opt(self.deps.kill_switch.clone())
        .with_health(self.deps.health.clone())
        .with_backfills(self.deps.ops.clone());
        let alerter = self.alerter(reconciler.metrics());
        reconciler.with_alerts(alerter)
    }

    /// The reconciler function's second step: operators' backfills, throttled by `signals`.
    pub fn backfill_releaser(&self, signals: Option<Arc<dyn Signals>>) -> BackfillReleaser {
        BackfillReleaser {
            store: self.deps.store.clone(),
            ops: self.deps.ops.clone(),
            lanes: self.deps.lanes.clone(),
            signals,
            alerter: Some(self.alerter(&Metrics::new())),
        }
    }

    /// `system`: the kill switch's and one-off runs' AWS side (`None` locally); `signals`:
    /// what backfills' status reads. Its on-demand audits are [`Components::auditor`]'s.
    pub fn api(
        &self,
        system: Option<Arc<dyn SystemControl>>,
        signals: Option<Arc<dyn Signals>>,
        auth: AuthConfig,
        config: ApiConfig,
    ) -> Api {
        Api::new(ApiDeps {
            store: self.deps.store.clone(),
            ops: self.deps.ops.clone(),
            health: Some(self.deps.health.clone()),
            lanes: self.deps.lanes.clone(),
            clock: self.deps.clock.clone(),
            system,
            signals,
            auditor: Some(Arc::new(self.auditor(AuditorConfig::default()))),
            auth,
            config,
        })
    }
}

#[cfg(test)]
mod tests {
    use cronledger_ledger::prelude::*;
    use std::collections::BTreeMap;

    use chrono::{DateTime, TimeDelta, Utc};
    use cronledger_aws::notify::MemoryNotifier;
    use cronledger_aws::{
        AwsClients, BackfillState, ChangeMeta, DynamoLedger, MemoryStore, RequestMeter, SqsLanes,
    };
    use cronledger_core::ValidationRules;

    use super::*;
    use crate::jobs::HttpJob;
    use crate::reconciler::{QuietSignals, ReconcileEvent};
    use crate::simulate::{SimLanes, SimQueues, SimulationEnv, VirtualTime};

    fn at(text: &str) -> DateTime<Utc> {
        text.parse().expect("test instants are valid")
    }

    fn memory_store() -> Arc<MemoryStore> {
        Arc::new(MemoryStore::new(1, RequestMeter::new()))
    }

    fn memory_lanes(now: DateTime<Utc>) -> Arc<SimLanes> {
        let time = VirtualTime::new(now);
        Arc::new(SimLanes::new(
            SimQueues::memory(),
            time,
            false,
            TimeDelta::minutes(5),
        ))
    }

    /// The four functions' path: the deployment's connection (clients that are never called).
    fn deployed() -> Components {
        let sdk = aws_config::SdkConfig::builder()
            .behavior_version(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new("us-east-1"))
            .build();
        let clients = AwsClients::from_sdk_config(&sdk, RequestMeter::new(), None);
        let connected = Connected {
            ledger: Arc::new(DynamoLedger::new(&clients, "t", 1)),
            lanes: Arc::new(SqsLanes::new(clients.sqs.clone(), BTreeMap::new())),
            clients,
        };
        Components::build(Deps::deployed(&connected))
    }

    fn local(now: DateTime<Utc>) -> Components {
        crate::local::components(
            memory_store(),
            memory_lanes(now),
            Arc::new(MemoryNotifier::new()),
        )
    }

    /// The simulator's path; `kill_switch`: the simulation has kill-switch windows.
    fn simulated(now: DateTime<Utc>, kill_switch: bool) -> Components {
        let store = memory_store();
        let env = SimulationEnv::on(store.clone(), SimQueues::memory(), 1, None);
        let time = VirtualTime::new(now);
        crate::simulate::components(
            &env,
            memory_lanes(now),
            Arc::new(MemoryNotifier::new()),
            Arc::new(time.clock()),
            kill_switch.then(|| Arc::new(KillSwitchCheck::new(store))),
        )
    }

    /// Each component's features, by component.
    fn features(components: &Components) -> BTreeMap<&'static str, BTreeSet<Feature>> {
        let jobs = JobTargets::new(HttpJob::new().expect("an http client"));
        BTreeMap::from([
            (
                "ticker",
                components.ticker(TickerConfig::default()).features(),
            ),
            (
                "worker",
                components.worker(jobs, WorkerConfig::default()).features(),
            ),
            (
                "reconciler",
                components
                    .reconciler(Arc::new(QuietSignals), ReconcilerConfig::default())
                    .features(),
            ),
            (
                "auditor",
                components.auditor(AuditorConfig::default()).features(),
            ),
        ])
    }

    #[test]
    fn the_functions_local_and_the_simulator_wire_the_same_features() {
        use Feature::*;
        let now = at("2026-03-06T00:00:00Z");
        let functions = features(&deployed());
        let expected = BTreeMap::from([
            (
                "ticker",
                BTreeSet::from([KillSwitch, Alerts, AlertMetrics, Health]),
            ),
            (
                "worker",
                BTreeSet::from([KillSwitch, Alerts, AlertMetrics, Health]),
            ),
            (
                "reconciler",
                BTreeSet::from([KillSwitch, Alerts, AlertMetrics, Health, Backfills]),
            ),
            // One metric of its own: the alerts it raises are not counted in it.
            ("auditor", BTreeSet::from([KillSwitch, Alerts])),
        ]);
        assert_eq!(functions, expected);
        assert_eq!(features(&local(now)), functions, "cronledger local");
        assert_eq!(features(&simulated(now, true)), functions, "simulate");
        // Without kill-switch windows the simulator reads nothing for the switch: the one
        // difference.
        let mut unchecked = functions.clone();
        for features in unchecked.values_mut() {
            features.remove(&KillSwitch);
        }
        assert_eq!(features(&simulated(now, false)), unchecked);
    }

    /// `cronledger local` used to build its reconciler without backfills: a long gap's
    /// proposal was only logged.
    #[tokio::test]
    async fn the_local_reconciler_stores_a_long_gaps_backfill_proposal() {
        let created = at("2026-03-06T00:59:00Z");
        let store = memory_store();
        let spec = cronledger_core::spec::parse_manifest(
            r#"{"schedules": [{"id": "gap", "cron": "*/10 * * * *", "timezone": "UTC",
                "misfire": "CATCH_UP_ALL", "grace": "5m", "side_effects": false,
                "overlap": "ALLOW", "max_auto_catch_up": 0, "job": {"type": "noop"}}]}"#,
            &ValidationRules::default(),
            created,
        )
        .expect("a valid manifest")
        .remove(0);
        let meta = ChangeMeta {
            actor: "test".into(),
            reason: "test".into(),
            at: created,
            details: None,
        };
        store.create_schedule(spec, meta).await.expect("create");
        let now = at("2026-03-06T07:30:00Z");
        let components = crate::local::components(
            store.clone(),
            memory_lanes(now),
            Arc::new(MemoryNotifier::new()),
        );
        let reconciler = components.reconciler(Arc::new(QuietSignals), ReconcilerConfig::default());
        let report = reconciler.reconcile(&ReconcileEvent::at(now)).await;
        assert!(report.errors.is_empty(), "{report:?}");
        assert_eq!(report.backfills_proposed.len(), 1, "{report:?}");
        let open = store.open_backfills().await.expect("open backfills");
        assert_eq!(open.len(), 1, "{open:?}");
        assert_eq!(open[0].id, report.backfills_proposed[0]);
        // Every window held (a cap of 0): the proposal waits for an operator.
        assert_eq!(open[0].state, BackfillState::Paused);
        assert_eq!(open[0].from, at("2026-03-06T01:00:00Z"));
        // The gap's alert is counted in the reconciler's metrics, which its function flushes.
        let docs = reconciler.metrics().drain("reconciler", now);
        for name in [
            "BackfillsProposed",
            "AlertsRaised",
            "AlertsPublishedFromOutbox",
        ] {
            assert!(
                docs.iter().any(|d| d.get(name).is_some()),
                "{name}: {docs:?}"
            );
        }
    }
}
