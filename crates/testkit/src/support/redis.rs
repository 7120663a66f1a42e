//! A real Redis for tests: `REDIS_URL` when set, otherwise a private `redis-server` child on a
//! free loopback port (no persistence), killed on drop. Never the machine's Redis on 6379
//! implicitly.
//!
//! FLUSHALL-safe: every `TestRedis` has a unique `prefix`; tests put their keys under it (e.g.
//! as the gate namespace), and [`TestRedis::flush`] runs FLUSHALL only on a private server,
//! deleting just `prefix*` keys on a shared one.
//!
//! ```ignore
//! mod support;
//! let redis = support::redis::TestRedis::start();
//! let client = redis::Client::open(redis.url.as_str()).unwrap();
//! ```

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub struct TestRedis {
    /// `redis://127.0.0.1:PORT/` (or `REDIS_URL`).
    pub url: String,
    /// Unique per instance: put every key of the test under it.
    pub prefix: String,
    child: Option<Child>,
}

/// A key prefix no other test (or test process) uses.
pub fn unique_prefix() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "t{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// A loopback port free a moment ago (the server started on it may still lose a race).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to find a free port");
    l.local_addr().expect("local addr").port()
}

fn ping(url: &str) -> bool {
    ping_with(url, &syncfleet::redis_conn::TlsFiles::default())
}

/// Whether the server at `url` answers PING, verified with `files` when it speaks TLS.
fn ping_with(url: &str, files: &syncfleet::redis_conn::TlsFiles) -> bool {
    let Ok(client) = syncfleet::redis_conn::client_with(url, files) else {
        return false;
    };
    let Ok(mut con) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        return false;
    };
    ::redis::cmd("PING")
        .query::<String>(&mut con)
        .map(|r| r == "PONG")
        .unwrap_or(false)
}

/// A connection to the private server on loopback `port`, if it answers within 500 ms.
pub fn connection_at(port: u16) -> Option<::redis::Connection> {
    ::redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .ok()?
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()
}

/// Wait (polling every 50 ms, at most `timeout`) until `ok`; panics naming `what`.
pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A plain private server on `port`: loopback only, nothing kept on disk.
pub fn plain_args(port: u16) -> Vec<String> {
    let port = port.to_string();
    [
        "--port",
        &port,
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
    ]
    .map(String::from)
    .to_vec()
}

/// A private `redis-server` with the arguments `args(port)` on a free port, once `answers`
/// its URL (`url_of(port)`); a lost port race tries another port, five times at most.
fn start_private(
    args: impl Fn(u16) -> Vec<String>,
    url_of: impl Fn(u16) -> String,
    answers: impl Fn(&str) -> bool,
) -> Option<TestRedis> {
    for _attempt in 0..5 {
        let port = free_port();
        let mut child = Command::new("redis-server")
            .args(args(port))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "redis-server is not installed (apt-get install redis-server, or set REDIS_URL)",
            );
        let url = url_of(port);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if answers(&url) {
                return Some(TestRedis {
                    url,
                    prefix: unique_prefix(),
                    child: Some(child),
                });
            }
            if let Ok(Some(_)) = child.try_wait() {
                break; // lost the port race (or the server refused its arguments)
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    None
}

impl TestRedis {
    /// Whether this test started the server itself (its settings may be changed), rather
    /// than sharing the one `REDIS_URL` names.
    pub fn is_private(&self) -> bool {
        self.child.is_some()
    }

    /// A Redis reached by `url` whose processes another owner keeps (a Sentinel set, say):
    /// nothing is started or killed here.
    pub fn external(url: String) -> TestRedis {
        TestRedis {
            url,
            prefix: unique_prefix(),
            child: None,
        }
    }

    /// Use `REDIS_URL`, or start a private `redis-server` and wait until it answers PING.
    pub fn start() -> TestRedis {
        if let Ok(url) = std::env::var("REDIS_URL") {
            if !url.is_empty() {
                assert!(ping(&url), "REDIS_URL={url} does not answer PING");
                return TestRedis {
                    url,
                    prefix: unique_prefix(),
                    child: None,
                };
            }
        }
        start_private(
            plain_args,
            |port| format!("redis://127.0.0.1:{port}/"),
            ping,
        )
        .unwrap_or_else(|| panic!("could not start redis-server on a free port"))
    }

    /// A private `redis-server` that speaks only TLS (certificate `cert` with `key`, signed
    /// by `ca`: see `support::tls`) and knows one ACL user, `sf` with `password` (the default
    /// user is off): `url` is `rediss://sf:PASSWORD@127.0.0.1:PORT/`. Never the shared
    /// `REDIS_URL`.
    pub fn start_tls(
        ca: &std::path::Path,
        cert: &std::path::Path,
        key: &std::path::Path,
        password: &str,
    ) -> TestRedis {
        let files = syncfleet::redis_conn::TlsFiles {
            ca: Some(ca.to_path_buf()),
            ..Default::default()
        };
        let path = |p: &std::path::Path| p.display().to_string();
        start_private(
            |port| {
                let mut args: Vec<String> = [
                    "--port",
                    "0",
                    "--bind",
                    "127.0.0.1",
                    "--tls-auth-clients",
                    "no",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--user",
                    "default",
                    "off",
                    "--user",
                    "sf",
                    "on",
                ]
                .map(String::from)
                .to_vec();
                args.extend([
                    format!(">{password}"),
                    "~*".into(),
                    "&*".into(),
                    "+@all".into(),
                ]);
                args.extend(["--tls-port".into(), port.to_string()]);
                args.extend(["--tls-cert-file".into(), path(cert)]);
                args.extend(["--tls-key-file".into(), path(key)]);
                args.extend(["--tls-ca-cert-file".into(), path(ca)]);
                args
            },
            |port| format!("rediss://sf:{password}@127.0.0.1:{port}/"),
            |url| ping_with(url, &files),
        )
        .unwrap_or_else(|| {
            panic!("could not start redis-server with TLS on a free port (is it built with TLS?)")
        })
    }

    /// Stop a private server (a Redis outage); [`TestRedis::restart`] brings it back on the
    /// same port, empty (it keeps nothing on disk). Panics on a shared server.
    pub fn stop(&mut self) {
        let child = self
            .child
            .as_mut()
            .expect("only a private redis-server can be stopped");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Start the private server again on its port (after [`TestRedis::stop`]).
    pub fn restart(&mut self) {
        let port: u16 = self
            .url
            .trim_end_matches('/')
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("port of a private redis url");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let child = Command::new("redis-server")
                .args(plain_args(port))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server");
            self.child = Some(child);
            let up = Instant::now() + Duration::from_secs(5);
            while Instant::now() < up {
                if ping(&self.url) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // The port may still be in TIME_WAIT-like limbo: try again, bounded.
            self.stop();
            assert!(
                Instant::now() < deadline,
                "redis-server did not restart on port {port}"
            );
        }
    }

    /// Whether this is a private server (FLUSHALL and CONFIG SET are fine).
    pub fn owned(&self) -> bool {
        self.child.is_some()
    }

    /// A synchronous connection, for setup and assertions.
    pub fn connection(&self) -> ::redis::Connection {
        ::redis::Client::open(self.url.as_str())
            .and_then(|c| c.get_connection())
            .expect("connect to the test redis")
    }

    /// Remove this test's data: FLUSHALL on a private server, `prefix*` keys on a shared one.
    pub fn flush(&self) {
        let mut con = self.connection();
        if self.owned() {
            let _: () = ::redis::cmd("FLUSHALL").query(&mut con).expect("FLUSHALL");
            return;
        }
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg(format!("{}*", self.prefix))
            .query(&mut con)
            .expect("KEYS");
        if !keys.is_empty() {
            let _: () = ::redis::cmd("DEL").arg(keys).query(&mut con).expect("DEL");
        }
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
