//! `config check` refuses what `work` would refuse at start (before: it passed configs the
//! worker then refused): a shop whose session variable is unset, hooks without their signing
//! key, a malformed `--redis`; and a worker given a malformed `--redis` exits 2 (bad input),
//! not 1.

use crate::jobs_harness::{output_within, ClientOpts, Harness};
use std::time::Duration;
use syncfleet::sim::SimConfig;

const WAIT: Duration = Duration::from_secs(60);

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_refuses_what_work_would() {
    let h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    let ok = output_within(h.command_with(&h.config, &["config", "check"]), WAIT);
    assert_eq!(ok.status.code(), Some(0), "{}", said(&ok));

    let config = h.dir.path().join("unset.toml");
    let text = std::fs::read_to_string(&h.config).expect("config")
        + "\n[shops.acme]\nplatform = \"taobao\"\nsession_env = \"SF_CHECK_TEST_UNSET_SESSION\"\n\
           \n[hooks]\nurl = \"http://127.0.0.1:9/hook\"\nsecret_env = \"SF_CHECK_TEST_UNSET_HOOK_KEY\"\n";
    std::fs::write(&config, text).expect("config");
    let mut cmd = h.command_with(&config, &["config", "check"]);
    cmd.env_remove("SF_CHECK_TEST_UNSET_SESSION")
        .env_remove("SF_CHECK_TEST_UNSET_HOOK_KEY");
    let out = output_within(cmd, WAIT);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("key `shops.acme`") && text.contains("SF_CHECK_TEST_UNSET_SESSION"),
        "{text}"
    );
    assert!(
        text.contains("key `hooks.secret_env`") && text.contains("SF_CHECK_TEST_UNSET_HOOK_KEY"),
        "{text}"
    );

    // A malformed Redis URL: `config check` and `work` both say so, exit 2.
    for args in [
        vec!["--redis", "redis//nope", "config", "check"],
        vec!["--redis", "redis//nope", "work", "--exit-when-idle-s", "1"],
    ] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"));
        cmd.arg("--config")
            .arg(&h.config)
            .arg("--db")
            .arg(&h.db)
            .args(&args)
            .envs(
                h.command_with(&h.config, &[])
                    .get_envs()
                    .filter_map(|(k, v)| Some((k, v?))),
            );
        let out = output_within(cmd, WAIT);
        let text = said(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains("not a redis URL"), "{args:?}: {text}");
    }
}

/// `enqueue --lane` and `--chunk-size` are taken after the subcommand too, as `schedule add`
/// takes them (before: only in front of it, "unexpected argument" after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_takes_its_lane_before_or_after_the_subcommand() {
    let h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    let items = h.item_file(3);
    let items = items.to_str().expect("utf-8 path");
    let after = h.enqueue(&[
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--items",
        items,
        "--lane",
        "interactive",
        "--chunk-size",
        "1",
    ]);
    let before = h.enqueue(&[
        "--lane",
        "interactive",
        "listing",
        "--from",
        "alibaba",
        "--to",
        "taobao",
        "--items",
        items,
    ]);
    for job in [after, before] {
        let spec = h.store.job_status(job).await.expect("status").spec;
        assert!(
            spec.contains("\"lane\":\"interactive\""),
            "job {job}: {spec}"
        );
    }
}

/// `work --listen` with `--exit-when-idle-s` is refused (exit 2) instead of the flag being
/// ignored while the listener kept the worker up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_with_an_idle_exit_is_refused() {
    let h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    let out = output_within(
        h.command_with(
            &h.config,
            &["work", "--listen", "taobao:s1", "--exit-when-idle-s", "5"],
        ),
        WAIT,
    );
    let text = said(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("--exit-when-idle-s does not go with --listen"),
        "{text}"
    );
}
