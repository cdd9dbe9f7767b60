//! The api's contract: what every request carries and every answer holds, as types. The api
//! serialises these; the CLI and the tests deserialise them (an unknown or missing field is
//! an error that names it); `/openapi.json` and the published schemas are generated from them
//! ([`schemas`]), so the document, the server and its clients cannot drift apart.
//!
//! Instants are RFC3339 in UTC (`2026-03-01T02:00:00Z`, fractions only when there are any).

pub mod audit;
pub mod backfill;
pub mod calendar;
pub mod error;
pub mod replay;
pub mod requests;
pub mod run;
pub mod schedule;
pub mod schemas;
pub mod system;

pub use audit::*;
pub use backfill::*;
pub use calendar::*;
pub use error::ErrorBody;
pub use replay::*;
pub use requests::*;
pub use run::*;
pub use schedule::*;
pub use system::*;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One page of a listing: `next` is the cursor of the following page (`null` on the last).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "{T}Page")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}
