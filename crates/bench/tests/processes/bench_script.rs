//! `scripts/bench`, the one way the benchmark programs are run: it knows every program of this
//! crate, runs a known one after the release build of the binary it starts, and refuses a name
//! it does not know with exit 2 before building anything.

use std::process::Command;

fn bench_script() -> Command {
    Command::new(syncfleet_testkit::repo_root().join("scripts/bench"))
}

#[test]
fn the_bench_script_lists_runs_and_refuses_by_name() {
    let out = bench_script()
        .arg("--list")
        .output()
        .expect("scripts/bench");
    assert!(out.status.success(), "{out:?}");
    let listed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let root = syncfleet_testkit::repo_root().join("crates/bench");
    let mut programs: Vec<String> = std::fs::read_dir(root.join("benches"))
        .expect("benches/")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    programs.extend(["gatebench".to_string(), "linkbench".to_string()]);
    for p in &programs {
        assert!(listed.contains(p), "{p} is not listed: {listed:?}");
    }
    assert_eq!(listed.len(), programs.len(), "{listed:?}");

    // A known name runs its program through cargo, after the release build of the binary it
    // starts (shown, not run).
    let out = bench_script()
        .args(["--dry-run", "fairbench", "--shops", "4"])
        .output()
        .expect("scripts/bench");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "cargo build --quiet --release --bin syncfleet\ncargo bench --quiet -p syncfleet-bench --bench fairbench -- --shops 4\n"
    );
    let out = bench_script()
        .args(["--dry-run", "gatebench", "sim-bench"])
        .output()
        .expect("scripts/bench");
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with(
            "cargo run --quiet --release -p syncfleet-bench --bin gatebench -- sim-bench\n"
        ),
        "{out:?}"
    );

    let out = bench_script()
        .arg("no-such-bench")
        .output()
        .expect("scripts/bench");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no benchmark program named 'no-such-bench'")
    );
}
