//! A TCP tap between a client and a server speaking newline-delimited
//! JSON-RPC: it forwards every message both ways and keeps them, so a
//! test can check each one against the official schema afterwards.

use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// One message seen: its connection, whether the client sent it, itself.
#[derive(Clone, Debug)]
pub struct Seen {
    pub connection: usize,
    pub from_client: bool,
    pub message: Value,
}

/// The tap: connect clients to `addr`.
pub struct Tap {
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<Seen>>>,
}

/// Starts a tap in front of the TCP server at `server`.
pub fn tap(server: SocketAddr) -> Tap {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let log: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let kept = log.clone();
    std::thread::spawn(move || {
        for (connection, client) in listener.incoming().enumerate() {
            let Ok(client) = client else { return };
            let server = TcpStream::connect(server).unwrap();
            for (from_client, from, to) in [
                (
                    true,
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                ),
                (false, server, client),
            ] {
                let log = kept.clone();
                std::thread::spawn(move || forward(connection, from_client, from, to, &log));
            }
        }
    });
    Tap { addr, log }
}

fn forward(
    connection: usize,
    from_client: bool,
    from: TcpStream,
    mut to: TcpStream,
    log: &Mutex<Vec<Seen>>,
) {
    for line in BufReader::new(from).lines() {
        let Ok(line) = line else { break };
        // Not JSON: kept as a string, which `validate` then refuses.
        let message: Value = serde_json::from_str(&line).unwrap_or(Value::String(line.clone()));
        // Kept before it is passed on: a request is always seen before its answer.
        log.lock().unwrap().push(Seen {
            connection,
            from_client,
            message,
        });
        if to.write_all(format!("{line}\n").as_bytes()).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

impl Tap {
    /// A client connection through the tap.
    pub fn connection(&self) -> mcpvisor::client::Connection {
        mcpvisor::client::Connection::tcp(self.addr).unwrap()
    }

    /// Every message so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    /// Checks every message so far against revision `version` (requests,
    /// notifications, results by the method they answer, errors),
    /// skipping the custom methods in `custom` and their answers; returns
    /// how many were checked.
    pub fn validate(&self, version: &str, custom: &[&str]) -> usize {
        let mut asked: HashMap<(usize, bool, String), String> = HashMap::new();
        let mut checked = 0;
        for s in self.seen() {
            let m = &s.message;
            assert!(m.is_object() || m.is_array(), "not a JSON-RPC message: {m}");
            let method = m.get("method").and_then(Value::as_str);
            if let (Some(method), Some(id)) = (method, m.get("id")) {
                asked.insert(
                    (s.connection, s.from_client, id.to_string()),
                    method.to_owned(),
                );
            }
            // What this message answers, if it is a response.
            let answers = match (method, m.get("id")) {
                (None, Some(id)) => asked
                    .get(&(s.connection, !s.from_client, id.to_string()))
                    .cloned()
                    .unwrap_or_default(),
                _ => String::new(),
            };
            if method.is_some_and(|m| custom.contains(&m)) || custom.contains(&answers.as_str()) {
                continue;
            }
            checked += 1;
            if !s.from_client {
                super::validate_server_message(version, m, &answers);
                continue;
            }
            let def = match (method, m.get("id"), m.get("result")) {
                (Some(_), Some(_), _) => "ClientRequest",
                (Some(_), None, _) => "ClientNotification",
                (None, _, Some(result)) => {
                    let def = match answers.as_str() {
                        "sampling/createMessage" => "CreateMessageResult",
                        "elicitation/create" => "ElicitResult",
                        "roots/list" => "ListRootsResult",
                        _ => "EmptyResult",
                    };
                    super::assert_valid(version, def, result);
                    "JSONRPCResultResponse"
                }
                _ => "JSONRPCErrorResponse",
            };
            super::assert_valid(version, def, m);
        }
        checked
    }
}
