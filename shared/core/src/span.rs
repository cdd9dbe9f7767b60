//! Human durations as the manifest writes them: `90s`, `30m`, `6h`, `2d`, or a sum like `1h30m`.

use std::fmt;
use std::str::FromStr;

use chrono::TimeDelta;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A non-negative whole number of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(u64);

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{input}` is not a duration like 90s, 30m, 6h, 2d or 1h30m")]
pub struct SpanParseError {
    pub input: String,
}

// Large enough for any schedule setting (about 31 years), small enough that
// every arithmetic use below stays far from overflow.
const MAX_SECONDS: u64 = 1_000_000_000;

impl Span {
    pub const ZERO: Span = Span(0);

    pub const fn seconds(s: u64) -> Span {
        Span(s)
    }
    pub const fn minutes(m: u64) -> Span {
        Span(m * 60)
    }
    pub const fn hours(h: u64) -> Span {
        Span(h * 3600)
    }
    pub const fn days(d: u64) -> Span {
        Span(d * 86_400)
    }
    pub const fn as_secs(self) -> u64 {
        self.0
    }
    pub fn as_delta(self) -> TimeDelta {
        // MAX_SECONDS keeps this inside i64.
        TimeDelta::seconds(self.0 as i64)
    }
    pub fn as_std(self) -> std::time::Duration {
        std::time::Duration::from_secs(self.0)
    }
    /// The span of a non-negative delta, rounded down to whole seconds.
    pub fn from_delta(delta: TimeDelta) -> Span {
        Span(delta.num_seconds().max(0) as u64)
    }
}

impl Span {
    /// For people: every unit from the largest, `5h 59m` or `36524d 5h 12m` (the `Display`
    /// form is the shortest exact spelling, `359m`, which configuration files use).
    pub fn humanized(self) -> String {
        if self.0 == 0 {
            return "0s".into();
        }
        let mut left = self.0;
        let mut parts = Vec::new();
        for (unit, suffix) in [(86_400, "d"), (3600, "h"), (60, "m"), (1, "s")] {
            if left >= unit {
                parts.push(format!("{}{suffix}", left / unit));
                left %= unit;
            }
        }
        parts.join(" ")
    }
}

impl FromStr for Span {
    type Err = SpanParseError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let err = || SpanParseError {
            input: input.to_string(),
        };
        let text = input.trim();
        if text.is_empty() {
            return Err(err());
        }
        if text == "0" {
            return Ok(Span(0));
        }
        let mut total: u64 = 0;
        let mut digits = String::new();
        for ch in text.chars() {
            if ch.is_ascii_digit() {
                digits.push(ch);
                continue;
            }
            let unit = match ch {
                's' => 1,
                'm' => 60,
                'h' => 3600,
                'd' => 86_400,
                'w' => 604_800,
                _ => return Err(err()),
            };
            let value: u64 = digits.parse().map_err(|_| err())?;
            digits.clear();
            total = value
                .checked_mul(unit)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(err)?;
        }
        if !digits.is_empty() || total > MAX_SECONDS {
            return Err(err());
        }
        Ok(Span(total))
    }
}

impl fmt::Display for Span {
    /// The shortest exact spelling, so `5400` seconds prints as `90m`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s == 0 {
            return f.write_str("0s");
        }
        for (unit, suffix) in [(86_400, "d"), (3600, "h"), (60, "m")] {
            if s % unit == 0 {
                return write!(f, "{}{}", s / unit, suffix);
            }
        }
        write!(f, "{s}s")
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_sums() {
        assert_eq!("90s".parse::<Span>().unwrap(), Span::seconds(90));
        assert_eq!("30m".parse::<Span>().unwrap(), Span::minutes(30));
        assert_eq!("6h".parse::<Span>().unwrap(), Span::hours(6));
        assert_eq!("2d".parse::<Span>().unwrap(), Span::days(2));
        assert_eq!("1h30m".parse::<Span>().unwrap(), Span::minutes(90));
        assert_eq!("0".parse::<Span>().unwrap(), Span::ZERO);
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "",
            "m",
            "10",
            "10x",
            "-5m",
            "1.5h",
            "99999999999999999999s",
            "100000d",
        ] {
            assert!(bad.parse::<Span>().is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn prints_shortest_exact_form() {
        assert_eq!(Span::seconds(5400).to_string(), "90m");
        assert_eq!(Span::seconds(90).to_string(), "90s");
        assert_eq!(Span::days(2).to_string(), "2d");
        assert_eq!(Span::ZERO.to_string(), "0s");
    }

    #[test]
    fn humanized_spells_every_unit_from_the_largest() {
        assert_eq!(Span::minutes(359).humanized(), "5h 59m");
        assert_eq!(Span::hours(5).humanized(), "5h");
        assert_eq!(Span::seconds(90).humanized(), "1m 30s");
        assert_eq!(Span::seconds(2 * 86_400 + 1).humanized(), "2d 1s");
        assert_eq!(Span::ZERO.humanized(), "0s");
    }
}
