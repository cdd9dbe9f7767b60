//! Upgrades: the current code reads what the previous release wrote. Each release's items
//! (every kind) and lane messages (every kind) are kept in `tests/fixtures/releases/<version>/`,
//! written by [`generate`] before the format changed.

#[path = "upgrade/ddb_json.rs"]
mod ddb_json;
#[path = "upgrade/fixtures.rs"]
mod fixtures;
#[path = "upgrade/generate.rs"]
mod generate;
#[path = "upgrade/mixed.rs"]
mod mixed;
#[path = "upgrade/reads.rs"]
mod reads;
#[path = "upgrade/stores.rs"]
mod stores;

use fixtures::{Release, RELEASES};

/// The item kinds every release's fixtures hold (issue 36: schedule, version, run with steps
/// and children, child, backfill, alert, tracker, health, audit, idempotency claim, system
/// flag), by file name.
const ITEM_KINDS: &[&str] = &[
    "schedule",
    "audit",
    "catalog_entry",
    "fire_mark",
    "run",
    "child",
    "backfill",
    "alert",
    "awaiting",
    "health",
    "idempotency",
    "kill_switch",
    "system_audit",
    "calendar",
    "calendar_audit",
    "release_state",
];

#[test]
fn every_release_has_fixtures_of_every_item_and_message_kind() {
    for version in RELEASES {
        let release = Release::read(version);
        for kind in ITEM_KINDS {
            let items = release.items.get(*kind).map_or(0, Vec::len);
            assert!(items > 0, "{version}: no `{kind}` items");
        }
        for lane in cronledger_core::Lane::ALL {
            let sent = release.messages.get(lane.as_str()).map_or(0, Vec::len);
            assert!(sent > 0, "{version}: no message on the {lane} lane");
        }
        let bodies: Vec<&String> = release.messages.values().flatten().collect();
        let child = bodies.iter().filter(|b| b.contains("\"child\"")).count();
        assert!(
            child > 0 && child < bodies.len(),
            "{version}: runs' and children's messages"
        );
    }
}
