//! cronledger core: pure, deterministic scheduling logic.
//!
//! No AWS SDK, no async runtime, no wall clock: every function takes the time it needs.

pub mod admission;
pub mod alerts;
pub mod attempt;
pub mod calendar;
pub mod children;
pub mod delay;
pub mod dependency;
pub mod dst;
pub mod error;
pub mod estimate;
pub mod health;
pub mod http_target;
pub mod jitter;
pub mod policy;
pub mod quality;
pub mod retention;
pub mod run;
pub mod schedule;
pub mod schema;
pub mod span;
pub mod spec;
pub mod steps;
pub mod timing;
pub mod tolerance;
pub mod window;

pub use attempt::{Attempt, AttemptEnd, AttemptOutcome, AttemptStart};
pub use delay::StartWait;
pub use error::{Code, Invalid, Issue};
pub use planner::{
    late_start, plan, plan_backlog, plan_until, planned_with_its_gap, Coverage, LateStart, Plan,
    PlanInput, PlannerConfig,
};
pub use policy::{Lane, MisfirePolicy, OverlapPolicy, Priority};
pub use run::{Reason, Run, RunEvent, RunKey, RunStatus, Trigger};
pub use schedule::Schedule;
pub use span::Span;
pub use spec::{JobSpec, ScheduleSpec, ValidationRules};
pub use timing::{CalendarStats, DstNote, Timing};
pub use window::{IdempotencyKey, Window};
pub mod overlap;
pub mod planner;
pub mod risk;
