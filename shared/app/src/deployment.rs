//! Where a function finds its table and lanes: environment variables set by the template
//! (or by the local stack's env file). Read once per cold start.

use std::sync::Arc;

use cronledger_aws::{AwsClients, AwsSettings, DynamoLedger, LaneError, SqsLanes, StoreError};
use cronledger_ledger::keys::{shards_for_fleet, MAX_SHARDS};

/// The fleet the `auto` shard count assumes when the deployment names none.
pub const DEFAULT_EXPECTED_RUNS_PER_MINUTE: u64 = 1_000;

/// The names a deployment is made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub table: String,
    pub queue_prefix: String,
    pub shards: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("CONFIG_MISSING: environment variable {0} is not set")]
    Missing(&'static str),
    #[error("CONFIG_INVALID: {name}={value}: {problem}")]
    Invalid {
        name: &'static str,
        value: String,
        problem: String,
    },
    #[error("CONFIG_LANES: {0}")]
    Lanes(#[from] LaneError),
    /// The table refused this deployment's shard count (`SHARD_COUNT_DECREASED`), or it
    /// could not be checked.
    #[error("{0}")]
    Shards(StoreError),
}

impl Deployment {
    /// Reads `CRONLEDGER_TABLE`, `CRONLEDGER_QUEUE_PREFIX` and `CRONLEDGER_SHARDS`: a count
    /// from 1 to 1024, or `auto` (the default): the fleet rule
    /// ([`cronledger_ledger::keys::shards_for_fleet`]) applied to
    /// `CRONLEDGER_EXPECTED_RUNS_PER_MINUTE` (default 1,000: one shard).
    pub fn from_env() -> Result<Deployment, ConfigError> {
        Deployment::from_lookup(|name| std::env::var(name).ok())
    }

    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Deployment, ConfigError> {
        let required = |name: &'static str| get(name).ok_or(ConfigError::Missing(name));
        let expected = match get("CRONLEDGER_EXPECTED_RUNS_PER_MINUTE") {
            None => DEFAULT_EXPECTED_RUNS_PER_MINUTE,
            Some(v) => v.parse::<u64>().map_err(|_| ConfigError::Invalid {
                name: "CRONLEDGER_EXPECTED_RUNS_PER_MINUTE",
                value: v.clone(),
                problem: "must be a whole number".into(),
            })?,
        };
        let shards = match get("CRONLEDGER_SHARDS").as_deref() {
            None | Some("auto") => shards_for_fleet(expected),
            Some(v) => v
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_SHARDS).contains(n))
                .ok_or_else(|| ConfigError::Invalid {
                    name: "CRONLEDGER_SHARDS",
                    value: v.to_string(),
                    problem: "must be `auto` or a whole number from 1 to 1024".into(),
                })?,
        };
        Ok(Deployment {
            table: required("CRONLEDGER_TABLE")?,
            queue_prefix: required("CRONLEDGER_QUEUE_PREFIX")?,
            shards,
        })
    }

    /// Builds the clients (standard AWS environment), checks the shard count against the
    /// table's (a smaller one is refused: see `DynamoLedger::claim_shard_count`) and resolves
    /// the lanes' queue URLs.
    pub async fn connect(&self) -> Result<Connected, ConfigError> {
        let clients = AwsClients::from_env(&AwsSettings::default()).await;
        let ledger = DynamoLedger::new(&clients, self.table.clone(), self.shards);
        ledger
            .claim_shard_count()
            .await
            .map_err(ConfigError::Shards)?;
        let lanes = SqsLanes::resolve(clients.sqs.clone(), &self.queue_prefix).await?;
        Ok(Connected {
            ledger: Arc::new(ledger),
            lanes: Arc::new(lanes),
            clients,
        })
    }
}

/// A deployment's live handles.
#[derive(Clone)]
pub struct Connected {
    pub ledger: Arc<DynamoLedger>,
    pub lanes: Arc<SqsLanes>,
    pub clients: AwsClients,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_and_refuses_bad_shards() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let d = Deployment::from_lookup(env(&[
            ("CRONLEDGER_TABLE", "t"),
            ("CRONLEDGER_QUEUE_PREFIX", "q"),
        ]))
        .unwrap();
        assert_eq!(d.shards, 1);
        let fleet = Deployment::from_lookup(env(&[
            ("CRONLEDGER_TABLE", "t"),
            ("CRONLEDGER_QUEUE_PREFIX", "q"),
            ("CRONLEDGER_SHARDS", "auto"),
            ("CRONLEDGER_EXPECTED_RUNS_PER_MINUTE", "100000"),
        ]))
        .unwrap();
        assert_eq!(fleet.shards, 14);
        let fixed = Deployment::from_lookup(env(&[
            ("CRONLEDGER_TABLE", "t"),
            ("CRONLEDGER_QUEUE_PREFIX", "q"),
            ("CRONLEDGER_SHARDS", "3"),
            ("CRONLEDGER_EXPECTED_RUNS_PER_MINUTE", "100000"),
        ]))
        .unwrap();
        assert_eq!(fixed.shards, 3);
        assert!(matches!(
            Deployment::from_lookup(env(&[("CRONLEDGER_QUEUE_PREFIX", "q")])),
            Err(ConfigError::Missing("CRONLEDGER_TABLE"))
        ));
        assert!(matches!(
            Deployment::from_lookup(env(&[
                ("CRONLEDGER_TABLE", "t"),
                ("CRONLEDGER_QUEUE_PREFIX", "q"),
                ("CRONLEDGER_SHARDS", "0"),
            ])),
            Err(ConfigError::Invalid { .. })
        ));
    }
}
