//! A listener running under a supervision tree of its own: what
//! `HttpServer::start`, `TcpServer::start`, `AmqpServer::start` and
//! `Server::start` return. Derefs to the listener's handle.

use crossbeam_channel::Receiver;
use std::io;
use supervisor::{Supervisor, SupervisorRef, SupervisorSpec};

/// A supervision tree that runs one listener, and the listener's handle.
/// Dropping it stops the listener, like [`Tree::shutdown`]; keep it (or
/// [`Tree::wait`] on it) for as long as the listener should serve.
pub struct Tree<H> {
    // Taken by `wait`, `shutdown` or `Drop`.
    root: Option<Supervisor>,
    handle: H,
    // Ready when the listener is done for good (stdio: EOF), for listeners
    // that end normally and are then not restarted.
    done: Option<Receiver<()>>,
}

impl<H> Tree<H> {
    /// Starts `spec` as the root of a tree of its own.
    pub(crate) fn run(spec: SupervisorSpec, handle: H) -> io::Result<Tree<H>> {
        let root = Supervisor::start(spec).map_err(io::Error::other)?;
        Ok(Tree {
            root: Some(root),
            handle,
            done: None,
        })
    }

    /// [`Tree::wait`] returns once `done` is ready (or disconnected).
    pub(crate) fn ending_with(mut self, done: Receiver<()>) -> Tree<H> {
        self.done = Some(done);
        self
    }

    /// The listener's handle.
    pub fn handle(&self) -> &H {
        &self.handle
    }

    /// The supervision tree.
    pub fn supervisor(&self) -> SupervisorRef {
        self.root().handle()
    }

    fn root(&self) -> &Supervisor {
        self.root
            .as_ref()
            .expect("present until the tree is consumed")
    }

    fn take_root(&mut self) -> Supervisor {
        self.root
            .take()
            .expect("present until the tree is consumed")
    }

    /// Blocks until the listener ends: `Err` when it failed beyond its
    /// restart intensity; `Ok` when it ended normally (stdio at EOF).
    pub fn wait(mut self) -> io::Result<()> {
        let root = self.take_root();
        match self.done.take() {
            Some(done) => {
                // Ready at the normal end: stop what is left. The tree may
                // also give up first (a worker it detached may still hold
                // the sender): then say why.
                let ended = root.ended();
                crossbeam_channel::select! {
                    recv(done) -> _ => root.shutdown().map(drop).map_err(io::Error::other),
                    recv(ended) -> _ => root.wait().map_err(io::Error::other),
                }
            }
            None => root.wait().map_err(io::Error::other),
        }
    }

    /// Stops the listener and its tree: it stops accepting, and its
    /// sessions end.
    pub fn shutdown(mut self) -> io::Result<()> {
        self.take_root()
            .shutdown()
            .map(drop)
            .map_err(io::Error::other)
    }
}

impl<H> Drop for Tree<H> {
    fn drop(&mut self) {
        if let Some(root) = self.root.take() {
            let _ = root.shutdown();
        }
    }
}

impl<H> std::ops::Deref for Tree<H> {
    type Target = H;
    fn deref(&self) -> &H {
        &self.handle
    }
}

impl<H: std::fmt::Display> std::fmt::Display for Tree<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle.fmt(f)
    }
}
