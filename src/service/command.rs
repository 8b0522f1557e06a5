//! Command tools: a program the daemon runs as a tool, never through a
//! shell. Its `argv` is a template whose `{name}` placeholders take the
//! call's arguments as they are (no splitting, no globbing); it runs in a
//! process group of its own with a cleared environment (an allow-list plus
//! explicit variables), stdin from /dev/null, bounded output and a time
//! limit after which the whole group is killed; cancelling the call kills
//! it too. Exit 0 gives stdout as text (and as `structuredContent` when the
//! tool declares an output schema and stdout is JSON); any other end gives
//! `isError` with how it ended and the tail of stderr.

use crate::server::{TaskSupport, Tool, ToolResult};
use crate::sync::lock;
use crate::Context;
use crossbeam_channel::{after, select, tick};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default time limit of one run: 30 s.
pub const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Default most bytes of stdout kept: 1 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 1024 * 1024;
/// How much of stderr a failed run reports: its last 4 KiB.
pub const STDERR_TAIL_BYTES: usize = 4 * 1024;
/// How often a run that was asked for progress reports it.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// One command tool.
#[derive(Clone, Debug)]
pub struct CommandTool {
    /// The tool's name.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, if it has one.
    pub output_schema: Option<Value>,
    /// The program and its arguments, with `{name}` placeholders (`{{` and
    /// `}}` for literal braces).
    pub argv: Vec<String>,
    /// Working directory (default: the daemon's).
    pub cwd: Option<PathBuf>,
    /// Variables passed through from the daemon's environment.
    pub env_allow: Vec<String>,
    /// Variables set for the program.
    pub env: BTreeMap<String, String>,
    /// Time limit (default [`DEFAULT_COMMAND_TIMEOUT`]).
    pub timeout: Duration,
    /// Most output bytes kept (default [`DEFAULT_MAX_OUTPUT_BYTES`]).
    pub max_output_bytes: usize,
    /// Whether a call may run as a task (default forbidden): answered at
    /// once with a task handle, the program running on; `tasks/cancel`
    /// kills its process group.
    pub task: TaskSupport,
}

impl CommandTool {
    /// A command tool running `argv` with every other field at its default.
    pub fn new(name: impl Into<String>, argv: Vec<String>) -> CommandTool {
        CommandTool {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
            output_schema: None,
            argv,
            cwd: None,
            env_allow: Vec::new(),
            env: BTreeMap::new(),
            timeout: DEFAULT_COMMAND_TIMEOUT,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            task: TaskSupport::Forbidden,
        }
    }

    /// The tool the server serves; its runs are recorded in `runs`.
    pub fn into_tool(self, runs: Arc<Runs>) -> Tool {
        let spec = Arc::new(self);
        let run = spec.clone();
        let mut tool = Tool::new(
            spec.name.clone(),
            spec.input_schema.clone(),
            move |args, ctx| Ok(run.run(&Value::Object(args), ctx, &runs)),
        )
        .description(spec.description.clone())
        .task_support(spec.task);
        if let Some(schema) = &spec.output_schema {
            tool = tool.output_schema(schema.clone());
        }
        tool
    }

    /// Runs the command for one call, recorded in `runs`.
    pub fn run(&self, args: &Value, ctx: &Context, runs: &Runs) -> ToolResult {
        let argv = match fill_argv(&self.argv, args) {
            Ok(a) => a,
            Err(e) => return ToolResult::error(e),
        };
        let Some((program, rest)) = argv.split_first() else {
            return ToolResult::error("the command's argv is empty");
        };
        let mut cmd = Command::new(program);
        cmd.args(rest)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        crate::transport::child_exit::with_no_signal_blocked(&mut cmd);
        for name in &self.env_allow {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        cmd.envs(&self.env);
        if let Some(dir) = &self.cwd {
            cmd.current_dir(dir);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                runs.record(&self.name, RunEnd::Unstartable);
                return ToolResult::error(format!("cannot start {program}: {e}"));
            }
        };
        let group = child.id() as libc::pid_t;
        // Watched first, then counted as running: a run that cannot be
        // watched is already killed and reaped, and was never counted.
        let watched = watch(&mut child, group, self.max_output_bytes, spawn_thread);
        let Watch {
            stdout,
            stderr,
            done,
        } = match watched {
            Ok(w) => w,
            Err(e) => {
                runs.record(&self.name, RunEnd::Unstartable);
                return ToolResult::error(format!("{}: {e}", self.name));
            }
        };
        lock(&runs.groups).insert(group);
        let started = Instant::now();
        let deadline = after(self.timeout);
        let ticks = tick(PROGRESS_INTERVAL);
        let cancelled = ctx.cancelled();
        let ended = loop {
            select! {
                recv(done) -> _ => break End::Exited(None),
                recv(deadline) -> _ => break End::TimedOut,
                recv(cancelled) -> _ => break End::Cancelled,
                recv(ticks) -> _ => {
                    let secs = started.elapsed().as_secs_f64();
                    let limit = self.timeout.as_secs_f64();
                    ctx.progress(secs, Some(limit), Some("running"));
                }
            }
        };
        // The whole group, also after a normal exit: whatever the program
        // left running in the background would hold its pipes open.
        {
            let mut groups = lock(&runs.groups);
            // SAFETY: kill(2) on the process group we created for it.
            unsafe {
                libc::kill(-group, libc::SIGKILL);
            }
            groups.remove(&group);
        }
        if !matches!(ended, End::Exited(_)) {
            let _ = done.recv();
        }
        // Reaped only now, the group killed.
        let status = child.wait().ok();
        let ended = match ended {
            End::Exited(_) => End::Exited(status),
            other => other,
        };
        runs.record(
            &self.name,
            match &ended {
                End::Exited(Some(s)) if s.success() => RunEnd::Ok,
                End::Exited(_) => RunEnd::Failed,
                End::TimedOut => RunEnd::TimedOut,
                End::Cancelled => RunEnd::Cancelled,
            },
        );
        // A process that left the group (setsid) may still hold a pipe:
        // take what arrived within a moment and go on.
        let drained = std::time::Instant::now() + DRAIN_WAIT;
        let out = stdout.map(|c| c.finish(drained)).unwrap_or_default();
        let err = stderr.map(|c| c.finish(drained)).unwrap_or_default();
        self.result(ended, out, err)
    }

    fn result(&self, ended: End, out: Captured, err: Captured) -> ToolResult {
        let cut = |c: &Captured, what: &str| {
            (c.total > c.bytes.len())
                .then(|| format!("\n[{what} cut at {} of {} bytes]", c.bytes.len(), c.total))
        };
        let how = match ended {
            End::Exited(Some(s)) if s.success() => {
                let text = String::from_utf8_lossy(&out.bytes).into_owned();
                let note = cut(&out, "output").unwrap_or_default();
                if self.output_schema.is_none() {
                    return ToolResult::text(text + &note);
                }
                // A declared output schema needs JSON: say why there is none.
                return match serde_json::from_str::<Value>(&text) {
                    Ok(v) if note.is_empty() => ToolResult::structured(v),
                    _ => ToolResult::error(format!(
                        "{} declares an output schema but its output is not JSON{note}:\n{text}",
                        self.name
                    )),
                };
            }
            End::Exited(Some(s)) => describe(s),
            End::Exited(None) => "the command's end could not be observed".to_owned(),
            End::TimedOut => format!(
                "timed out after {:?}; its process group was killed",
                self.timeout
            ),
            End::Cancelled => "cancelled; its process group was killed".to_owned(),
        };
        let tail = String::from_utf8_lossy(&err.bytes);
        let mut message = format!("{} {how}", self.name);
        if !tail.trim().is_empty() {
            let earlier = err.total - err.bytes.len();
            let cut = match earlier {
                0 => String::new(),
                n => format!(
                    " (its last {} bytes; {n} before them left out)",
                    err.bytes.len()
                ),
            };
            message.push_str(&format!("\nstderr{cut}:\n{}", tail.trim_end()));
        }
        ToolResult::error(message)
    }
}

/// How a run of a command tool ended, as [`Runs`] counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RunEnd {
    /// Exit status 0.
    Ok,
    /// Another exit status, or killed from outside.
    Failed,
    /// Killed at its time limit.
    TimedOut,
    /// Killed because the call was cancelled.
    Cancelled,
    /// The program could not be started, or was killed at once because
    /// no thread could be started to watch it.
    Unstartable,
}

impl RunEnd {
    /// `ok`, `failed`, `timeout`, `cancelled` or `unstartable`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunEnd::Ok => "ok",
            RunEnd::Failed => "failed",
            RunEnd::TimedOut => "timeout",
            RunEnd::Cancelled => "cancelled",
            RunEnd::Unstartable => "unstartable",
        }
    }
}

/// The runs of a daemon's command tools: how many ended how (for
/// metrics), and the process groups still running, which a stop kills.
#[derive(Default)]
pub struct Runs {
    groups: Mutex<HashSet<libc::pid_t>>,
    ends: Mutex<BTreeMap<(String, RunEnd), u64>>,
}

impl Runs {
    fn record(&self, tool: &str, end: RunEnd) {
        *lock(&self.ends).entry((tool.to_owned(), end)).or_default() += 1;
    }

    /// Runs so far by tool and end.
    pub fn ends(&self) -> Vec<(String, RunEnd, u64)> {
        lock(&self.ends)
            .iter()
            .map(|((t, e), n)| (t.clone(), *e, *n))
            .collect()
    }

    /// Commands running now.
    pub fn running(&self) -> usize {
        lock(&self.groups).len()
    }

    /// Kills the process group of every command still running (a stop
    /// whose calls could not all finish); returns how many.
    pub fn kill_all(&self) -> usize {
        let groups = lock(&self.groups);
        for g in groups.iter() {
            // SAFETY: kill(2) on a process group a run created and has not
            // yet killed and forgotten (it removes it under this lock).
            unsafe {
                libc::kill(-g, libc::SIGKILL);
            }
        }
        groups.len()
    }
}

enum End {
    Exited(Option<ExitStatus>),
    TimedOut,
    Cancelled,
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was killed by signal {sig}"),
        _ => "ended abnormally".to_owned(),
    }
}

/// What a stream produced: the first `limit` bytes and how many there were.
#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    total: usize,
}

/// Longest wait for the streams' ends, both together, once the command's
/// group was killed.
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// A stream being read on a thread of its own.
struct Capture {
    got: Arc<std::sync::Mutex<Captured>>,
    ended: crossbeam_channel::Receiver<()>,
}

impl Capture {
    /// What the stream produced, waiting until `deadline` at most for its end.
    fn finish(self, deadline: std::time::Instant) -> Captured {
        let _ = self.ended.recv_deadline(deadline);
        std::mem::take(&mut *crate::sync::lock(&self.got))
    }
}

/// Which bytes of a stream [`capture`] keeps.
#[derive(Clone, Copy)]
enum Keep {
    /// The first so many.
    Head(usize),
    /// The last so many.
    Tail(usize),
}

/// How a thread named so is started to run the function: [`spawn_thread`],
/// or in a test one that fails as thread creation does under a task limit.
type Spawn = fn(&str, Box<dyn FnOnce() + Send>) -> std::io::Result<()>;

/// Starts a thread named `name` running `f` (detached).
fn spawn_thread(name: &str, f: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(f)
        .map(drop)
}

/// The threads that watch a run: its stdout and stderr read, its exit
/// waited for.
struct Watch {
    stdout: Option<Capture>,
    stderr: Option<Capture>,
    /// Its exit, waited for without reaping it: until its group is killed,
    /// its id (the group's) stays its own.
    done: crossbeam_channel::Receiver<std::io::Result<()>>,
}

/// Starts the [`Watch`] of `child`, the leader of process group `group`
/// (its stdout kept up to `limit` bytes), with `spawn`. When a thread
/// cannot be started, the group is killed and the child reaped, and the
/// error says so: nothing of the run is left.
fn watch(
    child: &mut Child,
    group: libc::pid_t,
    limit: usize,
    spawn: Spawn,
) -> Result<Watch, String> {
    watchers(child, group, limit, spawn).map_err(|e| {
        // SAFETY: kill(2) on the process group we created for it; its
        // leader is not yet reaped, so the id is still its.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
        let _ = child.wait();
        format!("cannot start a thread to watch the command, so it was killed: {e}")
    })
}

/// [`watch`]'s threads; the first that cannot be started is the error.
fn watchers(
    child: &mut Child,
    group: libc::pid_t,
    limit: usize,
    spawn: Spawn,
) -> std::io::Result<Watch> {
    let stdout = child
        .stdout
        .take()
        .map(|s| capture(s, Keep::Head(limit), spawn))
        .transpose()?;
    let stderr = child
        .stderr
        .take()
        .map(|s| capture(s, Keep::Tail(STDERR_TAIL_BYTES), spawn))
        .transpose()?;
    let (done_tx, done) = crossbeam_channel::bounded(1);
    spawn(
        "mcpvisor-command-exit",
        Box::new(move || {
            let _ = done_tx.send(crate::transport::child_exit::exited_unreaped(group));
        }),
    )?;
    Ok(Watch {
        stdout,
        stderr,
        done,
    })
}

/// Reads `source` to its end on a thread of its own (started with
/// `spawn`), keeping what `keep` says (the rest is read and dropped, so
/// the program never blocks on a full pipe).
fn capture(
    mut source: impl Read + Send + 'static,
    keep: Keep,
    spawn: Spawn,
) -> std::io::Result<Capture> {
    let got = Arc::new(std::sync::Mutex::new(Captured::default()));
    let (done, ended) = crossbeam_channel::bounded(1);
    let into = got.clone();
    let name = match keep {
        Keep::Head(_) => "mcpvisor-command-out",
        Keep::Tail(_) => "mcpvisor-command-err",
    };
    spawn(
        name,
        Box::new(move || {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match source.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut c = crate::sync::lock(&into);
                        c.total += n;
                        match keep {
                            Keep::Head(limit) => {
                                let room = n.min(limit.saturating_sub(c.bytes.len()));
                                c.bytes.extend_from_slice(&buf[..room]);
                            }
                            Keep::Tail(last) => {
                                c.bytes.extend_from_slice(&buf[..n]);
                                let over = c.bytes.len().saturating_sub(last);
                                c.bytes.drain(..over);
                            }
                        }
                    }
                }
            }
            let _ = done.send(());
        }),
    )?;
    Ok(Capture { got, ended })
}

/// Fills `{name}` placeholders from `args`: a string as it is, anything
/// else as its JSON text; `{{` and `}}` are literal braces. A placeholder
/// is (part of) one argv element; its value is never split.
pub fn fill_argv(templates: &[String], args: &Value) -> Result<Vec<String>, String> {
    let value = |name: &str| match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) | None => Err(format!("argument {name:?} is required by the command")),
        Some(other) => Ok(other.to_string()),
    };
    templates.iter().map(|t| fill(t, &value)).collect()
}

/// Checks the placeholder syntax of `templates` without any arguments.
pub fn check_argv(templates: &[String]) -> Result<(), String> {
    let any = |_: &str| Ok(String::new());
    templates.iter().try_for_each(|t| fill(t, &any).map(drop))
}

/// The names of the placeholders in `template`, in order (none if its
/// syntax is wrong: see [`check_argv`]).
pub fn placeholders(template: &str) -> Vec<String> {
    let names = std::cell::RefCell::new(Vec::new());
    let name = |n: &str| {
        names.borrow_mut().push(n.to_owned());
        Ok(String::new())
    };
    match fill(template, &name) {
        Ok(_) => names.into_inner(),
        Err(_) => Vec::new(),
    }
}

fn fill(template: &str, value: &dyn Fn(&str) -> Result<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if let Some(after) = tail.strip_prefix('{') {
            let end = after
                .find('}')
                .ok_or_else(|| format!("unclosed placeholder in {template:?}"))?;
            out.push_str(&value(&after[..end])?);
            rest = &after[end + 1..];
        } else {
            return Err(format!("a lone '}}' in {template:?} (write '}}}}')"));
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_stop_kills_every_group_still_running() {
        let runs = Runs::default();
        let mut child = Command::new("sleep")
            .arg("600")
            .process_group(0)
            .spawn()
            .unwrap();
        lock(&runs.groups).insert(child.id() as libc::pid_t);
        assert_eq!(runs.running(), 1);
        assert_eq!(runs.kill_all(), 1);
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    }

    #[test]
    fn a_run_whose_watching_thread_cannot_start_is_killed_and_reaped() {
        // Thread creation fails as it does under a task limit, for the
        // last of the three threads (its output's readers have started).
        fn refuse_the_exit_waiter(name: &str, f: Box<dyn FnOnce() + Send>) -> std::io::Result<()> {
            if name == "mcpvisor-command-exit" {
                return Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
            }
            spawn_thread(name, f)
        }
        use std::io::{BufRead, BufReader};
        let mut child = Command::new("/bin/sh")
            .args(["-c", "sleep 600 & echo $!; wait"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let helper: libc::pid_t = line.trim().parse().unwrap();
        let group = child.id() as libc::pid_t;
        let e = watch(&mut child, group, 1024, refuse_the_exit_waiter)
            .err()
            .expect("a thread could not start");
        assert!(e.contains("cannot start a thread"), "{e}");
        // Reaped (its status is known) after a SIGKILL to its group.
        let status = child.try_wait().unwrap().expect("reaped");
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // The helper in its group was killed too: it ends (a zombie until
        // whoever inherited it reaps it).
        let dead = || {
            std::fs::read_to_string(format!("/proc/{helper}/stat"))
                .ok()
                .is_none_or(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('Z')))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !dead() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let survived = !dead();
        if survived {
            // SAFETY: kill(2) on the helper this test started.
            unsafe {
                libc::kill(helper, libc::SIGKILL);
            }
        }
        assert!(!survived, "the helper ({helper}) outlived its run");
    }

    #[test]
    fn the_head_of_output_and_the_tail_of_errors_are_kept() {
        let text: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let head = capture(
            std::io::Cursor::new(text.clone()),
            Keep::Head(1000),
            spawn_thread,
        )
        .unwrap()
        .finish(std::time::Instant::now() + DRAIN_WAIT);
        assert_eq!(
            (head.bytes.as_slice(), head.total),
            (&text[..1000], text.len())
        );
        let tail = capture(
            std::io::Cursor::new(text.clone()),
            Keep::Tail(STDERR_TAIL_BYTES),
            spawn_thread,
        )
        .unwrap()
        .finish(std::time::Instant::now() + DRAIN_WAIT);
        assert_eq!(tail.total, text.len());
        assert_eq!(
            tail.bytes.as_slice(),
            &text[text.len() - STDERR_TAIL_BYTES..]
        );
    }

    #[test]
    fn placeholders_are_filled_whole_and_never_split() {
        let t: Vec<String> = ["du", "-sh", "--", "{path}", "x{n}y", "{{literal}}"]
            .map(String::from)
            .to_vec();
        let argv = fill_argv(&t, &json!({"path": "/tmp/a b;rm -rf *", "n": 3})).unwrap();
        assert_eq!(
            argv,
            ["du", "-sh", "--", "/tmp/a b;rm -rf *", "x3y", "{literal}"]
        );
        assert!(fill_argv(&t, &json!({"n": 1}))
            .unwrap_err()
            .contains("\"path\""));
        let syntax = |t: &str| check_argv(&[t.to_owned()]);
        assert!(syntax("{open").unwrap_err().contains("unclosed"));
        assert!(syntax("a}b").unwrap_err().contains("lone"));
        assert!(
            syntax("{a} then }").unwrap_err().contains("lone"),
            "after a placeholder too"
        );
        assert!(syntax("{a}{{b}}").is_ok());
    }
}
