//! JSON Schema checks of tool arguments and structured results (2020-12
//! unless a schema says otherwise via `$schema`), with the `schema` feature.
//! Without it, schemas are still required to be objects and are listed as
//! given, but nothing is validated against them.
//!
//! A plain schema (the keywords of [`plain`]) is checked by a small tree of
//! our own; any other by the `jsonschema` crate, whose code and
//! meta-schemas are then loaded only by servers that need them.

use serde_json::Value;

#[cfg(feature = "schema")]
mod plain;

/// A compiled schema.
pub(crate) struct Schema {
    #[cfg(feature = "schema")]
    checks: Checks,
}

/// The fast path for a plain schema, the full validator for any other.
#[cfg(feature = "schema")]
enum Checks {
    Plain(plain::Node),
    Full(Box<jsonschema::Validator>),
}

impl Schema {
    /// Compiles `schema`; the error says what is wrong with it.
    pub(crate) fn compile(schema: &Value) -> Result<Schema, String> {
        if !schema.is_object() {
            return Err("a schema must be a JSON object".into());
        }
        #[cfg(feature = "schema")]
        {
            let checks = match plain::Node::compile_root(schema) {
                Some(node) => Checks::Plain(node),
                None => Checks::Full(Box::new(
                    jsonschema::validator_for(schema).map_err(|e| e.to_string())?,
                )),
            };
            Ok(Schema { checks })
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
            let validator = match &self.checks {
                Checks::Plain(node) => {
                    let mut errors = plain::Errors::new();
                    node.check(instance, &plain::Path::Root, &mut errors);
                    return if errors.is_empty() {
                        Ok(())
                    } else {
                        Err(errors.messages.join("; "))
                    };
                }
                Checks::Full(validator) => validator,
            };
            if validator.is_valid(instance) {
                return Ok(());
            }
            let errors: Vec<String> = validator
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
