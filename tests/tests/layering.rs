//! The crates' layering, from their manifests: the pure core has no I/O crate at all, the
//! ledger port no AWS SDK and no runtime (so naming a `RunChange` never pulls in DynamoDB),
//! and only the adapter crate talks to AWS among the libraries.

use std::path::Path;

/// The `[dependencies]` names of the crate at `dir` (relative to the workspace root).
fn dependencies(dir: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(dir)
        .join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps && !line.is_empty() && !line.starts_with('#') {
            if let Some((name, _)) = line.split_once(['=', '.']) {
                names.push(name.trim().to_string());
            }
        }
    }
    names
}

fn io_crates(deps: &[String]) -> Vec<&String> {
    deps.iter()
        .filter(|d| {
            d.starts_with("aws")
                || ["tokio", "reqwest", "hyper", "lambda_runtime", "lambda_http"]
                    .contains(&d.as_str())
        })
        .collect()
}

#[test]
fn the_core_and_the_ledger_port_depend_on_no_sdk_and_no_runtime() {
    let core = dependencies("shared/core");
    assert!(core.contains(&"chrono".to_string()), "{core:?}");
    assert!(io_crates(&core).is_empty(), "core: {core:?}");
    assert!(
        !core.iter().any(|d| d.starts_with("cronledger")),
        "core: {core:?}"
    );

    let port = dependencies("shared/ledger");
    assert!(port.contains(&"cronledger-core".to_string()), "{port:?}");
    assert!(io_crates(&port).is_empty(), "ledger port: {port:?}");
    assert!(!port.contains(&"cronledger-aws".to_string()), "{port:?}");

    // The adapter implements the port; the app names the port for its types.
    assert!(dependencies("shared/aws").contains(&"cronledger-ledger".to_string()));
    assert!(dependencies("shared/app").contains(&"cronledger-ledger".to_string()));
}
