//! Who may read the dashboard, against `syncfleet dashboard` processes: a remote dashboard
//! does not start without a token and then answers nothing without it, reads included (a
//! browser gets it as a cookie by signing in at `/login`, never from a URL); a loopback one
//! refuses a request whose Host is not a loopback name (DNS rebinding).

use crate::jobs_harness;

use jobs_harness::{ClientOpts, Harness};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use syncfleet::sim::SimConfig;

const TOKEN: &str = "t0k3n-for-the-test";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn start(h: &Harness, port: u16, remote: bool) -> Child {
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["dashboard", "--listen", listen.as_str()];
    if remote {
        args.push("--allow-remote");
    }
    h.command_with(&h.config, &args)
        .env("SYNCFLEET_DASHBOARD_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the dashboard")
}

/// The status of GET `path` once the dashboard answers at all.
async fn status(
    client: &reqwest::Client,
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut req = client.get(format!("http://127.0.0.1:{port}{path}"));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Ok(r) = req.send().await {
            return r;
        }
        assert!(Instant::now() < deadline, "the dashboard never answered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_dashboard_needs_its_token_for_reads_and_a_local_one_checks_the_host() {
    let h = Harness::start(SimConfig::demo(), &ClientOpts::default()).await;
    // Each platform's per-second cap, above the configured gates (1,900/s and a burst of 20).
    let text = std::fs::read_to_string(&h.config).expect("config");
    let capped = text.replace(
        "max_in_flight = 256\n",
        "max_in_flight = 256\nper_second_cap = 2000\n",
    );
    assert_ne!(text, capped);
    std::fs::write(&h.config, capped).expect("config");
    // No token: a remote dashboard does not start.
    let out = h
        .command_with(&h.config, &["dashboard", "--allow-remote"])
        .env_remove("SYNCFLEET_DASHBOARD_TOKEN")
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("SYNCFLEET_DASHBOARD_TOKEN"),
        "{out:?}"
    );

    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let port = free_port();
    let mut remote = start(&h, port, true);
    let bearer = format!("Bearer {TOKEN}");
    assert_eq!(status(&client, port, "/api/state", &[]).await.status(), 401);
    assert_eq!(
        status(
            &client,
            port,
            "/api/state",
            &[("authorization", "Bearer wrong")]
        )
        .await
        .status(),
        401
    );
    assert_eq!(
        status(&client, port, "/api/state", &[("authorization", &bearer)])
            .await
            .status(),
        200
    );
    // The token is never taken from a URL; a browser signs in with the form and keeps the
    // cookie (HttpOnly, Secure, SameSite=Strict).
    assert_eq!(
        status(&client, port, &format!("/?token={TOKEN}"), &[])
            .await
            .status(),
        400
    );
    let page = status(&client, port, "/", &[]).await;
    assert_eq!(
        page.status(),
        303,
        "a browser without the cookie goes to /login"
    );
    assert_eq!(status(&client, port, "/login", &[]).await.status(), 200);
    let wrong = client
        .post(format!("http://127.0.0.1:{port}/login"))
        .form(&[("token", "wrong")])
        .send()
        .await
        .expect("login");
    assert_eq!(wrong.status(), 401);
    let login = client
        .post(format!("http://127.0.0.1:{port}/login"))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), 303);
    let set = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a cookie")
        .to_string();
    assert!(
        set.contains("; Secure") && set.contains("; HttpOnly"),
        "{set}"
    );
    let cookie = set.split(';').next().expect("name=value").to_string();
    assert_eq!(
        status(&client, port, "/api/state", &[("cookie", &cookie)])
            .await
            .status(),
        200
    );
    // A gate's rate is held to the platform's per-second cap here as in `config check`.
    let over_cap = client
        .post(format!("http://127.0.0.1:{port}/api/actions/gate"))
        .header("authorization", &bearer)
        .json(&serde_json::json!({
            "platform": "taobao", "api": "item_add", "rate": 5000.0, "why": "more"
        }))
        .send()
        .await
        .expect("gate action");
    assert_eq!(over_cap.status(), 400);
    let why = over_cap.text().await.unwrap_or_default();
    assert!(why.contains("per_second_cap"), "{why}");
    let _ = remote.kill();
    let _ = remote.wait();

    // Loopback: open to this host, but only under a loopback Host.
    let port = free_port();
    let mut local = start(&h, port, false);
    assert_eq!(status(&client, port, "/api/state", &[]).await.status(), 200);
    assert_eq!(
        status(
            &client,
            port,
            "/api/state",
            &[("host", "evil.example:8088")]
        )
        .await
        .status(),
        421
    );
    let _ = local.kill();
    let _ = local.wait();
}
