//! Routing keys derived from the message alone (never from application
//! knowledge), in one format used by both sides; replaceable by the user.

use serde_json::Value;

/// Chooses the routing key of a message.
pub trait RoutingStrategy: Send + Sync {
    /// The routing key for `message`.
    fn routing_key(&self, message: &Value) -> String;
    /// The keys a logical server's request queue is bound with: they must
    /// match every key [`routing_key`](Self::routing_key) gives a request
    /// or notification that opens or precedes a session.
    fn binding_keys(&self) -> Vec<String>;
}

/// The default: `mcp.request.<method>`, `mcp.notification.<method>`,
/// `mcp.response`, with `/` in method names turned into `.` (topic words).
#[derive(Clone, Copy, Debug, Default)]
pub struct MethodRouting;

impl RoutingStrategy for MethodRouting {
    fn routing_key(&self, message: &Value) -> String {
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(|m| m.replace('/', "."));
        match (method, message.get("id").is_some()) {
            (Some(m), true) => format!("mcp.request.{m}"),
            (Some(m), false) => format!("mcp.notification.{m}"),
            (None, _) => "mcp.response".to_owned(),
        }
    }
    fn binding_keys(&self) -> Vec<String> {
        vec!["mcp.request.#".into(), "mcp.notification.#".into()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_come_from_the_method_only() {
        let r = MethodRouting;
        assert_eq!(
            r.routing_key(
                &json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}})
            ),
            "mcp.request.tools.call"
        );
        assert_eq!(
            r.routing_key(&json!({"jsonrpc":"2.0","method":"notifications/progress"})),
            "mcp.notification.notifications.progress"
        );
        assert_eq!(
            r.routing_key(&json!({"jsonrpc":"2.0","id":1,"result":{}})),
            "mcp.response"
        );
        // The tool name (application knowledge) never shapes the key.
        assert_eq!(
            r.routing_key(
                &json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"other"}})
            ),
            "mcp.request.tools.call"
        );
    }
}
