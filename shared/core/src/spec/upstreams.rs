//! `after` and `accept_partial`: the schedules whose run for a window must succeed first.
//! Only the field's own shape is checked here; whether the upstreams exist and form no
//! cycle is a check across schedules ([`crate::dependency::check_graph`]).

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::valid_id;
use crate::dependency::MAX_UPSTREAMS;
use crate::error::{Code, Issue};

pub(super) struct Upstreams {
    pub(super) after: Vec<String>,
    pub(super) accept_partial: bool,
}

pub(super) fn read(
    obj: &Map<String, Value>,
    own_id: Option<&str>,
    field: &dyn Fn(&str) -> String,
    issues: &mut Vec<Issue>,
) -> Upstreams {
    let mut problem = |at: &str, message: String| {
        issues.push(Issue::new(Code::ScheduleInvalidAfter, field(at), message));
    };
    let mut after = Vec::new();
    match obj.get("after") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            let mut seen = BTreeSet::new();
            for (i, item) in items.iter().enumerate() {
                let at = format!("after[{i}]");
                match item.as_str() {
                    Some(id) if !valid_id(id) => {
                        problem(&at, format!("`{id}` is not a schedule id"));
                    }
                    Some(id) if Some(id) == own_id => {
                        problem(&at, "a schedule cannot run after itself".into());
                    }
                    Some(id) if !seen.insert(id) => {
                        problem(&at, format!("`{id}` is named twice"));
                    }
                    Some(id) => after.push(id.to_string()),
                    None => problem(&at, "must be a schedule id".into()),
                }
            }
            if items.len() > MAX_UPSTREAMS {
                problem(
                    "after",
                    format!(
                        "at most {MAX_UPSTREAMS} upstream schedules, found {}",
                        items.len()
                    ),
                );
            }
        }
        Some(_) => problem("after", "must be a list of schedule ids".into()),
    }
    let accept_partial = match obj.get("accept_partial") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            problem("accept_partial", "must be true or false".into());
            false
        }
    };
    if accept_partial && after.is_empty() {
        problem(
            "accept_partial",
            "applies to upstream outcomes: it needs `after`".into(),
        );
    }
    Upstreams {
        after,
        accept_partial,
    }
}
