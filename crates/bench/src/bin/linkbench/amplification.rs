//! `amplification`: simulator calls per logical call under an error drill, the naive client
//! against the gateway at two retry budgets.

use crate::harness::{config, gateway, sim_calls, start_sim, Naive};
use crate::TB;
use std::sync::Arc;
use syncfleet::config::LinkConfig;
use syncfleet::link::CallContext;
use syncfleet::platform::ApiRequest;
use syncfleet::sim::DrillPatch;
use syncfleet::throttle::Gates;

pub(super) async fn amplification(
    calls: u64,
    concurrency: usize,
    errors: f64,
) -> anyhow::Result<()> {
    use futures::stream::{self, StreamExt};
    let sim = start_sim((0, 0)).await?;
    println!(
        "{:.0}% error drill: {calls} logical item_get calls, {concurrency} at a time",
        errors * 100.0
    );
    let drill = DrillPatch {
        error_ratio: Some(errors),
        ..Default::default()
    };
    let run =
        |name: &'static str,
         f: Arc<dyn Fn(u64) -> futures::future::BoxFuture<'static, bool> + Send + Sync>| {
            let sim = &sim;
            let drill = drill.clone();
            async move {
                sim.clear_drills();
                sim.reset();
                sim.set_drill(drill).map_err(anyhow::Error::msg)?;
                let ok = stream::iter(0..calls)
                    .map(|i| f(i))
                    .buffer_unordered(concurrency)
                    .filter(|ok| futures::future::ready(*ok))
                    .count()
                    .await;
                let amp = sim_calls(sim) as f64 / calls as f64;
                println!(
                    "{name:<28} amplification {amp:.3}x  success {:.4}",
                    ok as f64 / calls as f64
                );
                anyhow::Ok(amp)
            }
        };
    let cfg = config(&sim.endpoint(TB), "")?;
    let naive = Arc::new(Naive::new(&cfg)?);
    let base = run(
        "naive 3-attempt client",
        Arc::new(move |i| {
            let n = naive.clone();
            Box::pin(async move {
                n.call(&ApiRequest::ItemGet {
                    item_id: (i + 1).to_string(),
                })
                .await
            })
        }),
    )
    .await?;
    for (name, ratio) in [
        ("gateway (budget_ratio 0.10)", 0.10),
        ("gateway (budget_ratio 0.05)", 0.05),
    ] {
        let cfg = config(
            &sim.endpoint(TB),
            &format!("[link.retry]\nbudget_ratio = {ratio}\n"),
        )?;
        let gw = gateway(&cfg, None, Gates::embedded(&cfg))?;
        let link: LinkConfig = cfg.link.clone();
        let amp = run(
            name,
            Arc::new(move |i| {
                let (gw, link) = (gw.clone(), link.clone());
                Box::pin(async move {
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
                })
            }),
        )
        .await?;
        println!("{:<28} ratio to naive {:.3}", "", amp / base);
    }
    sim.shutdown().await;
    Ok(())
}
