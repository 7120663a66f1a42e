//! Redis over TLS with an ACL user, against a real `redis-server` that speaks only TLS with a
//! certificate from a CA of the test's own: a listing job runs through it end to end (queue,
//! gates, breakers and leases all on `rediss://`), and a client that cannot verify the server,
//! or has the wrong password, is refused with a clear error that never shows the password.

use crate::jobs_harness::{self, ClientOpts, Harness};
use crate::support::ledger::Kind;
use crate::support::redis::TestRedis;
use crate::support::tls::TestCa;
use std::process::Command;
use std::time::Duration;
use syncfleet::platform::Platform;
use syncfleet::redis_conn::CA_FILE_ENV;

const PASSWORD: &str = "tls-test-pw-7d1c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_runs_over_tls_with_an_acl_user_and_refuses_what_it_cannot_verify() {
    let _serial = jobs_harness::serial().await;
    let ca = TestCa::new();
    let redis = TestRedis::start_tls(&ca.ca, &ca.server_cert, &ca.server_key, PASSWORD);
    let url = redis.url.clone();
    let mut h = Harness::start_with_redis(
        Kind::Sqlite,
        jobs_harness::listing_sim(),
        &ClientOpts::default(),
        redis,
    )
    .await;
    h.env
        .push((CA_FILE_ENV.to_string(), ca.ca.display().to_string()));

    let job = h.enqueue_listing(60);
    h.spawn_worker(4, 2);
    h.spawn_worker(4, 2);
    let status = h.wait_job(job, Duration::from_secs(180)).await;
    assert_eq!(status.job.counts.done, 60, "{:?}", status.job.counts);
    h.wait_workers(Duration::from_secs(60));
    assert_eq!(h.distinct_writes(Platform::Taobao), 60);

    // The fleet's view of the gates comes through the same TLS connection.
    let shown = h.run(&["gate", "show"]);
    assert!(shown.status.success());

    let refused = |what: &str, cmd: Command| {
        let out = jobs_harness::output_within(cmd, Duration::from_secs(60));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{what}: succeeded\n{text}");
        assert!(
            !text.contains(PASSWORD),
            "{what}: the password leaked\n{text}"
        );
        println!("{what}: {text}");
        text
    };

    // Trusting another CA (or none): the server's certificate is not believed.
    let mut stranger = h.command_with(&h.config, &["gate", "show"]);
    stranger.env(CA_FILE_ENV, &ca.stranger_ca);
    let text = refused("another CA", stranger);
    assert!(
        text.to_lowercase().contains("certificate") || text.contains("UnknownIssuer"),
        "another CA: {text}"
    );

    // The right CA, the wrong password.
    let mut wrong = h.command_with(&h.config, &["gate", "show"]);
    let bad_url = url.replace(PASSWORD, "not-the-password");
    wrong.args(["--redis", &bad_url]);
    let text = refused("wrong password", wrong);
    assert!(
        text.contains("WRONGPASS") || text.to_lowercase().contains("authentication"),
        "wrong password: {text}"
    );

    // Plain redis:// to the TLS port: no answer in clear text.
    let mut plain = h.command_with(&h.config, &["gate", "show"]);
    plain.args(["--redis", &url.replace("rediss://", "redis://")]);
    refused("cleartext", plain);
}
