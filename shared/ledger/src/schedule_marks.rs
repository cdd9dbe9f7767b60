//! The marks the reconciler and the worker keep on a schedule's item, apart from its rule
//! (no version condition): the watermark, the downstream list, the failure streak. Each is
//! one UpdateItem, planned once; both stores apply these [`Expr`]s.

use chrono::{DateTime, Utc};

use crate::codec::schedule as codec;
use crate::error::StoreError;
use crate::expr::Expr;
use crate::item::{n, s, time};
use crate::keys::PK;
use crate::ledger::StreakChange;

/// The reconciler's watermark moved to `through`, if it is still `expected` (compared as the
/// stored text). It only moves forward.
pub fn watermark(
    id: &str,
    expected: DateTime<Utc>,
    through: DateTime<Utc>,
) -> Result<Expr, StoreError> {
    if through < expected {
        return Err(StoreError::InvalidRequest(format!(
            "the watermark of `{id}` only moves forward"
        )));
    }
    let mut expr = Expr::new();
    expr.set(codec::RECONCILED_THROUGH, time(through))
        .eq(codec::RECONCILED_THROUGH, time(expected));
    Ok(expr)
}

/// The schedule's `downstream` list replaced (removed when empty); the schedule must exist.
pub fn downstream(downstream: &[String]) -> Result<Expr, StoreError> {
    let mut expr = Expr::new();
    if downstream.is_empty() {
        expr.remove(codec::DOWNSTREAM);
    } else {
        let list = serde_json::to_string(downstream)
            .map_err(|e| StoreError::InvalidRequest(e.to_string()))?;
        expr.set(codec::DOWNSTREAM, s(list));
    }
    expr.exists(PK);
    Ok(expr)
}

/// The failure streak moved by a run's end: one more failure (`1 + if_not_exists(streak,
/// 0)`: the attribute is absent while the streak is 0), or back to 0. The schedule must
/// exist.
pub fn failure_streak(change: StreakChange) -> Expr {
    let mut expr = Expr::new();
    match change {
        StreakChange::Failed => {
            expr.set_sum(codec::FAILURE_STREAK, n(1), codec::FAILURE_STREAK, n(0))
        }
        StreakChange::Succeeded => expr.set(codec::FAILURE_STREAK, n(0)),
    };
    expr.exists(PK);
    expr
}
