//! The table definition. It lives in one file, `infra/table.json` (CreateTable-shaped, plus
//! the TTL attribute); this code, the local bootstrap and the template drift test read it.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;
use serde::Deserialize;

use crate::error::StoreError;
use crate::meter::metered;

/// The file's text, compiled in so deployed code and tests never read it at run time.
pub const TABLE_JSON: &str = include_str!("../../../infra/table.json");

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TableDefinition {
    pub table_name: String,
    pub billing_mode: String,
    pub attribute_definitions: Vec<AttributeDef>,
    pub key_schema: Vec<KeyDef>,
    pub global_secondary_indexes: Vec<IndexDef>,
    pub time_to_live_specification: TtlDef,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct AttributeDef {
    pub attribute_name: String,
    pub attribute_type: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct KeyDef {
    pub attribute_name: String,
    pub key_type: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct IndexDef {
    pub index_name: String,
    pub key_schema: Vec<KeyDef>,
    pub projection: ProjectionDef,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ProjectionDef {
    pub projection_type: String,
    #[serde(default)]
    pub non_key_attributes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct TtlDef {
    pub attribute_name: String,
    pub enabled: bool,
}

impl TableDefinition {
    /// The definition compiled into this crate.
    pub fn bundled() -> Result<TableDefinition, StoreError> {
        TableDefinition::parse(TABLE_JSON)
    }

    pub fn parse(text: &str) -> Result<TableDefinition, StoreError> {
        serde_json::from_str(text)
            .map_err(|e| StoreError::TableDefinition(format!("table.json: {e}")))
    }

    /// Creates the table under `name`, waits until it is usable, and turns TTL on.
    pub async fn create(&self, client: &Client, name: &str) -> Result<(), StoreError> {
        metered("create_table", async {
            client
                .create_table()
                .table_name(name)
                .billing_mode(BillingMode::from(self.billing_mode.as_str()))
                .set_attribute_definitions(Some(self.attribute_definitions()?))
                .set_key_schema(Some(key_schema(&self.key_schema)?))
                .set_global_secondary_indexes(Some(self.indexes()?))
                .send()
                .await
                .map_err(|e| crate::error::store_request("CreateTable", e))?;
            self.wait_active(client, name).await?;
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .attribute_name(&self.time_to_live_specification.attribute_name)
                        .enabled(self.time_to_live_specification.enabled)
                        .build()
                        .map_err(|e| StoreError::TableDefinition(e.to_string()))?,
                )
                .send()
                .await
                .map_err(|e| crate::error::store_request("UpdateTimeToLive", e))?;
            Ok(())
        })
        .await
    }

    pub async fn delete(client: &Client, name: &str) -> Result<(), StoreError> {
        metered("delete_table", async {
            client
                .delete_table()
                .table_name(name)
                .send()
                .await
                .map_err(|e| crate::error::store_request("DeleteTable", e))?;
            Ok(())
        })
        .await
    }

    async fn wait_active(&self, client: &Client, name: &str) -> Result<(), StoreError> {
        // Emulators answer ACTIVE at once; real DynamoDB takes seconds. Bounded either way.
        for _ in 0..120 {
            let out = client
                .describe_table()
                .table_name(name)
                .send()
                .await
                .map_err(|e| crate::error::store_request("DescribeTable", e))?;
            let status = out.table().and_then(|t| t.table_status());
            if status.map(|s| s.as_str()) == Some("ACTIVE") {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        Err(StoreError::TableDefinition(format!(
            "table `{name}` did not become ACTIVE"
        )))
    }

    fn attribute_definitions(&self) -> Result<Vec<AttributeDefinition>, StoreError> {
        self.attribute_definitions
            .iter()
            .map(|a| {
                AttributeDefinition::builder()
                    .attribute_name(&a.attribute_name)
                    .attribute_type(ScalarAttributeType::from(a.attribute_type.as_str()))
                    .build()
                    .map_err(|e| StoreError::TableDefinition(e.to_string()))
            })
            .collect()
    }

    fn indexes(&self) -> Result<Vec<GlobalSecondaryIndex>, StoreError> {
        self.global_secondary_indexes
            .iter()
            .map(|i| {
                let projection = Projection::builder()
                    .projection_type(ProjectionType::from(i.projection.projection_type.as_str()))
                    .set_non_key_attributes(
                        (!i.projection.non_key_attributes.is_empty())
                            .then(|| i.projection.non_key_attributes.clone()),
                    )
                    .build();
                GlobalSecondaryIndex::builder()
                    .index_name(&i.index_name)
                    .set_key_schema(Some(key_schema(&i.key_schema)?))
                    .projection(projection)
                    .build()
                    .map_err(|e| StoreError::TableDefinition(e.to_string()))
            })
            .collect()
    }
}

fn key_schema(keys: &[KeyDef]) -> Result<Vec<KeySchemaElement>, StoreError> {
    keys.iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(&k.attribute_name)
                .key_type(KeyType::from(k.key_type.as_str()))
                .build()
                .map_err(|e| StoreError::TableDefinition(e.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys;

    #[test]
    fn bundled_definition_parses_and_names_the_indexes_the_code_uses() {
        let def = TableDefinition::bundled().unwrap();
        let names: Vec<_> = def
            .global_secondary_indexes
            .iter()
            .map(|i| i.index_name.as_str())
            .collect();
        assert_eq!(
            names,
            [keys::DUE_INDEX, keys::ACTIVE_INDEX, keys::CATALOG_INDEX]
        );
        assert_eq!(
            def.time_to_live_specification.attribute_name,
            keys::EXPIRES_AT
        );
        assert_eq!(def.billing_mode, "PAY_PER_REQUEST");
    }
}
