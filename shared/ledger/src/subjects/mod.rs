//! Store subjects written once over an [`ItemEngine`](crate::engine::ItemEngine): both
//! stores implement their traits through [`engine_subjects!`](crate::engine_subjects), so
//! their requests, conditions and items are the same by construction.

pub mod alerts;
pub mod backfills;
pub mod health;
pub mod release;
pub mod system;

/// Implements every store trait written over the item engine (alerts and trackers,
/// backfills, the system's items, release states, health) for `$store`, an
/// [`ItemEngine`](crate::engine::ItemEngine): one set of forwarding for both stores.
#[macro_export]
macro_rules! engine_subjects {
    ($store:ty) => {
        #[$crate::subjects::__private::async_trait]
        impl $crate::alerts::AlertStore for $store {
            async fn record_alert(
                &self,
                alert: &$crate::subjects::__private::Alert,
                at: $crate::subjects::__private::DateTime<$crate::subjects::__private::Utc>,
            ) -> ::std::result::Result<bool, $crate::error::StoreError> {
                $crate::subjects::alerts::record(self, alert, at).await
            }

            async fn alert_published(
                &self,
                alert: &$crate::subjects::__private::Alert,
                at: $crate::subjects::__private::DateTime<$crate::subjects::__private::Utc>,
            ) -> ::std::result::Result<(), $crate::error::StoreError> {
                $crate::subjects::alerts::published(self, alert, at).await
            }

            async fn unpublished_alerts(
                &self,
                limit: u32,
            ) -> ::std::result::Result<
                Vec<$crate::alerts::RecordedAlert>,
                $crate::error::StoreError,
            > {
                $crate::subjects::alerts::unpublished(self, limit).await
            }

            async fn alerts_of(
                &self,
                schedule: &str,
                limit: u32,
            ) -> ::std::result::Result<
                Vec<$crate::alerts::RecordedAlert>,
                $crate::error::StoreError,
            > {
                $crate::subjects::alerts::of_schedule(self, schedule, limit).await
            }

            async fn track_awaiting(
                &self,
                awaiting: &$crate::alerts::Awaiting,
                at: $crate::subjects::__private::DateTime<$crate::subjects::__private::Utc>,
            ) -> ::std::result::Result<bool, $crate::error::StoreError> {
                $crate::subjects::alerts::track(self, awaiting, at).await
            }

            async fn awaiting_due(
                &self,
                now: $crate::subjects::__private::DateTime<$crate::subjects::__private::Utc>,
                limit: u32,
            ) -> ::std::result::Result<Vec<$crate::alerts::Awaiting>, $crate::error::StoreError>
            {
                $crate::subjects::alerts::due(self, now, limit).await
            }

            async fn remind_awaiting(
                &self,
                awaiting: &$crate::alerts::Awaiting,
                next: Option<
                    $crate::subjects::__private::DateTime<$crate::subjects::__private::Utc>,
                >,
            ) -> ::std::result::Result<(), $crate::error::StoreError> {
                $crate::subjects::alerts::remind(self, awaiting, next).await
            }
        }

        #[$crate::subjects::__private::async_trait]
        impl $crate::ops::BackfillStore for $store {
            async fn create_backfill(
                &self,
                backfill: &$crate::ops::Backfill,
            ) -> ::std::result::Result<$crate::ops::Backfill, $crate::error::StoreError> {
                $crate::subjects::backfills::create(self, backfill).await
            }

            async fn get_backfill(
                &self,
                id: &str,
            ) -> ::std::result::Result<$crate::ops::Backfill, $crate::error::StoreError> {
                $crate::subjects::backfills::get(self, id).await
            }

            async fn put_backfill(
                &self,
                backfill: &$crate::ops::Backfill,
            ) -> ::std::result::Result<Option<$crate::ops::Backfill>, $crate::error::StoreError>
            {
                $crate::subjects::backfills::put(self, backfill).await
            }

            async fn open_backfills(
                &self,
            ) -> ::std::result::Result<Vec<$crate::ops::Backfill>, $crate::error::StoreError>
            {
                $crate::subjects::backfills::open(self).await
            }
        }

        #[$crate::subjects::__private::async_trait]
        impl $crate::ops::SystemStore for $store {
            async fn claim_idempotency(
                &self,
                claim: &$crate::ops::IdempotencyClaim,
            ) -> ::std::result::Result<
                Option<$crate::ops::IdempotencyClaim>,
                $crate::error::StoreError,
            > {
                $crate::subjects::system::claim(self, claim).await
            }

            async fn append_system_audit(
                &self,
                entry: &$crate::ops::SystemAuditEntry,
            ) -> ::std::result::Result<(), $crate::error::StoreError> {
                $crate::subjects::system::append_audit(self, entry).await
            }

            async fn system_audit(
                &self,
                limit: u32,
            ) -> ::std::result::Result<
                Vec<$crate::ops::SystemAuditEntry>,
                $crate::error::StoreError,
            > {
                $crate::subjects::system::audit(self, limit).await
            }

            async fn kill_switch(
                &self,
            ) -> ::std::result::Result<Option<$crate::ops::KillSwitch>, $crate::error::StoreError>
            {
                $crate::subjects::system::kill_switch(self).await
            }

            async fn put_kill_switch(
                &self,
                state: &$crate::ops::KillSwitch,
            ) -> ::std::result::Result<(), $crate::error::StoreError> {
                $crate::subjects::system::put_kill_switch(self, state).await
            }
        }

        #[$crate::subjects::__private::async_trait]
        impl $crate::control::ReleaseStateStore for $store {
            async fn release_state(
                &self,
                lane: $crate::subjects::__private::Lane,
            ) -> ::std::result::Result<
                Option<$crate::control::ReleaseState>,
                $crate::error::StoreError,
            > {
                $crate::subjects::release::get(self, lane).await
            }

            async fn put_release_state(
                &self,
                state: &$crate::control::ReleaseState,
            ) -> ::std::result::Result<bool, $crate::error::StoreError> {
                $crate::subjects::release::put(self, state).await
            }
        }

        #[$crate::subjects::__private::async_trait]
        impl $crate::health::HealthStore for $store {
            async fn count_outcome(
                &self,
                schedule: &str,
                day: $crate::subjects::__private::NaiveDate,
                outcome: $crate::health::Outcome,
                count: u64,
            ) -> ::std::result::Result<(), $crate::error::StoreError> {
                $crate::subjects::health::count(self, schedule, day, outcome, count).await
            }

            async fn outcome_days(
                &self,
                schedule: &str,
                from: $crate::subjects::__private::NaiveDate,
                through: $crate::subjects::__private::NaiveDate,
            ) -> ::std::result::Result<Vec<$crate::health::DayTally>, $crate::error::StoreError>
            {
                $crate::subjects::health::days(self, schedule, from, through).await
            }
        }
    };
}

/// What [`engine_subjects!`] names in the crates that expand it.
#[doc(hidden)]
pub mod __private {
    pub use async_trait::async_trait;
    pub use chrono::{DateTime, NaiveDate, Utc};
    pub use cronledger_core::alerts::Alert;
    pub use cronledger_core::Lane;
}
