//! The grammar of every id a path carries, checked by [`super::extract::ApiPath`] before any
//! store call. The rule: an id that cannot exist (too long, a character no id has) is a 404
//! with its resource's not-found code, as an id that could exist but does not; it never
//! reaches the table, whose key limits would turn it into a server error.

use cronledger_core::spec::valid_id;

use super::error::ApiError;
use super::views::parse_run_id;

/// Longest id of an operator's run or of a backfill (the api makes them: `new_id`).
pub const ORIGIN_ID_MAX: usize = 64;

/// How much of a bad id a message repeats.
const SHOWN_MAX: usize = 80;

/// Checks one path parameter, by its name in the route table.
pub fn check_path_param(name: &str, value: &str) -> Result<(), ApiError> {
    match name {
        "id" if !valid_id(value) => Err(ApiError::not_found(
            "SCHEDULE_NOT_FOUND",
            format!("schedule `{}` does not exist", shown(value)),
        )),
        "backfill" if !valid_origin_id(value) => Err(ApiError::not_found(
            "BACKFILL_NOT_FOUND",
            format!("backfill `{}` does not exist", shown(value)),
        )),
        "replay" if !valid_origin_id(value) => Err(ApiError::not_found(
            "REPLAY_NOT_FOUND",
            format!("replay `{}` does not exist", shown(value)),
        )),
        "calendar" if !cronledger_core::calendar::valid_calendar_name(value) => {
            Err(ApiError::not_found(
                "CALENDAR_NOT_FOUND",
                format!("calendar `{}` does not exist", shown(value)),
            ))
        }
        "run" => parse_run_id("", value).map(|_| ()),
        _ => Ok(()),
    }
}

/// A backfill's id, or the request id of an operator's run: 1 to 64 ASCII letters, digits,
/// `-` or `_`.
pub fn valid_origin_id(id: &str) -> bool {
    (1..=ORIGIN_ID_MAX).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A bad id as a message repeats it: at most [`SHOWN_MAX`] characters.
pub fn shown(id: &str) -> String {
    if id.chars().count() <= SHOWN_MAX {
        id.to_string()
    } else {
        let head: String = id.chars().take(SHOWN_MAX).collect();
        format!("{head}... ({} bytes)", id.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_cannot_exist_are_not_found() {
        let long = "a".repeat(2048);
        for (name, value, code) in [
            ("id", long.as_str(), "SCHEDULE_NOT_FOUND"),
            ("id", "Has Space", "SCHEDULE_NOT_FOUND"),
            ("backfill", long.as_str(), "BACKFILL_NOT_FOUND"),
            ("backfill", "bf#1", "BACKFILL_NOT_FOUND"),
            ("run", "yesterday", "RUN_NOT_FOUND"),
        ] {
            let e = check_path_param(name, value).unwrap_err();
            assert_eq!((e.status.as_u16(), e.code.as_str()), (404, code), "{name}");
            assert!(e.message.len() < 200, "{}", e.message);
        }
        let suffix = format!("2026-03-01T02:00:00Z~M~{}", "x".repeat(1000));
        assert_eq!(
            check_path_param("run", &suffix).unwrap_err().code,
            "RUN_NOT_FOUND"
        );
        assert!(check_path_param("id", "nightly-report").is_ok());
        assert!(check_path_param("backfill", "bf19a2b3c4d5e6f7a8b9").is_ok());
        assert!(check_path_param("run", "2026-03-01T02:00:00Z~B~bf1").is_ok());
    }
}
