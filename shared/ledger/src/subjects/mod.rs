//! Store subjects written once over an [`ItemEngine`](crate::engine::ItemEngine): both
//! stores implement their traits by calling these, so their requests, conditions and items
//! are the same by construction.

pub mod alerts;
pub mod backfills;
pub mod health;
pub mod release;
pub mod system;
