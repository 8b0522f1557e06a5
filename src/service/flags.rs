//! The daemon's command line: `mcpvisor [flags]` runs it, `mcpvisor
//! status` asks a running one. Flags override the configuration file.

use super::config::{metrics_addr, LOG_LEVELS};
use crate::transport::listen::redact;
use std::path::PathBuf;

/// `--help`.
pub const USAGE: &str = "usage: mcpvisor [--config PATH] [--check-config] [--listen URL]... \
[--stdio] [--http ADDR] [--tcp ADDR] [--amqp URL] [--log-level LEVEL] [--control PATH] \
[--metrics ADDR] [--version] [--help]
       mcpvisor status [--json] [--control PATH]

  --config PATH      the configuration file (default /etc/mcpvisor/mcpvisor.json, if present)
  --check-config     validate the configuration and exit (0: valid, 78: not)
  --listen URL       serve on URL: stdio, tcp://ADDR, http://ADDR/PATH, amqp://HOST?name=NAME
                     (repeatable; replaces the file's listen list)
  --stdio            the same as --listen stdio
  --http ADDR        the same as --listen http://ADDR/mcp
  --tcp ADDR         the same as --listen tcp://ADDR
  --amqp URL         the same as --listen URL (an amqp:// or amqps:// URL with ?name=NAME)
  --log-level LEVEL  error, warn, info, debug or trace (default: the file's logLevel, else info;
                     RUST_LOG, when set, overrides both)
  --control PATH     the control socket (default: the file's control, else
                     $RUNTIME_DIRECTORY/control under systemd, else none)
  --metrics ADDR     serve Prometheus metrics at http://ADDR/metrics (HOST:PORT, or
                     a port on 127.0.0.1; default: the file's metrics, else off)
  --version          print the version and exit
  --help             print this and exit

  status             print the running daemon's supervision tree, listeners and
                     tools (from its control socket; --json: as JSON)

Signals: SIGTERM and SIGINT stop (calls in flight finish first), SIGHUP
reloads the configuration file.

Exit status: 0 clean, 64 usage, 69 (status) no daemon answers on the control
socket, 70 the supervision tree gave up, 71 a listener could not be started,
78 invalid configuration.";

/// What the flags say.
#[derive(Debug, Default, PartialEq)]
pub struct Flags {
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--check-config`.
    pub check: bool,
    /// `--listen` and its shorthands, in order.
    pub listen: Vec<String>,
    /// `--log-level`.
    pub log_level: Option<String>,
    /// `--control`.
    pub control: Option<PathBuf>,
    /// `--metrics`.
    pub metrics: Option<String>,
    /// The `status` command (with `--json`: `Some(true)`).
    pub status: Option<bool>,
    /// `--version`.
    pub version: bool,
    /// `--help`.
    pub help: bool,
}

impl Flags {
    /// Parses the arguments (without the program name).
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Flags, String> {
        let mut f = Flags::default();
        let mut args = args.into_iter();
        while let Some(a) = args.next() {
            let mut value = |flag: &str| args.next().ok_or_else(|| format!("{flag} needs a value"));
            match a.as_str() {
                "--config" => f.config = Some(PathBuf::from(value("--config")?)),
                "--check-config" => f.check = true,
                "--listen" => f.listen.push(value("--listen")?),
                "--amqp" => {
                    let url = value("--amqp")?;
                    if !(url.starts_with("amqp://") || url.starts_with("amqps://")) {
                        return Err(format!(
                            "--amqp: not an amqp:// or amqps:// URL: {}",
                            redact(&url)
                        ));
                    }
                    f.listen.push(url);
                }
                "--stdio" => f.listen.push("stdio".into()),
                "--http" => f.listen.push(format!("http://{}/mcp", value("--http")?)),
                "--tcp" => f.listen.push(format!("tcp://{}", value("--tcp")?)),
                "--log-level" => {
                    let level = value("--log-level")?;
                    if !LOG_LEVELS.contains(&level.as_str()) {
                        return Err(format!(
                            "--log-level: expected one of {}",
                            LOG_LEVELS.join(", ")
                        ));
                    }
                    f.log_level = Some(level);
                }
                "--control" => f.control = Some(PathBuf::from(value("--control")?)),
                "--metrics" => {
                    let addr = value("--metrics")?;
                    metrics_addr(&addr).map_err(|e| format!("--metrics: {e}"))?;
                    f.metrics = Some(addr);
                }
                "status" if f.status.is_none() => f.status = Some(false),
                "--json" if f.status.is_some() => f.status = Some(true),
                "--version" | "-V" => f.version = true,
                "--help" | "-h" => f.help = true,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        // A listener the flags name must parse: a usage error otherwise.
        for l in &f.listen {
            l.parse::<crate::transport::listen::Listen>()
                .map_err(|e| format!("{}: {e}", redact(l)))?;
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn flags_and_their_shorthands() {
        let f = Flags::parse(args(&[
            "--config",
            "c.json",
            "--http",
            "127.0.0.1:0",
            "--stdio",
            "--tcp",
            "[::1]:9",
            "--check-config",
        ]))
        .unwrap();
        assert_eq!(f.config, Some(PathBuf::from("c.json")));
        assert_eq!(
            f.listen,
            ["http://127.0.0.1:0/mcp", "stdio", "tcp://[::1]:9"]
        );
        assert!(f.check);
        assert!(Flags::parse(args(&["--listen"]))
            .unwrap_err()
            .contains("needs a value"));
        let f = Flags::parse(args(&["status", "--json", "--control", "/x"])).unwrap();
        assert_eq!(
            (f.status, f.control),
            (Some(true), Some(PathBuf::from("/x")))
        );
        assert!(
            Flags::parse(args(&["--json"])).is_err(),
            "--json is status's"
        );
        assert_eq!(
            Flags::parse(args(&["--metrics", "9100"])).unwrap().metrics,
            Some("9100".into())
        );
        assert!(Flags::parse(args(&["--metrics", "nowhere"])).is_err());
        assert!(Flags::parse(args(&["--listen", "ftp://x"])).is_err());
        // --amqp takes only a broker URL.
        for url in ["stdio", "http://0.0.0.0:80/mcp"] {
            assert!(Flags::parse(args(&["--amqp", url])).is_err(), "{url}");
        }
        assert_eq!(
            Flags::parse(args(&["--amqp", "amqp://h?name=n"]))
                .unwrap()
                .listen,
            ["amqp://h?name=n"]
        );
        assert!(Flags::parse(args(&["--http", "nohost"])).is_err());
        assert!(Flags::parse(args(&["--bogus"]))
            .unwrap_err()
            .contains("--bogus"));
    }

    #[test]
    fn a_usage_error_hides_a_password() {
        for (a, shown) in [
            // An AMQP listener without its ?name=.
            (
                ["--listen", "amqp://u:s3cret@broker/vh"],
                "amqp://u:***@broker/vh",
            ),
            (
                ["--amqp", "amqp://u:s3cret@broker/vh"],
                "amqp://u:***@broker/vh",
            ),
            (
                ["--amqp", "http://u:s3cret@host/mcp"],
                "http://u:***@host/mcp",
            ),
        ] {
            let e = Flags::parse(args(&a)).unwrap_err();
            assert!(!e.contains("s3cret") && e.contains(shown), "{a:?}: {e}");
        }
    }

    #[test]
    fn every_flag_is_in_the_usage() {
        for flag in [
            "--config",
            "--check-config",
            "--listen",
            "--stdio",
            "--http",
            "--tcp",
            "--amqp",
            "--log-level",
            "--control",
            "--metrics",
            "--version",
            "--help",
        ] {
            assert_eq!(USAGE.matches(&format!("\n  {flag} ")).count(), 1, "{flag}");
        }
    }
}
