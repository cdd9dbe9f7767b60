//! `after` and `accept_partial`: the schedules whose run for a window must succeed first,
//! and the grid (`cron` and `timezone`) a schedule with `after` inherits when it leaves it
//! out. Only the field's own shape is checked here; whether the upstreams exist and form
//! no cycle is a check across schedules ([`crate::dependency::check_graph`]).

use std::collections::{BTreeMap, BTreeSet};

use chrono_tz::Tz;
use serde_json::{Map, Value};

use super::{valid_id, ScheduleSpec};
use crate::dependency::MAX_UPSTREAMS;
use crate::dst::DstChoice;
use crate::error::{Code, Issue};
use crate::timing::Timing;

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

/// A window grid as written: the expression and the zone's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    pub cron: String,
    pub timezone: String,
}

impl Grid {
    /// The grid a validated schedule fires on.
    pub fn of(spec: &ScheduleSpec) -> Grid {
        Grid {
            cron: spec.cron.clone(),
            timezone: spec.timezone.name().to_string(),
        }
    }
}

/// What is known of an upstream's grid when a dependent inherits it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamGrid {
    Known(Grid),
    /// No such schedule (or an archived one).
    Unknown,
    /// The upstream exists but has no valid grid of its own; its own issues say why.
    Unresolved,
    /// The upstream is itself still inheriting its grid from this schedule: a cycle.
    Cycle,
}

/// How a schedule's grid was settled before it is validated.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Inherited {
    /// It inherits nothing (it names its grid, or has no `after`): validated as written.
    AsWritten,
    /// The document with the `cron` and `timezone` it left out taken from its upstreams.
    Filled(Value),
    /// It cannot inherit; the issues say why (none when an upstream's own issues do).
    Failed(Vec<Issue>),
}

/// Settles the grid of a schedule with `after` that leaves out `cron` or `timezone`: each
/// one left out is its upstreams' (`grid_of` tells each upstream's), and they must share one
/// grid, since a dependent window is its upstreams' window of the same fire time.
pub(super) fn inherit_grid(
    doc: &Value,
    field: &dyn Fn(&str) -> String,
    grid_of: &mut dyn FnMut(&str) -> UpstreamGrid,
) -> Inherited {
    let Some(obj) = doc.as_object() else {
        return Inherited::AsWritten;
    };
    let given = |name: &str| !matches!(obj.get(name), None | Some(Value::Null));
    if given("cron") && given("timezone") {
        return Inherited::AsWritten;
    }
    let own_id = obj.get("id").and_then(Value::as_str).unwrap_or_default();
    // Entries the field's own check refuses are left to it.
    let upstreams: Vec<&str> = obj
        .get("after")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|id| valid_id(id) && *id != own_id)
        .take(MAX_UPSTREAMS)
        .collect();
    if upstreams.is_empty() {
        return Inherited::AsWritten;
    }
    let mut issues = Vec::new();
    let mut unresolved = false;
    let mut grids: Vec<(&str, Grid)> = Vec::new();
    for upstream in upstreams {
        match grid_of(upstream) {
            UpstreamGrid::Known(grid) => grids.push((upstream, grid)),
            UpstreamGrid::Unresolved => unresolved = true,
            UpstreamGrid::Unknown => issues.push(Issue::new(
                Code::DependencyUnknownUpstream,
                field("after"),
                format!(
                    "`{own_id}` runs after `{upstream}` (and takes its grid from it), which is not a schedule"
                ),
            )),
            UpstreamGrid::Cycle => issues.push(Issue::new(
                Code::DependencyCycle,
                field("after"),
                format!(
                    "`{own_id}` takes its grid from `{upstream}`, which takes its own from `{own_id}`: \
                     dependencies go round in a cycle"
                ),
            )),
        }
    }
    if let Some((first, grid)) = grids.first() {
        if let Some((other, different)) = grids.iter().find(|(_, g)| g != grid) {
            issues.push(Issue::new(
                Code::DependencyGridMismatch,
                field("after"),
                format!(
                    "`{own_id}` names no grid and its upstreams fire on different ones: `{first}` \
                     ({} {}) and `{other}` ({} {}); give `cron` and `timezone`",
                    grid.cron, grid.timezone, different.cron, different.timezone
                ),
            ));
        }
    }
    if unresolved || !issues.is_empty() {
        return Inherited::Failed(issues);
    }
    let Some((_, grid)) = grids.into_iter().next() else {
        return Inherited::AsWritten;
    };
    let mut filled = obj.clone();
    for (name, value) in [("cron", grid.cron), ("timezone", grid.timezone)] {
        if !given(name) {
            filled.insert(name.to_string(), Value::String(value));
        }
    }
    Inherited::Filled(Value::Object(filled))
}

/// The grid each schedule of a manifest inherits, through chains (`c` after `b` after `a`,
/// only `a` naming a grid), each schedule settled once.
pub(super) fn inherit_manifest_grids(docs: &[Value], prefixes: &[String]) -> Vec<Inherited> {
    let mut first_by_id: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, doc) in docs.iter().enumerate() {
        if let Some(id) = doc.get("id").and_then(Value::as_str) {
            first_by_id.entry(id).or_insert(i);
        }
    }
    let mut manifest = ManifestGrids {
        docs,
        prefixes,
        first_by_id,
        slots: vec![Slot::Todo; docs.len()],
    };
    (0..docs.len())
        .map(|i| {
            manifest.settle(i);
            match &manifest.slots[i] {
                Slot::Done(inherited) => inherited.clone(),
                _ => Inherited::AsWritten,
            }
        })
        .collect()
}

#[derive(Clone)]
enum Slot {
    Todo,
    Settling,
    Done(Inherited),
}

struct ManifestGrids<'a> {
    docs: &'a [Value],
    prefixes: &'a [String],
    first_by_id: BTreeMap<&'a str, usize>,
    slots: Vec<Slot>,
}

impl ManifestGrids<'_> {
    /// Settles schedule `i` (and, first, the upstreams it inherits from); its grid.
    fn settle(&mut self, i: usize) -> UpstreamGrid {
        match &self.slots[i] {
            Slot::Settling => return UpstreamGrid::Cycle,
            Slot::Done(inherited) => return self.grid(i, inherited),
            Slot::Todo => {}
        }
        self.slots[i] = Slot::Settling;
        let prefix = self.prefixes[i].clone();
        let field = |name: &str| format!("{prefix}.{name}");
        let docs = self.docs;
        let inherited = inherit_grid(&docs[i], &field, &mut |upstream| match self
            .first_by_id
            .get(upstream)
            .copied()
        {
            Some(j) => self.settle(j),
            None => UpstreamGrid::Unknown,
        });
        let grid = self.grid(i, &inherited);
        self.slots[i] = Slot::Done(inherited);
        grid
    }

    /// The grid schedule `i` fires on once settled: known only when it is a valid one.
    fn grid(&self, i: usize, inherited: &Inherited) -> UpstreamGrid {
        let doc = match inherited {
            Inherited::AsWritten => &self.docs[i],
            Inherited::Filled(doc) => doc,
            Inherited::Failed(_) => return UpstreamGrid::Unresolved,
        };
        let text = |name: &str| doc.get(name).and_then(Value::as_str);
        let (Some(cron), Some(timezone)) = (text("cron"), text("timezone")) else {
            return UpstreamGrid::Unresolved;
        };
        // The grid is known only when the upstream is valid with its own DST choice (a
        // `dst` on a rate is refused, an unreadable one too): otherwise it is unresolved, and
        // the upstream's own issues say why.
        let dst = match doc.get("dst") {
            None | Some(Value::Null) => Some(DstChoice::default()),
            Some(v) => serde_json::from_value::<DstChoice>(v.clone()).ok(),
        };
        let valid = |tz: Tz| {
            dst.is_some_and(|dst| {
                Timing::parse(cron, tz).is_ok_and(|t| t.with_checked_dst(dst).is_ok())
            })
        };
        match timezone.parse::<Tz>() {
            Ok(tz) if valid(tz) => UpstreamGrid::Known(Grid {
                cron: cron.to_string(),
                timezone: timezone.to_string(),
            }),
            _ => UpstreamGrid::Unresolved,
        }
    }
}
