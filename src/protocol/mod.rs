//! The MCP protocol engine: sessions and their lifecycle, version
//! negotiation, dispatch, cancellation, progress, logging, pagination, and
//! requests from server to client.
//!
//! A transport opens a [`Session`] per connection with [`Engine::open_session`]
//! and feeds it bytes with [`Session::receive`]; replies come back through the
//! [`Sink`] it passed in. Handlers run on a bounded pool of named threads.

mod batch;
mod cancel;
mod context;
mod dispatch;
mod logging;
mod pagination;
mod pool;
mod session;
mod sink;
mod version;

pub use cancel::CancelToken;
pub use context::{Context, PeerError, ProtocolContext, ToolContext, DEFAULT_PEER_REQUEST_TIMEOUT};
pub use logging::LogLevel;
pub use session::{Phase, Session};
pub use sink::{Outgoing, Sink};
pub use version::ProtocolVersion;

use crate::jsonrpc;
use crate::server::registry::Registry;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, Weak};

/// Default number of handler threads.
pub const DEFAULT_POOL_THREADS: usize = 16;
/// Default capacity of the handler queue; beyond it requests are refused
/// with -32603 "server overloaded" instead of blocking the transport.
pub const DEFAULT_QUEUE_CAPACITY: usize = 4096;
/// Default number of items per page of a list method.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// Engine options.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Handler threads (default [`DEFAULT_POOL_THREADS`]).
    pub pool_threads: usize,
    /// Handler queue capacity (default [`DEFAULT_QUEUE_CAPACITY`]).
    pub queue_capacity: usize,
    /// Items per page of `tools/list` and the other lists (default [`DEFAULT_PAGE_SIZE`]).
    pub page_size: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            pool_threads: DEFAULT_POOL_THREADS,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            page_size: DEFAULT_PAGE_SIZE,
        }
    }
}

/// The server's `serverInfo` and `instructions`.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Optional display title.
    pub title: Option<String>,
    /// Optional instructions for the model.
    pub instructions: Option<String>,
}

impl ServerInfo {
    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), self.name.as_str().into());
        m.insert("version".into(), self.version.as_str().into());
        if let Some(t) = &self.title {
            m.insert("title".into(), t.as_str().into());
        }
        Value::Object(m)
    }
}

/// The protocol engine shared by every session of a server.
pub struct Engine {
    pub(crate) info: ServerInfo,
    pub(crate) options: EngineOptions,
    registry: RwLock<Registry>,
    pool: pool::Pool,
    sessions: Mutex<HashMap<u64, Weak<Session>>>,
    next_key: AtomicU64,
}

/// Which list changed, for `notifications/*/list_changed`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// tools
    Tools,
    /// resources and resource templates
    Resources,
    /// prompts
    Prompts,
}

impl Engine {
    pub(crate) fn new(
        info: ServerInfo,
        options: EngineOptions,
        registry: Registry,
    ) -> std::io::Result<Arc<Engine>> {
        let pool = pool::Pool::new(options.pool_threads, options.queue_capacity)?;
        Ok(Arc::new(Engine {
            info,
            options,
            registry: RwLock::new(registry),
            pool,
            sessions: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
        }))
    }

    /// Opens a session whose unrelated messages (list changes, resource
    /// updates) go to `sink`.
    pub fn open_session(self: &Arc<Self>, sink: Arc<dyn Sink>) -> Arc<Session> {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let session = Arc::new(Session::new(self.clone(), key, sink));
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, Arc::downgrade(&session));
        session
    }

    /// Number of open sessions.
    pub fn session_count(&self) -> usize {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    pub(crate) fn forget_session(&self, key: u64) {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
    }

    pub(crate) fn registry(&self) -> RwLockReadGuard<'_, Registry> {
        self.registry.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn registry_mut(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry.write().unwrap_or_else(|p| p.into_inner())
    }

    fn live_sessions(&self) -> Vec<Arc<Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// Sends `notifications/<kind>/list_changed` to every operating session.
    pub fn notify_list_changed(&self, kind: ListKind) {
        let method = match kind {
            ListKind::Tools => "notifications/tools/list_changed",
            ListKind::Resources => "notifications/resources/list_changed",
            ListKind::Prompts => "notifications/prompts/list_changed",
        };
        for s in self
            .live_sessions()
            .into_iter()
            .filter(|s| s.phase() == Phase::Operating)
        {
            s.sink().send(Outgoing::Notification(jsonrpc::notification(
                method,
                json!({}),
            )));
        }
    }

    /// Sends `notifications/resources/updated` to every session subscribed to `uri`.
    pub fn notify_resource_updated(&self, uri: &str) {
        for s in self
            .live_sessions()
            .into_iter()
            .filter(|s| s.is_subscribed(uri))
        {
            s.sink().send(Outgoing::Notification(jsonrpc::notification(
                "notifications/resources/updated",
                json!({"uri": uri}),
            )));
        }
    }
}

#[cfg(test)]
mod tests;
