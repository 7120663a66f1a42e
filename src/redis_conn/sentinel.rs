//! The fleet's Redis found through Sentinel, and a connection that follows a failover
//! (docs/design.md, "Beyond one Redis").
//!
//! The URL names the sentinels and the service:
//! `redis+sentinel://[user:password@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`, or
//! `rediss+sentinel://...` when the sentinels and the data nodes speak TLS (verified with the
//! same files as `rediss://`). The user and password are the data nodes' (the primary's AUTH or
//! ACL user); sentinels that ask for a password of their own get it from
//! `SYNCFLEET_REDIS_SENTINEL_PASSWORD`, so it never travels in a URL.
//!
//! A [`Following`] connection holds a connection manager to the primary the sentinels named
//! last. It moves to the new primary as soon as the sentinels name another one: a watcher asks
//! every sentinel every [`WATCH_EVERY`] and believes the highest configuration epoch (a forced
//! failover promotes the replica at once, but the old primary goes on taking writes, and still
//! answers `ROLE` as a primary, until Sentinel demotes it some 10-20 s later; every write it
//! takes then is lost). It also moves when a command meets a sign that the primary moved (the
//! old one demoted and refusing writes with `READONLY`, or gone: a dropped, refused or
//! timed-out connection): it asks the sentinels again and swaps in a manager to the new
//! primary. A command refused with
//! `READONLY` did not run, so it is sent once more to the new primary; any other failed
//! command is returned as failed, as on one server (its caller decides: a gate books again, a
//! report batch is resent under its id, a queue push is found by the heal sweep).

use crate::clock::{elapsed_since, monotonic_now};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{
    Cmd, ConnectionAddr, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisFuture,
    RedisResult, ServerErrorKind, TlsCertificates, TlsMode, Value,
};

use super::RedisOpenError;

/// The password of sentinels that ask for one (`requirepass` in sentinel.conf).
pub const SENTINEL_PASSWORD_ENV: &str = "SYNCFLEET_REDIS_SENTINEL_PASSWORD";

/// The schemes of a Sentinel URL: plain, and TLS to sentinels and data nodes alike.
const PLAIN: &str = "redis+sentinel://";
const TLS: &str = "rediss+sentinel://";

/// Whether `url` names sentinels rather than one server.
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    url.starts_with(PLAIN) || url.starts_with(TLS)
}

/// A Sentinel URL taken apart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SentinelUrl {
    /// `host:port` of each sentinel, in the URL's order.
    pub(crate) sentinels: Vec<(String, u16)>,
    /// The monitored service's name (`sentinel monitor NAME ...`).
    pub(crate) service: String,
    pub(crate) db: i64,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) tls: bool,
}

/// Parse `redis+sentinel://[user:password@]HOST:PORT[,HOST:PORT...]/SERVICE[/DB]`. Errors
/// never quote the password.
pub(crate) fn parse(url: &str) -> Result<SentinelUrl, RedisOpenError> {
    let bad = |why: &str| RedisOpenError::BadUrl(format!("sentinel URL: {why}"));
    let (tls, rest) = match (url.strip_prefix(PLAIN), url.strip_prefix(TLS)) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => return Err(bad("expected redis+sentinel:// or rediss+sentinel://")),
    };
    // The user info runs to the last `@` (a password may hold `/` or `@`).
    let (userinfo, rest) = match rest.rfind('@') {
        Some(i) => (Some(&rest[..i]), &rest[i + 1..]),
        None => (None, rest),
    };
    let (hosts, path) = rest
        .split_once('/')
        .ok_or_else(|| bad("no service name (expected .../SERVICE)"))?;
    let mut parts = path.split('/');
    let service = parts.next().unwrap_or("").to_string();
    if service.is_empty() {
        return Err(bad("no service name (expected .../SERVICE)"));
    }
    let db = match parts.next() {
        None | Some("") => 0,
        Some(d) => d
            .parse::<i64>()
            .map_err(|_| bad("the database after the service is not a number"))?,
    };
    if parts.next().is_some() {
        return Err(bad("expected .../SERVICE[/DB] and nothing after"));
    }
    let mut sentinels = Vec::new();
    for host in hosts.split(',') {
        let (h, p) = host
            .rsplit_once(':')
            .ok_or_else(|| bad("each sentinel is HOST:PORT"))?;
        let port = p
            .parse::<u16>()
            .map_err(|_| bad("a sentinel's port is not a number"))?;
        if h.is_empty() {
            return Err(bad("a sentinel has no host"));
        }
        sentinels.push((h.to_string(), port));
    }
    // The user and password, percent-decoded the way redis-rs decodes a plain URL's.
    let (username, password) = match userinfo {
        None => (None, None),
        Some(info) => {
            let (h, p) = &sentinels[0];
            let probe = format!("redis://{info}@{h}:{p}/");
            let parsed = probe
                .as_str()
                .into_connection_info()
                .map_err(|_| bad("the user or password does not parse"))?;
            let settings = parsed.redis_settings();
            (
                settings.username().map(str::to_string),
                settings.password().map(str::to_string),
            )
        }
    };
    Ok(SentinelUrl {
        sentinels,
        service,
        db,
        username,
        password,
        tls,
    })
}

/// How often the sentinels are asked which server is the primary: the longest a connection
/// keeps writing to a primary the sentinels have already replaced.
pub const WATCH_EVERY: Duration = Duration::from_millis(100);

/// The sentinels of one service, asked for its primary.
pub struct SentinelTarget {
    client: tokio::sync::Mutex<SentinelClient>,
    url: SentinelUrl,
    certificates: Option<TlsCertificates>,
    sentinel_password: Option<String>,
    /// The primary the sentinels name with the highest configuration epoch, as the watcher
    /// last saw it.
    named: Mutex<Option<(String, u16)>>,
    /// Bumped each time the watcher sees the sentinels name another primary.
    moves: AtomicU64,
    watching: AtomicBool,
}

impl std::fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SentinelTarget")
    }
}

impl SentinelTarget {
    /// Sentinels for `url` with these TLS certificates (used only for `rediss+sentinel://`).
    pub(crate) fn new(
        url: &SentinelUrl,
        certificates: Option<TlsCertificates>,
    ) -> Result<SentinelTarget, RedisOpenError> {
        let addrs = url.sentinels.iter().map(|(host, port)| {
            if url.tls {
                ConnectionAddr::TcpTls {
                    host: host.clone(),
                    port: *port,
                    insecure: false,
                    tls_params: None,
                }
            } else {
                ConnectionAddr::Tcp(host.clone(), *port)
            }
        });
        let refused = |e: RedisError| RedisOpenError::BadUrl(super::without_url(&e));
        let mut b = SentinelClientBuilder::new(addrs, &url.service, SentinelServerType::Master)
            .map_err(refused)?
            .set_client_to_redis_db(url.db);
        if let Some(user) = &url.username {
            b = b.set_client_to_redis_username(user);
        }
        if let Some(password) = &url.password {
            b = b.set_client_to_redis_password(password);
        }
        let sentinel_password = std::env::var(SENTINEL_PASSWORD_ENV)
            .ok()
            .filter(|p| !p.is_empty());
        if let Some(password) = &sentinel_password {
            b = b.set_client_to_sentinel_password(password);
        }
        if url.tls {
            b = b
                .set_client_to_redis_tls_mode(TlsMode::Secure)
                .set_client_to_sentinel_tls_mode(TlsMode::Secure);
            if let Some(certs) = &certificates {
                b = b
                    .set_client_to_sentinel_certificates(certs.clone())
                    .set_client_to_redis_certificates(certs.clone());
            }
        }
        let client = b
            .build()
            .map_err(|e| RedisOpenError::Tls(super::without_url(&e)))?;
        Ok(SentinelTarget {
            client: tokio::sync::Mutex::new(client),
            url: url.clone(),
            certificates,
            sentinel_password,
            named: Mutex::new(None),
            moves: AtomicU64::new(0),
            watching: AtomicBool::new(false),
        })
    }

    /// A client for the server at `host:port`: a data node (the URL's user, password and
    /// database) or a sentinel (its own password, if any); TLS as the URL says.
    fn client_at(&self, host: &str, port: u16, data_node: bool) -> RedisResult<redis::Client> {
        let scheme = if self.url.tls { "rediss" } else { "redis" };
        let mut settings = redis::RedisConnectionInfo::default();
        if data_node {
            settings = settings.set_db(self.url.db);
            if let Some(user) = &self.url.username {
                settings = settings.set_username(user);
            }
            if let Some(password) = &self.url.password {
                settings = settings.set_password(password);
            }
        } else if let Some(password) = &self.sentinel_password {
            settings = settings.set_password(password);
        }
        let info = format!("{scheme}://{host}:{port}/")
            .as_str()
            .into_connection_info()?
            .set_redis_settings(settings);
        match (&self.certificates, self.url.tls) {
            (Some(certs), true) => redis::Client::build_with_tls(info, certs.clone()),
            _ => redis::Client::open(info),
        }
    }

    /// Record the primary the sentinels name now; a change counts as a move.
    fn note_named(&self, addr: (String, u16)) {
        let mut named = self.named.lock().unwrap_or_else(|e| e.into_inner());
        if named.as_ref() != Some(&addr) {
            if named.is_some() {
                self.moves.fetch_add(1, Ordering::AcqRel);
            }
            *named = Some(addr);
        }
    }

    /// How many times the primary moved since the watcher started.
    fn moves(&self) -> u64 {
        self.moves.load(Ordering::Acquire)
    }

    /// Start the watcher (once; it ends with the last holder of the target).
    fn watch(self: &Arc<Self>) {
        if self.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(watch_primary(Arc::downgrade(self)));
    }

    /// A client for the primary the sentinels name now: the watcher's answer (the highest
    /// configuration epoch among the sentinels) once it has one, else redis-rs's (the first
    /// sentinel's, checked with `ROLE`: during a forced failover the old primary still passes
    /// that check for seconds).
    pub(crate) async fn primary(&self) -> RedisResult<redis::Client> {
        let named = self.named.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match named {
            Some((host, port)) => self.client_at(&host, port, true),
            None => self.client.lock().await.async_get_client().await,
        }
    }
}

/// Ask every sentinel for the service's primary every [`WATCH_EVERY`] and keep the answer of
/// the highest configuration epoch (sentinels that have not heard of a failover yet still name
/// the old primary); count each change.
async fn watch_primary(target: Weak<SentinelTarget>) {
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(1)));
    let mut conns: Vec<Option<redis::aio::MultiplexedConnection>> = Vec::new();
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(t) = target.upgrade() else { return };
        conns.resize_with(t.url.sentinels.len(), || None);
        let mut best: Option<(u64, String, u16)> = None;
        for (i, (host, port)) in t.url.sentinels.iter().enumerate() {
            if conns[i].is_none() {
                if let Ok(client) = t.client_at(host, *port, false) {
                    conns[i] = client
                        .get_multiplexed_async_connection_with_config(&cfg)
                        .await
                        .ok();
                }
            }
            let Some(c) = conns[i].as_mut() else { continue };
            let answer: RedisResult<HashMap<String, String>> = redis::cmd("SENTINEL")
                .arg("MASTER")
                .arg(&t.url.service)
                .query_async(c)
                .await;
            let Ok(fields) = answer else {
                conns[i] = None;
                continue;
            };
            let (Some(ip), Some(port), epoch) = (
                fields.get("ip"),
                fields.get("port").and_then(|p| p.parse::<u16>().ok()),
                fields
                    .get("config-epoch")
                    .and_then(|e| e.parse::<u64>().ok())
                    .unwrap_or(0),
            ) else {
                continue;
            };
            if best.as_ref().is_none_or(|(e, _, _)| epoch > *e) {
                best = Some((epoch, ip.clone(), port));
            }
        }
        if let Some((_, ip, port)) = best {
            t.note_named((ip, port));
        }
    }
}

/// How soon after one look at the sentinels another may be taken: a primary that is down but
/// not yet replaced makes every command fail, and each failure must not become a query.
const FOLLOW_AT_MOST_EVERY: Duration = Duration::from_millis(250);

/// A connection to the primary of a Sentinel service that moves when the primary does.
pub struct Following {
    target: Arc<SentinelTarget>,
    config: ConnectionManagerConfig,
    /// The manager in use and its generation (bumped at each swap).
    current: Mutex<(u64, ConnectionManager)>,
    /// The target's move count when the manager in use was made.
    moves_seen: AtomicU64,
    /// One look at the sentinels at a time, and when the last one was taken.
    following: tokio::sync::Mutex<Option<Instant>>,
    /// When the connection last moved to another primary.
    moved_at: Mutex<Option<Instant>>,
}

impl Following {
    /// Connect to the primary the sentinels name now.
    pub(crate) async fn connect(
        target: Arc<SentinelTarget>,
        config: ConnectionManagerConfig,
    ) -> RedisResult<Following> {
        target.watch();
        let moves = target.moves();
        let primary = target.primary().await?;
        let manager = ConnectionManager::new_with_config(primary, config.clone()).await?;
        Ok(Following {
            target,
            config,
            current: Mutex::new((0, manager)),
            moves_seen: AtomicU64::new(moves),
            following: tokio::sync::Mutex::new(None),
            moved_at: Mutex::new(None),
        })
    }

    fn current(&self) -> (u64, ConnectionManager) {
        let c = self.current.lock().unwrap_or_else(|e| e.into_inner());
        (c.0, c.1.clone())
    }

    /// The manager to send with: first moved to the new primary when the watcher saw the
    /// sentinels name one since this connection's last move.
    async fn ready(&self) -> (u64, ConnectionManager) {
        let (seen, manager) = self.current();
        let moves = self.target.moves();
        if moves == self.moves_seen.load(Ordering::Acquire) {
            return (seen, manager);
        }
        if self.follow_from(seen, true).await {
            self.moves_seen.store(moves, Ordering::Release);
        }
        self.current()
    }

    /// Ask the sentinels for the primary and move there, unless another command already moved
    /// since `seen` or a look was taken moments ago; `told` when the watcher saw the primary
    /// move (a shorter wait between looks then). Returns whether the connection moved.
    async fn follow_from(&self, seen: u64, told: bool) -> bool {
        let mut last = self.following.lock().await;
        if self.current().0 != seen {
            return true;
        }
        // Told by the watcher, look again soon; still not at a flood of connection attempts
        // while the new primary is not reachable yet.
        let gap = if told {
            FOLLOW_AT_MOST_EVERY / 5
        } else {
            FOLLOW_AT_MOST_EVERY
        };
        if last.is_some_and(|t| elapsed_since(t) < gap) {
            return false;
        }
        *last = Some(monotonic_now());
        let Ok(primary) = self.target.primary().await else {
            return false;
        };
        // host:port only (the address never carries the password).
        let addr = primary.get_connection_info().addr().to_string();
        let Ok(manager) = ConnectionManager::new_with_config(primary, self.config.clone()).await
        else {
            return false;
        };
        {
            let mut c = self.current.lock().unwrap_or_else(|e| e.into_inner());
            c.0 += 1;
            c.1 = manager;
        }
        *self.moved_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(monotonic_now());
        tracing::warn!(primary = %addr, "redis primary moved (sentinel): the connection follows it");
        true
    }

    /// Whether the connection moved to another primary within `span`.
    pub(crate) fn moved_within(&self, span: Duration) -> bool {
        self.moved_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|t| elapsed_since(t) < span)
    }
}

/// A command refused because this server is no longer the primary: it did not run.
fn refused_as_replica(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        ErrorKind::Server(ServerErrorKind::ReadOnly)
            | ErrorKind::Server(ServerErrorKind::MasterDown)
    )
}

/// A sign that the primary may have moved: refused as a replica, or the server unreachable.
fn primary_may_have_moved(e: &RedisError) -> bool {
    refused_as_replica(e) || e.is_io_error() || e.is_connection_dropped() || e.is_timeout()
}

impl Following {
    pub(crate) fn req_packed_command<'a>(&'a self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let (seen, mut manager) = self.ready().await;
            let result = manager.req_packed_command(cmd).await;
            match &result {
                Err(e) if primary_may_have_moved(e) => {
                    let moved = self.follow_from(seen, false).await;
                    if moved && refused_as_replica(e) {
                        let (_, mut manager) = self.current();
                        return manager.req_packed_command(cmd).await;
                    }
                    result
                }
                _ => result,
            }
        })
    }

    pub(crate) fn req_packed_commands<'a>(
        &'a self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let (seen, mut manager) = self.ready().await;
            let result = manager.req_packed_commands(pipeline, offset, count).await;
            if let Err(e) = &result {
                if primary_may_have_moved(e) {
                    // A pipeline refused part-way may have run its first commands: it is
                    // returned as failed, never sent twice.
                    self.follow_from(seen, false).await;
                }
            }
            result
        })
    }

    pub(crate) fn get_db(&self) -> i64 {
        self.current().1.get_db()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_parses() {
        let u = parse("redis+sentinel://sf:p%40ss@127.0.0.1:26379,10.0.0.2:26380/main/2")
            .expect("parses");
        assert_eq!(
            u.sentinels,
            vec![("127.0.0.1".into(), 26379), ("10.0.0.2".into(), 26380)]
        );
        assert_eq!(u.service, "main");
        assert_eq!(u.db, 2);
        assert_eq!(u.username.as_deref(), Some("sf"));
        assert_eq!(u.password.as_deref(), Some("p@ss"));
        assert!(!u.tls);
        let t = parse("rediss+sentinel://h:1/svc").expect("parses");
        assert!(t.tls);
        assert_eq!((t.db, t.username, t.password), (0, None, None));
    }

    #[test]
    fn a_bad_sentinel_url_is_named_without_its_password() {
        for bad in [
            "redis+sentinel://u:hunter2@h:1",
            "redis+sentinel://u:hunter2@h:1/",
            "redis+sentinel://u:hunter2@h/svc",
            "redis+sentinel://u:hunter2@h:x/svc",
            "redis+sentinel://u:hunter2@h:1/svc/x",
            "redis+sentinel://u:hunter2@h:1/svc/1/2",
            "redis://h:1/svc",
        ] {
            let e = parse(bad).expect_err(bad);
            assert!(matches!(e, RedisOpenError::BadUrl(_)), "{bad}: {e:?}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn only_a_refusal_as_replica_is_sent_again() {
        let readonly = RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        assert!(refused_as_replica(&readonly));
        assert!(primary_may_have_moved(&readonly));
        let io = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(!refused_as_replica(&io), "a dropped command may have run");
        assert!(primary_may_have_moved(&io));
        let script = RedisError::from((ErrorKind::Server(ServerErrorKind::ResponseError), "x"));
        assert!(!primary_may_have_moved(&script));
    }
}
