//! Mapping between the ledger's types and DynamoDB items.

pub mod attempt;
pub mod run;
pub mod schedule;
