//! Small control items the reconciler keeps beside the ledger: the release state of each
//! catch-up lane (paused or not, why, since when, when it last released), so that pauses and
//! resumes are recorded with their cause and survive from one invocation to the next.

use chrono::{DateTime, Utc};
use cronledger_core::Lane;

use crate::error::StoreError;
use crate::layer::store_trait;

/// The release state of one lane: `PK=RELEASE#{lane}`, `SK=STATE`.
#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseState {
    pub lane: Lane,
    pub paused: bool,
    /// Why it is paused (or, once resumed, why it was last paused).
    pub cause: Option<String>,
    /// When the current state (paused or released) began.
    pub since: DateTime<Utc>,
    /// When runs were last released on this lane (for the rate limit).
    pub last_release_at: Option<DateTime<Utc>>,
    /// The lane's DLQ depth at the last look (DLQ growth is measured against it).
    pub dlq_depth: Option<u64>,
    /// Optimistic-concurrency version: 0 for a state never stored.
    pub version: u64,
}

impl ReleaseState {
    /// The state of a lane nobody has written yet: released, nothing known.
    pub fn initial(lane: Lane, at: DateTime<Utc>) -> ReleaseState {
        ReleaseState {
            lane,
            paused: false,
            cause: None,
            since: at,
            last_release_at: None,
            dlq_depth: None,
            version: 0,
        }
    }
}

store_trait! {
    /// Where the release states live.
    pub trait ReleaseStateStore {
    async fn release_state(&self, lane: Lane) -> Result<Option<ReleaseState>, StoreError>;

    /// Stores `state` if the stored version is still `state.version` (absent for 0), at
    /// `state.version + 1`. `false` when another writer got there first.
    async fn put_release_state(&self, state: &ReleaseState) -> Result<bool, StoreError>;
}
}
