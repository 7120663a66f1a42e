//! Opening Redis, in one place for the queue, the gates and the link layer: the URL's forms
//! (`redis://`, `rediss://` for TLS, `user:password@` for AUTH and ACL users), the
//! certificates that verify a TLS server, and the connection manager's timeouts
//! (docs/design.md, "Security").
//!
//! TLS uses rustls with the ring provider already in the tree (no OpenSSL, no aws-lc). The
//! server's certificate is verified against the system's roots, or against the PEM file named
//! by `SYNCFLEET_REDIS_CA_FILE` (a private CA, the usual case for a Redis of one's own). A
//! server that asks for client certificates gets the pair named by
//! `SYNCFLEET_REDIS_CLIENT_CERT_FILE` and `SYNCFLEET_REDIS_CLIENT_KEY_FILE`. The files are
//! read at start-up; their contents never reach a log or an error.
//!
//! A `redis+sentinel://` URL names sentinels instead of one server: the connection then goes
//! to the service's primary and follows it through a failover (`sentinel`). A
//! `redis+cluster://` URL names a Redis Cluster's seed nodes (`cluster`).

mod cluster;
mod sentinel;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{
    ClientTlsConfig, Cmd, IntoConnectionInfo, Pipeline, RedisFuture, TlsCertificates, Value,
};

pub use sentinel::SENTINEL_PASSWORD_ENV;
use sentinel::{Following, SentinelTarget};

/// PEM file of the CA (or CAs) that signed the Redis server's certificate.
pub const CA_FILE_ENV: &str = "SYNCFLEET_REDIS_CA_FILE";
/// PEM files of the client certificate and its key, for a server with `tls-auth-clients yes`.
pub const CLIENT_CERT_ENV: &str = "SYNCFLEET_REDIS_CLIENT_CERT_FILE";
/// See [`CLIENT_CERT_ENV`].
pub const CLIENT_KEY_ENV: &str = "SYNCFLEET_REDIS_CLIENT_KEY_FILE";

/// Why a Redis client could not be made. The URL is never part of it (it may hold a
/// password); callers name the redacted URL.
#[derive(Debug, thiserror::Error)]
pub enum RedisOpenError {
    /// The URL does not parse, or names an unknown scheme.
    #[error(
        "not a redis URL (expected redis://[user:password@]host:port[/db], rediss://..., or redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]): {0}"
    )]
    BadUrl(String),
    /// A certificate file named by the environment could not be read.
    #[error("cannot read {var}={path}: {error}")]
    File {
        /// The environment variable that names the file.
        var: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        error: String,
    },
    /// Only one of the client certificate and its key is named.
    #[error("{CLIENT_CERT_ENV} and {CLIENT_KEY_ENV} go together: set both or neither")]
    HalfClientPair,
    /// The TLS settings were refused (a malformed certificate, say).
    #[error("redis TLS settings refused: {0}")]
    Tls(String),
}

/// The certificate files named by the environment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TlsFiles {
    /// The CA that signed the server's certificate (else the system's roots).
    pub ca: Option<PathBuf>,
    /// The client's certificate, for a server that asks for one.
    pub client_cert: Option<PathBuf>,
    /// The client certificate's key.
    pub client_key: Option<PathBuf>,
}

impl TlsFiles {
    /// Read from [`CA_FILE_ENV`], [`CLIENT_CERT_ENV`] and [`CLIENT_KEY_ENV`] (empty = unset).
    pub fn from_env() -> TlsFiles {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        TlsFiles {
            ca: var(CA_FILE_ENV),
            client_cert: var(CLIENT_CERT_ENV),
            client_key: var(CLIENT_KEY_ENV),
        }
    }

    fn is_empty(&self) -> bool {
        self.ca.is_none() && self.client_cert.is_none() && self.client_key.is_none()
    }
}

/// Where the fleet's Redis is: one server, or the primary of a service the sentinels watch.
#[derive(Clone, Debug)]
pub enum RedisTarget {
    /// One server (`redis://`, `rediss://`).
    Server(Box<redis::Client>),
    /// The primary the sentinels name (`redis+sentinel://`, `rediss+sentinel://`).
    Sentinel(Arc<SentinelTarget>),
    /// A Redis Cluster (`redis+cluster://`, `rediss+cluster://`), and one seed node's client
    /// for subscriptions.
    Cluster(Box<(redis::cluster::ClusterClient, redis::Client)>),
}

/// The Redis `url` names, with the TLS files of the environment for a TLS URL.
pub fn target(url: &str) -> Result<RedisTarget, RedisOpenError> {
    target_with(url, &TlsFiles::from_env())
}

/// [`target`] with these TLS files (used only for TLS URLs).
pub fn target_with(url: &str, files: &TlsFiles) -> Result<RedisTarget, RedisOpenError> {
    if sentinel::is_sentinel_url(url) {
        return sentinel_target(url, files).map(RedisTarget::Sentinel);
    }
    if cluster::is_cluster_url(url) {
        let certificates = if files.is_empty() {
            None
        } else {
            Some(certificates(files)?)
        };
        return Ok(RedisTarget::Cluster(Box::new(cluster::client(
            url,
            certificates,
        )?)));
    }
    client_with(url, files).map(|c| RedisTarget::Server(Box::new(c)))
}

/// The sentinels of `url`, shared by every part of the process that opens it (queue, gates,
/// link layer): one watcher asks the sentinels, not one per part.
fn sentinel_target(url: &str, files: &TlsFiles) -> Result<Arc<SentinelTarget>, RedisOpenError> {
    type Opened = std::sync::Mutex<Vec<((String, TlsFiles), std::sync::Weak<SentinelTarget>)>>;
    static OPENED: std::sync::OnceLock<Opened> = std::sync::OnceLock::new();
    let opened = OPENED.get_or_init(Default::default);
    let mut opened = opened.lock().unwrap_or_else(|e| e.into_inner());
    opened.retain(|(_, t)| t.strong_count() > 0);
    if let Some(t) = opened
        .iter()
        .find(|((u, f), _)| u == url && f == files)
        .and_then(|(_, t)| t.upgrade())
    {
        return Ok(t);
    }
    let parsed = sentinel::parse(url)?;
    let certificates = if parsed.tls && !files.is_empty() {
        Some(certificates(files)?)
    } else {
        None
    };
    let target = Arc::new(SentinelTarget::new(&parsed, certificates)?);
    opened.push(((url.to_string(), files.clone()), Arc::downgrade(&target)));
    Ok(target)
}

impl RedisTarget {
    /// A client for the server, or for the primary the sentinels name now (for a
    /// subscription, which is made again after each lost connection).
    pub async fn client(&self) -> redis::RedisResult<redis::Client> {
        match self {
            RedisTarget::Server(c) => Ok((**c).clone()),
            RedisTarget::Sentinel(s) => s.primary().await,
            RedisTarget::Cluster(c) => Ok(c.1.clone()),
        }
    }

    /// Whether this is a Redis Cluster (whose commands must keep to one slot each).
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisTarget::Cluster(_))
    }

    /// A reconnecting connection whose commands fail after `response_timeout`. The crate's
    /// default (500 ms) is shorter than a loaded server's pauses; a reply that comes after the
    /// timeout is lost even though the command ran, so every caller picks a timeout that fits
    /// its slowest command. Through Sentinel it follows the primary when it moves.
    pub async fn connect(&self, response_timeout: Duration) -> redis::RedisResult<Conn> {
        let cfg = ConnectionManagerConfig::new()
            .set_response_timeout(Some(response_timeout))
            .set_connection_timeout(Some(Duration::from_secs(3)))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_secs(2));
        Ok(match self {
            RedisTarget::Server(c) => {
                Conn::Server(ConnectionManager::new_with_config((**c).clone(), cfg).await?)
            }
            RedisTarget::Sentinel(s) => {
                Conn::Following(Arc::new(Following::connect(s.clone(), cfg).await?))
            }
            RedisTarget::Cluster(c) => {
                let cfg = redis::cluster::ClusterConfig::new()
                    .set_response_timeout(response_timeout)
                    .set_connection_timeout(Duration::from_secs(3));
                Conn::Cluster(c.0.get_async_connection_with_config(cfg).await?)
            }
        })
    }
}

/// The connection every part of the fleet uses: cheap to clone, reconnects by itself.
#[derive(Clone)]
pub enum Conn {
    /// One server.
    Server(ConnectionManager),
    /// The primary of a Sentinel service, followed through failovers.
    Following(Arc<Following>),
    /// A Redis Cluster: each command goes to the shard of its keys' slot.
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Conn {
    /// Whether this connection moved to another primary within `span` (Sentinel only): what
    /// the old primary took in its last moments may be missing from the new one, so state
    /// read or measured across the move is suspect for a while.
    pub fn moved_within(&self, span: Duration) -> bool {
        match self {
            Conn::Following(f) => f.moved_within(span),
            Conn::Server(_) | Conn::Cluster(_) => false,
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Server(m) => m.req_packed_command(cmd),
            Conn::Following(f) => f.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Server(m) => m.req_packed_commands(pipeline, offset, count),
            Conn::Following(f) => f.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Server(m) => m.get_db(),
            Conn::Following(f) => f.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// A client for one server's `url`, with these TLS files (used only for `rediss://`).
pub fn client_with(url: &str, files: &TlsFiles) -> Result<redis::Client, RedisOpenError> {
    let bad = |e: redis::RedisError| RedisOpenError::BadUrl(without_url(&e));
    if !url.starts_with("rediss://") || files.is_empty() {
        return redis::Client::open(url).map_err(bad);
    }
    let info = url.into_connection_info().map_err(bad)?;
    redis::Client::build_with_tls(info, certificates(files)?)
        .map_err(|e| RedisOpenError::Tls(without_url(&e)))
}

/// The certificates the files name, read now.
fn certificates(files: &TlsFiles) -> Result<TlsCertificates, RedisOpenError> {
    let read = |var: &'static str, path: &Path| {
        std::fs::read(path).map_err(|e| RedisOpenError::File {
            var,
            path: path.to_path_buf(),
            error: e.to_string(),
        })
    };
    let root_cert = match &files.ca {
        Some(p) => Some(read(CA_FILE_ENV, p)?),
        None => None,
    };
    let client_tls = match (&files.client_cert, &files.client_key) {
        (Some(c), Some(k)) => Some(ClientTlsConfig {
            client_cert: read(CLIENT_CERT_ENV, c)?,
            client_key: read(CLIENT_KEY_ENV, k)?,
        }),
        (None, None) => None,
        _ => return Err(RedisOpenError::HalfClientPair),
    };
    Ok(TlsCertificates {
        client_tls,
        root_cert,
    })
}

/// An error's category and detail, which redis-rs words without the URL (the URL may hold a
/// password; a test below holds it to that).
fn without_url(e: &redis::RedisError) -> String {
    match e.detail() {
        Some(detail) => format!("{}: {detail}", e.category()),
        None => e.category().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_tls_urls_parse_without_files() {
        let none = TlsFiles::default();
        assert!(client_with("redis://127.0.0.1:6379/", &none).is_ok());
        assert!(client_with("redis://sf:pw@127.0.0.1:6379/0", &none).is_ok());
        assert!(client_with("rediss://127.0.0.1:6380/", &none).is_ok());
        assert!(matches!(
            client_with("http://127.0.0.1/", &none),
            Err(RedisOpenError::BadUrl(_))
        ));
    }

    #[test]
    fn a_missing_file_is_named_and_a_half_pair_refused() {
        let files = TlsFiles {
            ca: Some(PathBuf::from("/nonexistent/ca.pem")),
            ..TlsFiles::default()
        };
        match client_with("rediss://127.0.0.1:6380/", &files) {
            Err(RedisOpenError::File { var, path, .. }) => {
                assert_eq!(var, CA_FILE_ENV);
                assert_eq!(path, PathBuf::from("/nonexistent/ca.pem"));
            }
            other => panic!("{other:?}"),
        }
        let half = TlsFiles {
            client_cert: Some(PathBuf::from("/nonexistent/c.pem")),
            ..TlsFiles::default()
        };
        assert!(matches!(
            client_with("rediss://127.0.0.1:6380/", &half),
            Err(RedisOpenError::HalfClientPair)
        ));
    }

    #[test]
    fn errors_never_carry_the_password() {
        let e = client_with(
            "redis://sf:hunter2@127.0.0.1:notaport/",
            &TlsFiles::default(),
        )
        .expect_err("bad port");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
