//! JSON Schema checks of tool arguments and structured results (2020-12
//! unless a schema says otherwise via `$schema`), with the `schema` feature.
//! Without it, schemas are still required to be objects and are listed as
//! given, but nothing is validated against them.

use serde_json::Value;

/// A compiled schema.
pub(crate) struct Schema {
    #[cfg(feature = "schema")]
    validator: jsonschema::Validator,
}

impl Schema {
    /// Compiles `schema`; the error says what is wrong with it.
    pub(crate) fn compile(schema: &Value) -> Result<Schema, String> {
        if !schema.is_object() {
            return Err("a schema must be a JSON object".into());
        }
        #[cfg(feature = "schema")]
        {
            let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
            Ok(Schema { validator })
        }
        #[cfg(not(feature = "schema"))]
        Ok(Schema {})
    }

    /// The spec's rule for a successful result of `tool`, whose output
    /// schema this is: it must carry `structuredContent` that satisfies it.
    pub(crate) fn check_output(
        &self,
        tool: &str,
        structured: Option<&Value>,
    ) -> Result<(), String> {
        let structured = structured.ok_or_else(|| {
            format!("tool {tool} declares an outputSchema but returned no structuredContent")
        })?;
        self.check(structured).map_err(|e| {
            format!("tool {tool} returned structuredContent that violates its outputSchema: {e}")
        })
    }

    /// Validates `instance`; the error names each violation and where it is.
    pub(crate) fn check(&self, instance: &Value) -> Result<(), String> {
        #[cfg(feature = "schema")]
        {
            if self.validator.is_valid(instance) {
                return Ok(());
            }
            let errors: Vec<String> = self
                .validator
                .iter_errors(instance)
                .map(|e| {
                    let path = e.instance_path().to_string();
                    if path.is_empty() {
                        e.to_string()
                    } else {
                        format!("{path}: {e}")
                    }
                })
                .collect();
            Err(errors.join("; "))
        }
        #[cfg(not(feature = "schema"))]
        {
            let _ = instance;
            Ok(())
        }
    }
}
