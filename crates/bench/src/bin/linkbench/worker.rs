//! `worker`: one process of the fleet breaker test, calling through a fleet gateway and
//! printing each call's outcome.

use crate::harness::{config, gateway};
use crate::TB;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use syncfleet::link::{CallContext, FleetLink};
use syncfleet::platform::ApiRequest;
use syncfleet::throttle::Gates;

pub(super) async fn worker(
    endpoint: &str,
    redis: &str,
    namespace: &str,
    seconds: u64,
    every_ms: u64,
    min_samples: u32,
) -> anyhow::Result<()> {
    let cfg = config(
        endpoint,
        // A fixed 10 s open period: the fleet test checks that a trip holds every process,
        // with seconds of margin on both sides so a loaded machine cannot flake it.
        &format!(
            "[link.breaker]\nopen_s = 10\ninitial_open_ms = 10000\nmin_samples = {min_samples}\n"
        ),
    )?;
    let gates = Gates::redis_with_namespace(&cfg, redis, namespace).await?;
    let fleet = FleetLink::connect(redis, namespace).await?;
    let gw = gateway(&cfg, Some(fleet), gates)?;
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut i = 0u64;
    println!("ready");
    while Instant::now() < end {
        i += 1;
        let ctx = CallContext::new(syncfleet::link::Budget::starting_now(Duration::from_secs(
            5,
        )));
        let kind = match gw
            .call(
                TB,
                ApiRequest::ItemGet {
                    item_id: (50_000 + i).to_string(),
                },
                &ctx,
            )
            .await
        {
            Ok(r) if r.stale.is_some() => "stale".to_string(),
            Ok(_) => "ok".to_string(),
            Err(e) => e.kind.as_str().to_string(),
        };
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        println!("{ms} {kind}");
        tokio::time::sleep(Duration::from_millis(every_ms)).await;
    }
    Ok(())
}
