//! Prometheus metrics of a worker: `syncfleet work --metrics-listen ADDR`.
//!
//! Two sources, neither on the call path:
//! - [`MetricsLayer`], a `tracing` layer, turns the events the gateway already emits for every
//!   request on the wire (`syncfleet::call`), every local refusal (`syncfleet::refusal`) and
//!   every stale answer (`syncfleet::stale`) into counters and the latency histogram. The call
//!   path stays as it is: the link layer does not know metrics exist.
//! - A collector task reads the state APIs once a second (gates, breakers, link counters,
//!   queue lengths, the ledger's jobs) and sets gauges.
//!
//! Names follow the Prometheus conventions: `syncfleet_` prefix, counters end in `_total`,
//! durations are `_seconds`, and labels are bounded sets (platform, api, class, reason,
//! status, state): never an item or job id. Values that are not a known label value are
//! exported as `other`, so a new spelling cannot grow the series count.
//!
//! The exporter crate renders the text; [`serve`] serves it from a small axum route rather
//! than the exporter's own HTTP listener: axum/hyper are already in the binary (the exporter's
//! listener would add a second HTTP server stack), and the route's task is ours to stop with
//! the worker and to report a bind failure as the operator's error before any work starts.
//!
//! By concern: `crate::metric_names` holds the metric names, their help text and histogram
//! buckets (the job runner records one histogram itself); `layer` the tracing layer;
//! `collector` the gauges' refresh; this module the recorder and the `/metrics` endpoint.

mod collector;
mod layer;

pub(crate) use collector::Sources;
pub(crate) use layer::{event_filter, MetricsLayer};

use crate::metric_names::{describe, CALL_BUCKETS, CALL_DURATION, LEDGER_BUCKETS, LEDGER_WRITE};
use collector::collect;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

/// Why metrics could not be started.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The `--metrics-listen` address could not be listened on (bad or busy).
    #[error("--metrics-listen {addr}: cannot listen: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why listening failed.
        #[source]
        source: std::io::Error,
    },
    /// The Prometheus exporter could not be built.
    #[error("metrics exporter: {0}")]
    Build(#[from] metrics_exporter_prometheus::BuildError),
}

impl MetricsError {
    /// A bad or busy address is the operator's to fix (exit 2); the rest is ours.
    pub(crate) fn is_input_error(&self) -> bool {
        matches!(self, MetricsError::Bind { .. })
    }
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static INSTALL: Mutex<()> = Mutex::new(());

/// Install the Prometheus recorder as the process's `metrics` recorder (once; later calls
/// return the same handle) and describe every metric.
pub(crate) fn install() -> Result<PrometheusHandle, MetricsError> {
    let _once = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    // Histograms with buckets render as Prometheus histograms (aggregatable across workers);
    // without, the exporter would render per-process summaries.
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(CALL_DURATION.into()), CALL_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(LEDGER_WRITE.into()), LEDGER_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_err() {
        // Another recorder owns the process (an embedding program): our handle then renders
        // nothing, which the scrape shows plainly rather than failing the worker.
        tracing::warn!("a metrics recorder is already installed: /metrics stays empty");
    }
    describe();
    let _ = HANDLE.set(handle.clone());
    Ok(handle)
}

/// The running metrics endpoint and collector; both stop when this is dropped.
pub(crate) struct MetricsServer {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Install the recorder, bind `addr`, and serve `GET /metrics` there while the collector
/// refreshes the gauges from `sources` every second. A bind failure is returned before
/// anything runs. Hold the returned value for as long as metrics should be served.
pub(crate) async fn serve(
    addr: SocketAddr,
    sources: Sources,
) -> Result<MetricsServer, MetricsError> {
    let handle = install()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| MetricsError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| MetricsError::Bind { addr, source })?;
    let render = handle.clone();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let render = render.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    render.render(),
                )
            }
        }),
    );
    let server = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!("metrics endpoint stopped: {e}");
        }
    });
    let collector = tokio::spawn(collect(sources, handle));
    tracing::info!(%local, "metrics on http://{local}/metrics");
    Ok(MetricsServer {
        tasks: vec![server, collector],
    })
}

/// [`serve`] when `addr` is given; `None` (metrics off, the default) otherwise.
pub(crate) async fn serve_if(
    addr: Option<SocketAddr>,
    sources: impl FnOnce() -> Sources,
) -> Result<Option<MetricsServer>, MetricsError> {
    match addr {
        Some(addr) => serve(addr, sources()).await.map(Some),
        None => Ok(None),
    }
}
