//! Shared harness of the job tests (tests/jobs_*.rs): a private Redis, the simulator in this
//! process over loopback, a temp dir with the ledger (SQLite) or a fresh PostgreSQL database,
//! a generated client config, and the `syncfleet` binary run as real child processes
//! (enqueue, work, status, reconcile). On PostgreSQL every worker is its own "host": an empty
//! working directory with its own copy of the config, sharing nothing with the others but the
//! network addresses of Redis, PostgreSQL and the simulator.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub mod chaos;
pub mod sync;

use crate::support::ledger::{Kind, TestLedger};
use crate::support::redis::TestRedis;
use syncfleet::config::Config;
use syncfleet::link::gateway::Gateway;
use syncfleet::link::shared::FleetLink;
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{self, ApiStats, SimConfig, SimHandle};
use syncfleet::store::{JobStatus, Store};
use syncfleet::throttle::Gates;

/// Environment variable names the generated config gives each platform's secret / session.
fn secret_env(p: Platform) -> String {
    format!("SF_JOBTEST_{}_SECRET", p.as_str().to_uppercase())
}
fn session_env(p: Platform) -> String {
    format!("SF_JOBTEST_{}_SESSION", p.as_str().to_uppercase())
}

/// The simulator for listing tests (1688 -> Taobao): item_get and item_add at 2,000/s, high
/// enough to finish fast, with the client gates (ClientOpts::default, 1,900/s + burst 20)
/// under them the way an operator sizes a gate from the console.
pub fn listing_sim() -> SimConfig {
    SimConfig::demo()
        .with_limit(Platform::Alibaba, Api::ItemGet, 2_000, 10_000_000)
        .with_limit(Platform::Taobao, Api::ItemAdd, 2_000, 10_000_000)
}

/// The value after `name` on a benchmark's command line, parsed, or `default` (the bench
/// programs that share this harness read their options with it).
pub fn arg<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Client settings the tests vary.
#[derive(Debug, Clone)]
pub struct ClientOpts {
    /// `[gates.default]` rate and burst (fleet-wide, calls/s).
    pub rate: f64,
    pub burst: f64,
    /// In-flight calls per process per gate.
    pub concurrency: u32,
    pub chunk_size: usize,
    pub logistics_min_interval_s: u64,
    /// `[queue]` attempts per task, the backoff after the first failed one (it doubles per
    /// attempt), shutdown grace, unreachable exit.
    pub max_attempts: u32,
    pub retry_base_ms: u64,
    pub shutdown_grace_s: u64,
    pub unreachable_exit_s: u64,
    /// `[jobs] item_retry_rounds`.
    pub item_retry_rounds: u32,
    /// `[shops.NAME]` entries (name, weight) for the simulator's app shops of that name;
    /// each session comes from `shop_session_env(NAME)`.
    pub shops: Vec<(String, u32)>,
    /// `[queue] heal_interval_s`.
    pub heal_interval_s: u64,
    /// `[jobs] order_page_size` (unset: each platform's largest page).
    pub order_page_size: Option<u32>,
    /// `[queue] heartbeat_s` and `missed_heartbeats`: 1 s and 2 (a killed worker's tasks are
    /// claimed after 2 s). A run with no faults that asserts no repeated write uses
    /// [`ClientOpts::steady_leases`]: on a loaded machine a heartbeat can be that late.
    pub heartbeat_s: u64,
    pub missed_heartbeats: u32,
    /// The shops' tokens are renewed: each `[shops.NAME]` names `refresh_env`
    /// (`shop_refresh_env(NAME)`, holding the simulator's refresh token), each platform its
    /// token endpoint on the simulator, and `[jobs] token_check_ms` is this.
    pub renew_tokens_every_ms: Option<u64>,
}

impl Default for ClientOpts {
    fn default() -> Self {
        ClientOpts {
            rate: 1900.0,
            burst: 20.0,
            concurrency: 64,
            chunk_size: 100,
            logistics_min_interval_s: 3600,
            max_attempts: 5,
            retry_base_ms: 1000,
            shutdown_grace_s: 5,
            unreachable_exit_s: 120,
            item_retry_rounds: 4,
            shops: Vec::new(),
            heal_interval_s: 60,
            order_page_size: None,
            heartbeat_s: 1,
            missed_heartbeats: 2,
            renew_tokens_every_ms: None,
        }
    }
}

impl ClientOpts {
    /// Leases for a run in which no worker is lost: claimed only after 3 heartbeats of 2 s
    /// missed, so a worker that a loaded machine holds up for a second keeps its tasks.
    pub fn steady_leases(self) -> ClientOpts {
        ClientOpts {
            heartbeat_s: 2,
            missed_heartbeats: 3,
            ..self
        }
    }
}

/// The environment variable the harness puts shop `name`'s simulator refresh token in.
pub fn shop_refresh_env(name: &str) -> String {
    format!(
        "SF_JOBTEST_SHOP_{}_REFRESH",
        name.to_uppercase().replace('-', "_")
    )
}

/// The simulator's token endpoint of `platform`.
pub fn token_endpoint(sim: &SimHandle, platform: Platform) -> String {
    match platform {
        Platform::Taobao => format!("{}/token", sim.base_url()),
        Platform::Jd => format!("{}/oauth2/refresh_token", sim.base_url()),
        Platform::Alibaba => format!(
            "{}/openapi/param2/1/system.oauth2/getToken/{}",
            sim.base_url(),
            sim.config()
                .app(platform)
                .map(|a| a.app_key.clone())
                .unwrap_or_default()
        ),
    }
}

/// The environment variable the harness puts shop `name`'s simulator session in.
pub fn shop_session_env(name: &str) -> String {
    format!(
        "SF_JOBTEST_SHOP_{}_SESSION",
        name.to_uppercase().replace('-', "_")
    )
}

/// Run `cmd` to completion and return what it printed, whether it succeeded or not; panics
/// with its output when it does not finish within `timeout`.
pub fn output_within(mut cmd: Command, timeout: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start syncfleet");
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            return child.wait_with_output().expect("collect output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect output");
            panic!(
                "{cmd:?} did not finish in {timeout:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One heavy test at a time per test process: each starts several worker processes, and on a
/// small machine parallel tests would only make each other slow. (`scripts/run-test-binaries`
/// runs the suite's modules as a few processes at once, so a few heavy tests overlap.)
/// (An async mutex: a panicking test releases it without poisoning the others.)
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub sim: SimHandle,
    pub redis: TestRedis,
    pub config: PathBuf,
    pub db: String,
    pub store: Store,
    workers: Vec<(String, Child)>,
    /// Workers run as separate hosts (own empty working directory and config copy).
    separate_hosts: bool,
    /// Commands run without `--redis`: the embedded queue and gates in the ledger's process.
    embedded: bool,
    /// More environment for every command (a Redis CA file, say).
    pub env: Vec<(String, String)>,
    /// Declared last: dropped after the workers are gone.
    _ledger: TestLedger,
}

/// The client config text for `sim`: every platform of the simulator's demo apps, secrets from
/// the environment, one default gate, a fast-polling queue whose orphans are claimed after 2 s,
/// and probes off (their sample calls would land in the simulator's exact counts).
/// The shipped listing map of the simulator's catalog to `target` (`maps/`).
pub fn sim_map(target: Platform) -> PathBuf {
    crate::repo_root()
        .join("maps")
        .join(format!("sim-1688-{target}.toml"))
}

pub fn client_toml(sim: &SimHandle, o: &ClientOpts) -> String {
    let mut t = String::new();
    for app in &sim.config().apps {
        let p = app.platform;
        t.push_str(&format!(
            "[platforms.{p}]\nendpoint = \"{}\"\napp_key = \"{}\"\nsecret_env = \"{}\"\nsession_env = \"{}\"\nmax_in_flight = 256\n\n",
            sim.endpoint(p),
            app.app_key,
            secret_env(p),
            session_env(p),
        ));
        if o.renew_tokens_every_ms.is_some() {
            // Into the platform's section, before its blank line.
            t.pop();
            t.push_str(&format!(
                "token_endpoint = \"{}\"\n\n",
                token_endpoint(sim, p)
            ));
        }
    }
    t.push_str(&format!(
        "[gates.default]\nrate = {}\nburst = {}\nconcurrency = {}\np95_ms = 20\nmax_wait_ms = 5000\n\n\
         [queue]\nchunk_size = {}\npoll_interval_ms = 20\nheartbeat_s = {}\nmissed_heartbeats = {}\n\
         max_attempts = {}\nretry_base_ms = {}\nshutdown_grace_s = {}\nunreachable_exit_s = {}\nheal_interval_s = {}\n\n\
         [jobs]\nlogistics_min_interval_s = {}\nitem_retry_rounds = {}\n{}{}\n[probe]\ninterval_s = 0\n\n\
         [listing]\nmap = \"{}\"\nlocation_state = \"浙江\"\nlocation_city = \"杭州\"\n",
        o.rate,
        o.burst,
        o.concurrency,
        o.chunk_size,
        o.heartbeat_s,
        o.missed_heartbeats,
        o.max_attempts,
        o.retry_base_ms,
        o.shutdown_grace_s,
        o.unreachable_exit_s,
        o.heal_interval_s,
        o.logistics_min_interval_s,
        o.item_retry_rounds,
        o.order_page_size
            .map(|n| format!("order_page_size = {n}\n"))
            .unwrap_or_default(),
        o.renew_tokens_every_ms
            .map(|ms| format!("token_check_ms = {ms}\n"))
            .unwrap_or_default(),
        sim_map(Platform::Taobao).display()
    ));
    for (name, weight) in &o.shops {
        let app = sim
            .config()
            .apps
            .iter()
            .find(|a| a.shops.contains_key(name))
            .unwrap_or_else(|| panic!("no simulator app has shop {name}"));
        t.push_str(&format!(
            "\n[shops.{name}]\nplatform = \"{}\"\nsession_env = \"{}\"\nweight = {weight}\n",
            app.platform,
            shop_session_env(name)
        ));
        if o.renew_tokens_every_ms.is_some() {
            t.push_str(&format!("refresh_env = \"{}\"\n", shop_refresh_env(name)));
        }
    }
    t
}

impl Harness {
    pub async fn start(sim_cfg: SimConfig, opts: &ClientOpts) -> Harness {
        Harness::start_on(Kind::Sqlite, sim_cfg, opts).await
    }

    /// [`Harness::start`] with the ledger on `kind`; on PostgreSQL the workers run as separate
    /// hosts.
    pub async fn start_on(kind: Kind, sim_cfg: SimConfig, opts: &ClientOpts) -> Harness {
        Harness::start_with_redis(kind, sim_cfg, opts, TestRedis::start()).await
    }

    /// [`Harness::start_on`] with a Redis of the test's own making (TLS, say).
    pub async fn start_with_redis(
        kind: Kind,
        sim_cfg: SimConfig,
        opts: &ClientOpts,
        redis: TestRedis,
    ) -> Harness {
        let sim = sim::spawn(sim_cfg, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start the simulator");
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("client.toml");
        std::fs::write(&config, client_toml(&sim, opts)).expect("write config");
        let ledger = TestLedger::empty(kind).await;
        let db = match kind {
            // The ledger beside the config, as the SQLite tests have always had it.
            Kind::Sqlite => format!("sqlite://{}", dir.path().join("ledger.db").display()),
            Kind::Postgres => ledger.url.clone(),
        };
        let store = Store::connect(&db).await.expect("open ledger");
        store.migrate().await.expect("migrate ledger");
        Harness {
            dir,
            sim,
            redis,
            config,
            db,
            store,
            workers: Vec::new(),
            separate_hosts: kind == Kind::Postgres,
            embedded: false,
            env: Vec::new(),
            _ledger: ledger,
        }
    }

    /// From now on, commands run without Redis: one worker process runs the embedded queue and
    /// gates (the default a user without Redis gets).
    pub fn use_embedded(&mut self) {
        self.embedded = true;
    }

    /// Write another config file (e.g. a different min interval) and return its path.
    pub fn write_config(&self, name: &str, opts: &ClientOpts) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, client_toml(&self.sim, opts)).expect("write config");
        path
    }

    /// `syncfleet --config C --redis R --db D ARGS...` with the secrets in its environment.
    pub fn command_with(&self, config: &Path, args: &[&str]) -> Command {
        self.command_on(config, &self.db, args)
    }

    /// [`Harness::command_with`] on another ledger URL.
    pub fn command_on(&self, config: &Path, db: &str, args: &[&str]) -> Command {
        let mut c = Command::new(crate::syncfleet_bin());
        c.arg("--config").arg(config);
        if !self.embedded {
            c.arg("--redis").arg(&self.redis.url);
        }
        c.arg("--db")
            .arg(db)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("SF_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .env_remove("SYNCFLEET_CONFIG")
            .env_remove("SYNCFLEET_REDIS_URL")
            .env_remove("SYNCFLEET_DB");
        for app in &self.sim.config().apps {
            c.env(secret_env(app.platform), app.secret.expose());
            c.env(session_env(app.platform), app.session.expose());
            for (name, session) in &app.shops {
                c.env(shop_session_env(name), session.expose());
                if let Some(refresh) = app.shop_refresh(name) {
                    c.env(shop_refresh_env(name), refresh.expose());
                }
            }
        }
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Run a short command to completion (bounded by `timeout`); panics with its output when it
    /// fails or hangs.
    pub fn run_with(&self, config: &Path, args: &[&str], timeout: Duration) -> Output {
        let out = output_within(self.command_with(config, args), timeout);
        assert!(
            out.status.success(),
            "syncfleet {args:?} failed ({:?})\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(&self.config.clone(), args, Duration::from_secs(60))
    }

    /// `syncfleet enqueue ARGS...`; returns the job id it printed.
    pub fn enqueue_with(&self, config: &Path, args: &[&str]) -> i64 {
        let mut all = vec!["enqueue"];
        all.extend_from_slice(args);
        let out = self.run_with(config, &all, Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.lines()
            .find_map(|l| {
                l.strip_prefix("job ")
                    .and_then(|r| r.split(':').next())
                    .and_then(|id| id.trim().parse().ok())
            })
            .unwrap_or_else(|| panic!("no job id in enqueue output: {text}"))
    }

    pub fn enqueue(&self, args: &[&str]) -> i64 {
        self.enqueue_with(&self.config.clone(), args)
    }

    /// Enqueue a listing (1688 -> Taobao) of items 1..=n with `config`; returns the job id.
    pub fn enqueue_listing_with(&self, config: &Path, n: u64) -> i64 {
        self.enqueue_listing_to(config, n, None)
    }

    /// [`Harness::enqueue_listing_with`] for target shop `to_shop` (None: the default one).
    pub fn enqueue_listing_to(&self, config: &Path, n: u64, to_shop: Option<&str>) -> i64 {
        let items = self.item_file(n);
        let items = items.to_str().expect("utf-8 temp path");
        let mut args = vec![
            "listing", "--from", "alibaba", "--to", "taobao", "--items", items,
        ];
        if let Some(shop) = to_shop {
            args.extend(["--to-shop", shop]);
        }
        self.enqueue_with(config, &args)
    }

    /// [`Harness::enqueue_listing_with`] with the harness's own config.
    pub fn enqueue_listing(&self, n: u64) -> i64 {
        self.enqueue_listing_with(&self.config.clone(), n)
    }

    /// Write `n` listing item ids (1..=n) to a file; returns its path.
    pub fn item_file(&self, n: u64) -> PathBuf {
        let path = self.dir.path().join(format!("items-{n}.txt"));
        let text: String = (1..=n).map(|i| format!("{i}\n")).collect();
        std::fs::write(&path, text).expect("write items");
        path
    }

    /// Start a worker process: `work --concurrency C --exit-when-idle-s IDLE`; its output goes
    /// to files in the temp dir (printed if a wait fails).
    pub fn spawn_worker_with(&mut self, config: &Path, concurrency: usize, idle_s: u64) -> u32 {
        let n = self.workers.len();
        let out = File::create(self.dir.path().join(format!("worker{n}.out"))).expect("log");
        let err = File::create(self.dir.path().join(format!("worker{n}.err"))).expect("log");
        let (config, host_dir) = self.host_for(n, config);
        let mut cmd = self.command_with(
            &config,
            &[
                "work",
                "--concurrency",
                &concurrency.to_string(),
                "--exit-when-idle-s",
                &idle_s.to_string(),
            ],
        );
        if let Some(dir) = host_dir {
            cmd.current_dir(dir);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start worker");
        let pid = child.id();
        self.workers.push((format!("worker{n}"), child));
        pid
    }

    /// Where worker `n` runs: on separate hosts, a new empty directory holding only its own
    /// copy of `config` (returned with the directory); otherwise `config` as is.
    fn host_for(&self, n: usize, config: &Path) -> (PathBuf, Option<PathBuf>) {
        if !self.separate_hosts {
            return (config.to_path_buf(), None);
        }
        let host = self.dir.path().join(format!("host{n}"));
        std::fs::create_dir_all(&host).expect("host dir");
        let own = host.join("syncfleet.toml");
        std::fs::copy(config, &own).expect("copy config to the host");
        (own, Some(host))
    }

    /// Files in worker directories other than the worker's own config copy: on separate hosts
    /// a worker must need (and leave) nothing else on its disk, e.g. no SQLite ledger or queue.
    pub fn host_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for n in 0..self.workers.len() {
            let host = self.dir.path().join(format!("host{n}"));
            if let Ok(entries) = std::fs::read_dir(&host) {
                for e in entries.flatten() {
                    if e.file_name() != "syncfleet.toml" {
                        out.push(e.path());
                    }
                }
            }
        }
        out
    }

    pub fn spawn_worker(&mut self, concurrency: usize, idle_s: u64) -> u32 {
        let config = self.config.clone();
        self.spawn_worker_with(&config, concurrency, idle_s)
    }

    /// Whether the worker with this pid is still running.
    pub fn worker_running(&mut self, pid: u32) -> bool {
        self.workers
            .iter_mut()
            .filter(|(_, c)| c.id() == pid)
            .any(|(_, c)| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGKILL the worker with this pid.
    pub fn kill_worker(&mut self, pid: u32) {
        for (_, c) in self.workers.iter_mut().filter(|(_, c)| c.id() == pid) {
            let _ = c.kill(); // SIGKILL on unix
            let _ = c.wait();
        }
    }

    /// SIGTERM the worker with this pid (graceful: it finishes its in-flight tasks).
    pub fn terminate_worker(&self, pid: u32) {
        let status = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid}");
    }

    /// Wait (bounded) for the worker with this pid to exit; returns whether it exited 0.
    pub fn wait_worker(&mut self, pid: u32, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            for (_, c) in self.workers.iter_mut().filter(|(_, c)| c.id() == pid) {
                if let Some(status) = c.try_wait().expect("try_wait") {
                    return status.success();
                }
            }
            assert!(
                Instant::now() < deadline,
                "worker {pid} still running after {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Logs of every worker started so far (for failure messages).
    pub fn worker_logs(&self) -> String {
        let mut s = String::new();
        for (name, _) in &self.workers {
            for ext in ["out", "err"] {
                let text = self.worker_log(name, ext);
                let tail: String = text
                    .lines()
                    .rev()
                    .take(15)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect::<Vec<_>>()
                    .join("\n");
                s.push_str(&format!("--- {name}.{ext}\n{tail}\n"));
            }
        }
        s
    }

    /// What worker `name` wrote to its stdout (`out`) or stderr (`err`) so far; empty if
    /// nothing.
    fn worker_log(&self, name: &str, ext: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(format!("{name}.{ext}"))).unwrap_or_default()
    }

    /// The warnings and errors every worker started so far logged (for failure messages: a
    /// lost lease or an abandoned call shows there, long before a log's last lines).
    pub fn worker_warnings(&self) -> String {
        let mut s = String::new();
        for (name, _) in &self.workers {
            for line in self
                .worker_log(name, "err")
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .take(40)
            {
                s.push_str(&format!("{name}: {line}\n"));
            }
        }
        s
    }

    /// Wait (bounded) for every started worker to exit; asserts each exited with success.
    pub fn wait_workers(&mut self, timeout: Duration) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        for i in 0..self.workers.len() {
            loop {
                let status = self.workers[i].1.try_wait().expect("try_wait");
                if let Some(status) = status {
                    let name = self.workers[i].0.clone();
                    let out = self.worker_log(&name, "out");
                    lines.push(format!("{name}: {status} {}", out.trim()));
                    break;
                }
                if Instant::now() > deadline {
                    let logs = self.worker_logs();
                    panic!("workers did not exit within {timeout:?}\n{logs}");
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        lines
    }

    /// The peak resident memory of a running process (`VmHWM`, MiB), None once it is gone.
    pub fn peak_rss_mb(pid: u32) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kb / 1024)
    }

    /// Poll the ledger until the job has no pending item (bounded).
    pub async fn wait_job(&self, job: i64, timeout: Duration) -> JobStatus {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.store.job_status(job).await.expect("job status");
            if s.job.counts.pending == 0 {
                return s;
            }
            if Instant::now() > deadline {
                panic!(
                    "job {job} not finished within {timeout:?}: {:?}\n{}",
                    s.job.counts,
                    self.worker_logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Wait until at least `n` items of the job are terminal (bounded).
    pub async fn wait_terminal(&self, job: i64, n: u64, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let s = self.store.job_status(job).await.expect("job status");
            if s.job.counts.terminal() >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "job {job}: {n} items not terminal within {timeout:?}: {:?}\n{}",
                s.job.counts,
                self.worker_logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A gateway for an in-process worker: every platform of `cfg` with the simulator's
    /// demo-app credentials (no environment variables), calls recorded in the ledger.
    pub fn gateway(&self, cfg: &Config, gates: Gates, fleet: Option<FleetLink>) -> Gateway {
        syncfleet::app::demo::sim_gateway(cfg, self.sim.config(), &self.store, gates, fleet)
            .expect("gateway with the simulator's credentials")
    }

    /// Distinct products written at the simulator on `p`: item_add made ones, less those
    /// whose seller's code another product of the shop already carried.
    pub fn distinct_writes(&self, p: Platform) -> u64 {
        let s = self.stats(p, Api::ItemAdd);
        s.ok - s.duplicate_writes
    }

    pub fn stats(&self, p: Platform, api: Api) -> ApiStats {
        self.sim
            .stats()
            .for_platform(p, api)
            .cloned()
            .unwrap_or_else(|| panic!("no simulator stats for {p} {api}"))
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for (_, c) in &mut self.workers {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

// ---- Operations: workers with extra arguments and environment, and their stderr. ----
impl Harness {
    /// [`Harness::spawn_worker_with`] with `extra` arguments appended after the worker's own
    /// (global flags such as `--log-format json` may come last) and `env` set on top of the
    /// harness's (e.g. `RUST_LOG=info`).
    pub fn spawn_worker_args(
        &mut self,
        config: &Path,
        concurrency: usize,
        idle_s: u64,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> u32 {
        let n = self.workers.len();
        let out = File::create(self.dir.path().join(format!("worker{n}.out"))).expect("log");
        let err = File::create(self.dir.path().join(format!("worker{n}.err"))).expect("log");
        let concurrency = concurrency.to_string();
        let idle_s = idle_s.to_string();
        let mut args = vec![
            "work",
            "--concurrency",
            &concurrency,
            "--exit-when-idle-s",
            &idle_s,
        ];
        args.extend_from_slice(extra);
        let mut cmd = self.command_with(config, &args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("start worker");
        let pid = child.id();
        self.workers.push((format!("worker{n}"), child));
        pid
    }

    /// Everything the worker with this pid wrote to stderr so far (a file, not a terminal).
    pub fn worker_stderr(&self, pid: u32) -> String {
        let name = self
            .workers
            .iter()
            .find(|(_, c)| c.id() == pid)
            .map(|(name, _)| name.clone())
            .unwrap_or_else(|| panic!("no worker with pid {pid}"));
        std::fs::read_to_string(self.dir.path().join(format!("{name}.err"))).unwrap_or_default()
    }
}
