//! Custom methods: requests the spec does not define, served by handlers
//! the builder registered (the engine's method fallback), and what the
//! server declares under `capabilities.experimental`.

use super::tool::ToolError;
use crate::jsonrpc::ErrorObject;
use crate::protocol::catalog::MethodFallback;
use crate::protocol::Context;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// Answers a custom method: its `params` (`{}` when absent) in, the
/// result out. A plain [`ToolError`] is -32603; [`ToolError::rpc`] is sent
/// as given.
pub type MethodHandler =
    dyn Fn(&Map<String, Value>, &Context) -> Result<Value, ToolError> + Send + Sync;

/// The builder's custom methods, by name.
#[derive(Default)]
pub(crate) struct Methods(pub(crate) HashMap<String, Arc<MethodHandler>>);

impl MethodFallback for Methods {
    fn handle(
        &self,
        method: &str,
        params: Option<&Map<String, Value>>,
        ctx: &Context,
    ) -> Result<Value, ErrorObject> {
        let handler = self
            .0
            .get(method)
            .ok_or_else(|| ErrorObject::method_not_found(method))?;
        let empty = Map::new();
        handler(params.unwrap_or(&empty), ctx).map_err(ToolError::into_rpc)
    }
}
