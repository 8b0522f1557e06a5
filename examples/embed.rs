//! A "legacy" synchronous program (a struct behind a Mutex, no async) that
//! exposes two of its methods as MCP tools over stdio in a few lines.

use mcpvisor::{Server, Tool, ToolError, ToolResult};
use serde_json::json;
use std::sync::{Arc, Mutex};

/// The existing application code: knows nothing about MCP.
#[derive(Default)]
struct Inventory {
    items: Vec<(String, u32)>,
}

impl Inventory {
    fn add(&mut self, name: &str, count: u32) -> u32 {
        match self.items.iter_mut().find(|(n, _)| n == name) {
            Some((_, c)) => {
                *c += count;
                *c
            }
            None => {
                self.items.push((name.to_owned(), count));
                count
            }
        }
    }

    fn count(&self, name: &str) -> Option<u32> {
        self.items.iter().find(|(n, _)| n == name).map(|(_, c)| *c)
    }
}

fn main() -> std::io::Result<()> {
    let inventory = Arc::new(Mutex::new(Inventory::default()));
    let (a, b) = (inventory.clone(), inventory);
    let server = Server::builder("inventory", "1.0.0")
        .tool(Tool::new(
            "add_item",
            json!({"type": "object", "properties": {"name": {"type": "string"}, "count": {"type": "integer", "minimum": 1}}, "required": ["name", "count"]}),
            move |args, _| {
                let count = u32::try_from(args["count"].as_u64().unwrap_or(0)).map_err(ToolError::from)?;
                let total = a.lock().map_err(|_| ToolError::new("inventory lock poisoned"))?.add(args["name"].as_str().unwrap_or(""), count);
                Ok(ToolResult::text(format!("now {total}")))
            },
        ))
        .tool(Tool::new(
            "count_item",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
            move |args, _| {
                let name = args["name"].as_str().unwrap_or("");
                match b.lock().map_err(|_| ToolError::new("inventory lock poisoned"))?.count(name) {
                    Some(c) => Ok(ToolResult::text(c.to_string())),
                    None => Err(ToolError::new(format!("no item named {name}"))),
                }
            },
        ))
        .build()
        .map_err(std::io::Error::other)?;
    server.serve_stdio()
}
