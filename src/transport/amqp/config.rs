//! AMQP configuration: a plain value built by the caller (nothing is read
//! from the environment), with URLs restricted to `amqp://` / `amqps://` and
//! credentials that never appear in `Display` or `Debug` output.

use super::routing::{MethodRouting, RoutingStrategy};
use crate::transport::reconnect::Reconnect;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use supervisor::{Clock, SystemClock};

/// Default topic exchange.
pub const DEFAULT_EXCHANGE: &str = "mcp";
/// Default dead-letter exchange for rejected messages.
pub const DEFAULT_DEAD_LETTER_EXCHANGE: &str = "mcp.dlx";
/// Default unacknowledged deliveries per consumer.
pub const DEFAULT_PREFETCH: u16 = 64;
/// Default largest accepted message body: 1 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1024 * 1024;
/// Default largest body a server instance publishes: 16 MiB, RabbitMQ
/// 4's default `max_message_size` (a broker closes the channel of a
/// larger message, which would reset every session of the instance).
pub const DEFAULT_MAX_PUBLISH_BYTES: usize = 16 * 1024 * 1024;
/// Default idle expiry of a session owned by an instance.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// Default time a session lives on after the broker returned a message to
/// its client's queue (the queue is gone; a client that only lost its
/// connection declares it again and speaks within this time): 60 s.
pub const DEFAULT_CLIENT_GONE_GRACE: Duration = Duration::from_secs(60);
/// Default queue that collects dead letters (bound to the dead-letter exchange).
pub const DEFAULT_DEAD_LETTER_QUEUE: &str = "mcp.dead-letters";
/// Default most sessions one server instance owns.
pub const DEFAULT_MAX_SESSIONS: usize = crate::transport::session_table::DEFAULT_MAX_SESSIONS;
/// Default AMQP heartbeat in seconds: a dead broker or network is noticed
/// within about twice this.
pub const DEFAULT_HEARTBEAT_SECS: u16 = 10;
/// Default most messages waiting to be published while the broker is
/// unreachable; beyond it notifications are dropped (responses never are).
pub const DEFAULT_MAX_BACKLOG: usize = 65_536;

/// What happened to a broker link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AmqpEvent {
    /// Connected (again); `generation` counts connections from 1.
    Connected {
        /// 1 for the first connection, then one more per reconnection.
        generation: u64,
    },
    /// The connection was lost; reconnection starts.
    Disconnected(String),
    /// Every reconnection attempt failed: the link is closed for good and
    /// its owner (supervisor, client) decides what happens next.
    GaveUp(String),
    /// Closed on purpose; no reconnection follows.
    Closed,
}

/// Receives [`AmqpEvent`]s.
pub type EventHandler = Arc<dyn Fn(&AmqpEvent) + Send + Sync>;

/// Why a configuration is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigError {
    /// The URL's scheme is not `amqp` or `amqps`.
    Scheme(String),
    /// The URL is malformed.
    Malformed(String),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Scheme(s) => write!(
                f,
                "AMQP URLs must start with amqp:// or amqps://, not {s}://"
            ),
            ConfigError::Malformed(why) => write!(f, "malformed AMQP URL: {why}"),
        }
    }
}

impl std::error::Error for ConfigError {}

/// A validated AMQP URL. The password is kept but never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct AmqpUrl {
    /// Whether TLS is used (`amqps://`).
    pub tls: bool,
    /// User name (default "guest").
    pub user: String,
    password: String,
    /// Host name.
    pub host: String,
    /// Port (default 5672, or 5671 with TLS).
    pub port: u16,
    /// Virtual host (default "/").
    pub vhost: String,
    /// PEM file of the certificate authorities that `amqps://` trusts
    /// (query parameter `cacertfile`, as RabbitMQ's URI spec names it);
    /// `None`: the system's trusted roots.
    pub ca_file: Option<std::path::PathBuf>,
}

/// The query parameters an AMQP URL may carry.
const URL_PARAMETERS: &[&str] = &["cacertfile"];

/// Decodes `%XX` escapes (URL userinfo and vhost).
fn percent_decode(s: &str) -> Result<String, ConfigError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .ok_or_else(|| ConfigError::Malformed("truncated %-escape".into()))?;
            out.push(
                u8::from_str_radix(hex, 16)
                    .map_err(|_| ConfigError::Malformed("bad %-escape".into()))?,
            );
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ConfigError::Malformed("non-UTF-8 escape".into()))
}

impl AmqpUrl {
    /// Parses and validates
    /// `amqp[s]://[user[:password]@]host[:port][/vhost][?cacertfile=PATH]`.
    /// Error messages never contain the credentials.
    pub fn parse(url: &str) -> Result<AmqpUrl, ConfigError> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| ConfigError::Malformed("missing scheme".into()))?;
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "amqp" => false,
            "amqps" => true,
            other => return Err(ConfigError::Scheme(other.to_owned())),
        };
        Self::parse_parts(tls, rest).map_err(|e| {
            // A '/', '?' or '#' written unescaped in the user name or
            // password ends the authority early, and the error would quote
            // part of the password: name the likely cause instead.
            let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            if rest[authority_end..].contains('@') {
                ConfigError::Malformed(
                    "malformed authority; if the user name or password contains '/', '?' \
                     or '#', percent-encode it (%2F, %3F, %23)"
                        .into(),
                )
            } else {
                e
            }
        })
    }

    fn parse_parts(tls: bool, rest: &str) -> Result<AmqpUrl, ConfigError> {
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut ca_file = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "cacertfile" if !value.is_empty() => {
                    ca_file = Some(std::path::PathBuf::from(percent_decode(value)?))
                }
                _ => {
                    return Err(ConfigError::Malformed(format!(
                        "unknown or empty URL parameter {key:?} (known: {})",
                        URL_PARAMETERS.join(", ")
                    )))
                }
            }
        }
        if ca_file.is_some() && !tls {
            return Err(ConfigError::Malformed(
                "cacertfile needs an amqps:// URL".into(),
            ));
        }
        let (authority, vhost) = match rest.split_once('/') {
            Some((a, v)) => (
                a,
                if v.is_empty() {
                    "/".to_owned()
                } else {
                    percent_decode(v)?
                },
            ),
            None => (rest, "/".to_owned()),
        };
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            Some(u) => match u.split_once(':') {
                Some((user, pass)) => (percent_decode(user)?, percent_decode(pass)?),
                None => (percent_decode(u)?, String::new()),
            },
            None => ("guest".to_owned(), "guest".to_owned()),
        };
        let default_port = if tls { 5671 } else { 5672 };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && !p.contains(']') => (
                h.to_owned(),
                p.parse().map_err(|_| {
                    ConfigError::Malformed("the port is not a number from 0 to 65535".into())
                })?,
            ),
            _ => (hostport.to_owned(), default_port),
        };
        // An IPv6 literal is written in brackets: `[::1]:5672`.
        let host = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Some(inner) => inner.to_owned(),
            None => host,
        };
        if host.is_empty() {
            return Err(ConfigError::Malformed("missing host".into()));
        }
        Ok(AmqpUrl {
            tls,
            user,
            password,
            host,
            port,
            vhost,
            ca_file,
        })
    }

    /// The password, for opening the connection only.
    pub fn password(&self) -> &str {
        &self.password
    }
}

/// Shows the URL with the password replaced by `***`.
impl fmt::Display for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { "amqps" } else { "amqp" };
        let vhost = if self.vhost == "/" {
            String::new()
        } else {
            format!("/{}", self.vhost)
        };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(
            f,
            "{scheme}://{}:***@{host}:{}{vhost}",
            self.user, self.port
        )?;
        match &self.ca_file {
            Some(ca) => write!(f, "?cacertfile={}", ca.display()),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for AmqpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AmqpUrl({self})")
    }
}

/// Configuration of the AMQP transport (server and client sides): a plain
/// value; nothing is read from the environment.
#[derive(Clone)]
pub struct AmqpConfig {
    /// Broker URL.
    pub url: AmqpUrl,
    /// Durable topic exchange that new sessions are published to (default
    /// [`DEFAULT_EXCHANGE`]). One exchange is one namespace: a logical server
    /// binds its request queue to it with the routing strategy's keys.
    pub exchange: String,
    /// Logical server name: names the shared request queue `mcp.<name>.requests`
    /// and each instance's queue; clients use it to reach the server.
    pub server_name: String,
    /// Dead-letter exchange (default [`DEFAULT_DEAD_LETTER_EXCHANGE`]).
    pub dead_letter_exchange: String,
    /// Queue bound to the dead-letter exchange (default [`DEFAULT_DEAD_LETTER_QUEUE`]).
    pub dead_letter_queue: String,
    /// Unacknowledged deliveries of the shared request queue's consumer
    /// (default [`DEFAULT_PREFETCH`]); a server instance's own queue (its
    /// sessions' messages) takes as many as its engine lets those sessions
    /// have in flight, twice over, so that calls running long never hold
    /// back what they wait for.
    pub prefetch: u16,
    /// Largest accepted body (default [`DEFAULT_MAX_MESSAGE_BYTES`]).
    pub max_message_bytes: usize,
    /// Largest body a server instance or a client publishes (default
    /// [`DEFAULT_MAX_PUBLISH_BYTES`]); set it to the broker's
    /// `max_message_size` when that is lower. The broker closes the
    /// channel on a larger message (resetting the link of every session),
    /// so a response over it is replaced by an error response to the same
    /// request (-32603, naming the size). A server drops a larger
    /// notification or request of its own with a log line; a client's
    /// write of one fails (a call then fails at once with
    /// `InvalidInput`).
    pub max_publish_bytes: usize,
    /// Session idle expiry (default [`DEFAULT_SESSION_IDLE`]).
    pub session_idle: Duration,
    /// Most sessions one instance owns (default [`DEFAULT_MAX_SESSIONS`]).
    pub max_sessions: usize,
    /// How long a session outlives its client's queue: after the broker
    /// returned a message to it and the client sent nothing since, the
    /// session ends (default [`DEFAULT_CLIENT_GONE_GRACE`]).
    pub client_gone_grace: Duration,
    /// AMQP heartbeat in seconds (default [`DEFAULT_HEARTBEAT_SECS`]).
    pub heartbeat_secs: u16,
    /// Most messages held while the broker is unreachable (default
    /// [`DEFAULT_MAX_BACKLOG`]): on a client, as many unanswered requests
    /// and as many other messages; a write past that fails. On a server,
    /// a notification past that is dropped and a request to the client
    /// fails its handler at once; answers are always held.
    pub max_backlog: usize,
    /// Reconnection after a broker or network failure: exponential backoff
    /// with jitter and a bounded number of attempts (default [`Reconnect::default`]).
    pub reconnect: Reconnect,
    /// Routing keys of messages published to the exchange (default [`MethodRouting`]).
    pub routing: Arc<dyn RoutingStrategy>,
    /// Told when the link connects, drops, gives up or closes (default: logged only).
    pub on_event: Option<EventHandler>,
    /// Clock of session expiry (default the system clock).
    pub clock: Arc<dyn Clock>,
}

impl fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AmqpConfig")
            .field("url", &self.url)
            .field("exchange", &self.exchange)
            .field("server_name", &self.server_name)
            .field("dead_letter_exchange", &self.dead_letter_exchange)
            .field("prefetch", &self.prefetch)
            .field("max_message_bytes", &self.max_message_bytes)
            .field("max_publish_bytes", &self.max_publish_bytes)
            .finish_non_exhaustive()
    }
}

impl AmqpConfig {
    /// A configuration for `url` serving (or reaching) `server_name`, with
    /// every other field at its documented default.
    pub fn new(url: &str, server_name: impl Into<String>) -> Result<AmqpConfig, ConfigError> {
        let server_name = server_name.into();
        if server_name.is_empty() || server_name.len() > 200 {
            return Err(ConfigError::Malformed(
                "the server name must have 1 to 200 bytes".into(),
            ));
        }
        Ok(AmqpConfig {
            url: AmqpUrl::parse(url)?,
            exchange: DEFAULT_EXCHANGE.into(),
            server_name,
            dead_letter_exchange: DEFAULT_DEAD_LETTER_EXCHANGE.into(),
            dead_letter_queue: DEFAULT_DEAD_LETTER_QUEUE.into(),
            prefetch: DEFAULT_PREFETCH,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_publish_bytes: DEFAULT_MAX_PUBLISH_BYTES,
            session_idle: DEFAULT_SESSION_IDLE,
            max_sessions: DEFAULT_MAX_SESSIONS,
            client_gone_grace: DEFAULT_CLIENT_GONE_GRACE,
            heartbeat_secs: DEFAULT_HEARTBEAT_SECS,
            max_backlog: DEFAULT_MAX_BACKLOG,
            reconnect: Reconnect::default(),
            routing: Arc::new(MethodRouting),
            on_event: None,
            clock: Arc::new(SystemClock),
        })
    }
    /// The shared, durable request queue of the logical server.
    pub fn request_queue(&self) -> String {
        format!("mcp.{}.requests", self.server_name)
    }
    /// The headers exchange between the topic exchange and the logical
    /// servers' request queues: `<exchange>.servers`.
    pub fn servers_exchange(&self) -> String {
        format!("{}.servers", self.exchange)
    }
    /// Reports `event` to the handler, if any, and the log.
    pub(crate) fn emit(&self, event: AmqpEvent) {
        match &event {
            AmqpEvent::Connected { generation } => {
                log::info!("amqp: connected to {} (#{generation})", self.url)
            }
            AmqpEvent::Disconnected(why) => log::warn!("amqp: connection lost: {why}"),
            AmqpEvent::GaveUp(why) => log::error!("amqp: gave up reconnecting: {why}"),
            AmqpEvent::Closed => log::debug!("amqp: closed"),
        }
        if let Some(h) = &self.on_event {
            h(&event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_amqp_schemes_are_accepted() {
        assert_eq!(
            AmqpUrl::parse("http://guest:guest@localhost").unwrap_err(),
            ConfigError::Scheme("http".into())
        );
        assert!(matches!(
            AmqpUrl::parse("localhost:5672"),
            Err(ConfigError::Malformed(_))
        ));
        assert!(AmqpUrl::parse("amqps://h").unwrap().tls);
        assert_eq!(AmqpUrl::parse("amqps://h").unwrap().port, 5671);
    }

    #[test]
    fn an_unescaped_slash_or_question_mark_in_the_password_is_named_not_quoted() {
        // #11 item 23: "bad port" quoted part of the password.
        for url in [
            "amqp://user:xq/cr3t@broker:5672/vh",
            "amqp://user:xq?cr3t@broker",
            "amqp://user:a:b/cr3t@broker",
        ] {
            let e = AmqpUrl::parse(url).unwrap_err().to_string();
            assert!(e.contains("percent-encode"), "{url}: {e}");
            assert!(!e.contains("cr3t") && !e.contains("xq"), "{url}: {e}");
        }
        // An '@' in the path or a parameter is no password.
        for url in [
            "amqp://h/team@prod",
            "amqps://u:p@h/?cacertfile=/etc/ca@1.pem",
        ] {
            assert!(AmqpUrl::parse(url).is_ok(), "{url}");
        }
        let e = AmqpUrl::parse("amqp://broker:56x2")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("56x2"), "{e}");
        let u = AmqpUrl::parse("amqp://user:se%2Fcr3t@broker").unwrap();
        assert_eq!(u.password(), "se/cr3t");
    }

    #[test]
    fn parses_parts_with_defaults_and_escapes() {
        let u = AmqpUrl::parse("amqp://al%40ice:p%3Ass@broker:5673/prod%2Fmcp").unwrap();
        assert_eq!(
            (
                u.user.as_str(),
                u.password(),
                u.host.as_str(),
                u.port,
                u.vhost.as_str()
            ),
            ("al@ice", "p:ss", "broker", 5673, "prod/mcp")
        );
        let d = AmqpUrl::parse("amqp://127.0.0.1").unwrap();
        assert_eq!(
            (d.user.as_str(), d.password(), d.port, d.vhost.as_str()),
            ("guest", "guest", 5672, "/")
        );
        assert!(AmqpUrl::parse("amqp://h:notaport").is_err());
    }

    #[test]
    fn query_parameters_and_ipv6_literals() {
        let u = AmqpUrl::parse("amqps://u:p@[::1]:5671/v?cacertfile=/etc/ca%20file.pem").unwrap();
        assert_eq!(u.host, "::1");
        assert_eq!(u.vhost, "v");
        assert_eq!(
            u.ca_file.as_deref(),
            Some(std::path::Path::new("/etc/ca file.pem"))
        );
        assert_eq!(
            u.to_string(),
            "amqps://u:***@[::1]:5671/v?cacertfile=/etc/ca file.pem"
        );
        assert_eq!(AmqpUrl::parse("amqp://h?").unwrap().ca_file, None);
        for bad in [
            "amqps://h?verify=none",
            "amqps://h?cacertfile=",
            "amqp://h?cacertfile=/ca.pem",
        ] {
            let e = AmqpUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains("cacertfile"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_publish_limit_defaults_to_the_brokers_message_size_limit() {
        let c = AmqpConfig::new("amqp://h", "x").unwrap();
        assert_eq!(c.max_publish_bytes, DEFAULT_MAX_PUBLISH_BYTES);
        assert_eq!(c.max_publish_bytes, 16 * 1024 * 1024);
        assert!(format!("{c:?}").contains("max_publish_bytes"));
    }

    #[test]
    fn credentials_never_printed() {
        let u = AmqpUrl::parse("amqp://user:s3cret-pass@h:5672/v").unwrap();
        for text in [
            u.to_string(),
            format!("{u:?}"),
            format!(
                "{:?}",
                AmqpConfig::new("amqp://user:s3cret-pass@h", "x").unwrap()
            ),
        ] {
            assert!(!text.contains("s3cret"), "{text}");
            assert!(text.contains("***"), "{text}");
        }
        let e = AmqpUrl::parse("ftp://user:s3cret@h")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret"), "{e}");
    }
}
