//! Mapping between the ledger's types and DynamoDB items.

pub mod alert;
pub mod attempt;
pub mod awaiting;
pub mod child;
pub mod health;
pub mod run;
pub mod schedule;
