//! The control socket: a Unix socket (mode 0600) on which the running
//! daemon answers `mcpvisor status`. A client writes one line, `status`
//! or `status --json`, and reads the answer to the end.

use super::state::State;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use supervisor::ChildSpec;

/// Its file name under `$RUNTIME_DIRECTORY` (systemd's `RuntimeDirectory=`).
pub const SOCKET_NAME: &str = "control";
/// Where `mcpvisor status` looks when neither `--control` nor
/// `$RUNTIME_DIRECTORY` says.
pub const DEFAULT_CONTROL_PATH: &str = "/run/mcpvisor/control";
/// How long either side waits for the other.
pub const CONTROL_TIMEOUT: Duration = Duration::from_secs(5);
/// Exit status of `status` when no daemon answers (EX_UNAVAILABLE).
pub const EXIT_UNAVAILABLE: u8 = 69;

/// The daemon's control socket path: `--control`, else the file's
/// `control`, else `$RUNTIME_DIRECTORY/control` under systemd, else none.
pub fn daemon_path(flag: Option<&Path>, file: Option<&Path>) -> Option<PathBuf> {
    flag.or(file)
        .map(Path::to_path_buf)
        .or_else(|| runtime_dir().map(|d| d.join(SOCKET_NAME)))
}

/// Where `mcpvisor status` connects.
pub fn client_path(flag: Option<&Path>) -> PathBuf {
    daemon_path(flag, None).unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL_PATH))
}

fn runtime_dir() -> Option<PathBuf> {
    // RuntimeDirectory= may list several, separated by colons.
    let dirs = std::env::var_os("RUNTIME_DIRECTORY")?;
    let first = dirs.to_str()?.split(':').next()?.to_owned();
    (!first.is_empty()).then(|| PathBuf::from(first))
}

/// Binds the socket at `path` (mode 0600 from the start). A socket file
/// left by a daemon that is gone is replaced; one a live daemon answers
/// on, or a file that is not a socket, is an error.
pub(crate) fn bind(path: &Path) -> Result<UnixListener, String> {
    use std::os::unix::fs::FileTypeExt;
    let what = |e: std::io::Error| format!("control socket {}: {e}", path.display());
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "control socket {}: exists and is not a socket",
                path.display()
            ));
        }
        match UnixStream::connect(path) {
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(what)?
            }
            Ok(_) => {
                return Err(format!(
                    "control socket {}: another daemon answers on it",
                    path.display()
                ))
            }
            Err(e) => return Err(what(e)),
        }
    }
    // SAFETY: umask(2) only swaps the process's file mode mask; the old
    // one is put back right after the bind.
    let old = unsafe { libc::umask(0o177) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above.
    unsafe { libc::umask(old) };
    let socket = bound.map_err(what)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(what)?;
    Ok(socket)
}

/// The control socket as a child of the root: each client on a thread of
/// its own (see `local`), within [`CONTROL_TIMEOUT`]; its file is removed
/// when it stops.
pub(crate) fn child(socket: UnixListener, path: PathBuf, state: Arc<State>) -> ChildSpec {
    super::local::worker(
        "control",
        socket,
        CONTROL_TIMEOUT,
        move |stream, deadline| answer(stream, deadline, &state),
        move || {
            let _ = std::fs::remove_file(&path);
        },
    )
}

fn answer(stream: UnixStream, deadline: Instant, state: &State) -> std::io::Result<()> {
    use super::local::left;
    stream.set_nonblocking(false)?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\n") && line.len() < 256 {
        stream.set_read_timeout(Some(left(deadline)?))?;
        if (&stream).read(&mut byte)? == 0 {
            break;
        }
        line.push(byte[0]);
    }
    let reply = match String::from_utf8_lossy(&line).trim() {
        "status" => state.status_text(),
        "status --json" => format!("{}\n", state.status_json()),
        other => format!("error: unknown request {other:?} (try status)\n"),
    };
    stream.set_write_timeout(Some(left(deadline)?))?;
    (&stream).write_all(reply.as_bytes())
}

/// `mcpvisor status [--json]`: prints what the daemon at `path` answers.
pub fn status(path: &Path, json: bool) -> u8 {
    match ask(path, if json { "status --json" } else { "status" }) {
        Ok(reply) => {
            print!("{reply}");
            0
        }
        Err(e) => {
            eprintln!(
                "mcpvisor status: no daemon answers on {}: {e}",
                path.display()
            );
            EXIT_UNAVAILABLE
        }
    }
}

fn ask(path: &Path, request: &str) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(CONTROL_TIMEOUT))?;
    stream.set_write_timeout(Some(CONTROL_TIMEOUT))?;
    writeln!(stream, "{request}")?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    if reply.is_empty() {
        // It took the connection and closed it: at its limit of clients,
        // or it could not answer within its time.
        return Err(std::io::Error::other(
            "it closed the connection without an answer (busy?)",
        ));
    }
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_daemon_that_closes_without_an_answer_is_no_answer() {
        let dir = std::env::temp_dir().join(format!("mcpvisor-mute-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("control");
        let socket = UnixListener::bind(&path).unwrap();
        let mute = std::thread::spawn(move || {
            let (mut s, _) = socket.accept().unwrap();
            let mut request = [0u8; 64];
            let _ = s.read(&mut request);
            // Closed with nothing written, as a busy daemon does.
        });
        assert_eq!(status(&path, false), EXIT_UNAVAILABLE);
        mute.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_stale_socket_file_is_replaced_and_a_live_one_refused() {
        let dir = std::env::temp_dir().join(format!("mcpvisor-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("control");
        let live = bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(bind(&path).unwrap_err().contains("another daemon"));
        drop(live);
        // The file stays when its listener is gone: a crashed daemon's.
        assert!(path.exists());
        drop(bind(&path).expect("a stale file is replaced"));
        let plain = dir.join("plain");
        std::fs::write(&plain, "keep").unwrap();
        assert!(bind(&plain).unwrap_err().contains("not a socket"));
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
