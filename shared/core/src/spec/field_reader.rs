//! Typed reads of a schedule document's fields, each bad one recorded as a problem.

use super::*;

/// Reads typed fields out of a JSON object, recording a problem for each bad one.
pub(super) struct FieldReader<'a> {
    pub(super) obj: &'a Map<String, Value>,
    pub(super) issues: &'a mut Vec<Issue>,
    pub(super) field: &'a dyn Fn(&str) -> String,
}

impl FieldReader<'_> {
    pub(super) fn wrong_type(&mut self, name: &str, expected: &str) {
        let got = self.obj.get(name).map(type_name).unwrap_or("nothing");
        self.issues.push(Issue::new(
            Code::ScheduleInvalidField,
            (self.field)(name),
            format!("`{name}` must be {expected}, found {got}"),
        ));
    }

    pub(super) fn required_str(&mut self, name: &str) -> Option<String> {
        match self.obj.get(name) {
            None | Some(Value::Null) => {
                self.issues.push(Issue::new(
                    Code::ScheduleMissingField,
                    (self.field)(name),
                    format!("`{name}` is required"),
                ));
                None
            }
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.wrong_type(name, "a string");
                None
            }
        }
    }

    pub(super) fn optional_str(&mut self, name: &str) -> Option<String> {
        match self.obj.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.wrong_type(name, "a string");
                None
            }
        }
    }

    pub(super) fn bool_or(&mut self, name: &str, default: bool) -> bool {
        match self.obj.get(name) {
            None | Some(Value::Null) => default,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                self.wrong_type(name, "true or false");
                default
            }
        }
    }

    pub(super) fn u32_or(&mut self, name: &str, default: u32) -> u32 {
        match self.obj.get(name) {
            None | Some(Value::Null) => default,
            Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) => n,
                None => {
                    self.wrong_type(name, "a whole number from 0");
                    default
                }
            },
        }
    }

    pub(super) fn span_or(&mut self, name: &str, default: Span) -> Span {
        self.optional_span(name).unwrap_or(default)
    }

    /// A duration, `None` when absent (or unreadable: the problem is recorded).
    pub(super) fn optional_span(&mut self, name: &str) -> Option<Span> {
        match self.obj.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => s
                .parse()
                .map_err(|e| {
                    self.issues.push(Issue::new(
                        Code::ScheduleInvalidDuration,
                        (self.field)(name),
                        format!("{name}: {e}"),
                    ));
                })
                .ok(),
            Some(_) => {
                self.wrong_type(name, "a duration string like 30m");
                None
            }
        }
    }

    /// A name out of a fixed set that is not a policy (`approval`).
    pub(super) fn named<P: std::str::FromStr<Err = String>>(
        &mut self,
        name: &str,
        default: P,
    ) -> P {
        self.one_of(name, default, Code::ScheduleInvalidField)
    }

    pub(super) fn policy<P: std::str::FromStr<Err = String>>(
        &mut self,
        name: &str,
        default: P,
    ) -> P {
        self.one_of(name, default, Code::ScheduleUnknownPolicy)
    }

    /// A name out of a fixed set; a name outside it is recorded under `code`.
    fn one_of<P: std::str::FromStr<Err = String>>(
        &mut self,
        name: &str,
        default: P,
        code: Code,
    ) -> P {
        match self.obj.get(name) {
            None | Some(Value::Null) => default,
            Some(Value::String(s)) => s.parse().unwrap_or_else(|e| {
                self.issues.push(Issue::new(code, (self.field)(name), e));
                default
            }),
            Some(_) => {
                self.wrong_type(name, "a name");
                default
            }
        }
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}
