//! Items as DynamoDB JSON (`{"PK": {"S": "..."}, "n": {"N": "1"}}`): the form the release
//! fixtures keep them in, the one `aws dynamodb` and a table export print.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use cronledger_aws::item::{Item, Value};
use serde_json::{json, Map, Value as Json};

pub fn item_to_json(item: &Item) -> Json {
    let fields: Map<String, Json> = item
        .iter()
        .map(|(name, value)| (name.clone(), value_to_json(value)))
        .collect();
    Json::Object(fields)
}

fn value_to_json(value: &Value) -> Json {
    match value {
        Value::S(s) => json!({ "S": s }),
        Value::N(n) => json!({ "N": n }),
        Value::B(b) => json!({ "B": STANDARD.encode(b) }),
        Value::Bool(b) => json!({ "BOOL": b }),
        Value::Null => json!({ "NULL": true }),
        Value::L(list) => json!({ "L": list.iter().map(value_to_json).collect::<Vec<_>>() }),
        Value::M(map) => json!({ "M": item_to_json(map) }),
        Value::Ss(set) => json!({ "SS": set }),
        Value::Ns(set) => json!({ "NS": set }),
        Value::Bs(set) => {
            json!({ "BS": set.iter().map(|b| STANDARD.encode(b)).collect::<Vec<_>>() })
        }
    }
}

pub fn item_from_json(doc: &Json) -> Result<Item, String> {
    let fields = doc.as_object().ok_or("an item is a JSON object")?;
    fields
        .iter()
        .map(|(name, value)| Ok((name.clone(), value_from_json(value)?)))
        .collect()
}

fn value_from_json(doc: &Json) -> Result<Value, String> {
    let fields = doc.as_object().filter(|f| f.len() == 1);
    let Some((tag, inner)) = fields.and_then(|f| f.iter().next()) else {
        return Err(format!("`{doc}` is not one typed DynamoDB value"));
    };
    let text = |v: &Json| {
        v.as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("`{v}` is not a string"))
    };
    let list = |v: &Json| {
        v.as_array()
            .cloned()
            .ok_or_else(|| format!("`{v}` is not a list"))
    };
    let binary = |v: &Json| {
        STANDARD
            .decode(text(v)?)
            .map_err(|e| format!("`{v}` is not base64: {e}"))
    };
    Ok(match tag.as_str() {
        "S" => Value::S(text(inner)?),
        "N" => Value::N(text(inner)?),
        "B" => Value::B(binary(inner)?),
        "BOOL" => Value::Bool(inner.as_bool().ok_or("BOOL is not a boolean")?),
        "NULL" => Value::Null,
        "L" => Value::L(
            list(inner)?
                .iter()
                .map(value_from_json)
                .collect::<Result<_, _>>()?,
        ),
        "M" => Value::M(item_from_json(inner)?),
        "SS" => Value::Ss(list(inner)?.iter().map(text).collect::<Result<_, _>>()?),
        "NS" => Value::Ns(list(inner)?.iter().map(text).collect::<Result<_, _>>()?),
        "BS" => Value::Bs(list(inner)?.iter().map(binary).collect::<Result<_, _>>()?),
        other => return Err(format!("`{other}` is not a DynamoDB type")),
    })
}

/// Items in key order (PK, then SK), for files whose content does not move between runs.
pub fn sorted(mut items: Vec<Item>) -> Vec<Item> {
    let key = |item: &Item, name: &str| match item.get(name) {
        Some(Value::S(s)) => s.clone(),
        _ => String::new(),
    };
    items.sort_by_key(|item| (key(item, "PK"), key(item, "SK")));
    items
}
