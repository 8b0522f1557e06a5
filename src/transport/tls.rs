//! TLS client configurations (rustls on ring; no C TLS stack) for the
//! transports that reach servers over TLS: `amqps://` and `https://`.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use std::sync::{Arc, OnceLock};

/// The client configuration trusting the system's roots (or those of
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` when set), built once it could be
/// (a failure is tried again next time: certificates may be installed
/// meanwhile).
pub(crate) fn system_config() -> Result<Arc<ClientConfig>, String> {
    static CONFIG: OnceLock<Arc<ClientConfig>> = OnceLock::new();
    if let Some(c) = CONFIG.get() {
        return Ok(c.clone());
    }
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        log::warn!("tls: reading the system's certificates: {e}");
    }
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err("no trusted certificate authorities found on this system".into());
    }
    let config = client_config(roots)?;
    Ok(CONFIG.get_or_init(|| config).clone())
}

/// The client configuration trusting the certificates of a PEM file.
pub(crate) fn file_config(path: &std::path::Path) -> Result<Arc<ClientConfig>, String> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM in {shown}: {e}"))?;
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(format!("{shown} holds no usable certificate"));
    }
    client_config(roots)
}

fn client_config(roots: RootCertStore) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())
        .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
}
