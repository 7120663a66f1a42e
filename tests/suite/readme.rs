//! The README runs: its shell blocks, in order, as a newcomer types them, against the
//! simulator, then the guide's (`docs/guide/*.md`, chapter by chapter), so a README or guide
//! that lies fails the suite; then every SQL recipe of the guide runs on the ledger that run
//! left.
//!
//! Every fenced block whose language is `sh` runs, one bash script for the whole file, in a
//! directory holding copies of the repository's `config/`, `jobs/` and `maps/`; a block is left
//! out only when its info string says `no-run` with the reason in parentheses. What differs
//! from a newcomer's terminal, and why:
//! - `syncfleet` is the binary this suite built (`cargo run --release --` and
//!   `target/release/syncfleet` name it); `cargo build` and `scripts/test` are not run (the
//!   binary is built, and the suite is the test command);
//! - `demo` lists 1,000 items in 10 s, not 100,000 in 60 (the same job, smaller and faster:
//!   the test binary is a debug build; the release demo's figures are BENCHMARKS.md's);
//! - the simulator listens on a free port (`SYNCFLEET_SIM_LISTEN`; the copied
//!   `config/local.toml` and the blocks' `127.0.0.1:7800` point there), and after a line that
//!   starts it in the background the script waits until it accepts connections (a person
//!   typing the next line is slower).

use crate::support::free_port;
use std::io::Write;
use std::path::Path;
use std::process::Command;

/// The runnable blocks of language `lang` (`sh`, which takes `bash` blocks too, or `sql`), in
/// order, each as its lines.
fn runnable_blocks(markdown: &str, lang: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    // Inside a fence: Some(the lines collected, or None for a block not run).
    let mut fence: Option<Option<Vec<String>>> = None;
    for line in markdown.lines() {
        let info = line.trim_start().strip_prefix("```").map(str::trim);
        match (info, fence.take()) {
            (Some(_), Some(block)) => blocks.extend(block),
            (Some(info), None) => {
                let (block_lang, rest) = info.split_once(' ').unwrap_or((info, ""));
                let block_lang = if block_lang == "bash" {
                    "sh"
                } else {
                    block_lang
                };
                let runs = block_lang == lang
                    && {
                        let reason = rest.trim().strip_prefix("no-run").map(str::trim);
                        assert!(
                            rest.trim().is_empty()
                                || matches!(reason, Some(r) if r.len() > 2 && r.starts_with('(') && r.ends_with(')')),
                            "a block left out says `no-run (why)`: ```{info}"
                        );
                        reason.is_none()
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
        .replace("target/release/syncfleet", "syncfleet")
        .replace("127.0.0.1:7800", &format!("127.0.0.1:{sim_port}"));
    if let Some(rest) = l.trim_start().strip_prefix("syncfleet demo") {
        if !rest.contains("--items") && !rest.contains("--target-s") {
            l = format!("syncfleet demo --items 1000 --target-s 10{rest}");
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

/// The guide's chapters (`docs/guide/*.md`), in name order.
fn guide_chapters(repo: &Path) -> Vec<std::path::PathBuf> {
    let mut chapters: Vec<_> = std::fs::read_dir(repo.join("docs/guide"))
        .expect("docs/guide")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("md"))
        .collect();
    chapters.sort();
    chapters
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
    let mut blocks = runnable_blocks(&readme, "sh");
    assert!(
        blocks.len() >= 3,
        "the README's runnable blocks: {blocks:?}"
    );
    // Then the guide's, chapter by chapter, with the README's simulator still running.
    let chapters = guide_chapters(repo);
    for chapter in &chapters {
        let text = std::fs::read_to_string(chapter).expect("a guide chapter");
        blocks.extend(runnable_blocks(&text, "sh"));
    }

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

    // The guide's SQL recipes, every one, on the ledger that run left (SQLite).
    let mut recipes = 0;
    for path in &chapters {
        let text = std::fs::read_to_string(path).expect("a guide chapter");
        for block in runnable_blocks(&text, "sql") {
            recipes += 1;
            let sql = block.join("\n");
            let mut child = Command::new("sqlite3")
                .args(["-bail", "sim-ledger.db"])
                .current_dir(dir.path())
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("sqlite3");
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(sql.as_bytes())
                .expect("write the recipe");
            let out = child.wait_with_output().expect("sqlite3 ran");
            assert!(
                out.status.success() && out.stderr.is_empty(),
                "{}: a SQL recipe fails on the README's ledger:\n{sql}\n{}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    assert!(recipes >= 3, "the guide's SQL recipes: {recipes}");
}
