//! An idle worker costs almost nothing: `syncfleet work` on the embedded default with an empty
//! queue, measured as an operator would (the process's CPU time over a few seconds). Its two
//! lanes once polled each other in one task and ran ~450 empty fetches a second (42% of a
//! core in a debug build).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// User plus system CPU time of `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    // The fields after the command name (which may hold spaces) start after its ')'.
    let after = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

fn ticks_per_second() -> f64 {
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("CLK_TCK")
}

#[test]
fn an_idle_embedded_worker_uses_almost_no_cpu() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = format!("sqlite://{}", dir.path().join("ledger.db").display());
    let config = concat!(env!("CARGO_MANIFEST_DIR"), "/config/local.toml");
    let command = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_syncfleet"));
        c.args(["--config", config, "--db", &db])
            .args(args)
            .env_remove("REDIS_URL")
            .env("RUST_LOG", "info");
        c.envs(crate::support::LOCAL_CONFIG_ENV);
        c
    };
    let migrate = command(&["db", "migrate"]).output().expect("db migrate");
    assert!(migrate.status.success(), "{migrate:?}");
    let log = dir.path().join("worker.err");
    let mut child = command(&["work"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"))
        .spawn()
        .expect("start the worker");
    let pid = child.id();
    // Started (bounded wait on what it says, not on time).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut text = String::new();
        std::fs::File::open(&log)
            .and_then(|mut f| f.read_to_string(&mut text))
            .expect("read the log");
        if text.contains("embedded queue worker starting") {
            break;
        }
        assert!(
            Instant::now() < deadline && matches!(child.try_wait(), Ok(None)),
            "the worker did not start:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // A window of idle time: what it spends in it, not how long anything takes.
    let (t0, w0) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(5));
    let (t1, wall) = (cpu_ticks(pid), w0.elapsed());
    let _ = child.kill();
    let _ = child.wait();
    let share = (t1 - t0) as f64 / ticks_per_second() / wall.as_secs_f64();
    println!("idle embedded worker: {:.1}% of a core", share * 100.0);
    assert!(
        share < 0.10,
        "an idle worker used {:.1}% of a core",
        share * 100.0
    );
}
