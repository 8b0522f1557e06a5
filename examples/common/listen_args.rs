//! The examples' one argument parser for where to listen: `--listen
//! LISTEN` (any [`Listen`] string), and the shorthands `--stdio`,
//! `--tcp ADDR` (= `--listen tcp://ADDR`) and `--http ADDR`
//! (= `--listen http://ADDR/mcp`) that scripts already use.

use mcpvisor::transport::listen::Listen;

/// What the listener flags say.
pub const LISTEN_USAGE: &str =
    "[--listen stdio|tcp://ADDR|http://ADDR/PATH|amqp://URL?name=NAME | --stdio | --tcp ADDR | --http ADDR]";

/// If `flag` is a listener flag, the listener it names (taking its value
/// from `args`); `None` for any other flag.
pub fn listen_flag(
    flag: &str,
    args: &mut impl Iterator<Item = String>,
) -> Option<Result<Listen, String>> {
    let string = match flag {
        "--stdio" => return Some(Ok(Listen::Stdio)),
        "--listen" => args.next(),
        "--tcp" => args.next().map(|a| format!("tcp://{a}")),
        "--http" => args.next().map(|a| format!("http://{a}/mcp")),
        _ => return None,
    };
    Some(match string {
        Some(s) => s.parse().map_err(|e| format!("{flag}: {e}")),
        None => Err(format!("{flag} needs a value")),
    })
}
