//! Child items: one per child of a run, under the run's schedule partition
//! (`CHILD#{run}#{step}#{index}`, see [`crate::keys::child_sk`]).

use cronledger_core::children::{Child, ChildStatus};
use cronledger_core::RunKey;

use crate::error::StoreError;
use crate::item::{Item, ItemReader, ItemWriter};
use crate::keys::{self, PK, SK};

pub const TYPE: &str = "type";
pub const CHILD_TYPE: &str = "CHILD";

pub const INDEX: &str = "index";
pub const STEP: &str = "step";
pub const STATUS: &str = "status";
pub const ATTEMPTS: &str = "attempts";
pub const LEASE_EPOCH: &str = "lease_epoch";
pub const LEASE_UNTIL: &str = "lease_until";
pub const PAYLOAD: &str = "payload";
pub const COUNT: &str = "count";
pub const CHECKSUM: &str = "checksum";
pub const ERROR_CODE: &str = "error_code";
pub const UPDATED_AT: &str = "updated_at";

pub fn encode(parent: &RunKey, child: &Child) -> Item {
    ItemWriter::new()
        .s(PK, keys::schedule_pk(&parent.schedule_id))
        .s(SK, keys::child_sk(parent, child.step, child.index))
        .s(TYPE, CHILD_TYPE)
        .n(INDEX, child.index)
        .n(STEP, child.step)
        .s(STATUS, child.status.as_str())
        .n(ATTEMPTS, child.attempts)
        .n(LEASE_EPOCH, child.lease_epoch)
        .opt_time(LEASE_UNTIL, child.lease_until)
        .s(PAYLOAD, child.payload.to_string())
        .opt_n(COUNT, child.count)
        .opt_s(CHECKSUM, child.checksum.as_deref())
        .opt_s(ERROR_CODE, child.error_code.as_deref())
        .time(UPDATED_AT, child.updated_at)
        .build()
}

pub fn decode(item: &Item) -> Result<Child, StoreError> {
    let r = ItemReader::new(item);
    r.expect_type(TYPE, CHILD_TYPE)?;
    Ok(Child {
        index: r.n(INDEX)?,
        step: r.n(STEP)?,
        status: r.parsed::<ChildStatus>(STATUS)?,
        attempts: r.n(ATTEMPTS)?,
        lease_epoch: r.n(LEASE_EPOCH)?,
        lease_until: r.opt_time(LEASE_UNTIL)?,
        payload: serde_json::from_str(r.s(PAYLOAD)?)
            .map_err(|e| r.malformed(PAYLOAD, format!("is not JSON: {e}")))?,
        count: r.opt_n(COUNT)?,
        checksum: r.opt_s(CHECKSUM)?.map(str::to_string),
        error_code: r.opt_s(ERROR_CODE)?.map(str::to_string),
        updated_at: r.time(UPDATED_AT)?,
    })
}
