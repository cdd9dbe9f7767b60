//! A release's fixtures on disk: `tests/fixtures/releases/<version>/items/<kind>.json` (the
//! items of one kind, DynamoDB JSON, in key order) and `messages/<lane>.json` (the bodies in
//! one lane, as sent), written by [`super::generate`] and read by the upgrade tests.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cronledger_aws::item::{Item, Value};
use cronledger_core::Lane;
use serde_json::Value as Json;

use super::ddb_json::{item_from_json, item_to_json, sorted};

/// The releases whose fixtures the current code must read.
pub const RELEASES: &[&str] = &["0.1.0"];

pub fn release_dir(version: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join("releases")
        .join(version)
}

/// An item's kind, as its fixture file is named: its `type` attribute, or for the kinds
/// without one the partition it lives in.
pub fn kind_of(item: &Item) -> String {
    let text = |name: &str| match item.get(name) {
        Some(Value::S(s)) => s.as_str(),
        _ => "",
    };
    if !text("type").is_empty() {
        return text("type").to_lowercase();
    }
    let pk = text("PK");
    let prefix = pk.split('#').next().unwrap_or(pk);
    match (prefix, text("SK")) {
        ("SYSTEM", sk) => format!("system_{}", sk.split('#').next().unwrap_or(sk)).to_lowercase(),
        (prefix, _) => prefix.to_lowercase(),
    }
}

/// One release's items by kind and messages by lane.
#[derive(Debug, Default)]
pub struct Release {
    pub items: BTreeMap<String, Vec<Item>>,
    /// By lane name.
    pub messages: BTreeMap<String, Vec<String>>,
}

impl Release {
    /// The item of `kind` in partition `pk` (the fixtures hold one per schedule and kind).
    pub fn item(&self, kind: &str, pk: &str) -> Item {
        let in_partition = |item: &&Item| matches!(item.get("PK"), Some(Value::S(p)) if p == pk);
        self.items
            .get(kind)
            .and_then(|items| items.iter().find(in_partition))
            .cloned()
            .unwrap_or_else(|| panic!("no `{kind}` item in {pk}"))
    }

    pub fn write(&self, version: &str) {
        let dir = release_dir(version);
        for (sub, files) in [
            ("items", self.item_files()),
            ("messages", self.message_files()),
        ] {
            let path = dir.join(sub);
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("the fixture directory");
            for (name, doc) in files {
                let text = serde_json::to_string_pretty(&doc).expect("json") + "\n";
                std::fs::write(path.join(format!("{name}.json")), text).expect("a fixture file");
            }
        }
    }

    fn item_files(&self) -> Vec<(String, Json)> {
        self.items
            .iter()
            .map(|(kind, items)| {
                let docs = sorted(items.clone()).iter().map(item_to_json).collect();
                (kind.clone(), Json::Array(docs))
            })
            .collect()
    }

    fn message_files(&self) -> Vec<(String, Json)> {
        self.messages
            .iter()
            .map(|(lane, bodies)| {
                let mut docs: Vec<Json> = bodies
                    .iter()
                    .map(|b| serde_json::from_str(b).expect("a message body is JSON"))
                    .collect();
                docs.sort_by_key(|d| d.to_string());
                (lane.clone(), Json::Array(docs))
            })
            .collect()
    }

    pub fn read(version: &str) -> Release {
        let dir = release_dir(version);
        let mut release = Release::default();
        for (name, docs) in json_files(dir.join("items")) {
            let items = docs
                .iter()
                .map(|d| item_from_json(d).unwrap_or_else(|e| panic!("{version} {name}: {e}")))
                .collect();
            release.items.insert(name, items);
        }
        for (name, docs) in json_files(dir.join("messages")) {
            assert!(
                name.parse::<Lane>().is_ok(),
                "{version}: messages/{name}.json names no lane"
            );
            let bodies = docs.iter().map(Json::to_string).collect();
            release.messages.insert(name, bodies);
        }
        release
    }
}

fn json_files(dir: PathBuf) -> Vec<(String, Vec<Json>)> {
    let mut files: Vec<(String, Vec<Json>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let text = std::fs::read_to_string(&path).expect("a fixture file");
            let doc: Json = serde_json::from_str(&text).expect("a fixture is JSON");
            let docs = doc.as_array().cloned().expect("a fixture is a JSON array");
            (name, docs)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}
