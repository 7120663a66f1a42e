//! Load generator for the simulator benchmark (BENCHMARKS.md).
//!
//! Starts `syncfleet sim` as a child process on a free loopback port with a bench config
//! (huge limits, no latency, no drills), then drives it with N concurrent keep-alive HTTP/1
//! connections for a bounded time:
//!
//! 1. baseline: `GET /admin/drill` (the same server, listener and serve loop, no platform work);
//! 2. platform: signed TOP `taobao.item.seller.get` calls (parse, verify HMAC-SHA256,
//!    window + quota, data, JSON answer).
//!
//! Prints calls/s of both and their ratio, and cross-checks the count the simulator saw.
//!
//! Usage: `scripts/bench simload [--connections 64] [--seconds 10] [--sim-bin PATH]`

use axum::body::Bytes;
use chrono::Utc;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use syncfleet::platform::sign::{top_sign, SignMethod};
use syncfleet::time::china_offset;
use tokio::io::{AsyncBufReadExt, BufReader};

const BENCH_CONFIG: &str = r#"
seed = 42
[apps.taobao]
app_key = "10000001"
secret = "sim-taobao-secret"
session = "sim-taobao-session"
[catalog]
items = 100000
[limits.default]
per_second = 1000000000
daily = 1000000000000
"#;

struct Args {
    connections: usize,
    seconds: u64,
    sim_bin: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        connections: 64,
        seconds: 10,
        sim_bin: syncfleet_testkit::syncfleet_bin(),
    };
    let mut it = syncfleet_testkit::program_args().into_iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--connections" => {
                args.connections = val()?.parse().map_err(|e| format!("--connections: {e}"))?
            }
            "--seconds" => args.seconds = val()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--sim-bin" => args.sim_bin = PathBuf::from(val()?),
            "-h" | "--help" => {
                println!("simload [--connections N] [--seconds S] [--sim-bin PATH]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.connections == 0 || args.seconds == 0 || args.seconds > 120 {
        return Err("--connections must be >= 1 and --seconds in 1..=120".into());
    }
    Ok(args)
}

/// Signed TOP item_get bodies, reused round-robin (the timestamp stays within the skew
/// for the run), so the generator spends its CPU on sending, not signing.
fn signed_bodies(n: u64) -> Vec<Bytes> {
    let ts = Utc::now()
        .with_timezone(&china_offset())
        .format("%Y-%m-%d %H:%M:%S")
        .to_string();
    (1..=n)
        .map(|id| {
            let id = id.to_string();
            let mut p: Vec<(&str, &str)> = vec![
                ("method", "taobao.item.seller.get"),
                ("app_key", "10000001"),
                ("session", "sim-taobao-session"),
                ("timestamp", &ts),
                ("format", "json"),
                ("v", "2.0"),
                ("sign_method", "hmac-sha256"),
                ("simplify", "false"),
                ("fields", "num_iid,title,price,num"),
                ("num_iid", &id),
            ];
            let sign = top_sign(
                "sim-taobao-secret",
                SignMethod::HmacSha256,
                p.iter().copied(),
            );
            p.push(("sign", &sign));
            Bytes::from(serde_urlencoded::to_string(&p).unwrap_or_default())
        })
        .collect()
}

/// Present in every successful item_get answer.
const MARK: &[u8] = b"item_seller_get_response";

#[derive(Default)]
struct Counts {
    ok: AtomicU64,
    bad: AtomicU64,
}

/// Drive `connections` keep-alive connections for `secs`; returns (ok, bad, elapsed) at the
/// deadline and the ok calls including those that finished after it.
async fn drive(
    addr: std::net::SocketAddr,
    connections: usize,
    secs: u64,
    platform: bool,
    bodies: Arc<Vec<Bytes>>,
) -> anyhow::Result<(u64, u64, Duration, u64)> {
    let counts = Arc::new(Counts::default());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..connections {
        let (counts, stop, bodies) = (counts.clone(), stop.clone(), bodies.clone());
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut i = c;
            while !stop.load(Relaxed) {
                let req = if platform {
                    i = (i + connections) % bodies.len();
                    Request::post("/router/rest")
                        .header("host", "127.0.0.1")
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(Full::new(bodies[i].clone()))?
                } else {
                    Request::get("/admin/drill")
                        .header("host", "127.0.0.1")
                        .body(Full::new(Bytes::new()))?
                };
                sender.ready().await?;
                let resp = sender.send_request(req).await?;
                let status = resp.status();
                let body = resp.into_body().collect().await?.to_bytes();
                let good =
                    status == 200 && (!platform || body.windows(MARK.len()).any(|w| w == MARK));
                if good { &counts.ok } else { &counts.bad }.fetch_add(1, Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    // Counts and time are read together: calls finishing after the deadline are not counted.
    let (ok, bad, elapsed) = (
        counts.ok.load(Relaxed),
        counts.bad.load(Relaxed),
        start.elapsed(),
    );
    stop.store(true, Relaxed);
    for t in tasks {
        if let Ok(Err(e)) = tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .unwrap_or(Ok(Ok(())))
        {
            eprintln!("connection failed: {e}");
        }
    }
    Ok((ok, bad, elapsed, counts.ok.load(Relaxed)))
}

async fn admin_ok(addr: std::net::SocketAddr) -> anyhow::Result<u64> {
    let v: serde_json::Value = reqwest::Client::new()
        .get(format!("http://{addr}/admin/stats"))
        .send()
        .await?
        .json()
        .await?;
    Ok(v["totals"]["ok"].as_u64().unwrap_or(0))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let cfg_path = std::env::temp_dir().join(format!("simload-{}.toml", std::process::id()));
    std::fs::write(&cfg_path, BENCH_CONFIG)?;
    let mut child = tokio::process::Command::new(&args.sim_bin)
        .args([
            "--log-format",
            "text",
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--sim-config",
        ])
        .arg(&cfg_path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| anyhow::anyhow!("cannot start {}: {e}", args.sim_bin.display()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout from the simulator"))?;
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .map_err(|_| anyhow::anyhow!("the simulator did not start within 10 s"))??
        .unwrap_or_default();
    let addr: std::net::SocketAddr = line
        .strip_prefix("sim listening on ")
        .ok_or_else(|| anyhow::anyhow!("unexpected first line from the simulator: {line}"))?
        .parse()?;
    let bodies = Arc::new(signed_bodies(1000));

    // Warm-up, then the baseline, then the platform path.
    drive(addr, args.connections, 1, true, bodies.clone()).await?;
    let before = admin_ok(addr).await?;
    let (b_ok, b_bad, b_el, _) =
        drive(addr, args.connections, args.seconds, false, bodies.clone()).await?;
    let (p_ok, p_bad, p_el, p_all) =
        drive(addr, args.connections, args.seconds, true, bodies.clone()).await?;
    let seen = admin_ok(addr).await? - before;
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = std::fs::remove_file(&cfg_path);

    let b_rate = b_ok as f64 / b_el.as_secs_f64();
    let p_rate = p_ok as f64 / p_el.as_secs_f64();
    println!(
        "simload: {} connections, {} s per phase, simulator pid child at {addr}",
        args.connections, args.seconds
    );
    println!("baseline GET /admin/drill    : {b_rate:>10.0} calls/s ({b_ok} ok, {b_bad} bad)");
    println!("signed TOP item_get (platform): {p_rate:>10.0} calls/s ({p_ok} ok, {p_bad} bad)");
    println!(
        "ratio platform / baseline     : {:>10.2}",
        p_rate / b_rate.max(1.0)
    );
    println!("simulator counted ok calls    : {seen} (client saw {p_all})");
    if p_bad > 0 || seen != p_all {
        anyhow::bail!("the simulator answered {p_bad} bad responses or its count differs");
    }
    Ok(())
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(run(args)) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
