//! TLS for tests: a certificate authority made for the test and a TLS
//! terminator (rustls) in front of a plain server.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// A certificate authority and a server certificate for `localhost` and
/// 127.0.0.1 it signed.
pub struct Pki {
    pub ca_pem: String,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: Vec<u8>,
}

pub fn pki(name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, name);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca_cert, &ca_key)
        .unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        server_chain: vec![cert.der().clone()],
        server_key: key.serialize_der(),
    }
}

/// Terminates TLS on an ephemeral port and forwards the plaintext to
/// `backend`, a thread pair per connection.
pub fn tls_terminator(pki: &Pki, backend: &str) -> u16 {
    tls_terminator_counting(pki, backend).0
}

/// [`tls_terminator`], with the number of TLS connections it accepted.
pub fn tls_terminator_counting(pki: &Pki, backend: &str) -> (u16, Arc<AtomicUsize>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                pki.server_chain.clone(),
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.server_key.clone())),
            )
            .unwrap(),
    );
    let backend = backend.to_owned();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    std::thread::spawn(move || {
        for tls in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let config = config.clone();
            let backend = backend.clone();
            std::thread::spawn(move || forward(config, tls, &backend));
        }
    });
    (port, accepted)
}

fn forward(config: Arc<ServerConfig>, mut tls: TcpStream, backend: &str) {
    let mut conn = ServerConnection::new(config).unwrap();
    while conn.is_handshaking() {
        if conn.complete_io(&mut tls).is_err() {
            return; // the client refused our certificate
        }
    }
    let Ok(mut plain) = TcpStream::connect(backend) else {
        return;
    };
    // What came with the client's last handshake message (a request sent
    // right after it) is decrypted already.
    let mut early = Vec::new();
    let _ = conn.reader().read_to_end(&mut early);
    if plain.write_all(&early).is_err() {
        return;
    }
    let conn = Arc::new(Mutex::new(conn));
    // plain -> TLS
    let (c, mut from_broker, mut tls_out) = (
        conn.clone(),
        plain.try_clone().unwrap(),
        tls.try_clone().unwrap(),
    );
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from_broker.read(&mut buf) {
            let mut conn = c.lock().unwrap();
            conn.writer().write_all(&buf[..n]).unwrap();
            while conn.wants_write() {
                if conn.write_tls(&mut tls_out).is_err() {
                    return;
                }
            }
        }
        // The backend is done: close_notify, then the socket.
        let mut conn = c.lock().unwrap();
        conn.send_close_notify();
        while conn.wants_write() {
            if conn.write_tls(&mut tls_out).is_err() {
                break;
            }
        }
        let _ = tls_out.shutdown(Shutdown::Both);
    });
    // TLS -> plain
    let mut to_broker = plain;
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n @ 1..) = tls.read(&mut buf) {
        let mut plaintext = Vec::new();
        {
            let mut conn = conn.lock().unwrap();
            let mut rest = &buf[..n];
            while !rest.is_empty() {
                conn.read_tls(&mut rest).unwrap();
                if conn.process_new_packets().is_err() {
                    return;
                }
                let _ = conn.reader().read_to_end(&mut plaintext);
            }
            while conn.wants_write() {
                if conn.write_tls(&mut tls).is_err() {
                    return;
                }
            }
        }
        if to_broker.write_all(&plaintext).is_err() {
            return;
        }
    }
    let _ = to_broker.shutdown(Shutdown::Both);
}
