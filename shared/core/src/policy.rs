//! The per-schedule policy vocabulary: misfire, overlap, priority, lanes.

/// An enum whose variants are stored and printed as fixed names (serde, `Display`,
/// `FromStr`, `as_str`, `ALL`). Exported so the adapters name their own enums the same way.
#[macro_export]
macro_rules! named_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, ::serde::Serialize, ::serde::Deserialize, schemars::JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err(format!(
                        "unknown {} `{}`; expected one of {}",
                        $crate::policy::type_in_words(stringify!($name)),
                        other,
                        [$($text),+].join(", ")
                    )),
                }
            }
        }
    };
}

named_enum!(
    /// What to do with windows that were expected but never fired.
    MisfirePolicy {
        /// Record them as SKIPPED (MISSED).
        Skip => "SKIP",
        /// Run the latest one; coalesce the rest into it.
        RunOnce => "RUN_ONCE",
        /// Replay every one, capped and throttled.
        CatchUpAll => "CATCH_UP_ALL",
        /// Hold every one for an operator's approval.
        Manual => "MANUAL",
    }
);

named_enum!(
    /// What to do when a window comes due while an earlier run of the schedule is still active.
    OverlapPolicy {
        Allow => "ALLOW",
        /// Record the new window as SKIPPED (OVERLAP).
        SkipNew => "SKIP_NEW",
        /// Keep the new run PENDING until the active one ends, then run it.
        QueueNew => "QUEUE_NEW",
    }
);

named_enum!(
    Priority {
        Critical => "CRITICAL",
        High => "HIGH",
        Normal => "NORMAL",
        Low => "LOW",
    }
);

named_enum!(
    /// An SQS queue with its own DLQ and its own worker concurrency.
    Lane {
        /// Live CRITICAL and HIGH work.
        Realtime => "realtime",
        /// Live NORMAL and LOW work.
        Normal => "normal",
        /// Recent catch-up and small replays.
        Correction => "correction",
        /// Bulk history, lowest priority.
        Backfill => "backfill",
        /// Work an operator approved or started by hand.
        Manual => "manual",
    }
);

/// A type's name as people say it, for messages: `MisfirePolicy` -> `misfire policy`.
pub fn type_in_words(name: &str) -> String {
    let mut words = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            words.push(' ');
        }
        words.extend(c.to_lowercase());
    }
    words
}

impl Priority {
    /// The lane live (on-time) runs of this priority use.
    pub fn live_lane(self) -> Lane {
        match self {
            Priority::Critical | Priority::High => Lane::Realtime,
            Priority::Normal | Priority::Low => Lane::Normal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in MisfirePolicy::ALL {
            assert_eq!(p.as_str().parse::<MisfirePolicy>().unwrap(), *p);
        }
        for l in Lane::ALL {
            assert_eq!(l.as_str().parse::<Lane>().unwrap(), *l);
        }
        assert_eq!(
            "RUN_TWICE".parse::<MisfirePolicy>(),
            Err("unknown misfire policy `RUN_TWICE`; expected one of SKIP, RUN_ONCE, CATCH_UP_ALL, MANUAL".to_string())
        );
        assert_eq!(Priority::High.live_lane(), Lane::Realtime);
        assert_eq!(Priority::Low.live_lane(), Lane::Normal);
    }
}
