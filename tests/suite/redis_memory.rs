//! A worker refuses a Redis that may evict any key (the stream, the consumer group, a gate's
//! state could vanish under memory pressure) with exit 2, and warns about one that evicts
//! keys with an expiry first (bans, bucket state and quota counters would go first).

use crate::jobs_harness::{self, ClientOpts, Harness};
use std::process::Stdio;

async fn set_policy(h: &Harness, policy: &str) {
    let client = redis::Client::open(h.redis.url.as_str()).expect("redis url");
    let mut c = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis connection");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg(policy)
        .query_async(&mut c)
        .await
        .expect("config set");
}

fn work(h: &Harness) -> std::process::Output {
    h.command_with(&h.config, &["work", "--exit-when-idle-s", "1"])
        .stdin(Stdio::null())
        .output()
        .expect("run a worker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_refuses_a_redis_that_evicts_any_key() {
    let _serial = jobs_harness::serial().await;
    let h = Harness::start(jobs_harness::listing_sim(), &ClientOpts::default()).await;
    if !h.redis.is_private() {
        // A shared server's eviction policy is not this test's to change.
        println!("skipped: REDIS_URL names a shared server");
        return;
    }
    set_policy(&h, "allkeys-lru").await;
    let out = work(&h);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("maxmemory-policy allkeys-lru"), "{stderr}");

    set_policy(&h, "volatile-lru").await;
    let out = work(&h);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("expiry first"), "{stderr}");

    set_policy(&h, "noeviction").await;
    let out = work(&h);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("maxmemory"), "{stderr}");
}
