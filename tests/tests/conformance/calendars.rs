//! Calendars: created, replaced under their version, read in one Query, deleted unless a
//! schedule that is not archived names them, every change audited; a name deleted and used
//! again continues its versions.

use chrono::Duration;
use cronledger_aws::{CalendarAction, StoreError};
use cronledger_core::calendar::CalendarSpec;
use cronledger_tests::{spec_with, t};
use serde_json::json;

use crate::{conformance, meta};

fn days(dates: &[&str]) -> CalendarSpec {
    CalendarSpec {
        exclude: dates.iter().map(|d| d.parse().expect("date")).collect(),
    }
}

conformance! {
    async fn calendars_are_put_under_their_version_and_audited(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-11-01T00:00:00Z");
        assert!(ledger.calendars().await.expect("none yet").0.is_empty());
        let missing = ledger.get_calendar("holidays").await.unwrap_err();
        assert_eq!(missing.code(), "CALENDAR_NOT_FOUND");

        let christmas = days(&["2026-12-25"]);
        let created = ledger
            .put_calendar("holidays", christmas.clone(), None, meta("alice", t0))
            .await
            .expect("create");
        assert_eq!((created.version, created.created_at), (1, t0));
        assert_eq!(created.updated_by, "alice");
        assert_eq!(ledger.get_calendar("holidays").await.expect("get"), created);

        // A create where one exists is refused, naming the version to replace.
        let taken = ledger
            .put_calendar("holidays", days(&["2027-01-01"]), None, meta("bob", t0))
            .await
            .unwrap_err();
        assert!(
            matches!(taken, StoreError::CalendarAlreadyExists { version: 1, .. }),
            "{taken}"
        );

        let t1 = t0 + Duration::days(1);
        let both = days(&["2026-12-24..2026-12-26", "2027-01-01"]);
        let replaced = ledger
            .put_calendar("holidays", both.clone(), Some(1), meta("bob", t1))
            .await
            .expect("replace");
        assert_eq!((replaced.version, replaced.created_at, replaced.updated_at), (2, t0, t1));

        // A replace based on a version no longer current loses, and changes nothing.
        let stale = ledger
            .put_calendar("holidays", days(&[]), Some(1), meta("carol", t1))
            .await
            .unwrap_err();
        assert!(
            matches!(stale, StoreError::CalendarVersionConflict { expected: 1, actual: 2, .. }),
            "{stale}"
        );
        assert_eq!(stale.code(), "CALENDAR_VERSION_CONFLICT");
        let absent = ledger
            .put_calendar("closures", days(&[]), Some(1), meta("carol", t1))
            .await
            .unwrap_err();
        assert_eq!(absent.code(), "CALENDAR_NOT_FOUND");

        ledger
            .put_calendar("closures", days(&["2026-08-15"]), None, meta("carol", t1))
            .await
            .expect("another");
        let set = ledger.calendars().await.expect("all");
        assert_eq!(set.0.keys().collect::<Vec<_>>(), ["closures", "holidays"]);
        assert_eq!(set.get("holidays"), Some(&both));
        let listed = ledger.list_calendars().await.expect("list");
        assert_eq!(
            listed.iter().map(|c| (c.name.as_str(), c.version)).collect::<Vec<_>>(),
            [("closures", 1), ("holidays", 2)]
        );

        let audit = ledger.calendar_audit("holidays").await.expect("audit");
        assert_eq!(audit.len(), 2, "{audit:?}");
        assert_eq!(
            (audit[0].version, audit[0].action, audit[0].actor.as_str()),
            (1, CalendarAction::Create, "alice")
        );
        assert_eq!((audit[0].before.as_ref(), audit[0].after.as_ref()), (None, Some(&christmas)));
        assert_eq!(
            (audit[1].version, audit[1].action, audit[1].note.as_str(), audit[1].at),
            (2, CalendarAction::Update, "bob did it", t1)
        );
        assert_eq!((audit[1].before.as_ref(), audit[1].after.as_ref()), (Some(&christmas), Some(&both)));
        assert!(ledger.calendar_audit("never").await.expect("none").is_empty());
    }

    async fn a_calendar_a_live_schedule_names_is_not_deleted(env: Env) {
        let ledger = &env.ledger;
        let t0 = t("2026-11-01T00:00:00Z");
        ledger
            .put_calendar("holidays", days(&["2026-12-25"]), None, meta("alice", t0))
            .await
            .expect("create");
        for id in ["uses-it", "also-uses-it"] {
            let spec = spec_with(id, "0 2 * * *", json!({"calendars": ["holidays"]}));
            ledger.create_schedule(spec, meta("alice", t0)).await.expect("schedule");
        }
        let other = spec_with("other", "0 3 * * *", json!({}));
        ledger.create_schedule(other, meta("alice", t0)).await.expect("schedule");

        let t1 = t0 + Duration::hours(1);
        let refused = ledger
            .delete_calendar("holidays", None, meta("bob", t1))
            .await
            .unwrap_err();
        match &refused {
            StoreError::CalendarInUse { schedules, .. } => {
                assert_eq!(schedules, &["also-uses-it", "uses-it"])
            }
            other => panic!("expected CALENDAR_IN_USE, got {other}"),
        }
        assert_eq!(refused.code(), "CALENDAR_IN_USE");
        assert_eq!(ledger.get_calendar("holidays").await.expect("kept").version, 1);

        // Archived schedules do not hold it; a stale version does not delete it.
        for id in ["uses-it", "also-uses-it"] {
            ledger.archive_schedule(id, None, meta("bob", t1)).await.expect("archive");
        }
        let stale = ledger
            .delete_calendar("holidays", Some(7), meta("bob", t1))
            .await
            .unwrap_err();
        assert_eq!(stale.code(), "CALENDAR_VERSION_CONFLICT");

        let deleted = ledger
            .delete_calendar("holidays", Some(1), meta("bob", t1))
            .await
            .expect("delete");
        assert_eq!((deleted.version, deleted.action), (2, CalendarAction::Delete));
        assert_eq!(deleted.after, None);
        assert_eq!(deleted.before, Some(days(&["2026-12-25"])));
        assert_eq!(
            ledger.get_calendar("holidays").await.unwrap_err().code(),
            "CALENDAR_NOT_FOUND"
        );
        assert!(ledger.calendars().await.expect("all").0.is_empty());
        let again = ledger.delete_calendar("holidays", None, meta("bob", t1)).await;
        assert_eq!(again.unwrap_err().code(), "CALENDAR_NOT_FOUND");

        // The name used again continues its versions; the log keeps the whole story.
        let t2 = t1 + Duration::hours(1);
        let recreated = ledger
            .put_calendar("holidays", days(&["2027-01-01"]), None, meta("carol", t2))
            .await
            .expect("again");
        assert_eq!((recreated.version, recreated.created_at), (3, t2));
        let actions: Vec<_> = ledger
            .calendar_audit("holidays")
            .await
            .expect("audit")
            .iter()
            .map(|e| (e.version, e.action))
            .collect();
        assert_eq!(
            actions,
            [
                (1, CalendarAction::Create),
                (2, CalendarAction::Delete),
                (3, CalendarAction::Create)
            ]
        );
    }
}
