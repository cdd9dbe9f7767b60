//! The schedules a pass works from: listed once, then kept while no shard's catalog moves.
//!
//! Listing every schedule every pass made a sparse fleet's passes cost the fleet's size (1,000
//! daily schedules: about 145 read units a run, all of it the listing). Every change to what
//! a pass decides from — a create, an edit, a pause, a resume, an archive, a `downstream`
//! list — goes through the schedule's write that bumps its shard's catalog version in the
//! same transaction, so a warm reconciler reads the shards' fire marks (one small item each)
//! and lists again only when a version moved.
//!
//! What a kept copy may have behind is its watermark (and a worker's failure streak, which a
//! pass does not read): the reconciler's own moves, or a racing reconciler's. Watermarks only
//! move forward, so a copy's watermark at or past a window proves the window judged; a copy
//! that shows something due is read again before it is judged, and the copy follows that
//! read and the pass's own watermark moves. A pass then costs the marks plus one read per
//! schedule with something due.

use std::sync::{Mutex, PoisonError};

use cronledger_ledger::ledger::StoredSchedule;

use super::{ReconcileReport, Reconciler};

/// The schedules of one pass.
pub(super) struct Listing {
    pub schedules: Vec<StoredSchedule>,
    /// Read in this pass; otherwise kept from an earlier one (see the module docs).
    pub fresh: bool,
    /// Every page was read (a failed page leaves the pass a partial list).
    pub complete: bool,
}

/// What a warm reconciler keeps between passes: every schedule as listed, at the catalog
/// version each shard had before the listing began.
#[derive(Default)]
pub struct ListingCache(Mutex<Option<(Vec<u64>, Vec<StoredSchedule>)>>);

impl ListingCache {
    fn get(&self, versions: &[u64]) -> Option<Vec<StoredSchedule>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.as_ref()
            .filter(|(at, _)| at.as_slice() == versions)
            .map(|(_, schedules)| schedules.clone())
    }

    fn put(&self, versions: Vec<u64>, schedules: Vec<StoredSchedule>) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *kept = Some((versions, schedules));
    }

    /// Keeps `id`'s copy in step with a write the reconciler made or a read it did, so the
    /// next pass does not read it again for a window already judged.
    pub(super) fn update(&self, id: &str, change: impl FnOnce(&mut StoredSchedule)) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(copy) = kept
            .as_mut()
            .and_then(|(_, schedules)| schedules.iter_mut().find(|s| s.id() == id))
        {
            change(copy);
        }
    }

    /// Forgets the listing: the next pass lists again.
    pub(super) fn clear(&self) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *kept = None;
    }
}

impl Reconciler {
    /// The schedules of every shard (see the module docs).
    pub(super) async fn listing(&self, report: &mut ReconcileReport) -> Listing {
        // Read before the listing: a change landing in between leaves the kept version
        // behind, and the next pass lists again.
        let versions = self.catalog_versions(report).await;
        if let Some(schedules) = versions.as_deref().and_then(|v| self.listing.get(v)) {
            return Listing {
                schedules,
                fresh: false,
                complete: true,
            };
        }
        let (schedules, complete) = self.list_all(report).await;
        if let (true, Some(versions)) = (complete, versions) {
            self.listing.put(versions, schedules.clone());
        }
        Listing {
            schedules,
            fresh: true,
            complete,
        }
    }

    /// Each shard's catalog version; `None` when one could not be read (the pass lists).
    async fn catalog_versions(&self, report: &mut ReconcileReport) -> Option<Vec<u64>> {
        let mut versions = Vec::with_capacity(self.config.shards as usize);
        for shard in 0..self.config.shards {
            match self.store.fire_mark(shard).await {
                Ok(mark) => versions.push(mark.catalog_version),
                Err(e) => {
                    report.error(&format!("fire mark of shard {shard}"), &e.into());
                    return None;
                }
            }
        }
        Some(versions)
    }

    async fn list_all(&self, report: &mut ReconcileReport) -> (Vec<StoredSchedule>, bool) {
        let mut schedules = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            match self
                .store
                .list_schedules(self.config.page_size, cursor.as_deref())
                .await
            {
                Ok(page) => {
                    schedules.extend(page.items);
                    match page.next {
                        Some(next) => cursor = Some(next),
                        None => return (schedules, true),
                    }
                }
                Err(e) => {
                    report.error("list schedules", &e.into());
                    return (schedules, false);
                }
            }
        }
    }
}
