//! The README runs: its shell blocks, in order, as a newcomer types them, against the
//! simulator, so a README that lies fails the suite; then every SQL recipe of the guide
//! (`docs/guide/*.md`) runs on the ledger that run left.
//!
//! Every fenced block whose language is `sh` runs, one bash script for the whole file, in a
//! directory holding copies of the repository's `config/`, `jobs/` and `maps/`; a block is left
//! out only when its info string says `no-run` with the reason in parentheses. What differs
//! from a newcomer's terminal, and why:
//! - `syncfleet` is the binary this suite built (`cargo run --release --` and
//!   `target/release/syncfleet` name it); `cargo build` and `scripts/test` are not run (the
//!   binary is built, and the suite is the test command);
//! - `demo` lists 1,000 items, not 100,000 (the same job, smaller: the test binary is a debug
//!   build; the release demo's figures are BENCHMARKS.md's);
//! - the simulator listens on a free port (`SYNCFLEET_SIM_LISTEN`, and the copied
//!   `config/local.toml` points there), and after a line that starts it in the background the
//!   script waits until it accepts connections (a person typing the next line is slower).

use crate::support::free_port;
use std::path::Path;
use std::process::Command;

/// The runnable blocks of language `lang` (`sh`, `sql`), in order, each as its lines.
fn runnable_blocks(markdown: &str, lang: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    // Inside a fence: Some(the lines collected, or None for a block not run).
    let mut fence: Option<Option<Vec<String>>> = None;
    for line in markdown.lines() {
        let info = line.trim_start().strip_prefix("```").map(str::trim);
        match (info, fence.take()) {
            (Some(_), Some(block)) => blocks.extend(block),
            (Some(info), None) => {
                let runs = match info.strip_prefix(lang) {
                    Some("") => true,
                    Some(rest) if rest.starts_with(' ') => {
                        let reason = rest.trim().strip_prefix("no-run").map(str::trim);
                        assert!(
                            matches!(reason, Some(r) if r.len() > 2 && r.starts_with('(') && r.ends_with(')')),
                            "a block left out says `no-run (why)`: ```{info}"
                        );
                        false
                    }
                    _ => false,
                };
                fence = Some(runs.then(Vec::new));
            }
            (None, Some(mut block)) => {
                if let Some(lines) = block.as_mut() {
                    lines.push(line.to_string());
                }
                fence = Some(block);
            }
            (None, None) => {}
        }
    }
    assert!(fence.is_none(), "an unclosed code block");
    blocks
}

/// A README line as the suite runs it (see the module's comment).
fn as_run(line: &str, sim_port: u16) -> String {
    let t = line.trim_start();
    if t.starts_with("cargo build") || t.starts_with("scripts/test") {
        return format!("# not run here: {t}");
    }
    let mut l = line
        .replace("cargo run --release --", "syncfleet")
        .replace("target/release/syncfleet", "syncfleet");
    if let Some(rest) = l.trim_start().strip_prefix("syncfleet demo") {
        if !rest.contains("--items") {
            l = format!("syncfleet demo --items 1000{rest}");
        }
    }
    let code = l.split(" #").next().unwrap_or("").trim_end();
    if code.starts_with("syncfleet sim") && code.ends_with('&') {
        // Wait (bounded) until the simulator accepts connections.
        l = format!(
            "{l}\nfor _ in $(seq 600); do (exec 3<>/dev/tcp/127.0.0.1/{sim_port}) 2>/dev/null && break; sleep 0.1; done"
        );
    }
    l
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn the_readme_runs_as_written() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(repo.join("README.md")).expect("README.md");
    let blocks = runnable_blocks(&readme, "sh");
    assert!(
        blocks.len() >= 3,
        "the README's runnable blocks: {blocks:?}"
    );

    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["config", "jobs", "maps"] {
        copy_dir(&repo.join(sub), &dir.path().join(sub));
    }
    let sim_port = free_port();
    let local = dir.path().join("config/local.toml");
    let text = std::fs::read_to_string(&local).expect("local.toml");
    std::fs::write(
        &local,
        text.replace("127.0.0.1:7800", &format!("127.0.0.1:{sim_port}")),
    )
    .expect("write local.toml");
    let bin = dir.path().join(".bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_syncfleet"), bin.join("syncfleet"))
        .expect("symlink");

    let mut script =
        String::from("set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n");
    for block in &blocks {
        for line in block {
            script.push_str(&as_run(line, sim_port));
            script.push('\n');
        }
    }
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("timeout");
    cmd.args(["-k", "10", "900", "bash", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path);
    // A newcomer's shell has none of the suite's settings.
    for (k, _) in std::env::vars() {
        if k.starts_with("SYNCFLEET_") || k.starts_with("SIM_") || k == "REDIS_URL" {
            cmd.env_remove(k);
        }
    }
    cmd.env("SYNCFLEET_SIM_LISTEN", format!("127.0.0.1:{sim_port}"));
    let out = cmd.output().expect("bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the README's commands failed ({}):\n--- script\n{script}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    // What the README says the run shows: the demo's items done, and the three jobs finished.
    assert!(
        stdout.lines().any(|l| l == "done|1000"),
        "the demo's ledger query shows 1,000 items done:\n{stdout}"
    );
    let finished = stdout
        .lines()
        .filter(|l| l.split_whitespace().nth(4) == Some("finished"))
        .count();
    assert_eq!(
        finished, 3,
        "`status` shows the three jobs finished:\n{stdout}"
    );
}
