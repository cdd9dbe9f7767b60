//! One case's names, the requests made of its operations, and what the memory store last
//! answered about them (the model that picks current and stale statuses and epochs).

use super::*;

/// A case's own ids on the shared table.
pub(crate) struct Names {
    pub(crate) case: u64,
}

impl Names {
    pub(crate) fn schedule(&self, s: usize) -> String {
        format!("d{}-{}", self.case, ["a", "b"][s])
    }

    pub(crate) fn spec(&self, s: usize) -> ScheduleSpec {
        spec(&self.schedule(s), CRON)
    }

    pub(crate) fn owns(&self, schedule_id: &str) -> bool {
        (0..SCHEDULES).any(|s| self.schedule(s) == schedule_id)
    }

    pub(crate) fn run_key(&self, r: RunRef) -> RunKey {
        RunKey {
            schedule_id: self.schedule(r.s),
            scheduled_for: window(r.w),
            origin: if r.manual {
                Origin::Manual("req-1".into())
            } else {
                Origin::Expected
            },
        }
    }

    pub(crate) fn backfill(&self, b: usize) -> String {
        format!("d{}-bf{b}", self.case)
    }
}

/// What the memory store last answered, to state the current status, epoch or version (or
/// a stale one) in later requests.
#[derive(Default)]
pub(crate) struct Model {
    pub(crate) schedules: BTreeMap<String, StoredSchedule>,
    pub(crate) runs: BTreeMap<RunKey, Run>,
    pub(crate) children: BTreeMap<(RunKey, u32), Child>,
    pub(crate) backfills: BTreeMap<String, Backfill>,
}

/// Another value than `current`: one below, or one above at 0.
pub(crate) fn stale(current: u64) -> u64 {
    current.checked_sub(1).unwrap_or(current + 1)
}

/// A request as sent to both stores.
#[derive(Debug, Clone)]
pub(crate) enum Request {
    CreateSchedule(ScheduleSpec, ChangeMeta),
    UpdateSchedule(ScheduleSpec, u64, ChangeMeta),
    Pause(String, Option<u64>, ChangeMeta),
    Resume(String, Option<u64>, ChangeMeta),
    Archive(String, Option<u64>, ChangeMeta),
    Streak(String, StreakChange),
    CreateRun(Run),
    Fire(Fire),
    FireAll(Vec<Fire>),
    Transition(RunKey, RunChange),
    PutChildren(RunKey, Vec<Child>),
    ChangeChild(RunKey, ChildChange),
    CountOutcome(String, NaiveDate, Outcome, u64),
    CreateBackfill(Backfill),
    PutBackfill(Backfill),
    Claim(IdempotencyClaim),
    RecordAlert(Alert, DateTime<Utc>),
    AlertPublished(Alert, DateTime<Utc>),
}

impl Request {
    /// The store operation it calls.
    pub(crate) fn operation(&self) -> &'static str {
        match self {
            Request::CreateSchedule(..) => "create_schedule",
            Request::UpdateSchedule(..) => "update_schedule",
            Request::Pause(..) => "pause_schedule",
            Request::Resume(..) => "resume_schedule",
            Request::Archive(..) => "archive_schedule",
            Request::Streak(..) => "count_failure_streak",
            Request::CreateRun(..) => "create_run",
            Request::Fire(..) => "fire",
            Request::FireAll(..) => "fire_all",
            Request::Transition(..) => "transition_run",
            Request::PutChildren(..) => "put_children",
            Request::ChangeChild(..) => "change_child",
            Request::CountOutcome(..) => "count_outcome",
            Request::CreateBackfill(..) => "create_backfill",
            Request::PutBackfill(..) => "put_backfill",
            Request::Claim(..) => "claim_idempotency",
            Request::RecordAlert(..) => "record_alert",
            Request::AlertPublished(..) => "alert_published",
        }
    }

    /// What the request states beyond its operation (for the failure report).
    pub(crate) fn describe(&self) -> String {
        match self {
            Request::UpdateSchedule(_, version, _) => format!("expected version {version}"),
            Request::Pause(_, v, _) | Request::Resume(_, v, _) | Request::Archive(_, v, _) => {
                format!("expected version {v:?}")
            }
            Request::CreateRun(run) => format!("{} {}", run.key, run.status),
            Request::Fire(fire) => describe_fire(fire),
            Request::FireAll(fires) => fires
                .iter()
                .map(describe_fire)
                .collect::<Vec<_>>()
                .join("; "),
            Request::Transition(key, c) => {
                let mut text = format!("{key}: {} from {} epoch {}", c.event(), c.from, c.epoch);
                let k = &c.transition;
                if let Some(lease) = k.lease() {
                    let _ = write!(text, " lease {}", lease.owner);
                }
                let extras: [(&str, Option<String>); 8] = [
                    ("reason", k.reason().map(|r| r.to_string())),
                    ("result", k.result().map(|r| format!("{r:?}"))),
                    ("lane", k.lane().map(|l| l.to_string())),
                    ("lane_was", k.lane_was().map(|l| l.to_string())),
                    ("catch_up", k.catch_up().map(str::to_string)),
                    (
                        "schedule_version",
                        k.schedule_version().map(|v| v.to_string()),
                    ),
                    ("children", k.children().map(|n| format!("{n:?}"))),
                    (
                        "coalesced_into",
                        k.coalesced_into().map(|at| at.to_rfc3339()),
                    ),
                ];
                for (name, value) in extras {
                    if let Some(value) = value {
                        let _ = write!(text, " {name} {value}");
                    }
                }
                text
            }
            Request::ChangeChild(key, c) => format!(
                "{key} child {}: {} -> {} epoch {}{}",
                c.index,
                c.from,
                c.to,
                c.epoch,
                if c.start_until.is_some() {
                    " start"
                } else {
                    ""
                }
            ),
            Request::PutBackfill(b) => format!("{} {} at version {}", b.id, b.state, b.version),
            Request::Claim(c) => format!("{} created {}", c.key, c.created_at.to_rfc3339()),
            _ => String::new(),
        }
    }
}

pub(crate) fn describe_fire(fire: &Fire) -> String {
    format!(
        "{} version {} expected {}",
        fire.run.key,
        fire.run.schedule_version,
        fire.expected_next_run_at.to_rfc3339()
    )
}

pub(crate) fn backfill(id: String, schedule_id: String, at: DateTime<Utc>) -> Backfill {
    let range = (window(0), window(WINDOWS - 1));
    running_backfill(id, schedule_id, range, WINDOWS as u64, at)
}

pub(crate) fn alert(schedule: String, kind: AlertKind, subject: usize, at: DateTime<Utc>) -> Alert {
    Alert {
        kind,
        severity: Severity::Warning,
        run: Some(format!("{schedule}/RUN#{}", at.to_rfc3339())),
        message: format!("{kind} on {schedule}"),
        schedule,
        owner: Some("payments".into()),
        window: Some(Window::new(at - Duration::hours(1), at)),
        console_url: None,
        at,
        subject: format!("subject-{subject}"),
    }
}

impl Model {
    /// The run `target` names: the `n`-th stored so far (by key), else a key of the space.
    pub(crate) fn target(&self, names: &Names, target: Target) -> RunKey {
        match target {
            Target::Stored(n) if !self.runs.is_empty() => self
                .runs
                .keys()
                .nth(n % self.runs.len())
                .cloned()
                .unwrap_or_else(|| {
                    names.run_key(RunRef {
                        s: 0,
                        w: 0,
                        manual: false,
                    })
                }),
            Target::Stored(n) => names.run_key(RunRef {
                s: 0,
                w: n % WINDOWS,
                manual: false,
            }),
            Target::Key(r) => names.run_key(r),
        }
    }

    /// The parent `target` names: the `n`-th of those with children, else as [`Model::target`].
    pub(crate) fn parent(&self, names: &Names, target: Target) -> RunKey {
        let parents: BTreeSet<&RunKey> = self.children.keys().map(|(parent, _)| parent).collect();
        match target {
            Target::Stored(n) if !parents.is_empty() => parents
                .iter()
                .nth(n % parents.len())
                .map(|k| (*k).clone())
                .unwrap_or_else(|| self.target(names, target)),
            _ => self.target(names, target),
        }
    }

    pub(crate) fn version(&self, id: &str) -> u64 {
        self.schedules.get(id).map_or(1, |s| s.version)
    }

    pub(crate) fn expect(&self, id: &str, choice: Expect) -> Option<u64> {
        match choice {
            Expect::Unset => None,
            Expect::Current => Some(self.version(id)),
            Expect::Stale => Some(stale(self.version(id))),
        }
    }

    pub(crate) fn counter(current: u64, choice: Counter) -> u64 {
        match choice {
            Counter::Current => current,
            Counter::Stale => stale(current),
        }
    }

    pub(crate) fn fire(
        &self,
        names: &Names,
        s: usize,
        w: usize,
        expected: Option<usize>,
        version: Counter,
        at: DateTime<Utc>,
    ) -> Fire {
        let id = names.schedule(s);
        let mut run = scheduled_run(&names.spec(s), window(w), at, "ticker");
        run.schedule_version = Model::counter(self.version(&id), version);
        let expected_next_run_at = match expected {
            Some(e) => window(e),
            None => self
                .schedules
                .get(&id)
                .and_then(|s| s.next_run_at)
                .unwrap_or(window(w)),
        };
        Fire {
            run,
            expected_next_run_at,
            next_run_at: Some(expected_next_run_at + Duration::minutes(5)),
        }
    }

    /// The request `op` (the `i`-th of its case) sends, stating what the model knows.
    pub(crate) fn request(&self, names: &Names, i: usize, op: &Op) -> Request {
        let at = op_at(i);
        match *op {
            Op::CreateSchedule { s } => Request::CreateSchedule(names.spec(s), meta("alice", at)),
            Op::UpdateSchedule { s, version, cron } => {
                let id = names.schedule(s);
                let edited = if cron {
                    spec(&id, "*/10 * * * *")
                } else {
                    spec_with(&id, CRON, serde_json::json!({ "owner": "someone-else" }))
                };
                let version = Model::counter(self.version(&id), version);
                Request::UpdateSchedule(edited, version, meta("bob", at))
            }
            Op::Pause { s, version } => {
                let id = names.schedule(s);
                let v = self.expect(&id, version);
                Request::Pause(id, v, meta("carol", at))
            }
            Op::Resume { s, version } => {
                let id = names.schedule(s);
                let v = self.expect(&id, version);
                Request::Resume(id, v, meta("carol", at))
            }
            Op::Archive { s, version } => {
                let id = names.schedule(s);
                let v = self.expect(&id, version);
                Request::Archive(id, v, meta("dave", at))
            }
            Op::Streak { s, failed } => Request::Streak(
                names.schedule(s),
                if failed {
                    StreakChange::Failed
                } else {
                    StreakChange::Succeeded
                },
            ),
            Op::CreateRun { run, status } => {
                let base = scheduled_run(&names.spec(run.s), window(run.w), at, "ticker");
                let mut new = if run.manual {
                    manual_run(&base, "req-1")
                } else {
                    base
                };
                new.status = status;
                if status == RunStatus::ManualRequired {
                    new.reason = Some(Reason::PolicyManual);
                } else if status == RunStatus::Skipped {
                    new.reason = Some(Reason::Missed);
                }
                Request::CreateRun(new)
            }
            Op::Fire {
                s,
                w,
                expected,
                version,
            } => Request::Fire(self.fire(names, s, w, expected, version, at)),
            Op::FireAll { w } => Request::FireAll(
                (0..SCHEDULES)
                    .map(|s| self.fire(names, s, w, None, Counter::Current, at))
                    .collect(),
            ),
            Op::Transition(ref m) => {
                let key = self.target(names, m.run);
                let known = self.runs.get(&key);
                let current = known.map_or(RunStatus::Pending, |r| r.status);
                let epoch = known.map_or(0, |r| r.lease_epoch);
                let from = match m.from {
                    Pick::Current => current,
                    Pick::Other(status) => status,
                };
                let event = match m.event {
                    EventPick::Allowed(n) => {
                        let allowed: Vec<RunEvent> = RunEvent::ALL
                            .iter()
                            .copied()
                            .filter(|e| transition(from, *e).is_ok())
                            .collect();
                        if allowed.is_empty() {
                            RunEvent::ALL[n % RunEvent::ALL.len()]
                        } else {
                            allowed[n % allowed.len()]
                        }
                    }
                    EventPick::Any(event) => event,
                };
                let lease = m
                    .lease
                    .then(|| LeaseGrant::new(format!("w{i}"), at + Duration::minutes(1)));
                let result = m.result.map(|count| RunResult {
                    count: Some(count),
                    error_code: (count % 2 == 1).then(|| "BOOM".to_string()),
                    ..RunResult::default()
                });
                let into = Some(key.scheduled_for + Duration::minutes(5));
                let transition = typed(event, m, lease, result, into);
                let change = RunChange::new(from, Model::counter(epoch, m.epoch), at, transition);
                Request::Transition(key, change)
            }
            Op::PutChildren { run, count } => Request::PutChildren(
                self.target(names, run),
                (0..count)
                    .map(|index| {
                        Child::new(0, index, serde_json::json!({ "i": index, "op": i }), at)
                    })
                    .collect(),
            ),
            Op::ChangeChild {
                run,
                index,
                from,
                epoch,
                to,
                start,
            } => {
                let key = self.parent(names, run);
                let known = self.children.get(&(key.clone(), index));
                let current = known.map_or(ChildStatus::Pending, |c| c.status);
                let current_epoch = known.map_or(0, |c| c.lease_epoch);
                let change = ChildChange {
                    step: 0,
                    index,
                    from: match from {
                        Pick::Current => current,
                        Pick::Other(status) => status,
                    },
                    epoch: Model::counter(current_epoch, epoch),
                    to,
                    at,
                    start_until: start.then(|| at + Duration::minutes(1)),
                    count: (to == ChildStatus::Success).then_some(2),
                    checksum: None,
                    error_code: (to == ChildStatus::Failed).then(|| "BOOM".to_string()),
                };
                Request::ChangeChild(key, change)
            }
            Op::CountOutcome {
                s,
                day: d,
                outcome,
                count,
            } => Request::CountOutcome(names.schedule(s), day(d), outcome, count),
            Op::CreateBackfill { b, s } => {
                Request::CreateBackfill(backfill(names.backfill(b), names.schedule(s), at))
            }
            Op::PutBackfill { b, state, version } => {
                let id = names.backfill(b);
                let mut next = self
                    .backfills
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| backfill(id, names.schedule(0), at));
                next.version = Model::counter(next.version, version);
                next.state = state;
                next.updated_at = at;
                next.held = (state == BackfillState::Paused).then(|| "realtime backlog".into());
                Request::PutBackfill(next)
            }
            Op::Claim { s, k, w, created } => {
                let id = names.schedule(s);
                let created_at = t0() + Duration::hours(created);
                Request::Claim(IdempotencyClaim {
                    key: format!("{id}:k{k}"),
                    run: RunKey {
                        schedule_id: id,
                        scheduled_for: window(w),
                        origin: Origin::Manual(format!("req-{i}")),
                    },
                    body_hash: (k == 0).then(|| "ab12".into()),
                    created_at,
                    expires_at: created_at + Duration::hours(24),
                })
            }
            Op::RecordAlert { s, kind, subject } => {
                Request::RecordAlert(alert(names.schedule(s), kind, subject, at), at)
            }
            Op::AlertPublished { s, kind, subject } => {
                Request::AlertPublished(alert(names.schedule(s), kind, subject, at), at)
            }
        }
    }

    /// Learns from the memory store's answer to `request`.
    pub(crate) fn learn(&mut self, request: &Request, seen: Seen) {
        match seen {
            Seen::Nothing => {}
            Seen::Schedule(s) => {
                self.schedules.insert(s.spec.id.clone(), s);
            }
            Seen::Run(run) => {
                self.runs.insert(run.key.clone(), run);
            }
            Seen::Fired(outcomes) => {
                let fires: Vec<&Fire> = match request {
                    Request::Fire(fire) => vec![fire],
                    Request::FireAll(fires) => fires.iter().collect(),
                    _ => Vec::new(),
                };
                for (fire, outcome) in fires.into_iter().zip(outcomes) {
                    match outcome {
                        FireOutcome::Created => {
                            self.runs.insert(fire.run.key.clone(), fire.run.clone());
                            if let Some(s) = self.schedules.get_mut(&fire.run.key.schedule_id) {
                                s.next_run_at = fire.next_run_at;
                            }
                        }
                        FireOutcome::Lost {
                            existing: Some(run),
                            ..
                        } => {
                            self.runs.insert(run.key.clone(), *run);
                        }
                        FireOutcome::Lost { existing: None, .. } => {}
                    }
                }
            }
            Seen::Child(parent, child) => {
                self.children.insert((parent, child.index), child);
            }
            Seen::Children(parent, children) => {
                for child in children {
                    self.children
                        .entry((parent.clone(), child.index))
                        .or_insert(child);
                }
            }
            Seen::Backfill(b) => {
                self.backfills.insert(b.id.clone(), b);
            }
        }
    }
}

/// The typed transition a generated change makes of `event` and what the case drew: each
/// kind takes the parts it carries; a kind drawn without a part it needs (a start without a
/// lease) becomes a bare decision, which both stores must refuse alike.
pub(crate) fn typed(
    event: RunEvent,
    m: &Move,
    lease: Option<LeaseGrant>,
    result: Option<RunResult>,
    into: Option<DateTime<Utc>>,
) -> Transition {
    let reason = m.reason;
    let decide = Transition::Decide { event, reason };
    let opening = match event {
        RunEvent::Start => Some(Opening::Start),
        RunEvent::Reclaim => Some(Opening::Reclaim),
        RunEvent::StartStep => Some(Opening::StartStep),
        _ => None,
    };
    let replay_group = m.catch_up.then(|| "g1".to_string());
    match (event, lease) {
        (_, Some(lease)) if opening.is_some() => Transition::Open {
            event: opening.unwrap_or(Opening::Start),
            lease,
            steps: None,
        },
        (RunEvent::Heartbeat, Some(lease)) => Transition::Heartbeat { lease },
        (RunEvent::AdvanceStep, Some(lease)) => Transition::HandOver {
            lease,
            steps: Vec::new(),
        },
        (RunEvent::AwaitChildren, Some(lease)) => Transition::AwaitChildren {
            lease,
            children: m.children.map(|total| ChildCounts {
                total,
                succeeded: 0,
                failed: 0,
                step: 0,
            }),
        },
        (RunEvent::Enqueue, _) => Transition::Enqueue {
            lane: m.lane,
            lane_was: m.lane_was,
            job_id: None,
            reason,
        },
        (RunEvent::Approve, _) => Transition::Approve { reason },
        (RunEvent::Retry, _) => Transition::Retry {
            reason,
            schedule_version: m.repin.then_some(2),
            cascade: Some(m.repin),
        },
        (
            RunEvent::PlanCatchUp | RunEvent::HoldForApproval | RunEvent::Skip | RunEvent::Coalesce,
            _,
        ) if replay_group.is_some() => Transition::Plan {
            event,
            reason,
            replay_group,
            lane: m.lane,
            coalesced_into: (event == RunEvent::Coalesce).then_some(into).flatten(),
        },
        (RunEvent::Coalesce, _) => Transition::Coalesce { reason, into },
        (RunEvent::HoldForApproval, _) => match reason {
            Some(reason) => Transition::Hold { reason, result },
            None => decide,
        },
        (event, _) => match Ending::of(event) {
            Some(ending) => Transition::End {
                event: ending,
                reason,
                result: result.unwrap_or_default(),
                steps: None,
            },
            None => decide,
        },
    }
}
