//! `outage`: p99 logical-call latency during an outage drill, gateway against the naive
//! client.

use crate::harness::{config, gateway, line, open_loop, pct, sim_calls, start_sim, Naive};
use crate::TB;
use std::sync::Arc;
use syncfleet::link::CallContext;
use syncfleet::platform::ApiRequest;
use syncfleet::sim::DrillPatch;
use syncfleet::throttle::Gates;

pub(super) async fn outage(rate: u64, seconds: u64, hang: bool) -> anyhow::Result<()> {
    let sim = start_sim((20, 60)).await?;
    let cfg = config(&sim.endpoint(TB), "")?;
    println!(
        "outage drill{}: {rate} logical item_get calls/s for {seconds} s, sim latency median 20 ms p95 60 ms, read timeout {} ms",
        if hang { " (hanging upstream)" } else { "" },
        cfg.link.timeouts.detail.read_ms
    );
    let drill = DrillPatch {
        outage: Some(true),
        outage_hang: Some(hang),
        ..Default::default()
    };
    // Baseline first, on a fresh simulator state.
    let naive = Arc::new(Naive::new(&cfg)?);
    sim.set_drill(drill.clone()).map_err(anyhow::Error::msg)?;
    let (lat, ok) = open_loop(rate, seconds, move |i| {
        let naive = naive.clone();
        async move {
            naive
                .call(&ApiRequest::ItemGet {
                    item_id: (i + 1).to_string(),
                })
                .await
        }
    })
    .await;
    let baseline_p99 = pct(&lat, 0.99);
    line("naive", &lat, ok, sim_calls(&sim));

    sim.clear_drills();
    sim.reset();
    let gw = gateway(&cfg, None, Gates::embedded(&cfg))?;
    sim.set_drill(drill).map_err(anyhow::Error::msg)?;
    let link = cfg.link.clone();
    let g = gw.clone();
    let (lat, ok) = open_loop(rate, seconds, move |i| {
        let (gw, link) = (g.clone(), link.clone());
        async move {
            let ctx = CallContext::for_task(&link);
            gw.call(
                TB,
                ApiRequest::ItemGet {
                    item_id: (i + 1).to_string(),
                },
                &ctx,
            )
            .await
            .is_ok()
        }
    })
    .await;
    let p99 = pct(&lat, 0.99);
    line("gateway", &lat, ok, sim_calls(&sim));
    let snap = gw.snapshot().total;
    println!(
        "gateway: breaker rejects {}, availability {:.3}; p99 ratio gateway/naive = {:.3}",
        snap.breaker_rejects,
        snap.availability(),
        p99.as_secs_f64() / baseline_p99.as_secs_f64().max(1e-9)
    );
    sim.shutdown().await;
    Ok(())
}
