//! A certificate authority of the test's own (rcgen), and a server certificate it signs for
//! 127.0.0.1 and localhost, written as PEM files to a temp dir: what a TLS server on loopback
//! needs, and the CA file a client verifies it with. Nothing secret is committed.

use std::path::PathBuf;

pub struct TestCa {
    /// The CA's certificate (what clients trust).
    pub ca: PathBuf,
    /// The server's certificate and key, signed by the CA, for 127.0.0.1 and localhost.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A second CA's certificate, which signed nothing here (a client trusting only it must
    /// refuse the server).
    pub stranger_ca: PathBuf,
    pub dir: tempfile::TempDir,
}

fn ca(name: &str) -> (rcgen::Certificate, rcgen::Issuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().expect("CA key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let cert = params.self_signed(&key).expect("self-sign the CA");
    (cert, rcgen::Issuer::new(params, key))
}

impl Default for TestCa {
    fn default() -> Self {
        Self::new()
    }
}

impl TestCa {
    pub fn new() -> TestCa {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca_cert, issuer) = ca("syncfleet test CA");
        let (stranger, _) = ca("another CA");
        let key = rcgen::KeyPair::generate().expect("server key");
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .expect("server params");
        let server = params.signed_by(&key, &issuer).expect("sign the server");
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).expect("write a PEM file");
            path
        };
        TestCa {
            ca: write("ca.pem", ca_cert.pem()),
            server_cert: write("server.pem", server.pem()),
            server_key: write("server.key", key.serialize_pem()),
            stranger_ca: write("stranger.pem", stranger.pem()),
            dir,
        }
    }
}
