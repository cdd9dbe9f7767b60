//! The AWS side of the commands that run the handlers on this machine (`local`, `simulate`):
//! the emulators (started through `infra/local/up` unless `AWS_ENDPOINT_URL` points somewhere
//! already, stopped again and their temporary folder removed on drop), and a fresh table and
//! lanes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cronledger_aws::lanes::LaneSettings;
use cronledger_aws::{AwsClients, AwsSettings, DynamoLedger, SqsLanes, TableDefinition};

use super::CliError;

/// The emulators this process started, stopped again when it ends.
pub struct Emulators {
    infra: PathBuf,
    state: PathBuf,
}

impl Drop for Emulators {
    fn drop(&mut self) {
        let stopped = Command::new(self.infra.join("local/down"))
            .env("CRONLEDGER_LOCAL_DIR", &self.state)
            .status();
        // The folder (PID files, logs) is this process's alone; it goes once nothing in it
        // is needed to stop an emulator. Kept when `down` failed, for the PIDs and logs.
        if stopped.is_ok_and(|s| s.success()) {
            let _ = std::fs::remove_dir_all(&self.state);
        }
    }
}

fn infra_dir() -> PathBuf {
    std::env::var_os("CRONLEDGER_INFRA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../infra"))
}

/// Starts the emulators through the same script the tests use and adopts its environment,
/// unless `AWS_ENDPOINT_URL` is set. `code` prefixes the error codes (`LOCAL`, `SIMULATE`).
pub fn emulators(code: &str) -> Result<Option<Emulators>, CliError> {
    if std::env::var_os("AWS_ENDPOINT_URL").is_some() {
        return Ok(None);
    }
    let infra = infra_dir();
    let state = std::env::temp_dir().join(format!("cronledger-local-{}", std::process::id()));
    // The script's progress goes to stderr, so a command's stdout stays its own output.
    let status = Command::new(infra.join("local/up"))
        .env("CRONLEDGER_LOCAL_DIR", &state)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| CliError::msg(format!("{code}_EMULATOR: cannot run infra/local/up: {e}")))?;
    let emulators = Emulators { infra, state };
    if !status.success() {
        return Err(CliError::msg(format!(
            "{code}_EMULATOR: infra/local/up failed (see above)"
        )));
    }
    let env = std::fs::read_to_string(emulators.state.join("env"))
        .map_err(|e| CliError::msg(format!("{code}_EMULATOR: no env file: {e}")))?;
    for line in env.lines() {
        if let Some((name, value)) = line.strip_prefix("export ").and_then(|l| l.split_once('=')) {
            // Called before the runtime's workers touch the environment.
            std::env::set_var(name, value);
        }
    }
    Ok(Some(emulators))
}

/// A fresh table named `name`, and the clients that made it.
pub struct Stack {
    pub clients: AwsClients,
    pub ledger: Arc<DynamoLedger>,
}

fn setup_error(code: &str, what: &str, e: &dyn std::fmt::Display) -> CliError {
    CliError::msg(format!("{code}_SETUP: {what}: {e}"))
}

pub async fn create(code: &str, name: &str, shards: u32) -> Result<Stack, CliError> {
    let clients = AwsClients::from_env(&AwsSettings::default()).await;
    TableDefinition::bundled()
        .map_err(|e| setup_error(code, "table definition", &e))?
        .create(&clients.dynamodb, name)
        .await
        .map_err(|e| setup_error(code, "create table", &e))?;
    let ledger = Arc::new(DynamoLedger::new(&clients, name.to_string(), shards));
    Ok(Stack { clients, ledger })
}

/// The five lanes (queues and dead-letter queues) named after `name`.
pub async fn create_lanes(
    code: &str,
    stack: &Stack,
    name: &str,
    settings: LaneSettings,
) -> Result<Arc<SqsLanes>, CliError> {
    lanes_on(code, &stack.clients, name, settings).await
}

/// The five lanes named after `name`, on `clients` (a stack without a table of its own).
pub async fn lanes_on(
    code: &str,
    clients: &AwsClients,
    name: &str,
    settings: LaneSettings,
) -> Result<Arc<SqsLanes>, CliError> {
    let lanes = SqsLanes::create(clients.sqs.clone(), name, settings)
        .await
        .map_err(|e| setup_error(code, "create lanes", &e))?;
    Ok(Arc::new(lanes))
}
