//! A schedule's lifecycle: pause, resume, archive, each with a note and, when the caller
//! names one, the version the change is based on (the api's `If-Match`).

use cronledger_contract::{Note, ScheduleView};

use super::Operator;
use crate::api::{views, Actor, ApiResult};

/// A change of a schedule's state.
#[derive(Clone, Copy)]
enum Lifecycle {
    Pause,
    Resume,
    Archive,
}

impl Operator {
    /// Pauses a schedule: it fires no more until resumed.
    pub async fn pause(
        &self,
        actor: &Actor,
        schedule_id: &str,
        note: Note,
        expected_version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        self.lifecycle(Lifecycle::Pause, actor, schedule_id, note, expected_version)
            .await
    }

    /// Resumes a paused schedule.
    pub async fn resume(
        &self,
        actor: &Actor,
        schedule_id: &str,
        note: Note,
        expected_version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        self.lifecycle(
            Lifecycle::Resume,
            actor,
            schedule_id,
            note,
            expected_version,
        )
        .await
    }

    /// Archives a schedule (it never fires again; its runs stay), unless others still run
    /// after it.
    pub async fn archive(
        &self,
        actor: &Actor,
        schedule_id: &str,
        note: Note,
        expected_version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        self.lifecycle(
            Lifecycle::Archive,
            actor,
            schedule_id,
            note,
            expected_version,
        )
        .await
    }

    async fn lifecycle(
        &self,
        change: Lifecycle,
        actor: &Actor,
        id: &str,
        note: Note,
        version: Option<u64>,
    ) -> ApiResult<ScheduleView> {
        let store = &self.deps().store;
        let stored = match change {
            Lifecycle::Pause => {
                let meta = self.api.meta(actor, note.text("paused through the api"));
                store.pause_schedule(id, version, meta).await?
            }
            Lifecycle::Resume => {
                let meta = self.api.meta(actor, note.text("resumed through the api"));
                store.resume_schedule(id, version, meta).await?
            }
            Lifecycle::Archive => {
                self.api.check_no_dependents(id).await?;
                let meta = self.api.meta(actor, note.text("archived through the api"));
                store.archive_schedule(id, version, meta).await?
            }
        };
        Ok(views::schedule(&stored))
    }
}
