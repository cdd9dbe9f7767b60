use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use proptest::prelude::*;

use super::*;
use crate::spec::parse_manifest;
use crate::ValidationRules;

fn now() -> DateTime<Utc> {
    "2026-12-01T00:00:00Z".parse().expect("instant")
}

fn manifest(schedules: &[(&str, &[&str])]) -> String {
    let items: Vec<serde_json::Value> = schedules
        .iter()
        .map(|(id, after)| {
            serde_json::json!({"id": id, "cron": "0 * * * *", "timezone": "UTC",
                               "after": after, "job": {"type": "noop"}})
        })
        .collect();
    serde_json::json!({ "schedules": items }).to_string()
}

/// The schedules, validated without their `after`, then given it, so the graph checks
/// can be tested on graphs the manifest refuses.
fn specs(schedules: &[(&str, &[&str])]) -> Vec<ScheduleSpec> {
    let plain: Vec<(&str, &[&str])> = schedules.iter().map(|(id, _)| (*id, &[][..])).collect();
    let mut specs =
        parse_manifest(&manifest(&plain), &ValidationRules::default(), now()).expect("valid");
    for (spec, (_, after)) in specs.iter_mut().zip(schedules) {
        spec.after = after.iter().map(|s| s.to_string()).collect();
    }
    specs
}

/// The graph's problems, each field named by the schedule's position.
fn codes(schedules: &[(&str, &[&str])]) -> Vec<(String, String)> {
    let field = |id: &str| {
        let i = schedules
            .iter()
            .position(|(s, _)| *s == id)
            .unwrap_or(usize::MAX);
        format!("schedules[{i}].after")
    };
    check_graph(&specs(schedules), &field)
        .iter()
        .map(|i| (i.code.as_str().to_string(), i.field.clone()))
        .collect()
}

/// The field's own problems, as the manifest reports them.
fn field_codes(schedules: &[(&str, &[&str])]) -> Vec<(String, String)> {
    match parse_manifest(&manifest(schedules), &ValidationRules::default(), now()) {
        Ok(_) => Vec::new(),
        Err(invalid) => invalid
            .0
            .iter()
            .map(|i| (i.code.as_str().to_string(), i.field.clone()))
            .collect(),
    }
}

fn outcomes(pairs: &[(&str, RunStatus)]) -> BTreeMap<String, RunStatus> {
    pairs.iter().map(|(u, s)| (u.to_string(), *s)).collect()
}

fn after(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_window_waits_for_every_upstream_then_runs_or_is_skipped() {
    let ab = after(&["a", "b"]);
    assert_eq!(
        readiness(&ab, false, &outcomes(&[])),
        Readiness::Waiting {
            pending: after(&["a", "b"])
        }
    );
    assert_eq!(
        readiness(
            &ab,
            false,
            &outcomes(&[("a", RunStatus::Success), ("b", RunStatus::Running)])
        ),
        Readiness::Waiting {
            pending: after(&["b"])
        }
    );
    assert_eq!(
        readiness(
            &ab,
            false,
            &outcomes(&[("a", RunStatus::Success), ("b", RunStatus::Success)])
        ),
        Readiness::Ready
    );
    // One upstream failing settles it, whatever the others are doing.
    assert_eq!(
        readiness(&ab, false, &outcomes(&[("b", RunStatus::Failed)])),
        Readiness::Skip {
            upstream: "b".into(),
            status: RunStatus::Failed
        }
    );
    for status in [
        RunStatus::Skipped,
        RunStatus::Coalesced,
        RunStatus::Cancelled,
    ] {
        assert!(matches!(
            readiness(&ab, false, &outcomes(&[("a", status)])),
            Readiness::Skip { .. }
        ));
    }
    // PARTIAL_SUCCESS counts only when the schedule accepts it.
    let partial = outcomes(&[("a", RunStatus::PartialSuccess), ("b", RunStatus::Success)]);
    assert!(matches!(
        readiness(&ab, false, &partial),
        Readiness::Skip { .. }
    ));
    assert_eq!(readiness(&ab, true, &partial), Readiness::Ready);
}

#[test]
fn unknown_upstreams_and_cycles_are_refused_with_their_codes() {
    assert!(codes(&[
        ("extract", &[]),
        ("load", &["extract"]),
        ("report", &["load", "extract"])
    ])
    .is_empty());
    assert_eq!(
        codes(&[("load", &["extract"])]),
        [(
            "DEPENDENCY_UNKNOWN_UPSTREAM".to_string(),
            "schedules[0].after".to_string()
        )]
    );
    let cycle = codes(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"]), ("d", &["a"])]);
    assert_eq!(
        cycle,
        [(
            "DEPENDENCY_CYCLE".to_string(),
            "schedules[0].after".to_string()
        )],
        "one cycle, told once"
    );
    let issues = check_graph(
        &specs(&[("a", &["c"]), ("b", &["a"]), ("c", &["b"])]),
        &|id: &str| id.to_string(),
    );
    assert!(
        issues[0].message.contains("a -> b -> c -> a"),
        "{}",
        issues[0].message
    );
    // The field's own shape.
    let invalid_after = |field: &str| ("SCHEDULE_INVALID_AFTER".to_string(), field.to_string());
    assert_eq!(
        field_codes(&[("a", &["a"])])[0],
        invalid_after("schedules[a].after[0]")
    );
    assert_eq!(
        field_codes(&[("a", &[]), ("b", &["a", "a"])])[0],
        invalid_after("schedules[b].after[1]")
    );
    assert_eq!(
        field_codes(&[("a", &["Not An Id"])])[0],
        invalid_after("schedules[a].after[0]")
    );
    assert_eq!(field_codes(&[("a", &[]), ("b", &["a"])]), []);
}

#[test]
fn a_manifest_with_a_chain_is_accepted_and_one_on_another_grid_is_refused() {
    let chain = parse_manifest(
        &manifest(&[("a", &[]), ("b", &["a"]), ("c", &["b"])]),
        &ValidationRules::default(),
        now(),
    )
    .expect("a chain on one grid");
    assert_eq!(chain[2].after, ["b"]);

    let text = serde_json::json!({"schedules": [
        {"id": "a", "cron": "0 * * * *", "timezone": "UTC", "job": {"type": "noop"}},
        {"id": "b", "cron": "0 * * * *", "timezone": "Asia/Seoul", "after": ["a"], "job": {"type": "noop"}},
        {"id": "c", "cron": "30 * * * *", "timezone": "UTC", "after": ["a"], "job": {"type": "noop"}}
    ]})
    .to_string();
    let err = parse_manifest(&text, &ValidationRules::default(), now()).expect_err("refused");
    let found: Vec<(&str, &str)> = err
        .0
        .iter()
        .map(|i| (i.code.as_str(), i.field.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            ("DEPENDENCY_GRID_MISMATCH", "schedules[b].after"),
            ("DEPENDENCY_GRID_MISMATCH", "schedules[c].after")
        ]
    );
}

#[test]
fn an_upstream_window_reads_its_expected_entry_or_the_range_covering_it() {
    let spec = &specs(&[("a", &[]), ("b", &["a"])])[1];
    let at = |h: u32| -> DateTime<Utc> {
        format!("2026-12-01T{h:02}:00:00Z")
            .parse()
            .expect("instant")
    };
    let schedule = crate::Schedule::new(specs(&[("a", &[])])[0].clone()).expect("schedule");
    let run = |h: u32, status: RunStatus| {
        let mut r = schedule.pending_run(
            at(h),
            schedule.window_for(at(h)),
            Origin::Expected,
            crate::Trigger::Scheduled,
            at(h),
            1,
        );
        r.status = status;
        r
    };
    let mut range = run(2, RunStatus::Skipped);
    range.range_end = Some(at(4));
    range.count = 3;
    // An operator's run of 05:00 beside the expected one that is still running.
    let mut manual = run(5, RunStatus::Success);
    manual.key.origin = Origin::Manual("req-1".into());
    let runs = BTreeMap::from([(
        "a".to_string(),
        vec![
            run(1, RunStatus::Success),
            range,
            manual,
            run(5, RunStatus::Running),
        ],
    )]);
    let decided = decide_windows(spec, &[at(1), at(3), at(5), at(6)], &runs);
    let skip = Readiness::Skip {
        upstream: "a".into(),
        status: RunStatus::Skipped,
    };
    let waiting = Readiness::Waiting {
        pending: after(&["a"]),
    };
    assert_eq!(
        decided,
        [
            (at(1), Readiness::Ready),
            (at(3), skip),
            (at(5), waiting.clone()),
            (at(6), waiting)
        ]
    );
}

#[test]
fn accept_partial_needs_upstreams_and_the_fields_round_trip() {
    let text = serde_json::json!({"schedules": [
        {"id": "a", "cron": "0 * * * *", "timezone": "UTC", "accept_partial": true, "job": {"type": "noop"}}
    ]})
    .to_string();
    let err = parse_manifest(&text, &ValidationRules::default(), now()).expect_err("refused");
    assert_eq!(err.0[0].code, Code::ScheduleInvalidAfter);
    let specs = specs(&[("a", &[]), ("b", &["a"])]);
    assert!(specs[0].after.is_empty());
    let stored = serde_json::to_value(&specs[0]).expect("json");
    assert!(
        stored.get("after").is_none() && stored.get("accept_partial").is_none(),
        "unchanged for schedules without dependencies"
    );
    let b: ScheduleSpec =
        serde_json::from_value(serde_json::to_value(&specs[1]).expect("json")).expect("back");
    assert_eq!(b.after, ["a"]);
}

#[test]
fn a_chain_lists_upstreams_and_downstreams_nearest_first() {
    let specs = specs(&[
        ("extract", &[]),
        ("rates", &[]),
        ("aggregate", &["extract", "rates"]),
        ("report", &["aggregate"]),
        ("archive", &["report"]),
    ]);
    let c = chain(&specs, "report");
    assert_eq!(c.upstream, ["aggregate", "extract", "rates"]);
    assert_eq!(c.downstream, ["archive"]);
    assert_eq!(
        chain(&specs, "extract").downstream,
        ["aggregate", "report", "archive"]
    );
    assert_eq!(chain(&specs, "rates").upstream, Vec::<String>::new());
}

fn status() -> impl Strategy<Value = RunStatus> {
    prop::sample::select(RunStatus::ALL.to_vec())
}

/// A random graph over `n` schedules: each may run after any others (self-loops left out,
/// as the field check refuses them).
fn graph() -> impl Strategy<Value = Vec<Vec<usize>>> {
    (1usize..7).prop_flat_map(|n| {
        prop::collection::vec(prop::collection::btree_set(0..n, 0..n), n).prop_map(|sets| {
            sets.into_iter()
                .enumerate()
                .map(|(i, s)| s.into_iter().filter(|j| *j != i).collect())
                .collect()
        })
    })
}

/// Whether the graph has a cycle: Kahn's algorithm leaves some node unsorted.
fn has_cycle(edges: &[Vec<usize>]) -> bool {
    let n = edges.len();
    let mut waiting: Vec<usize> = edges.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..n).filter(|i| waiting[*i] == 0).collect();
    let mut sorted = 0;
    while let Some(done) = ready.pop() {
        sorted += 1;
        for (i, ups) in edges.iter().enumerate() {
            if ups.contains(&done) {
                waiting[i] -= 1;
                if waiting[i] == 0 {
                    ready.push(i);
                }
            }
        }
    }
    sorted < n
}

proptest! {
    /// Ready exactly when every upstream succeeded (partial with accept_partial); Skip names
    /// a terminal upstream that did not; otherwise Waiting lists the ones not ended.
    #[test]
    fn readiness_follows_the_upstream_outcomes(
        given in prop::collection::vec(prop::option::of(status()), 1..6),
        accept_partial in any::<bool>(),
    ) {
        let ups: Vec<String> = (0..given.len()).map(|i| format!("u{i}")).collect();
        let known: BTreeMap<String, RunStatus> = ups.iter().zip(&given)
            .filter_map(|(u, s)| s.map(|s| (u.clone(), s)))
            .collect();
        let ok = |s: &Option<RunStatus>| matches!(s, Some(RunStatus::Success))
            || (accept_partial && matches!(s, Some(RunStatus::PartialSuccess)));
        let spoiled = |s: &Option<RunStatus>| s.is_some_and(|x| x.is_terminal()) && !ok(s);
        match readiness(&ups, accept_partial, &known) {
            Readiness::Ready => prop_assert!(given.iter().all(ok)),
            Readiness::Skip { upstream, status } => {
                let first = given.iter().position(spoiled);
                prop_assert_eq!(Some(upstream), first.map(|i| ups[i].clone()));
                prop_assert!(status.is_terminal());
            }
            Readiness::Waiting { pending } => {
                prop_assert!(!given.iter().any(spoiled));
                let expected: Vec<String> = ups.iter().zip(&given)
                    .filter(|(_, s)| !ok(s)).map(|(u, _)| u.clone()).collect();
                prop_assert_eq!(pending, expected);
            }
            Readiness::Hold { upstream } => {
                prop_assert!(false, "no suspect was given, yet {} holds", upstream);
            }
        }
    }

    /// The manifest is refused for a cycle exactly when the graph has one.
    #[test]
    fn a_cycle_is_refused_exactly_when_there_is_one(edges in graph()) {
        let names: Vec<String> = (0..edges.len()).map(|i| format!("s{i}")).collect();
        let owned: Vec<(String, Vec<String>)> = names.iter().zip(&edges)
            .map(|(n, ups)| (n.clone(), ups.iter().map(|j| names[*j].clone()).collect()))
            .collect();
        let borrowed: Vec<(&str, Vec<&str>)> = owned.iter()
            .map(|(n, ups)| (n.as_str(), ups.iter().map(String::as_str).collect()))
            .collect();
        let listed: Vec<(&str, &[&str])> = borrowed.iter().map(|(n, u)| (*n, u.as_slice())).collect();
        let refused = codes(&listed).iter().any(|(code, _)| code == "DEPENDENCY_CYCLE");
        prop_assert_eq!(refused, has_cycle(&edges));
    }
}

#[test]
fn a_dependent_window_is_due_when_its_upstreams_ended_unless_the_chain_was_late() {
    let at: DateTime<Utc> = "2026-12-01T05:00:00Z".parse().expect("instant");
    let minutes = |m: i64| at + chrono::TimeDelta::minutes(m);
    let schedule = crate::Schedule::new(specs(&[("a", &[])])[0].clone()).expect("schedule");
    let ended = |trigger: crate::Trigger, lane: Option<crate::Lane>, end: i64| {
        let mut r = schedule.pending_run(
            at,
            schedule.window_for(at),
            Origin::Expected,
            trigger,
            at,
            1,
        );
        r.status = RunStatus::Success;
        r.lane = lane;
        r.completed_at = Some(minutes(end));
        r
    };
    let live = ended(crate::Trigger::Scheduled, Some(crate::Lane::Normal), 10);
    let slower = ended(crate::Trigger::Dependency, Some(crate::Lane::Normal), 25);
    // An upstream's run time never makes its dependent late: due at the last end.
    assert_eq!(due_from(at, [&live]), minutes(10));
    assert_eq!(due_from(at, [&live, &slower]), minutes(25));
    // A chain already late is due at the window itself.
    let caught_up = ended(crate::Trigger::CatchUp, Some(crate::Lane::Correction), 40);
    assert_eq!(due_from(at, [&live, &caught_up]), at);
    let late_dependent = ended(
        crate::Trigger::Dependency,
        Some(crate::Lane::Correction),
        40,
    );
    assert_eq!(due_from(at, [&late_dependent]), at);
    let backfill = ended(crate::Trigger::Backfill, Some(crate::Lane::Backfill), 40);
    assert_eq!(due_from(at, [&backfill]), at);
    let mut unended = live.clone();
    unended.completed_at = None;
    assert_eq!(due_from(at, [&unended]), at);
    let mut range = live.clone();
    range.range_end = Some(minutes(60));
    assert_eq!(due_from(at, [&range]), at);
}

proptest! {
    /// With qualities: a SUSPECT success holds the window exactly when everything else would
    /// make it ready and the dependent does not accept_suspect; the hold names the first
    /// suspect upstream. Without a suspect, the answer is the plain readiness.
    #[test]
    fn a_suspect_upstream_holds_the_window_unless_accepted(
        given in prop::collection::vec(prop::option::of((status(), any::<bool>())), 1..6),
        accept_partial in any::<bool>(),
        accept_suspect in any::<bool>(),
    ) {
        use crate::dependency::{readiness_of, UpstreamOutcome};
        let ups: Vec<String> = (0..given.len()).map(|i| format!("u{i}")).collect();
        let with_quality: BTreeMap<String, UpstreamOutcome> = ups.iter().zip(&given)
            .filter_map(|(u, g)| g.map(|(status, suspect)| {
                let suspect = suspect && status.is_success();
                (u.clone(), UpstreamOutcome { status, suspect })
            }))
            .collect();
        let plain: BTreeMap<String, RunStatus> = with_quality.iter()
            .map(|(u, o)| (u.clone(), o.status)).collect();
        let without = readiness(&ups, accept_partial, &plain);
        let first_suspect = ups.iter().find(|u| with_quality.get(*u).is_some_and(|o| o.suspect));
        let got = readiness_of(&ups, accept_partial, accept_suspect, &with_quality);
        match (&without, first_suspect) {
            (Readiness::Ready, Some(u)) if !accept_suspect => {
                prop_assert_eq!(got, Readiness::Hold { upstream: u.clone() });
            }
            _ => prop_assert_eq!(got, without),
        }
    }
}

#[test]
fn a_suspect_success_holds_and_accept_suspect_lets_it_through() {
    let after = vec!["a".to_string(), "b".to_string()];
    let ok = UpstreamOutcome {
        status: RunStatus::Success,
        suspect: false,
    };
    let suspect = UpstreamOutcome {
        status: RunStatus::Success,
        suspect: true,
    };
    let both = BTreeMap::from([("a".to_string(), ok), ("b".to_string(), suspect)]);
    assert_eq!(
        readiness_of(&after, false, false, &both),
        Readiness::Hold {
            upstream: "b".into()
        }
    );
    assert_eq!(readiness_of(&after, false, true, &both), Readiness::Ready);
    // Still waiting for `a`: not held yet.
    let one = BTreeMap::from([("b".to_string(), suspect)]);
    assert_eq!(
        readiness_of(&after, false, false, &one),
        Readiness::Waiting {
            pending: vec!["a".into()]
        }
    );
}
