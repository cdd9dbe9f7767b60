//! Operators' actions in a schedule's audit log, beside its versioned changes.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use super::{DynamoLedger, Expr};
use crate::codec::schedule as codec;
use crate::error::StoreError;
use crate::keys::{self, PK};
use crate::ledger::{AuditEntry, OperatorAction};

impl DynamoLedger {
    /// Reads the current version (so the entry sorts after that version's change), then puts
    /// the entry. An action changes no version, so it never races a schedule edit's
    /// transaction; one that lands during an edit sorts under the version it read.
    pub(super) async fn record_operator_action_impl(
        &self,
        action: &OperatorAction,
    ) -> Result<AuditEntry, StoreError> {
        let version = self.get_schedule_impl(&action.schedule_id).await?.version;
        let entry = AuditEntry {
            schedule_id: action.schedule_id.clone(),
            version,
            action: action.action,
            actor: action.actor.clone(),
            reason: action.reason.clone(),
            at: action.at,
            before: None,
            after: serde_json::Value::Null,
            details: Some(action.details.clone()),
        };
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
