//! `GET /v1/audit/completeness`: viewers read it; a bad, reversed, too long or future range
//! is refused before any read; the missing lists page with a cursor bound to the query.

use super::*;

const NOW: &str = "2026-03-10T12:00:30Z";

fn completeness(query: &str) -> String {
    format!("/v1/audit/completeness?{query}")
}

#[tokio::test]
async fn a_bad_reversed_too_long_or_future_range_is_refused() {
    let api = ApiEnv::new(t(NOW)).await;
    for (query, code) in [
        ("to=2026-03-10T01:00:00Z", "AUDIT_RANGE_INVALID"),
        ("from=2026-03-10T00:00:00Z", "AUDIT_RANGE_INVALID"),
        (
            "from=yesterday&to=2026-03-10T01:00:00Z",
            "AUDIT_RANGE_INVALID",
        ),
        (
            "from=2026-03-10T02:00:00Z&to=2026-03-10T01:00:00Z",
            "AUDIT_RANGE_INVALID",
        ),
        (
            "from=2026-03-10T01:00:00Z&to=2026-03-10T01:00:00Z",
            "AUDIT_RANGE_INVALID",
        ),
        (
            "from=2026-02-01T00:00:00Z&to=2026-03-04T00:00:01Z",
            "AUDIT_RANGE_TOO_LONG",
        ),
        (
            "from=2026-03-10T00:00:00Z&to=2026-03-10T13:00:00Z",
            "AUDIT_RANGE_INVALID",
        ),
    ] {
        let answer = api.get(VIEWER, &completeness(query)).await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{query}: {:?}",
            answer.body
        );
        assert_eq!(answer.code(), code, "{query}");
    }
    // Exactly 31 days, in a zone of its own: fine.
    let ok = api
        .get(
            VIEWER,
            &completeness("from=2026-02-07T00:00:00%2B09:00&to=2026-03-10T00:00:00%2B09:00"),
        )
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{:?}", ok.body);
    assert_eq!(ok.body["completeness"], json!(1.0));
    let unknown = api
        .get(
            VIEWER,
            &completeness("from=2026-03-10T00:00:00Z&to=2026-03-10T01:00:00Z&schedule=nope"),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.code(), "SCHEDULE_NOT_FOUND");
    let stranger = api
        .get(
            STRANGER,
            &completeness("from=2026-03-10T00:00:00Z&to=2026-03-10T01:00:00Z"),
        )
        .await;
    assert_eq!(stranger.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn the_missing_lists_page_with_a_cursor_bound_to_the_query() {
    let api = ApiEnv::new(t(NOW)).await;
    let meta = cronledger_aws::ChangeMeta {
        actor: "tests".into(),
        reason: "audit".into(),
        at: t("2026-03-10T00:00:00Z"),
        details: None,
    };
    let store = api.env.store.as_ref();
    store
        .create_schedule(cronledger_tests::spec("quiet", "0 * * * *"), meta)
        .await
        .expect("create");
    // Nothing was ever recorded: 00:00 is its creation, 01:00 to 11:00 are missing.
    let query = "from=2026-03-10T00:00:00Z&to=2026-03-10T12:00:00Z&max_missing=4";
    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..5 {
        let path = match &cursor {
            Some(c) => completeness(&format!("{query}&cursor={c}")),
            None => completeness(query),
        };
        let page = api.get(VIEWER, &path).await;
        assert_eq!(page.status, StatusCode::OK, "{:?}", page.body);
        let quiet = &page.body["schedules"][0];
        assert_eq!(
            (quiet["expected"].clone(), quiet["missing_count"].clone()),
            (json!(11), json!(11))
        );
        assert_eq!(page.body["completeness"], json!(0.0));
        for t in quiet["missing"].as_array().into_iter().flatten() {
            listed.push(t.as_str().unwrap_or_default().to_string());
        }
        cursor = page.body["next"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    let hours: Vec<String> = (1..=11)
        .map(|h| format!("2026-03-10T{h:02}:00:00Z"))
        .collect();
    assert_eq!(listed, hours);
    // A cursor of the first page with another query is refused.
    let first = api.get(VIEWER, &completeness(query)).await;
    let next = first.body["next"].as_str().unwrap_or_default();
    let other = api
        .get(
            VIEWER,
            &completeness(&format!(
                "from=2026-03-10T00:00:00Z&to=2026-03-10T11:00:00Z&max_missing=4&cursor={next}"
            )),
        )
        .await;
    assert_eq!(other.status, StatusCode::BAD_REQUEST);
    assert_eq!(other.code(), "CURSOR_INVALID");
}
