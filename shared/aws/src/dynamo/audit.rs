//! A schedule's audit log: operators' actions beside its versioned changes, and the spec
//! of one version read back from its change entry.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use cronledger_core::ScheduleSpec;

use super::{DynamoStore, Expr};
use crate::codec::schedule as codec;
use crate::error::StoreError;
use crate::item::key;
use crate::keys::{self, PK};
use crate::ledger::{AuditEntry, OperatorAction};
use crate::schedule_change as change;

impl DynamoStore {
    /// Reads the current version (so the entry sorts after that version's change), then puts
    /// the entry. An action changes no version, so it never races a schedule edit's
    /// transaction; one that lands during an edit sorts under the version it read.
    pub(super) async fn record_operator_action_impl(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError> {
        let version = self.get_schedule_impl(&action.schedule_id).await?.version;
        let entry = change::operator_entry(action, version);
        let tag = RandomState::new().hash_one((&action.actor, action.at.timestamp_micros()));
        let sk = keys::operator_audit_sk(
            version,
            action.at,
            action.action.as_str(),
            (tag & 0xffff_ffff) as u32,
        );
        let mut absent = Expr::new();
        absent.not_exists(PK);
        if self
            .put_if(codec::encode_audit(&entry, sk)?, &absent)
            .await?
        {
            Ok(entry)
        } else {
            Err(StoreError::InvalidRequest(
                "an operator action with the same instant and tag is already recorded".into(),
            ))
        }
    }
}

impl DynamoStore {
    /// One GetItem on `AUDIT#{version}`: every change writes that entry, with the spec it
    /// produced, in the change's own transaction, so a version the schedule ever had is
    /// readable there for as long as the schedule exists.
    pub(super) async fn schedule_spec_at_impl(
        &self,
        id: &str,
        version: u64,
    ) -> Result<ScheduleSpec, StoreError> {
        match self
            .get_item(key(keys::schedule_pk(id), keys::audit_sk(version)))
            .await?
        {
            Some(item) => codec::decode_audit_spec(&item),
            None => Err(StoreError::VersionNotFound {
                id: id.to_string(),
                version,
            }),
        }
    }
}
