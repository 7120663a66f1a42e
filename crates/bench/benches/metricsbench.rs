//! metricsbench: what Prometheus metrics cost the demo (BENCHMARKS.md).
//!
//! Runs the demo (simulator + embedded queue + worker, one process) with metrics off, then
//! with `--metrics-listen` on and a scraper polling `/metrics` every second, and prints both
//! durations and their ratio. Each run is a child process of this program (`--child off|on`):
//! the tracing subscriber and the metrics recorder are process-wide and installed once, so
//! "off" must be a process that never installed them.
//!
//! `flock /tmp/bench.lock scripts/bench metricsbench [--items N --target-s S --rounds R]`

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use syncfleet::app::demo::{self, DemoOptions};
use syncfleet::app::logging::{self, LogFormat, LogOptions};

struct Args {
    items: u64,
    target_s: u64,
    rounds: u32,
    child: Option<bool>,
    port: u16,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        items: 20_000,
        target_s: 20,
        rounds: 1,
        child: None,
        port: 0,
    };
    let mut it = syncfleet_testkit::program_args().into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--items" => a.items = value()?.parse().map_err(|e| format!("--items: {e}"))?,
            "--target-s" => {
                a.target_s = value()?.parse().map_err(|e| format!("--target-s: {e}"))?
            }
            "--rounds" => a.rounds = value()?.parse().map_err(|e| format!("--rounds: {e}"))?,
            "--port" => a.port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--child" => {
                a.child = Some(match value()?.as_str() {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("--child on|off, not {other}")),
                })
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// The child: one demo run, metrics on or off, its figures as one line on stdout.
fn child(args: &Args, on: bool) -> Result<(), String> {
    // As the binary sets up `demo`: warn filter, non-blocking writer; the metrics layer only
    // when on.
    let log = logging::init_with(LogOptions {
        format: LogFormat::Text,
        default_filter: "warn",
        metrics: on,
        non_blocking: true,
    });
    let dir = std::env::temp_dir().join(format!(
        "metricsbench-{}-{}",
        std::process::id(),
        if on { "on" } else { "off" }
    ));
    let opts = DemoOptions {
        items: args.items,
        dir: dir.clone(),
        target: Duration::from_secs(args.target_s.max(1)),
        concurrency: 16,
        metrics_listen: on.then(|| SocketAddr::from(([127, 0, 0, 1], args.port))),
        ledger: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    let report = rt
        .block_on(demo::run(&opts, |_| {}))
        .map_err(|e| format!("demo: {e:#}"))?;
    let _ = std::fs::remove_dir_all(&dir);
    log.finish();
    let rejected: u64 = report.apis.iter().map(|a| a.rejected).sum();
    println!(
        "RESULT duration_s={:.4} physical_s={:.4} utilisation={:.5} rejected={} done={}",
        report.duration.as_secs_f64(),
        report.physical_limit.as_secs_f64(),
        report.quota_utilisation,
        rejected,
        report.status.job.counts.done
    );
    Ok(())
}

fn scrape(addr: SocketAddr) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    body.starts_with("HTTP/1.1 200").then_some(body)
}

/// The value of an unlabelled series in a scrape.
fn value(scrape: &str, name: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// One child run; with metrics on, a scraper thread polls every second while it runs.
fn run_child(args: &Args, on: bool) -> Result<(f64, String, u64), String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))?;
    let mut child = Command::new(exe)
        .args([
            "--child",
            if on { "on" } else { "off" },
            "--items",
            &args.items.to_string(),
            "--target-s",
            &args.target_s.to_string(),
            "--port",
            &port.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let scrapes = Arc::new(AtomicU64::new(0));
    let collect_us = Arc::new(AtomicU64::new(0));
    let scraper = on.then(|| {
        let (stop, scrapes, collect_us) = (stop.clone(), scrapes.clone(), collect_us.clone());
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                if let Some(body) = scrape(addr) {
                    scrapes.fetch_add(1, Ordering::Relaxed);
                    // The collector's own cost, to tell it apart from noise.
                    if let Some(v) = value(&body, "syncfleet_metrics_collect_duration_seconds") {
                        collect_us.fetch_max((v * 1e6) as u64, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    });
    let mut out = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        stdout
            .read_to_string(&mut out)
            .map_err(|e| format!("child stdout: {e}"))?;
    }
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    stop.store(true, Ordering::Relaxed);
    if let Some(t) = scraper {
        let _ = t.join();
    }
    if !status.success() {
        return Err(format!(
            "child ({}) failed: {status}",
            if on { "on" } else { "off" }
        ));
    }
    let line = out
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .ok_or_else(|| format!("no RESULT line in: {out}"))?
        .to_string();
    let duration = line
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("duration_s="))
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("no duration in {line}"))?;
    let line = if on {
        format!(
            "{line} scrapes={} max_collect_ms={:.2}",
            scrapes.load(Ordering::Relaxed),
            collect_us.load(Ordering::Relaxed) as f64 / 1000.0
        )
    } else {
        line
    };
    Ok((duration, line, scrapes.load(Ordering::Relaxed)))
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("metricsbench: {e}");
            std::process::exit(2);
        }
    };
    if let Some(on) = args.child {
        if let Err(e) = child(&args, on) {
            eprintln!("metricsbench child: {e}");
            std::process::exit(1);
        }
        return;
    }
    println!(
        "metricsbench: demo with {} items, target {} s, {} round(s) of metrics off then on (scraped every 1 s)",
        args.items, args.target_s, args.rounds
    );
    let (mut off_sum, mut on_sum) = (0.0, 0.0);
    for round in 1..=args.rounds.max(1) {
        let run = |on| match run_child(&args, on) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("metricsbench: {e}");
                std::process::exit(1);
            }
        };
        let (off, off_line, _) = run(false);
        println!("round {round} off: {off_line}");
        let (on, on_line, scrapes) = run(true);
        println!("round {round} on:  {on_line}");
        if scrapes == 0 {
            eprintln!("metricsbench: the scraper never got an answer from /metrics");
            std::process::exit(1);
        }
        println!("round {round} ratio on/off: {:.4}", on / off);
        off_sum += off;
        on_sum += on;
    }
    println!(
        "duration off {off_sum:.2} s, on {on_sum:.2} s, ratio on/off {:.4}",
        on_sum / off_sum
    );
}
