//! `cronledger schema manifest|openapi`: the documents generated from the contract's types.

use std::process::ExitCode;

use crate::args::{SchemaArgs, SchemaKind};
use crate::CliError;

pub fn run(args: SchemaArgs) -> Result<ExitCode, CliError> {
    let document = match args.which {
        SchemaKind::Manifest => cronledger_core::schema::manifest_schema(),
        SchemaKind::Openapi => cronledger_app::api::openapi::document(),
    };
    let mut text = serde_json::to_string_pretty(&document)
        .map_err(|e| CliError::msg(format!("INTERNAL: the schema did not serialize: {e}")))?;
    text.push('\n');
    match args.output {
        Some(path) => std::fs::write(&path, text).map_err(|e| {
            CliError::msg(format!("IO_ERROR: cannot write {}: {e}", path.display()))
        })?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
