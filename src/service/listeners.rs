//! The daemon's listeners: each one a child of the root supervisor named
//! `listener URL`, with the configured restart intensity. Sockets the
//! service manager passed (socket activation) serve the configured
//! listener with the same address, or, when none has it, a listener of
//! the kind their name says (`http…` or `tcp…`); one on the port of a
//! configured listener it does not serve is a configuration error.

use super::activation::Inherited;
use super::config::Intensity;
use crate::serve::{ListenOptions, Listener};
use crate::server::Server;
use crate::transport::listen::{redact, Listen};
use crossbeam_channel::Sender;
use std::net::TcpListener;
use std::sync::Arc;
use supervisor::ChildSpec;

/// The endpoint path of an inherited `http` socket no configured
/// listener claims.
#[cfg(feature = "http")]
pub const ACTIVATED_HTTP_PATH: &str = "/mcp";

/// A listener to start: what to serve, and an inherited socket to serve
/// it on instead of binding.
pub(crate) struct Planned {
    /// The configured `listen` string, or `fd:NAME` for a socket only.
    pub key: String,
    pub listen: Listen,
    pub socket: Option<TcpListener>,
}

/// A running listener.
pub(crate) struct Active {
    /// As [`Planned::key`].
    pub key: String,
    /// Its child id under the root.
    pub id: String,
    pub listener: Arc<Listener>,
    /// Served on a socket the service manager passed: a reload keeps it
    /// (it could not be bound again).
    pub inherited: bool,
    /// A copy of that socket, which a listener configured on its address
    /// by a reload takes over.
    pub socket: Option<TcpListener>,
}

impl Active {
    /// Where it serves (the bound address).
    pub fn url(&self) -> String {
        self.listener.to_string()
    }

    /// An inherited socket's copy, for a listener that takes it over.
    pub fn take_over(&self) -> Option<TcpListener> {
        self.socket.as_ref()?.try_clone().ok()
    }

    /// What to start to serve where it served: its configured string,
    /// unless that asked for port 0 or is no listener string (`fd:NAME`):
    /// its bound address then (another free port would move it).
    pub fn rebound(&self) -> String {
        let any_port = self
            .key
            .parse::<Listen>()
            .ok()
            .as_ref()
            .map(|l| listen_addr(l).is_some_and(|a| a.port() == 0));
        if any_port != Some(false) {
            self.url()
        } else {
            self.key.clone()
        }
    }
}

/// Pairs the configured listeners with the inherited sockets: a socket
/// serves the listener configured on exactly its address, else a
/// listener of the kind its name says. A socket on the port of a
/// configured listener it does not serve (one of the two on every
/// address) is an error: that listener could not bind.
pub(crate) fn plan(listen: &[String], inherited: Vec<Inherited>) -> Result<Vec<Planned>, String> {
    let mut out: Vec<Planned> = Vec::new();
    for l in listen {
        let parsed: Listen = l.parse().map_err(|e| format!("{}: {e}", redact(l)))?;
        out.push(Planned {
            key: l.clone(),
            listen: parsed,
            socket: None,
        });
    }
    // Every exact pair first: a socket that overlaps a listener another
    // socket serves is no clash.
    let mut unpaired = Vec::new();
    for socket in inherited {
        let (name, fd) = (socket.name.clone(), socket.fd);
        let tcp = socket.into_tcp()?;
        let addr = tcp
            .local_addr()
            .map_err(|e| format!("inherited socket {name:?}: {e}"))?;
        match out
            .iter_mut()
            .find(|p| p.socket.is_none() && listen_addr(&p.listen) == Some(addr))
        {
            Some(p) => p.socket = Some(tcp),
            None => unpaired.push((name, fd, tcp, addr)),
        }
    }
    for (name, fd, tcp, addr) in unpaired {
        let overlapped = out.iter().find(|p| {
            p.socket.is_none() && listen_addr(&p.listen).is_some_and(|a| overlap(a, addr))
        });
        if let Some(p) = overlapped {
            return Err(format!(
                "inherited socket {name:?} (fd {fd}, {addr}) and listener {} cannot both be served \
                 (one port); configure the listener on exactly {addr} to serve it on that socket",
                redact(&p.key)
            ));
        }
        let listen = if name.starts_with("http") {
            http(addr)?
        } else if name.starts_with("tcp") {
            tcp_listen(addr)?
        } else {
            return Err(format!(
                "inherited socket {name:?} (fd {fd}, {addr}) matches no configured listener; \
                 name it http or tcp with FileDescriptorName="
            ));
        };
        out.push(Planned {
            key: format!("fd:{name}"),
            listen,
            socket: Some(tcp),
        });
    }
    Ok(out)
}

/// Refuses a `listen` list in which two listeners are the same or would
/// bind the same socket (the second could not start).
pub(crate) fn clash(listen: &[String]) -> Result<(), String> {
    for (i, a) in listen.iter().enumerate() {
        if let Some(b) = listen[i + 1..]
            .iter()
            .find(|b| *b == a || same_socket(a, b))
        {
            return Err(format!(
                "listen: {} and {} cannot both be served (one address, or twice the same)",
                redact(a),
                redact(b)
            ));
        }
    }
    Ok(())
}

/// Whether listener `listen` (a configured string) names exactly the
/// address `socket` is bound to.
pub(crate) fn bound_to(listen: &str, socket: &TcpListener) -> bool {
    let addr = listen.parse::<Listen>().ok().as_ref().and_then(listen_addr);
    addr.is_some() && addr == socket.local_addr().ok()
}

/// Whether listeners `a` and `b` (configured strings) would bind the same
/// port of one address (or of every address): the second cannot bind
/// while the first runs. A port of 0 takes a free one and never clashes.
pub(crate) fn same_socket(a: &str, b: &str) -> bool {
    let addr = |l: &str| l.parse::<Listen>().ok().as_ref().and_then(listen_addr);
    match (addr(a), addr(b)) {
        (Some(a), Some(b)) => overlap(a, b),
        _ => false,
    }
}

/// Whether sockets on `a` and `b` would take the same port of one address
/// (or of every address); port 0 never does.
fn overlap(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

fn listen_addr(l: &Listen) -> Option<std::net::SocketAddr> {
    match l {
        #[cfg(feature = "http")]
        Listen::Http { addr, .. } => Some(*addr),
        #[cfg(feature = "tcp")]
        Listen::Tcp(addr) => Some(*addr),
        _ => None,
    }
}

#[cfg(feature = "http")]
fn http(addr: std::net::SocketAddr) -> Result<Listen, String> {
    Ok(Listen::Http {
        addr,
        path: ACTIVATED_HTTP_PATH.into(),
    })
}
#[cfg(not(feature = "http"))]
fn http(addr: std::net::SocketAddr) -> Result<Listen, String> {
    Err(format!(
        "inherited socket {addr}: this build has no HTTP transport"
    ))
}
#[cfg(feature = "tcp")]
fn tcp_listen(addr: std::net::SocketAddr) -> Result<Listen, String> {
    Ok(Listen::Tcp(addr))
}
#[cfg(not(feature = "tcp"))]
fn tcp_listen(addr: std::net::SocketAddr) -> Result<Listen, String> {
    Err(format!(
        "inherited socket {addr}: this build has no TCP transport"
    ))
}

/// Binds (or takes its socket) and returns the listener's child spec.
/// `stdin_done` is told when a `stdio` listener's input ends.
pub(crate) fn start(
    server: &Server,
    planned: Planned,
    options: &ListenOptions,
    intensity: Option<Intensity>,
    stdin_done: &Sender<()>,
) -> Result<(ChildSpec, Active), String> {
    let inherited = planned.socket.is_some();
    let socket = match &planned.socket {
        Some(s) => Some(
            s.try_clone()
                .map_err(|e| format!("{}: inherited socket: {e}", redact(&planned.key)))?,
        ),
        None => None,
    };
    let (spec, listener) = if planned.listen == Listen::Stdio {
        // stdout carries MCP: nothing else may be written there.
        let spec = crate::transport::stdio::worker(
            server.engine().clone(),
            options.stdio.clone(),
            Some(stdin_done.clone()),
        );
        (spec, Listener::Stdio)
    } else {
        let options = match planned.socket {
            Some(socket) => on_socket(options, socket)?,
            None => options.clone(),
        };
        server
            .listener_with(&planned.listen, &options)
            .map_err(|e| format!("{}: {e}", redact(&planned.key)))?
    };
    let id = format!("listener {listener}");
    let mut spec = spec.named(id.clone());
    if let Some(i) = intensity {
        spec = spec.intensity(i.intensity, i.period);
    }
    Ok((
        spec,
        Active {
            key: planned.key,
            id,
            listener: Arc::new(listener),
            inherited,
            socket,
        },
    ))
}

/// The options with `socket` as the listening socket of HTTP and TCP.
#[cfg_attr(
    not(all(feature = "http", feature = "tcp")),
    allow(unused_mut, unused_variables)
)]
fn on_socket(options: &ListenOptions, socket: TcpListener) -> Result<ListenOptions, String> {
    let mut o = options.clone();
    let fail = |e: std::io::Error| format!("inherited socket: {e}");
    #[cfg(feature = "http")]
    {
        o.http = o
            .http
            .with_listener(socket.try_clone().map_err(fail)?)
            .map_err(fail)?;
    }
    #[cfg(feature = "tcp")]
    {
        o.tcp = o.tcp.with_listener(socket).map_err(fail)?;
    }
    #[cfg(not(feature = "tcp"))]
    drop(socket);
    Ok(o)
}

#[cfg(all(test, feature = "http", feature = "tcp"))]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    #[test]
    #[cfg(all(feature = "http", feature = "tcp"))]
    fn listeners_clash_on_one_port_of_one_address_or_of_every_address() {
        assert!(same_socket(
            "http://127.0.0.1:8808/mcp",
            "http://127.0.0.1:8808/v1"
        ));
        assert!(same_socket(
            "tcp://127.0.0.1:8808",
            "http://127.0.0.1:8808/mcp"
        ));
        assert!(same_socket(
            "http://0.0.0.0:8808/mcp",
            "tcp://127.0.0.1:8808"
        ));
        assert!(!same_socket(
            "http://127.0.0.1:8808/mcp",
            "http://127.0.0.1:8809/mcp"
        ));
        assert!(!same_socket(
            "http://127.0.0.1:0/mcp",
            "http://127.0.0.1:0/v1"
        ));
        assert!(!same_socket("stdio", "stdio"));
        let list = |l: &[&str]| clash(&l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert!(list(&["stdio", "http://127.0.0.1:8808/mcp", "tcp://127.0.0.1:8809"]).is_ok());
        assert!(list(&["stdio", "stdio"]).is_err());
        assert!(list(&["http://127.0.0.1:8808/mcp", "tcp://0.0.0.0:8808"]).is_err());
        assert!(list(&["http://127.0.0.1:0/mcp", "http://127.0.0.1:0/v2"]).is_ok());
        // An inherited socket is taken over by a listener on exactly its
        // address only.
        let socket = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        assert!(bound_to(&format!("http://127.0.0.1:{port}/v2"), &socket));
        assert!(bound_to(&format!("tcp://127.0.0.1:{port}"), &socket));
        assert!(!bound_to(&format!("http://0.0.0.0:{port}/mcp"), &socket));
        assert!(!bound_to("stdio", &socket));
    }

    fn inherited(name: &str) -> (Inherited, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let socket = Inherited {
            name: name.into(),
            fd: 3,
            socket: OwnedFd::from(l),
        };
        (socket, addr)
    }

    #[test]
    fn inherited_sockets_serve_the_listener_with_their_address_or_their_name() {
        let (a, addr_a) = inherited("web");
        let (b, addr_b) = inherited("tcp-extra");
        let configured = format!("http://{addr_a}/custom");
        let p = plan(&[configured.clone(), "stdio".into()], vec![a, b]).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].key, configured);
        assert!(p[0].socket.is_some(), "matched by address");
        assert!(p[1].socket.is_none());
        assert_eq!(p[2].key, "fd:tcp-extra");
        assert_eq!(p[2].listen, Listen::Tcp(addr_b));
        let (c, _) = inherited("mystery");
        let e = plan(&[], vec![c]).err().unwrap();
        assert!(e.contains("FileDescriptorName"), "{e}");
    }

    #[test]
    fn an_inherited_socket_on_the_port_of_a_listener_it_does_not_serve_is_refused() {
        let (a, addr) = inherited("http");
        let everywhere = format!("http://0.0.0.0:{}/mcp", addr.port());
        let e = plan(std::slice::from_ref(&everywhere), vec![a])
            .err()
            .expect("the listener could not bind");
        assert!(
            e.contains(&everywhere) && e.contains("\"http\"") && e.contains(&addr.to_string()),
            "{e}"
        );
        // A listener on any free port binds beside it.
        let (b, _) = inherited("http");
        let p = plan(&["http://0.0.0.0:0/mcp".to_owned()], vec![b]).unwrap();
        assert_eq!(p.len(), 2);
        assert!(p[0].socket.is_none() && p[1].socket.is_some());
    }
}
