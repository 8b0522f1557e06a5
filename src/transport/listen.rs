//! Where to listen, as one string: the daemon's flags, its config and the
//! examples all name listeners this way.
//!
//! | string | listener |
//! |---|---|
//! | `stdio` | this process's stdin and stdout |
//! | `tcp://127.0.0.1:8809` | newline-delimited JSON-RPC over TCP |
//! | `http://127.0.0.1:8808/mcp` | Streamable HTTP (the path defaults to `/mcp`) |
//! | `amqp://user:pass@host:5672/vhost?name=NAME` | an AMQP instance of server `NAME` (`amqps://` for TLS) |
//!
//! Port 0 picks a free port. Host names are resolved when the string is
//! parsed (the first address wins). [`Display`](std::fmt::Display) gives
//! the string back with any password shown as `***`.

use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// Default path of an HTTP listener.
pub const DEFAULT_HTTP_PATH: &str = "/mcp";

/// A listener, named.
#[derive(Clone, PartialEq, Eq)]
pub enum Listen {
    /// `stdio`
    Stdio,
    /// `tcp://ADDR`
    Tcp(SocketAddr),
    /// `http://ADDR/PATH`
    Http {
        /// Address to bind.
        addr: SocketAddr,
        /// Endpoint path.
        path: String,
    },
    /// `amqp://…?name=NAME` or `amqps://…?name=NAME`
    Amqp {
        /// The broker URL without `name` (it may keep `cacertfile`).
        url: String,
        /// The logical server name (the `mcp-server` header, queue names).
        name: String,
    },
}

/// Why a listener string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenError(String);

impl fmt::Display for ListenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ListenError {}

/// The socket address `s`, a part of the listener string `original`;
/// errors quote both with any password hidden ([`redact`]).
fn address(s: &str, original: &str) -> Result<SocketAddr, ListenError> {
    let bad = |why: String| ListenError(format!("{:?}: {why}", redact(original)));
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let shown = redact(s);
    s.to_socket_addrs()
        .map_err(|e| bad(format!("no address {shown:?}: {e}")))?
        .next()
        .ok_or_else(|| bad(format!("{shown:?} resolves to no address")))
}

/// The `name` query parameter taken out of an AMQP URL; the rest kept.
fn split_name(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_owned(), None);
    };
    let mut name = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|p| match p.strip_prefix("name=") {
            Some(n) => {
                name = Some(n.to_owned());
                false
            }
            None => !p.is_empty(),
        })
        .collect();
    let url = if rest.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", rest.join("&"))
    };
    (url, name)
}

impl FromStr for Listen {
    type Err = ListenError;

    fn from_str(s: &str) -> Result<Listen, ListenError> {
        if s == "stdio" {
            return Ok(Listen::Stdio);
        }
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            ListenError(format!(
                "{:?}: expected stdio, tcp://ADDR, http://ADDR/PATH or amqp://…?name=NAME",
                redact(s)
            ))
        })?;
        match scheme {
            "tcp" => Ok(Listen::Tcp(address(rest.trim_end_matches('/'), s)?)),
            "http" => {
                let (host, path) = match rest.find('/') {
                    Some(i) => (&rest[..i], &rest[i..]),
                    None => (rest, DEFAULT_HTTP_PATH),
                };
                Ok(Listen::Http {
                    addr: address(host, s)?,
                    path: path.to_owned(),
                })
            }
            "amqp" | "amqps" => {
                let (url, name) = split_name(s);
                let name = name.filter(|n| !n.is_empty()).ok_or_else(|| {
                    ListenError(format!(
                        "{}: an AMQP listener needs ?name=NAME (the logical server)",
                        redact(s)
                    ))
                })?;
                #[cfg(feature = "amqp")]
                crate::transport::amqp::AmqpUrl::parse(&url)
                    .map_err(|e| ListenError(e.to_string()))?;
                Ok(Listen::Amqp { url, name })
            }
            other => Err(ListenError(format!(
                "{}: unknown scheme {other:?} (stdio, tcp, http, amqp, amqps)",
                redact(s)
            ))),
        }
    }
}

/// `scheme://user:***@host…`: the URL with its password hidden, whatever
/// the password holds (a `/`, `?` or `@` in it included: everything up to
/// the last `@` is taken as user information, which at worst hides more
/// than it must). A string that is no URL shows nothing before its last
/// `@`. Errors and logs show a configured listener string this way.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return match url.rfind('@') {
            Some(at) => format!("***{}", &url[at..]),
            None => url.to_owned(),
        };
    };
    match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            let shown = if userinfo.contains(':') { ":***" } else { "" };
            format!("{scheme}://{user}{shown}{}", &rest[at..])
        }
        None => url.to_owned(),
    }
}

impl fmt::Display for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Listen::Stdio => f.write_str("stdio"),
            Listen::Tcp(a) => write!(f, "tcp://{a}"),
            Listen::Http { addr, path } => write!(f, "http://{addr}{path}"),
            Listen::Amqp { url, name } => {
                let sep = if url.contains('?') { '&' } else { '?' };
                write!(f, "{}{sep}name={name}", redact(url))
            }
        }
    }
}

impl fmt::Debug for Listen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Listen({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_defaults() {
        for s in [
            "stdio",
            "tcp://127.0.0.1:8809",
            "http://127.0.0.1:8808/mcp",
            "http://[::1]:0/x/y",
            "amqp://guest@127.0.0.1:5672/%2f?name=inventory",
        ] {
            let l: Listen = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(l.to_string(), s);
        }
        let l: Listen = "http://127.0.0.1:0".parse().unwrap();
        assert_eq!(l.to_string(), "http://127.0.0.1:0/mcp");
        assert!(
            matches!("tcp://localhost:0".parse::<Listen>(), Ok(Listen::Tcp(a)) if a.ip().is_loopback())
        );
    }

    #[test]
    fn the_password_never_shows() {
        let s = "amqps://u:s3cret@broker:5671/v?cacertfile=/ca.pem&name=inv";
        let l: Listen = s.parse().unwrap();
        match &l {
            Listen::Amqp { url, name } => {
                assert_eq!(name, "inv");
                assert_eq!(url, "amqps://u:s3cret@broker:5671/v?cacertfile=/ca.pem");
            }
            other => panic!("{other}"),
        }
        let shown = format!("{l} {l:?}");
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("amqps://u:***@broker:5671/v?cacertfile=/ca.pem&name=inv"));
        let e = "amqp://u:s3cret@h/v"
            .parse::<Listen>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("name=NAME") && !e.contains("s3cret"), "{e}");
        // Whatever the password holds, and however the string is wrong.
        for bad in [
            "amqp://u:s3/cret@h/v",
            "amqp://u:s3?cret@h",
            "amqp://u:s3@cret@h?name=x&y",
            "amqp:/u:s3cret@h",
            "amqpx://u:s3cret@h",
        ] {
            let shown = match bad.parse::<Listen>() {
                Ok(l) => format!("{l} {l:?}"),
                Err(e) => e.to_string(),
            };
            assert!(!shown.contains("cret"), "{bad}: {shown}");
        }
    }

    #[test]
    fn an_address_that_is_refused_hides_its_password() {
        // Neither the string nor its address part is quoted whole (no
        // port: refused before any name lookup).
        for bad in ["tcp://u:s3cret@127.0.0.1", "http://u:s3cret@127.0.0.1/mcp"] {
            let e = bad.parse::<Listen>().unwrap_err().to_string();
            assert!(e.contains("no address"), "{bad}: {e}");
            assert!(!e.contains("s3cret"), "{bad}: {e}");
            assert!(e.contains("u:***@127.0.0.1"), "{bad}: {e}");
        }
    }

    #[test]
    fn bad_strings_say_why() {
        for (s, why) in [
            ("udp://1.2.3.4:5", "unknown scheme"),
            ("8808", "expected stdio"),
            ("tcp://127.0.0.1", "no address"),
        ] {
            let e = s.parse::<Listen>().unwrap_err().to_string();
            assert!(e.contains(why), "{s}: {e}");
        }
    }
}
