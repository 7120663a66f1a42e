//! Logs that read well: a real worker with stderr redirected to a file writes no
//! ANSI escapes, and with `--log-format json` every stderr line is one JSON object, the
//! command's own final error included.

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::time::Duration;
use syncfleet::sim::SimConfig;

/// Run a small listing job with one worker at `RUST_LOG=info` (call lines, job and worker
/// lines) and `extra` flags; returns its stderr.
async fn worker_stderr(h: &mut Harness, items: u64, extra: &[&str]) -> String {
    let job = h.enqueue_listing(items);
    let config = h.config.clone();
    let pid = h.spawn_worker_args(&config, 4, 1, extra, &[("RUST_LOG", "info")]);
    h.wait_job(job, Duration::from_secs(60)).await;
    assert!(
        h.wait_worker(pid, Duration::from_secs(60)),
        "worker failed\n{}",
        h.worker_logs()
    );
    h.worker_stderr(pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_to_a_file_have_no_colour_codes() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    let err = worker_stderr(&mut h, 30, &[]).await;
    assert!(
        err.contains("syncfleet::call"),
        "expected call lines on stderr:\n{err}"
    );
    assert!(
        !err.contains("\x1b["),
        "ANSI escape in a log written to a file:\n{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() {
    let _serial = jobs_harness::serial().await;
    let mut h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    let err = worker_stderr(&mut h, 30, &["--log-format", "json"]).await;
    let mut targets = std::collections::BTreeSet::new();
    for line in err.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n--- all:\n{err}"));
        assert!(v.is_object(), "not an object: {line}");
        assert!(v.get("level").is_some(), "no level: {line}");
        if let Some(t) = v.get("target").and_then(|t| t.as_str()) {
            targets.insert(t.to_string());
        }
    }
    assert!(
        targets.contains("syncfleet::call"),
        "no call lines among {targets:?}:\n{err}"
    );
    assert!(!err.contains("\x1b["), "ANSI escape in JSON logs");

    // The command's own final error is a JSON line too (exit 2: no such job).
    let out = h
        .command_with(&h.config, &["--log-format", "json", "status", "999999"])
        .env("RUST_LOG", "info")
        .output()
        .expect("run status");
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "no error printed");
    for line in &lines {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n--- all:\n{stderr}"));
        assert!(v.is_object(), "{line}");
    }
    let last: serde_json::Value = serde_json::from_str(lines[lines.len() - 1]).expect("json");
    assert_eq!(last["level"], "ERROR", "{stderr}");
    assert_eq!(
        last["exit_code"].as_i64(),
        out.status.code().map(i64::from),
        "{stderr}"
    );
}

/// `syncfleet status | head -3`: a report whose reader has gone ends quietly, as Unix tools
/// do, not with a panic on the closed pipe (exit 101). The pipe's read end is closed before
/// the command starts, so every write meets the closed pipe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_into_a_closed_pipe_ends_quietly() {
    let h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    h.enqueue_listing(10);
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = h
        .command_with(&h.config, &["status"])
        .stdin(std::process::Stdio::null())
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("run status");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_ne!(out.status.code(), Some(101), "{stderr}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(13),
        "ended by SIGPIPE: {:?}",
        out.status
    );
}
