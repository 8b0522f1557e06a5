//! The `echo` tool ({message} -> that message as text) on rmcp, as
//! idiomatic rmcp users serve it: `rmcp-echo stdio` or `rmcp-echo http ADDR`.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;

#[derive(Clone)]
struct Echo;

impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]});
        let serde_json::Value::Object(schema) = schema else { unreachable!() };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "echo",
            "Returns the message it is given",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let message = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("message"))
            .and_then(|m| m.as_str())
            .unwrap_or_default()
            .to_owned();
        Ok(CallToolResult::success(vec![ContentBlock::text(message)]).into())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("stdio") => {
            // rmcp's fastest stdio: the non-blocking pipe driver on Linux.
            Echo.serve(rmcp::transport::stdio_pipes()).await?.waiting().await?;
        }
        Some("http") => {
            let addr = args.get(1).map(String::as_str).unwrap_or("127.0.0.1:0");
            let service = StreamableHttpService::new(
                || Ok(Echo),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(addr).await?;
            println!("listening on http://{}/mcp", listener.local_addr()?);
            use axum::serve::ListenerExt;
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, router).await?;
        }
        _ => {
            eprintln!("usage: rmcp-echo stdio | rmcp-echo http ADDR");
            std::process::exit(2);
        }
    }
    Ok(())
}
