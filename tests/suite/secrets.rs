//! Secrets are demanded only for the platforms a job uses: a worker config with two
//! platforms, one secret missing, the job using only the other. The gateway builds, calls to
//! the other platform succeed against the in-process simulator, a call to the missing one is
//! a Fatal error naming the variable, and the start-up check of the ledger's running jobs
//! names the variable and the job only when a running job uses that platform.
//!
//! One test function: it sets environment variables, which must not race other tests'
//! threads reading the environment.

use std::time::Duration;
use syncfleet::config::Config;
use syncfleet::jobs::secrets::{self, SecretsError};
use syncfleet::jobs::spec::{JobKind, JobSpec};
use syncfleet::link::gateway::{CallContext, Gateway, LinkErrorKind};
use syncfleet::platform::{ApiRequest, ApiResponse, ErrorClass, Platform};
use syncfleet::sim::{self, SimConfig};
use syncfleet::store::{ItemOutcome, Store};
use syncfleet::throttle::Gates;

const TB_SECRET: &str = "SF_SECRETS_TEST_TAOBAO_SECRET";
const TB_SESSION: &str = "SF_SECRETS_TEST_TAOBAO_SESSION";
/// Never set by this test (removed first, in case the environment has it).
const JD_SECRET: &str = "SF_SECRETS_TEST_JD_SECRET";

fn orders_spec(platform: Platform) -> String {
    let spec = JobSpec::Orders {
        platform,
        shop: "shop-1".into(),
        since: "2026-01-01T00:00:00Z".parse().unwrap(),
        until: "2026-01-02T00:00:00Z".parse().unwrap(),
        lane: Default::default(),
    };
    serde_json::to_string(&spec).unwrap()
}

#[test]
fn worker_needs_only_the_secrets_of_platforms_its_running_jobs_use() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let sim = sim::spawn(SimConfig::demo(), "127.0.0.1:0".parse().unwrap())
            .await
            .expect("start the simulator");
        let tb = sim
            .config()
            .apps
            .iter()
            .find(|a| a.platform == Platform::Taobao)
            .expect("a taobao app")
            .clone();
        let jd_key = sim
            .config()
            .apps
            .iter()
            .find(|a| a.platform == Platform::Jd)
            .expect("a jd app")
            .app_key
            .clone();
        // Set before any other thread of this process reads the environment.
        std::env::set_var(TB_SECRET, tb.secret.expose());
        std::env::set_var(TB_SESSION, tb.session.expose());
        std::env::remove_var(JD_SECRET);

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("client.toml");
        let text = format!(
            "[platforms.taobao]\nendpoint = \"{}\"\napp_key = \"{}\"\nsecret_env = \"{TB_SECRET}\"\nsession_env = \"{TB_SESSION}\"\n\n\
             [platforms.jd]\nendpoint = \"{}\"\napp_key = \"{jd_key}\"\nsecret_env = \"{JD_SECRET}\"\n\n\
             [gates.default]\nrate = 100\nburst = 10\n\n[probe]\ninterval_s = 0\n",
            sim.endpoint(Platform::Taobao),
            tb.app_key,
            sim.endpoint(Platform::Jd),
        );
        std::fs::write(&path, text).unwrap();
        let cfg = Config::load(&path).expect("config");
        let db = format!("sqlite://{}", dir.path().join("ledger.db").display());
        let store = Store::connect(&db).await.unwrap();
        store.migrate().await.unwrap();

        // The job uses taobao only: the start-up check passes.
        let tb_job = store
            .create_job(JobKind::Orders, &orders_spec(Platform::Taobao), &["k".into()])
            .await
            .unwrap();
        secrets::check_running_jobs(&store, &cfg)
            .await
            .expect("taobao's secrets are set");

        // The gateway builds without JD's secret; taobao calls succeed.
        let gw = Gateway::from_config(&cfg, Gates::embedded(&cfg), None, Some(store.clone()))
            .expect("gateway without jd's secret");
        assert_eq!(gw.platforms(), vec![Platform::Taobao]);
        let req = ApiRequest::OrderList {
            start: "2026-01-01T00:00:00Z".parse().unwrap(),
            end: "2026-01-02T00:00:00Z".parse().unwrap(),
            page: 1,
            page_size: 10,
        };
        let ctx = CallContext::for_task(&cfg.link);
        let reply = gw
            .call(Platform::Taobao, req.clone(), &ctx)
            .await
            .expect("taobao call");
        assert!(matches!(reply.response, ApiResponse::OrderPage(_)));
        assert!(reply.stale.is_none());

        // A JD call fails Fatal, naming the variable (never a value), without trying.
        let err = gw
            .call(Platform::Jd, req, &CallContext::for_task(&cfg.link))
            .await
            .expect_err("jd has no client");
        assert_eq!(err.class, ErrorClass::Fatal);
        assert_eq!(err.kind, LinkErrorKind::MissingSecret);
        assert_eq!(err.attempts, 0);
        assert!(err.to_string().contains(JD_SECRET), "{err}");
        assert!(!err.to_string().contains(tb.secret.expose()), "{err}");

        // A running job on JD: the check names the variable and the job (exit 2).
        let jd_job = store
            .create_job(JobKind::Orders, &orders_spec(Platform::Jd), &["k".into()])
            .await
            .unwrap();
        let err = secrets::check_running_jobs(&store, &cfg)
            .await
            .expect_err("jd's secret is missing");
        assert!(err.is_input_error());
        let SecretsError::Missing(problems) = &err else {
            panic!("{err:?}");
        };
        assert_eq!(problems.len(), 1, "{err}");
        assert_eq!(problems[0].job_id, jd_job);
        let msg = err.to_string();
        assert!(
            msg.contains(JD_SECRET) && msg.contains(&format!("job {jd_job} (orders)")),
            "{msg}"
        );
        assert_ne!(tb_job, jd_job);

        // Once that job is finished, it no longer needs the secret.
        store
            .finish_items(jd_job, &[ItemOutcome::skipped("k", "test")])
            .await
            .unwrap();
        secrets::check_running_jobs(&store, &cfg)
            .await
            .expect("no running job uses jd");
        gw.flush().await;
        tokio::time::timeout(Duration::from_secs(10), store.close())
            .await
            .expect("close the ledger");
    });
}
