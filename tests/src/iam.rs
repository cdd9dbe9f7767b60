//! The SAM template's roles as IAM evaluates them: the template read with its CloudFormation
//! tags, every intrinsic in the roles resolved for one stack (fixed account, region and
//! stack name, parameters given), and a request ([`Access`]) allowed when an Allow statement
//! matches its action, resource and conditions and no Deny statement does.

use std::collections::BTreeMap;

use cronledger_aws::recorder::{Access, Account};
use serde_norway::Value as Yaml;

/// The account, region and partition the test stack is in.
pub fn test_account() -> Account {
    Account {
        partition: "aws".into(),
        region: "us-east-1".into(),
        id: "123456789012".into(),
    }
}

/// One resource entry of a statement: the template's text (say `!GetAtt NormalQueue.Arn`)
/// and the ARN pattern it resolves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceEntry {
    pub label: String,
    pub pattern: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// `StringEquals`, `ForAllValues:StringLike`, `ArnLikeIfExists`, ...
    pub operator: String,
    pub key: String,
    pub values: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    pub allow: bool,
    pub actions: Vec<String>,
    pub resources: Vec<ResourceEntry>,
    pub conditions: Vec<Condition>,
}

impl Statement {
    fn matches_action(&self, action: &str) -> bool {
        self.actions
            .iter()
            .any(|a| glob(&a.to_lowercase(), &action.to_lowercase()))
    }

    /// The entry that grants `access`, when this statement applies to it.
    pub fn entry_for(&self, access: &Access) -> Option<&ResourceEntry> {
        if !self.matches_action(&access.action) || !self.conditions_hold(access) {
            return None;
        }
        self.resources
            .iter()
            .find(|r| glob(&r.pattern, &access.resource))
    }

    fn conditions_hold(&self, access: &Access) -> bool {
        self.conditions
            .iter()
            .all(|c| condition_holds(c, access.context.get(&c.key)))
    }
}

/// Allowed: some Allow statement matches and no Deny statement does.
pub fn allows(statements: &[Statement], access: &Access) -> bool {
    let matching: Vec<&Statement> = statements
        .iter()
        .filter(|s| s.entry_for(access).is_some())
        .collect();
    matching.iter().any(|s| s.allow) && !matching.iter().any(|s| !s.allow)
}

fn condition_holds(condition: &Condition, present: Option<&Vec<String>>) -> bool {
    let (set, operator) = match condition.operator.split_once(':') {
        Some((set, operator)) => (Some(set), operator),
        None => (None, condition.operator.as_str()),
    };
    let (operator, if_exists) = match operator.strip_suffix("IfExists") {
        Some(base) => (base, true),
        None => (operator, false),
    };
    let test = |value: &str| -> Option<bool> {
        let any = |exact: bool| {
            condition.values.iter().any(|p| match exact {
                true => p == value,
                false => glob(p, value),
            })
        };
        Some(match operator {
            "StringEquals" | "ArnEquals" => any(true),
            "StringLike" | "ArnLike" => any(false),
            "StringNotEquals" | "ArnNotEquals" => !any(true),
            "StringNotLike" | "ArnNotLike" => !any(false),
            // An operator this evaluator does not know never holds: the test then names the
            // call rather than passing it.
            _ => return None,
        })
    };
    let values = present.map(Vec::as_slice).unwrap_or_default();
    match set {
        Some("ForAllValues") => values.iter().all(|v| test(v) == Some(true)),
        Some("ForAnyValue") => values.iter().any(|v| test(v) == Some(true)),
        Some(_) => false,
        None if values.is_empty() => if_exists,
        None => values.iter().any(|v| test(v) == Some(true)),
    }
}

/// IAM's wildcard match: `*` any run of characters, `?` any one.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The template as one stack deploys it.
pub struct Stack {
    template: Yaml,
    account: Account,
    name: String,
    parameters: BTreeMap<String, String>,
}

impl Stack {
    /// `parameters`: values that replace the template's defaults.
    pub fn new(template: &str, name: &str, parameters: &[(&str, &str)]) -> Stack {
        let template: Yaml = serde_norway::from_str(template).expect("template.yaml parses");
        Stack {
            template,
            account: test_account(),
            name: name.to_string(),
            parameters: parameters
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    pub fn template_mut(&mut self) -> &mut Yaml {
        &mut self.template
    }

    /// The logical id of the role a function runs as.
    pub fn role_of(&self, function: &str) -> String {
        let role = &self.template["Resources"][function]["Properties"]["Role"];
        let Yaml::Tagged(tagged) = role else {
            panic!("{function} names its role with !GetAtt ROLE.Arn");
        };
        let text = tagged.value.as_str().unwrap_or_default();
        text.trim_end_matches(".Arn").to_string()
    }

    /// Every statement of the role's inline policies, resolved.
    pub fn statements(&self, role: &str) -> Vec<Statement> {
        let policies = &self.template["Resources"][role]["Properties"]["Policies"];
        let mut statements = Vec::new();
        for policy in policies.as_sequence().into_iter().flatten() {
            let list = &policy["PolicyDocument"]["Statement"];
            for raw in list.as_sequence().into_iter().flatten() {
                if let Some(resolved) = self.resolve_branch(raw) {
                    statements.push(self.statement(&resolved));
                }
            }
        }
        statements
    }

    /// A statement's `!If` (a statement present or not) resolved to the statement itself.
    fn resolve_branch(&self, value: &Yaml) -> Option<Yaml> {
        match value {
            Yaml::Tagged(t) if t.tag == "!If" => {
                let branch = self.if_branch(&t.value)?;
                self.resolve_branch(branch)
            }
            Yaml::Tagged(t) if t.tag == "!Ref" && t.value.as_str() == Some("AWS::NoValue") => None,
            other => Some(other.clone()),
        }
    }

    fn statement(&self, raw: &Yaml) -> Statement {
        let strings = |value: &Yaml| -> Vec<String> {
            match self.resolve(value) {
                Some(Yaml::Sequence(items)) => items.iter().map(scalar_text).collect(),
                Some(other) => vec![scalar_text(&other)],
                None => Vec::new(),
            }
        };
        let entries = match &raw["Resource"] {
            Yaml::Sequence(items) => items.iter().collect(),
            one => vec![one],
        };
        let resources = entries
            .into_iter()
            .flat_map(|entry| {
                let label = label(entry);
                strings(entry)
                    .into_iter()
                    .map(move |pattern| ResourceEntry {
                        label: label.clone(),
                        pattern,
                    })
            })
            .collect();
        let mut conditions = Vec::new();
        for (operator, keys) in raw["Condition"].as_mapping().into_iter().flatten() {
            for (key, values) in keys.as_mapping().into_iter().flatten() {
                conditions.push(Condition {
                    operator: scalar_text(operator),
                    key: scalar_text(key),
                    values: strings(values),
                });
            }
        }
        Statement {
            allow: raw["Effect"].as_str() == Some("Allow"),
            actions: strings(&raw["Action"]),
            resources,
            conditions,
        }
    }

    /// The value with every intrinsic resolved; `None`: `!Ref AWS::NoValue`.
    pub fn resolve(&self, value: &Yaml) -> Option<Yaml> {
        let Yaml::Tagged(tagged) = value else {
            return Some(match value {
                Yaml::Sequence(items) => {
                    Yaml::Sequence(items.iter().filter_map(|v| self.resolve(v)).collect())
                }
                other => other.clone(),
            });
        };
        let args = &tagged.value;
        let arg = |i: usize| args.as_sequence().and_then(|s| s.get(i));
        let text_of = |v: Option<&Yaml>| v.and_then(|v| self.resolve(v)).map(|v| scalar_text(&v));
        match tagged.tag.to_string().as_str() {
            "!Ref" => self.reference(args.as_str().unwrap_or_default()),
            "!GetAtt" => {
                let (logical, attribute) = match args {
                    Yaml::Sequence(s) => (scalar_text(&s[0]), scalar_text(&s[1])),
                    other => {
                        let text = scalar_text(other);
                        let (l, a) = text.split_once('.').unwrap_or((&text, "Arn"));
                        (l.to_string(), a.to_string())
                    }
                };
                Some(Yaml::String(self.attribute(&logical, &attribute)))
            }
            "!Sub" => {
                let (text, vars) = match args {
                    Yaml::Sequence(s) => (scalar_text(&s[0]), s.get(1).cloned()),
                    other => (scalar_text(other), None),
                };
                Some(Yaml::String(self.substitute(&text, vars.as_ref())))
            }
            "!If" => self.resolve(self.if_branch(args)?),
            "!Join" => {
                let separator = text_of(arg(0)).unwrap_or_default();
                let items = match arg(1).and_then(|v| self.resolve(v)) {
                    Some(Yaml::Sequence(items)) => items.iter().map(scalar_text).collect(),
                    Some(other) => vec![scalar_text(&other)],
                    None => Vec::new(),
                };
                Some(Yaml::String(items.join(&separator)))
            }
            "!Split" => {
                let separator = text_of(arg(0)).unwrap_or_default();
                let text = text_of(arg(1)).unwrap_or_default();
                Some(Yaml::Sequence(
                    text.split(separator.as_str())
                        .map(|s| Yaml::String(s.to_string()))
                        .collect(),
                ))
            }
            "!Select" => {
                let index: usize = text_of(arg(0))?.parse().ok()?;
                match arg(1).and_then(|v| self.resolve(v))? {
                    Yaml::Sequence(items) => items.get(index).cloned(),
                    _ => None,
                }
            }
            "!Equals" | "!Not" | "!And" | "!Or" | "!Condition" => {
                Some(Yaml::Bool(self.holds(value)))
            }
            other => panic!("the IAM test does not resolve {other}"),
        }
    }

    fn if_branch<'a>(&self, args: &'a Yaml) -> Option<&'a Yaml> {
        let branches = args.as_sequence()?;
        let condition = branches.first()?.as_str()?;
        branches.get(if self.condition(condition) { 1 } else { 2 })
    }

    fn condition(&self, name: &str) -> bool {
        self.holds(&self.template["Conditions"][name])
    }

    fn holds(&self, value: &Yaml) -> bool {
        let Yaml::Tagged(tagged) = value else {
            return value.as_bool().unwrap_or(false);
        };
        let items = tagged.value.as_sequence().cloned().unwrap_or_default();
        match tagged.tag.to_string().as_str() {
            "!Equals" => {
                let text = |v: &Yaml| self.resolve(v).map(|v| scalar_text(&v)).unwrap_or_default();
                items.len() == 2 && text(&items[0]) == text(&items[1])
            }
            "!Not" => !items.first().is_some_and(|c| self.holds(c)),
            "!And" => items.iter().all(|c| self.holds(c)),
            "!Or" => items.iter().any(|c| self.holds(c)),
            "!Condition" => self.condition(tagged.value.as_str().unwrap_or_default()),
            _ => self
                .resolve(value)
                .and_then(|v| v.as_bool())
                .unwrap_or(false),
        }
    }

    fn reference(&self, name: &str) -> Option<Yaml> {
        let text = |s: &str| Some(Yaml::String(s.to_string()));
        match name {
            "AWS::NoValue" => None,
            "AWS::AccountId" => text(&self.account.id),
            "AWS::Region" => text(&self.account.region),
            "AWS::Partition" => text(&self.account.partition),
            "AWS::StackName" => text(&self.name),
            "AWS::URLSuffix" => text("amazonaws.com"),
            _ if self.template["Parameters"].get(name).is_some() => {
                let declared = &self.template["Parameters"][name];
                let value = self
                    .parameters
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| scalar_text(&declared["Default"]));
                if declared["Type"].as_str() == Some("CommaDelimitedList") {
                    let items = value.split(',').filter(|s| !s.is_empty());
                    Some(Yaml::Sequence(
                        items.map(|s| Yaml::String(s.trim().into())).collect(),
                    ))
                } else {
                    text(&value)
                }
            }
            _ => {
                let kind = self.kind(name);
                let physical = self.physical_name(name);
                match kind.as_str() {
                    "AWS::SNS::Topic" => text(&self.arn("sns", &physical)),
                    _ => text(&physical),
                }
            }
        }
    }

    fn kind(&self, logical: &str) -> String {
        scalar_text(&self.template["Resources"][logical]["Type"])
    }

    /// The resource's name: the one its properties give, or one made of the stack's name.
    pub fn physical_name(&self, logical: &str) -> String {
        let properties = &self.template["Resources"][logical]["Properties"];
        let given = [
            "TableName",
            "QueueName",
            "LogGroupName",
            "FunctionName",
            "RoleName",
            "TopicName",
            "Name",
        ]
        .iter()
        .find_map(|key| properties.get(*key))
        .and_then(|v| self.resolve(v))
        .map(|v| scalar_text(&v));
        given.unwrap_or_else(|| format!("{}-{logical}", self.name))
    }

    fn arn(&self, service: &str, resource: &str) -> String {
        let a = &self.account;
        format!(
            "arn:{}:{service}:{}:{}:{resource}",
            a.partition, a.region, a.id
        )
    }

    /// `!GetAtt LOGICAL.Arn`.
    pub fn arn_of(&self, logical: &str) -> String {
        self.attribute(logical, "Arn")
    }

    fn attribute(&self, logical: &str, attribute: &str) -> String {
        assert_eq!(
            attribute, "Arn",
            "{logical}.{attribute}: only ARNs are resolved"
        );
        let name = self.physical_name(logical);
        let properties = &self.template["Resources"][logical]["Properties"];
        match self.kind(logical).as_str() {
            "AWS::DynamoDB::Table" => self.arn("dynamodb", &format!("table/{name}")),
            "AWS::SQS::Queue" => self.arn("sqs", &name),
            "AWS::SNS::Topic" => self.arn("sns", &name),
            "AWS::Logs::LogGroup" => self.arn("logs", &format!("log-group:{name}:*")),
            "AWS::Serverless::Function" | "AWS::Lambda::Function" => {
                self.arn("lambda", &format!("function:{name}"))
            }
            "AWS::Scheduler::Schedule" => {
                let group = properties
                    .get("GroupName")
                    .and_then(|g| self.resolve(g))
                    .map_or("default".to_string(), |g| scalar_text(&g));
                self.arn("scheduler", &format!("schedule/{group}/{name}"))
            }
            "AWS::Scheduler::ScheduleGroup" => {
                self.arn("scheduler", &format!("schedule-group/{name}"))
            }
            "AWS::IAM::Role" => format!(
                "arn:{}:iam::{}:role/{name}",
                self.account.partition, self.account.id
            ),
            other => panic!("the IAM test does not know the ARN of a {other} ({logical})"),
        }
    }

    fn substitute(&self, text: &str, vars: Option<&Yaml>) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            out.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let end = after.find('}').unwrap_or(after.len());
            let name = &after[..end];
            rest = after.get(end + 1..).unwrap_or_default();
            if let Some(literal) = name.strip_prefix('!') {
                out.push_str(&format!("${{{literal}}}"));
                continue;
            }
            let value = match vars.and_then(|v| v.get(name)) {
                Some(v) => self.resolve(v).map(|v| scalar_text(&v)).unwrap_or_default(),
                None => match name.split_once('.') {
                    Some((logical, attribute)) => self.attribute(logical, attribute),
                    None => self
                        .reference(name)
                        .map(|v| scalar_text(&v))
                        .unwrap_or_default(),
                },
            };
            out.push_str(&value);
        }
        out.push_str(rest);
        out
    }
}

/// A scalar as text (numbers and booleans as YAML writes them).
fn scalar_text(value: &Yaml) -> String {
    match value {
        Yaml::String(s) => s.clone(),
        Yaml::Number(n) => n.to_string(),
        Yaml::Bool(b) => b.to_string(),
        Yaml::Null => String::new(),
        other => format!("{other:?}"),
    }
}

/// A resource entry as the template writes it (`!GetAtt NormalQueue.Arn`, `"*"`).
fn label(value: &Yaml) -> String {
    match value {
        Yaml::Tagged(tagged) => format!("{} {}", tagged.tag, label(&tagged.value)),
        Yaml::Sequence(items) => {
            let inner: Vec<String> = items.iter().map(label).collect();
            format!("[{}]", inner.join(", "))
        }
        other => scalar_text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_iam_matches() {
        assert!(glob(
            "arn:aws:sqs:*:1:q-*",
            "arn:aws:sqs:us-east-1:1:q-normal"
        ));
        assert!(glob("cronledger-*", "cronledger-"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*", ""));
        assert!(!glob("table/t", "table/t/index/active"));
    }
}
