//! A schedule's choice of what DST does to its fire times (`dst: {gap, fold}`).
//!
//! The default is the rule the README documents: a fixed-time expression (one minute, one
//! hour) fires once at the first instant after a spring-forward gap and once, on the first
//! pass, in a fall-back overlap; an interval expression has no slots in the gap and fires in
//! both passes. A schedule may choose otherwise for either case.

use serde::{Deserialize, Serialize};

use crate::named_enum;

named_enum!(
    /// What a local time that does not exist (spring forward) does.
    GapRule {
        /// Fires once at the first instant after the gap.
        NextValid => "next_valid",
        /// Does not fire: the day has no such time.
        Skip => "skip",
    }
);

named_enum!(
    /// What a local time that happens twice (fall back) does.
    FoldRule {
        /// Fires on the first pass only.
        First => "first",
        /// Fires on both passes.
        Both => "both",
    }
);

/// The schedule's DST choice; an absent rule is the default for its expression's kind.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct DstChoice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<GapRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fold: Option<FoldRule>,
}

impl DstChoice {
    pub fn is_default(&self) -> bool {
        self.gap.is_none() && self.fold.is_none()
    }

    /// The rules that apply to an expression: the chosen ones, else the default for a
    /// fixed-time (`fixed_time`) or an interval expression.
    pub fn resolved(&self, fixed_time: bool) -> (GapRule, FoldRule) {
        let gap = self.gap.unwrap_or(if fixed_time {
            GapRule::NextValid
        } else {
            GapRule::Skip
        });
        let fold = self.fold.unwrap_or(if fixed_time {
            FoldRule::First
        } else {
            FoldRule::Both
        });
        (gap, fold)
    }
}
