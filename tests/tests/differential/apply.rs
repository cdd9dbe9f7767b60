//! Applying a request to a store, and what came back, briefly.

use super::*;

/// Every store trait the operations call: both ledgers have them all.
pub(crate) trait Store: LedgerStore + OpsStore + AlertStore + HealthStore {}

impl<T: LedgerStore + OpsStore + AlertStore + HealthStore + ?Sized> Store for T {}

/// One store's answer: the value (as its `Debug` text) or the error's code.
pub(crate) enum Answer {
    Ok { full: String, brief: String },
    Err { code: &'static str, message: String },
}

impl PartialEq for Answer {
    fn eq(&self, other: &Answer) -> bool {
        match (self, other) {
            (Answer::Ok { full: a, .. }, Answer::Ok { full: b, .. }) => a == b,
            (Answer::Err { code: a, .. }, Answer::Err { code: b, .. }) => a == b,
            _ => false,
        }
    }
}

impl Answer {
    pub(crate) fn brief(&self) -> String {
        match self {
            Answer::Ok { brief, .. } => format!("Ok({brief})"),
            Answer::Err { code, .. } => format!("Err({code})"),
        }
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Answer::Ok { full, .. } => write!(f, "Ok({full})"),
            Answer::Err { message, .. } => write!(f, "Err({message})"),
        }
    }
}

/// A one-line summary of an answer, for the failure report's trace.
pub(crate) trait Brief {
    fn brief(&self) -> String;
}

impl Brief for () {
    fn brief(&self) -> String {
        "()".into()
    }
}

impl Brief for bool {
    fn brief(&self) -> String {
        self.to_string()
    }
}

impl Brief for u32 {
    fn brief(&self) -> String {
        self.to_string()
    }
}

impl Brief for Run {
    fn brief(&self) -> String {
        format!(
            "{} epoch {} attempts {}",
            self.status, self.lease_epoch, self.attempts
        )
    }
}

impl Brief for Created {
    fn brief(&self) -> String {
        match self {
            Created::New(run) => format!("New({})", run.brief()),
            Created::Existing(run) => format!("Existing({})", run.brief()),
        }
    }
}

impl Brief for StoredSchedule {
    fn brief(&self) -> String {
        format!(
            "v{} {} next {:?}",
            self.version,
            self.state,
            self.next_run_at.map(|at| at.to_rfc3339())
        )
    }
}

impl Brief for FireOutcome {
    fn brief(&self) -> String {
        match self {
            FireOutcome::Created => "Created".into(),
            FireOutcome::Lost {
                existing,
                schedule_moved,
            } => format!(
                "Lost(existing {:?}, moved {schedule_moved})",
                existing.as_ref().map(|r| r.brief())
            ),
        }
    }
}

impl Brief for Vec<FireOutcome> {
    fn brief(&self) -> String {
        let each: Vec<String> = self.iter().map(Brief::brief).collect();
        format!("[{}]", each.join(", "))
    }
}

impl Brief for Child {
    fn brief(&self) -> String {
        format!("{} epoch {}", self.status, self.lease_epoch)
    }
}

impl Brief for Backfill {
    fn brief(&self) -> String {
        format!("{} v{}", self.state, self.version)
    }
}

impl Brief for Option<Backfill> {
    fn brief(&self) -> String {
        self.as_ref().map_or("None".into(), |b| b.brief())
    }
}

impl Brief for Option<IdempotencyClaim> {
    fn brief(&self) -> String {
        self.as_ref()
            .map_or("None".into(), |c| format!("held by {}", c.run))
    }
}

pub(crate) fn answer<T: Debug + Brief>(result: &Result<T, StoreError>) -> Answer {
    match result {
        Ok(value) => Answer::Ok {
            full: format!("{value:?}"),
            brief: value.brief(),
        },
        Err(e) => Answer::Err {
            code: e.code(),
            message: e.to_string(),
        },
    }
}

/// What an answer tells the model.
pub(crate) enum Seen {
    Nothing,
    Schedule(StoredSchedule),
    Run(Run),
    Fired(Vec<FireOutcome>),
    Child(RunKey, Child),
    /// Children put: the ones not stored yet are now, as given.
    Children(RunKey, Vec<Child>),
    Backfill(Backfill),
}

pub(crate) fn seen<T>(result: Result<T, StoreError>, what: impl FnOnce(T) -> Seen) -> Seen {
    result.map_or(Seen::Nothing, what)
}

pub(crate) async fn apply(store: &dyn Store, request: &Request) -> (Answer, Seen) {
    match request {
        Request::CreateSchedule(spec, meta) => {
            let r = store.create_schedule(spec.clone(), meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::UpdateSchedule(spec, version, meta) => {
            let r = store
                .update_schedule(spec.clone(), *version, meta.clone())
                .await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Pause(id, version, meta) => {
            let r = store.pause_schedule(id, *version, meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Resume(id, version, meta) => {
            let r = store.resume_schedule(id, *version, meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Archive(id, version, meta) => {
            let r = store.archive_schedule(id, *version, meta.clone()).await;
            (answer(&r), seen(r, Seen::Schedule))
        }
        Request::Streak(id, change) => {
            let r = store.count_failure_streak(id, *change).await;
            (answer(&r), Seen::Nothing)
        }
        Request::CreateRun(run) => {
            let r = store.create_run(run).await;
            (answer(&r), seen(r, |c| Seen::Run(c.run().clone())))
        }
        Request::Fire(fire) => {
            let r = store.fire(fire).await;
            (answer(&r), seen(r, |o| Seen::Fired(vec![o])))
        }
        Request::FireAll(fires) => {
            let r = store.fire_all(fires).await;
            (answer(&r), seen(r, Seen::Fired))
        }
        Request::Transition(key, change) => {
            let r = store.transition_run(key, change).await;
            (answer(&r), seen(r, Seen::Run))
        }
        Request::PutChildren(parent, children) => {
            let r = store.put_children(parent, children).await;
            (
                answer(&r),
                seen(r, |()| Seen::Children(parent.clone(), children.clone())),
            )
        }
        Request::ChangeChild(parent, change) => {
            let r = store.change_child(parent, change).await;
            (answer(&r), seen(r, |c| Seen::Child(parent.clone(), c)))
        }
        Request::CountOutcome(id, on, outcome, count) => {
            let r = store.count_outcome(id, *on, *outcome, *count).await;
            (answer(&r), Seen::Nothing)
        }
        Request::CreateBackfill(b) => {
            let r = store.create_backfill(b).await;
            (answer(&r), seen(r, Seen::Backfill))
        }
        Request::PutBackfill(b) => {
            let r = store.put_backfill(b).await;
            let learned = match &r {
                Ok(Some(stored)) => Seen::Backfill(stored.clone()),
                _ => Seen::Nothing,
            };
            (answer(&r), learned)
        }
        Request::Claim(claim) => {
            let r = store.claim_idempotency(claim).await;
            (answer(&r), Seen::Nothing)
        }
        Request::RecordAlert(alert, at) => {
            let r = store.record_alert(alert, *at).await;
            (answer(&r), Seen::Nothing)
        }
        Request::AlertPublished(alert, at) => {
            let r = store.alert_published(alert, *at).await;
            (answer(&r), Seen::Nothing)
        }
    }
}
