//! Mapping between the ledger's types and DynamoDB items.

pub mod run;
pub mod schedule;
