//! TLS: the rustls server configuration the `tls-*` settings describe, and the one in force
//! for new connections; and a replica's client configuration (`replication_client`, built
//! each time its link connects). The server's is built at start when `tls-port` is set, and
//! again by `CONFIG SET` of any `tls-*` setting (Redis's `applyTlsCfg`): a build that fails
//! leaves the configuration in force untouched, so a bad certificate file answers an error
//! and clients keep connecting with the old certificates. Connections already open keep the
//! configuration they were accepted with.

use crate::config::Config;
use parking_lot::RwLock;
use std::sync::Arc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{
    NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier,
};
use tokio_rustls::rustls::sign::{CertifiedKey, SingleCertAndKey};
use tokio_rustls::rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};

/// The protocol names `tls-protocols` accepts, as Redis (case-insensitive).
const PROTOCOLS: &[&str] = &["TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"];

/// `tls-protocols`: the names Redis accepts, kept as written; empty is Redis's default
/// (TLSv1.2 and TLSv1.3). Which of them rustls can speak is checked when TLS is configured.
pub fn parse_protocols(value: &str) -> Result<String, String> {
    for w in value.split_whitespace() {
        if !PROTOCOLS.iter().any(|p| p.eq_ignore_ascii_case(w)) {
            return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into());
        }
    }
    Ok(value.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// How a TLS client's certificate is checked (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientAuth {
    /// No certificate is asked for.
    No,
    /// A certificate signed by a configured CA is required.
    Yes,
    /// A certificate is asked for and checked when given, but not required.
    Optional,
}

impl ClientAuth {
    pub fn from_setting(v: &str) -> ClientAuth {
        match v {
            "no" => ClientAuth::No,
            "optional" => ClientAuth::Optional,
            _ => ClientAuth::Yes,
        }
    }
}

/// One build of the `tls-*` settings: a rustls configuration per `tls-auth-clients` mode,
/// all sharing the same certificate and key, so `tls-auth-clients` changes take effect for
/// the next connection without reloading anything (as in Redis, which reads it per
/// connection). A mode that needs a CA is absent when none is configured.
pub struct Loaded {
    no: Arc<ServerConfig>,
    yes: Option<Arc<ServerConfig>>,
    optional: Option<Arc<ServerConfig>>,
}

impl Loaded {
    pub fn for_auth(&self, auth: ClientAuth) -> Option<Arc<ServerConfig>> {
        match auth {
            ClientAuth::No => Some(self.no.clone()),
            ClientAuth::Yes => self.yes.clone(),
            ClientAuth::Optional => self.optional.clone(),
        }
    }
}

/// The TLS configuration in force (none until TLS is configured).
#[derive(Default)]
pub struct TlsContext {
    current: RwLock<Option<Arc<Loaded>>>,
}

impl TlsContext {
    /// Builds the configuration `cfg` describes and puts it in force; on error the one in
    /// force stays. Nothing is built while `tls-port` is 0 (as Redis, which configures TLS
    /// only when it listens for it or replicates over it): the files are checked when TLS
    /// is turned on. With `tls-replication yes` the replica's client configuration must
    /// build too.
    pub fn reload(&self, cfg: &Config) -> Result<(), String> {
        // A replica's link would fail at every connection: refused now, as Redis's
        // tlsConfigure refuses it.
        if cfg.get_bool("tls-replication") {
            replication_client(cfg)?;
        }
        if cfg.get_i64("tls-port") == 0 {
            return Ok(());
        }
        let loaded = build(cfg)?;
        *self.current.write() = Some(Arc::new(loaded));
        Ok(())
    }

    /// The rustls configuration for a new connection under `auth`.
    pub fn server_config(&self, auth: ClientAuth) -> Option<Arc<ServerConfig>> {
        self.current.read().as_ref()?.for_auth(auth)
    }
}

/// The cipher suites the ring provider has, with the names OpenSSL gives them (what
/// `tls-ciphers` and `tls-ciphersuites` are written in) and the OpenSSL cipher-string words
/// that select them (`ECDHE+AESGCM`, `aRSA`, `CHACHA20`...).
struct Suite {
    suite: SupportedCipherSuite,
    openssl: &'static str,
    tags: &'static [&'static str],
}

fn suites() -> Vec<Suite> {
    use ring::cipher_suite as cs;
    vec![
        Suite {
            suite: cs::TLS13_AES_256_GCM_SHA384,
            openssl: "TLS_AES_256_GCM_SHA384",
            tags: &[],
        },
        Suite {
            suite: cs::TLS13_AES_128_GCM_SHA256,
            openssl: "TLS_AES_128_GCM_SHA256",
            tags: &[],
        },
        Suite {
            suite: cs::TLS13_CHACHA20_POLY1305_SHA256,
            openssl: "TLS_CHACHA20_POLY1305_SHA256",
            tags: &[],
        },
        Suite {
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
            openssl: "ECDHE-ECDSA-AES256-GCM-SHA384",
            tags: &["ECDSA", "aECDSA", "AESGCM", "AES", "AES256", "SHA384"],
        },
        Suite {
            suite: cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
            openssl: "ECDHE-ECDSA-AES128-GCM-SHA256",
            tags: &["ECDSA", "aECDSA", "AESGCM", "AES", "AES128", "SHA256"],
        },
        Suite {
            suite: cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
            openssl: "ECDHE-ECDSA-CHACHA20-POLY1305",
            tags: &["ECDSA", "aECDSA", "CHACHA20", "CHACHA20-POLY1305", "SHA256"],
        },
        Suite {
            suite: cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            openssl: "ECDHE-RSA-AES256-GCM-SHA384",
            tags: &["RSA", "aRSA", "AESGCM", "AES", "AES256", "SHA384"],
        },
        Suite {
            suite: cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            openssl: "ECDHE-RSA-AES128-GCM-SHA256",
            tags: &["RSA", "aRSA", "AESGCM", "AES", "AES128", "SHA256"],
        },
        Suite {
            suite: cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
            openssl: "ECDHE-RSA-CHACHA20-POLY1305",
            tags: &["RSA", "aRSA", "CHACHA20", "CHACHA20-POLY1305", "SHA256"],
        },
    ]
}

fn is_tls13(s: &Suite) -> bool {
    s.suite.version() == &rustls::version::TLS13
}

/// Words of an OpenSSL cipher string that every TLS 1.2 suite here has (all are ECDHE
/// key exchange with AEAD ciphers, "HIGH" strength, in OpenSSL's DEFAULT list).
const COMMON_TAGS: &[&str] = &[
    "DEFAULT", "ALL", "HIGH", "ECDHE", "EECDH", "kECDHE", "kEECDH", "AEAD", "TLSv1.2", "FIPS",
];

fn tag_matches(s: &Suite, tag: &str) -> bool {
    s.openssl.eq_ignore_ascii_case(tag)
        || s.suite
            .suite()
            .as_str()
            .is_some_and(|n| n.eq_ignore_ascii_case(tag))
        || s.tags.iter().any(|t| t.eq_ignore_ascii_case(tag))
        || COMMON_TAGS.iter().any(|t| t.eq_ignore_ascii_case(tag))
}

/// `tls-ciphers`: an OpenSSL cipher string (TLS 1.2 and older) read as far as it selects
/// suites rustls has: `NAME`, `WORD+WORD` (suites matching every word), `!X` and `-X`
/// (remove), `+X` and `@...` (ordering and security-level directives, which change nothing
/// here). Words naming ciphers rustls does not have (CBC, RSA key exchange, 3DES...) select
/// nothing, as OpenSSL skips words it has no cipher for; a string that selects nothing at
/// all is an error, as in OpenSSL.
fn select_tls12(value: &str, all: &[Suite]) -> Result<Vec<SupportedCipherSuite>, String> {
    let candidates: Vec<&Suite> = all.iter().filter(|s| !is_tls13(s)).collect();
    let mut chosen: Vec<usize> = Vec::new();
    let mut banned: Vec<usize> = Vec::new();
    for word in value.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        if word.starts_with('@') || word.starts_with('+') {
            continue;
        }
        let (op, body) = match word.as_bytes()[0] {
            b'!' | b'-' => (word.as_bytes()[0], &word[1..]),
            _ => (b' ', word),
        };
        let hits = candidates.iter().enumerate().filter(|(_, s)| {
            body.split('+')
                .filter(|t| !t.is_empty())
                .all(|t| tag_matches(s, t))
        });
        for (i, _) in hits {
            match op {
                b'!' => {
                    banned.push(i);
                    chosen.retain(|&c| c != i);
                }
                b'-' => chosen.retain(|&c| c != i),
                _ if !chosen.contains(&i) && !banned.contains(&i) => chosen.push(i),
                _ => {}
            }
        }
    }
    if chosen.is_empty() {
        return Err(format!(
            "Failed to configure ciphers: {value}: it selects no cipher this server supports ({})",
            candidates
                .iter()
                .map(|s| s.openssl)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(chosen.into_iter().map(|i| candidates[i].suite).collect())
}

/// `tls-ciphersuites`: TLS 1.3 suite names separated by colons, as OpenSSL's
/// `SSL_CTX_set_ciphersuites`; names rustls lacks are skipped, and a list naming none it has
/// is an error.
fn select_tls13(value: &str, all: &[Suite]) -> Result<Vec<SupportedCipherSuite>, String> {
    let candidates: Vec<&Suite> = all.iter().filter(|s| is_tls13(s)).collect();
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    for name in value.split([':', ',', ' ']).filter(|w| !w.is_empty()) {
        if let Some(s) = candidates.iter().find(|s| tag_matches(s, name)) {
            if !chosen.iter().any(|c| c.suite() == s.suite.suite()) {
                chosen.push(s.suite);
            }
        }
    }
    if chosen.is_empty() {
        return Err(format!(
            "Failed to configure ciphersuites: {value}: it names no TLSv1.3 ciphersuite this server supports ({})",
            candidates
                .iter()
                .map(|s| s.openssl)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(chosen)
}

fn protocol_versions(
    value: &str,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    if value.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS12, &rustls::version::TLS13]);
    }
    let mut out: Vec<&'static rustls::SupportedProtocolVersion> = Vec::new();
    for w in value.split_whitespace() {
        if w.eq_ignore_ascii_case("TLSv1.2") {
            out.push(&rustls::version::TLS12);
        } else if w.eq_ignore_ascii_case("TLSv1.3") {
            out.push(&rustls::version::TLS13);
        } else if w.eq_ignore_ascii_case("TLSv1") || w.eq_ignore_ascii_case("TLSv1.1") {
            // Formally deprecated and not implemented by rustls: skipped with a warning.
            tracing::warn!("tls-protocols: {w} is not supported by this server and is skipped");
        } else {
            return Err(parse_protocols(w).err().unwrap_or_default());
        }
    }
    if out.is_empty() {
        return Err(format!(
            "tls-protocols '{value}' names no protocol this server supports (TLSv1.2, TLSv1.3)"
        ));
    }
    Ok(out)
}

fn read_file(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| e.to_string())
}

fn load_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let data = read_file(path)?;
    let certs = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("bad PEM: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate found in the file".into());
    }
    Ok(certs)
}

fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let data = read_file(path)?;
    // An encrypted key (PKCS#8 `ENCRYPTED PRIVATE KEY`, or the legacy `Proc-Type:
    // 4,ENCRYPTED` header): rustls reads only plain keys, so it is refused with the way out
    // rather than read as garbage.
    let text = String::from_utf8_lossy(&data);
    if text.contains("ENCRYPTED PRIVATE KEY") || text.contains("Proc-Type: 4,ENCRYPTED") {
        let why = if pass.is_empty() {
            "the key is encrypted and no tls-key-file-pass is set"
        } else {
            "the key is encrypted; tls-key-file-pass is not supported by this server"
        };
        return Err(format!(
            "{why}: decrypt it first (openssl pkey -in {path} -out plain.key)"
        ));
    }
    PrivateKeyDer::from_pem_slice(&data).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => "no private key found in the file".into(),
        e => format!("bad PEM: {e}"),
    })
}

/// The CAs of `tls-ca-cert-file` (a PEM bundle) and `tls-ca-cert-dir` (every file in it
/// holding PEM certificates: OpenSSL's hashed directories and plain ones alike).
fn load_roots(file: &str, dir: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if !file.is_empty() {
        let certs = load_certs(file).map_err(|e| format!("{file}: {e}"))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(format!("{file}: no usable CA certificate"));
        }
    }
    if !dir.is_empty() {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{dir}: {e}"))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_file() {
                continue;
            }
            if let Ok(data) = std::fs::read(&path) {
                let certs = CertificateDer::pem_slice_iter(&data).filter_map(Result::ok);
                roots.add_parsable_certificates(certs);
            }
        }
        if roots.is_empty() {
            return Err(format!("{dir}: no CA certificate found in the directory"));
        }
    }
    Ok(roots)
}

/// The ring provider with the cipher suites `tls-ciphersuites` (TLSv1.3) and `tls-ciphers`
/// (TLSv1.2) select, empty meaning all: the server's and a replica's link alike.
fn crypto_provider(cfg: &Config) -> Result<Arc<CryptoProvider>, String> {
    let all = suites();
    let mut chosen = match cfg.get("tls-ciphersuites") {
        "" => all
            .iter()
            .filter(|s| is_tls13(s))
            .map(|s| s.suite)
            .collect(),
        v => select_tls13(v, &all)?,
    };
    match cfg.get("tls-ciphers") {
        "" => chosen.extend(all.iter().filter(|s| !is_tls13(s)).map(|s| s.suite)),
        v => chosen.extend(select_tls12(v, &all)?),
    }
    Ok(Arc::new(CryptoProvider {
        cipher_suites: chosen,
        ..ring::default_provider()
    }))
}

/// Builds the rustls configurations the `tls-*` settings of `cfg` describe. The error
/// says which setting and file is at fault, in Redis's words where Redis has them.
pub fn build(cfg: &Config) -> Result<Loaded, String> {
    let cert_file = cfg.get("tls-cert-file");
    let key_file = cfg.get("tls-key-file");
    let ca_file = cfg.get("tls-ca-cert-file");
    let ca_dir = cfg.get("tls-ca-cert-dir");
    if cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    let auth = ClientAuth::from_setting(cfg.get("tls-auth-clients"));
    if auth != ClientAuth::No && ca_file.is_empty() && ca_dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-auth-clients is enabled!".into());
    }
    let versions = protocol_versions(cfg.get("tls-protocols"))?;

    let provider = crypto_provider(cfg)?;

    let certs = load_certs(cert_file)
        .map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
    let key = load_key(key_file, cfg.get("tls-key-file-pass"))
        .map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    let certified = CertifiedKey::from_der(certs, key, &provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => format!(
            "Failed to load private key: {key_file}: it is not the key of the certificate in {cert_file}"
        ),
        e => format!("Failed to load private key: {key_file}: {e}"),
    })?;
    let resolver = Arc::new(SingleCertAndKey::from(certified));

    let roots = if ca_file.is_empty() && ca_dir.is_empty() {
        None
    } else {
        Some(Arc::new(load_roots(ca_file, ca_dir).map_err(|e| {
            format!("Failed to configure CA certificate(s) file/directory: {e}")
        })?))
    };

    let caching = cfg.get_bool("tls-session-caching");
    let cache_size = match cfg.get_u64("tls-session-cache-size") {
        // Redis: 0 is an unlimited cache; rustls's cache needs a bound.
        0 => 1 << 20,
        n => n as usize,
    };
    let finish = |mut c: ServerConfig| -> Arc<ServerConfig> {
        c.ignore_client_order = cfg.get_bool("tls-prefer-server-ciphers");
        if caching {
            c.session_storage = ServerSessionMemoryCache::new(cache_size);
        } else {
            c.session_storage = Arc::new(NoServerSessionStorage {});
            c.send_tls13_tickets = 0;
        }
        Arc::new(c)
    };
    let builder = || {
        ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("Failed to configure TLS: {e}"))
    };
    let no = finish(
        builder()?
            .with_no_client_auth()
            .with_cert_resolver(resolver.clone()),
    );
    let (mut yes, mut optional) = (None, None);
    if let Some(roots) = roots {
        let verifier = |allow_none: bool| {
            let b = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone());
            let b = if allow_none {
                b.allow_unauthenticated()
            } else {
                b
            };
            b.build()
                .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))
        };
        yes = Some(finish(
            builder()?
                .with_client_cert_verifier(verifier(false)?)
                .with_cert_resolver(resolver.clone()),
        ));
        optional = Some(finish(
            builder()?
                .with_client_cert_verifier(verifier(true)?)
                .with_cert_resolver(resolver),
        ));
    }
    Ok(Loaded { no, yes, optional })
}

/// A replica's TLS to its master (`tls-replication yes`): the master's chain is checked
/// against `tls-ca-cert-file` / `tls-ca-cert-dir`, not its name (Redis's OpenSSL context
/// sets no host to match, and masters are named by address); the certificate presented is
/// `tls-client-cert-file`, else `tls-cert-file`, when one is set. Protocols and ciphers are
/// the server's.
pub fn replication_client(cfg: &Config) -> Result<Arc<rustls::ClientConfig>, String> {
    let ca_file = cfg.get("tls-ca-cert-file");
    let ca_dir = cfg.get("tls-ca-cert-dir");
    if ca_file.is_empty() && ca_dir.is_empty() {
        return Err(
            "tls-replication needs tls-ca-cert-file or tls-ca-cert-dir to check the master's certificate"
                .into(),
        );
    }
    let versions = protocol_versions(cfg.get("tls-protocols"))?;
    let provider = crypto_provider(cfg)?;
    let roots = Arc::new(
        load_roots(ca_file, ca_dir)
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?,
    );
    let verifier =
        rustls::client::WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)));
    let (cert, key, pass) = match cfg.get("tls-client-cert-file") {
        "" => (
            cfg.get("tls-cert-file"),
            cfg.get("tls-key-file"),
            cfg.get("tls-key-file-pass"),
        ),
        c => (
            c,
            cfg.get("tls-client-key-file"),
            cfg.get("tls-client-key-file-pass"),
        ),
    };
    let config = if cert.is_empty() {
        builder.with_no_client_auth()
    } else {
        let certs =
            load_certs(cert).map_err(|e| format!("Failed to load certificate: {cert}: {e}"))?;
        let key =
            load_key(key, pass).map_err(|e| format!("Failed to load private key: {key}: {e}"))?;
        builder
            .with_client_auth_cert(certs, key)
            .map_err(|e| format!("Failed to load private key: {e}"))?
    };
    Ok(Arc::new(config))
}

/// Checks a server's certificate chain and signatures as rustls's WebPKI verifier does, and
/// accepts it whatever name it is for (see [`replication_client`]).
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl rustls::client::danger::ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        // The name is checked after the chain: a name error means the chain is good.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(rustls::client::danger::ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[SupportedCipherSuite]) -> Vec<String> {
        v.iter()
            .map(|s| s.suite().as_str().unwrap_or("?").to_string())
            .collect()
    }

    #[test]
    fn cipher_strings_select_what_rustls_has() {
        let all = suites();
        assert_eq!(select_tls12("DEFAULT:!MEDIUM", &all).unwrap().len(), 6);
        assert_eq!(
            names(&select_tls12("ECDHE-RSA-AES256-GCM-SHA384", &all).unwrap()),
            ["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"]
        );
        assert_eq!(
            names(&select_tls12("ECDHE+AESGCM:!aECDSA:!AES256", &all).unwrap()),
            ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
        );
        // Unknown words are skipped; a string selecting nothing fails.
        assert_eq!(
            select_tls12("RC4-SHA:ECDHE-RSA-CHACHA20-POLY1305", &all)
                .unwrap()
                .len(),
            1
        );
        let e = select_tls12("RC4-SHA:DES-CBC3-SHA", &all).unwrap_err();
        assert!(e.contains("selects no cipher"), "{e}");
        assert_eq!(
            names(&select_tls13("TLS_CHACHA20_POLY1305_SHA256:TLS_NOPE", &all).unwrap()),
            ["TLS13_CHACHA20_POLY1305_SHA256"]
        );
        assert!(select_tls13("TLS_AES_128_CCM_SHA256", &all).is_err());
    }

    #[test]
    fn protocols() {
        assert_eq!(
            parse_protocols("tlsv1.2  TLSv1.3").unwrap(),
            "tlsv1.2 TLSv1.3"
        );
        assert!(parse_protocols("SSLv3").is_err());
        assert_eq!(protocol_versions("TLSv1 TLSv1.3").unwrap().len(), 1);
        assert!(protocol_versions("TLSv1 TLSv1.1").is_err());
        assert_eq!(protocol_versions("").unwrap().len(), 2);
    }
}
