//! Calendars through the api: created, read with their ETag, replaced under If-Match,
//! deleted unless a live schedule names them, each change in the calendar's audit log; a
//! schedule naming a calendar that does not exist is refused naming the field; every role
//! allowed and refused; bad documents refused with the core's codes.

use cronledger_aws::CalendarAction;
use cronledger_contract::{CalendarAuditLog, CalendarDeleted, CalendarList, CalendarView};

use super::*;

/// An answer read as its contract type (an unknown or missing field fails).
macro_rules! read {
    ($t:ty, $answer:expr) => {{
        let answer: &Answer = &$answer;
        serde_json::from_value::<$t>(answer.body.clone())
            .unwrap_or_else(|e| panic!("{e}: {:?}", answer.body))
    }};
}

async fn put_calendar(
    api: &ApiEnv,
    who: &str,
    name: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> Answer {
    let path = format!("/v1/calendars/{name}");
    api.call_with(
        Some(Caller::new(who)),
        Method::PUT,
        &path,
        Some(body),
        headers,
    )
    .await
}

#[tokio::test]
async fn calendars_are_created_replaced_under_if_match_deleted_and_audited() {
    let api = ApiEnv::new(t(NOW)).await;
    let empty = read!(CalendarList, api.get(VIEWER, "/v1/calendars").await);
    assert!(empty.items.is_empty());

    let christmas = json!({"exclude": ["2026-12-25"]});
    let created = put_calendar(
        &api,
        OPERATOR,
        "holidays",
        christmas.clone(),
        &[("Cronledger-Note", "bank holidays")],
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{:?}", created.body);
    assert_eq!(created.headers["etag"], "\"1\"");
    let view = read!(CalendarView, created);
    assert_eq!((view.name.as_str(), view.version), ("holidays", 1));
    assert_eq!(view.updated_by, OPERATOR);
    assert_eq!(
        view.exclude
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["2026-12-25"]
    );

    // A second create is refused, naming the version to replace.
    let taken = put_calendar(&api, ADMIN, "holidays", christmas.clone(), &[]).await;
    assert_eq!(
        (taken.status, taken.code()),
        (StatusCode::CONFLICT, "CALENDAR_ALREADY_EXISTS")
    );
    assert_eq!(taken.body["details"]["current_version"], 1);

    let got = api.get(VIEWER, "/v1/calendars/holidays").await;
    assert_eq!(
        (got.status, &got.headers["etag"]),
        (StatusCode::OK, &"\"1\"".parse().expect("header"))
    );
    assert_eq!(read!(CalendarView, got), view);

    // Replace under If-Match; a stale one is 412 with the current version.
    let season = json!({"exclude": ["2026-12-24..2026-12-26", "2027-01-01"]});
    let replaced = put_calendar(
        &api,
        ADMIN,
        "holidays",
        season.clone(),
        &[
            ("If-Match", "\"1\""),
            ("Cronledger-Note", "the whole season"),
        ],
    )
    .await;
    assert_eq!(replaced.status, StatusCode::OK, "{:?}", replaced.body);
    assert_eq!(replaced.headers["etag"], "\"2\"");
    let stale = put_calendar(
        &api,
        ADMIN,
        "holidays",
        christmas.clone(),
        &[("If-Match", "1")],
    )
    .await;
    assert_eq!(
        (stale.status, stale.code()),
        (StatusCode::PRECONDITION_FAILED, "CALENDAR_VERSION_CONFLICT")
    );
    assert_eq!(stale.body["details"]["current_version"], 2);
    let nowhere = put_calendar(
        &api,
        ADMIN,
        "closures",
        christmas.clone(),
        &[("If-Match", "1")],
    )
    .await;
    assert_eq!(
        (nowhere.status, nowhere.code()),
        (StatusCode::NOT_FOUND, "CALENDAR_NOT_FOUND")
    );

    put_calendar(&api, OPERATOR, "closures", json!({"exclude": []}), &[]).await;
    let listed = read!(CalendarList, api.get(VIEWER, "/v1/calendars").await);
    let names: Vec<(&str, u64)> = listed
        .items
        .iter()
        .map(|c| (c.name.as_str(), c.version))
        .collect();
    assert_eq!(names, [("closures", 1), ("holidays", 2)]);
    assert_eq!(listed.next, None);

    // A live schedule naming it holds it; archived, it no longer does.
    let mut doc = schedule_doc("settle", "0 2 * * *");
    doc["calendars"] = json!(["holidays"]);
    create(&api, doc).await;
    let in_use = api.delete(OPERATOR, "/v1/calendars/holidays", None).await;
    assert_eq!(
        (in_use.status, in_use.code()),
        (StatusCode::CONFLICT, "CALENDAR_IN_USE")
    );
    assert_eq!(in_use.body["details"]["schedules"], json!(["settle"]));
    let archived = api.post(ADMIN, "/v1/schedules/settle/archive", None).await;
    assert_eq!(archived.status, StatusCode::OK, "{:?}", archived.body);

    let stale_delete = api
        .call_with(
            Some(Caller::new(OPERATOR)),
            Method::DELETE,
            "/v1/calendars/holidays",
            None,
            &[("If-Match", "1")],
        )
        .await;
    assert_eq!(stale_delete.code(), "CALENDAR_VERSION_CONFLICT");
    let deleted = api
        .call_with(
            Some(Caller::new(OPERATOR)),
            Method::DELETE,
            "/v1/calendars/holidays",
            None,
            &[("Cronledger-Note", "moved to closures")],
        )
        .await;
    assert_eq!(deleted.status, StatusCode::OK, "{:?}", deleted.body);
    assert_eq!(
        read!(CalendarDeleted, deleted),
        CalendarDeleted {
            name: "holidays".into(),
            version: 3
        }
    );
    let gone = api.get(VIEWER, "/v1/calendars/holidays").await;
    assert_eq!(
        (gone.status, gone.code()),
        (StatusCode::NOT_FOUND, "CALENDAR_NOT_FOUND")
    );

    // The log outlives the calendar: every change with its actor, note, before and after.
    let log = read!(
        CalendarAuditLog,
        api.get(VIEWER, "/v1/calendars/holidays/audit").await
    );
    let story: Vec<(u64, CalendarAction, &str, &str)> = log
        .entries
        .iter()
        .map(|e| (e.version, e.action, e.actor.as_str(), e.note.as_str()))
        .collect();
    assert_eq!(
        story,
        [
            (1, CalendarAction::Create, OPERATOR, "bank holidays"),
            (2, CalendarAction::Update, ADMIN, "the whole season"),
            (3, CalendarAction::Delete, OPERATOR, "moved to closures"),
        ]
    );
    let as_json = |spec: &Option<cronledger_core::calendar::CalendarSpec>| {
        serde_json::to_value(spec).expect("json")
    };
    assert_eq!(
        (
            as_json(&log.entries[1].before),
            as_json(&log.entries[1].after)
        ),
        (christmas, season.clone())
    );
    assert_eq!(
        (
            as_json(&log.entries[2].before),
            as_json(&log.entries[2].after)
        ),
        (season, Value::Null)
    );
    let never = api.get(VIEWER, "/v1/calendars/never/audit").await;
    assert_eq!(
        (never.status, never.code()),
        (StatusCode::NOT_FOUND, "CALENDAR_NOT_FOUND")
    );
}

#[tokio::test]
async fn a_schedule_naming_an_unknown_calendar_is_refused_naming_the_field() {
    let api = ApiEnv::new(t(NOW)).await;
    put_calendar(
        &api,
        OPERATOR,
        "holidays",
        json!({"exclude": ["2026-12-25"]}),
        &[],
    )
    .await;
    let mut doc = schedule_doc("settle", "0 2 * * *");
    doc["calendars"] = json!(["holidays", "closures"]);
    let refused = api.post(ADMIN, "/v1/schedules", Some(doc.clone())).await;
    assert_eq!(
        (refused.status, refused.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "CALENDAR_UNKNOWN")
    );
    assert_eq!(
        refused.body["details"]["issues"][0]["field"],
        "calendars[1]"
    );
    assert_eq!(
        api.get(VIEWER, "/v1/schedules/settle").await.status,
        StatusCode::NOT_FOUND
    );

    doc["calendars"] = json!(["holidays"]);
    create(&api, doc.clone()).await;
    // A replace naming one that does not exist is refused too, and changes nothing.
    doc["calendars"] = json!(["closures"]);
    let replace = api
        .call_with(
            Some(Caller::new(ADMIN)),
            Method::PUT,
            "/v1/schedules/settle",
            Some(doc),
            &[("If-Match", "1")],
        )
        .await;
    assert_eq!(
        (replace.status, replace.code()),
        (StatusCode::UNPROCESSABLE_ENTITY, "CALENDAR_UNKNOWN")
    );
    assert_eq!(
        replace.body["details"]["issues"][0]["field"],
        "calendars[0]"
    );
    let kept = api.get(VIEWER, "/v1/schedules/settle").await;
    assert_eq!(kept.body["version"], 1);
}

#[tokio::test]
async fn calendar_roles_and_bad_documents() {
    let api = ApiEnv::new(t(NOW)).await;
    let body = || json!({"exclude": ["2026-12-25"]});
    // Writes need an operator; a viewer reads; a stranger does neither.
    let viewer = put_calendar(&api, VIEWER, "holidays", body(), &[]).await;
    assert_eq!(viewer.status, StatusCode::FORBIDDEN);
    assert_eq!(
        api.get(STRANGER, "/v1/calendars").await.status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        api.delete(VIEWER, "/v1/calendars/holidays", None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let anonymous = api.call(None, Method::GET, "/v1/calendars", None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

    for (bad, code) in [
        (json!({"exclude": ["2026-13-01"]}), "CALENDAR_INVALID"),
        (
            json!({"exclude": ["2026-12-26..2026-12-24"]}),
            "CALENDAR_INVALID",
        ),
        (
            json!({"exclude": ["2026-12-25"], "note": "why"}),
            "CALENDAR_INVALID",
        ),
        (json!(["2026-12-25"]), "CALENDAR_INVALID"),
    ] {
        let answer = put_calendar(&api, OPERATOR, "holidays", bad.clone(), &[]).await;
        assert_eq!(
            (answer.status, answer.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, code),
            "{bad}: {:?}",
            answer.body
        );
    }
    let many: Vec<String> = (0..1001)
        .map(|i| {
            format!(
                "{}",
                t("2027-01-01T00:00:00Z").date_naive() + TimeDelta::days(i)
            )
        })
        .collect();
    let too_many = put_calendar(&api, OPERATOR, "holidays", json!({"exclude": many}), &[]).await;
    assert_eq!(too_many.code(), "CALENDAR_INVALID");
    assert_eq!(too_many.body["details"]["issues"][0]["field"], "exclude");
    let bad_version =
        put_calendar(&api, OPERATOR, "holidays", body(), &[("If-Match", "soon")]).await;
    assert_eq!(bad_version.status, StatusCode::BAD_REQUEST);
    // A name no calendar can have is not found, before any read.
    let bad_name = api.get(VIEWER, "/v1/calendars/Bank%20Holidays").await;
    assert_eq!(
        (bad_name.status, bad_name.code()),
        (StatusCode::NOT_FOUND, "CALENDAR_NOT_FOUND")
    );
    assert!(read!(CalendarList, api.get(VIEWER, "/v1/calendars").await)
        .items
        .is_empty());

    let made = put_calendar(&api, OPERATOR, "holidays", body(), &[]).await;
    assert_eq!(made.status, StatusCode::CREATED, "{:?}", made.body);
    let by_admin = put_calendar(&api, ADMIN, "holidays", body(), &[("If-Match", "1")]).await;
    assert_eq!(by_admin.status, StatusCode::OK, "{:?}", by_admin.body);
}
