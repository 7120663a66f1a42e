//! The simulator over loopback: hand-built signed requests (platform::sign), real HTTP.

use chrono::Utc;
use serde_json::Value;
use std::time::{Duration, Instant};
use syncfleet::platform::sign::{alibaba_sign, jd_sign, top_sign, SignMethod};
use syncfleet::platform::{Api, Platform};
use syncfleet::sim::{self, DrillPatch, LimitKind, SimConfig, SimHandle};
use syncfleet::time::china_offset;

const TOP_KEY: &str = "10000001";
const TOP_SECRET: &str = "sim-taobao-secret";
const TOP_SESSION: &str = "sim-taobao-session";
const JD_KEY: &str = "simjdapp";
const JD_SECRET: &str = "sim-jd-secret";
const JD_TOKEN: &str = "sim-jd-token";
const ALI_KEY: &str = "1000001";
const ALI_SECRET: &str = "sim-alibaba-secret";
const ALI_TOKEN: &str = "sim-alibaba-token";

async fn start(cfg: SimConfig) -> SimHandle {
    sim::spawn(cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

fn top_now() -> String {
    Utc::now()
        .with_timezone(&china_offset())
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A signed TOP form; `tweak` may change any param after signing-relevant fields are set.
/// An item read names its `fields` (TOP requires them) unless the test gives its own.
fn top_form(method: &str, biz: &[(&str, &str)], secret: &str) -> Vec<(String, String)> {
    let fields = (method == TOP_GET && !biz.iter().any(|(k, _)| *k == "fields"))
        .then_some(("fields", "num_iid,title,price,num"));
    let mut p: Vec<(String, String)> = [
        ("method", method),
        ("app_key", TOP_KEY),
        ("session", TOP_SESSION),
        ("timestamp", &top_now()),
        ("format", "json"),
        ("v", "2.0"),
        ("sign_method", "hmac-sha256"),
        ("simplify", "false"),
    ]
    .iter()
    .chain(biz.iter())
    .chain(fields.iter())
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let sign = top_sign(
        secret,
        SignMethod::HmacSha256,
        p.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    p.push(("sign".into(), sign));
    p
}

async fn post_form(c: &reqwest::Client, url: &str, form: &[(String, String)]) -> (u16, Value) {
    let r = c.post(url).form(form).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

async fn top(c: &reqwest::Client, s: &SimHandle, method: &str, biz: &[(&str, &str)]) -> Value {
    let (status, body) = post_form(
        c,
        &s.endpoint(Platform::Taobao),
        &top_form(method, biz, TOP_SECRET),
    )
    .await;
    assert_eq!(status, 200, "TOP answers HTTP 200 always: {body}");
    body
}

fn jd_form(method: &str, param_json: &str, secret: &str) -> Vec<(String, String)> {
    let ts = Utc::now()
        .with_timezone(&china_offset())
        .format("%Y-%m-%d %H:%M:%S%.3f+0800")
        .to_string();
    let mut p: Vec<(String, String)> = [
        ("method", method),
        ("access_token", JD_TOKEN),
        ("app_key", JD_KEY),
        ("timestamp", &ts),
        ("v", "2.0"),
        ("360buy_param_json", param_json),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let sign = jd_sign(secret, p.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    p.push(("sign".into(), sign));
    p
}

async fn jd(c: &reqwest::Client, s: &SimHandle, method: &str, param_json: &str) -> Value {
    let (status, body) = post_form(
        c,
        &s.endpoint(Platform::Jd),
        &jd_form(method, param_json, JD_SECRET),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

/// (url, form) of a signed 1688 call.
fn ali_request(
    s: &SimHandle,
    api: Api,
    biz: &[(&str, &str)],
    secret: &str,
) -> (String, Vec<(String, String)>) {
    let path = format!("param2/1/{}/{ALI_KEY}", api.method(Platform::Alibaba));
    let ts = Utc::now().timestamp_millis().to_string();
    // 1688's product and logistics APIs require the site.
    let site = (matches!(api, Api::ItemGet | Api::LogisticsTrace | Api::LogisticsInfo)
        && !biz.iter().any(|(k, _)| *k == "webSite"))
    .then_some(("webSite", "1688"));
    let mut p: Vec<(String, String)> = biz
        .iter()
        .chain(site.iter())
        .chain([("access_token", ALI_TOKEN), ("_aop_timestamp", ts.as_str())].iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let sign = alibaba_sign(
        secret,
        &path,
        p.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    p.push(("_aop_signature".into(), sign));
    (format!("{}/{path}", s.endpoint(Platform::Alibaba)), p)
}

async fn ali(c: &reqwest::Client, s: &SimHandle, api: Api, biz: &[(&str, &str)]) -> (u16, Value) {
    let (url, form) = ali_request(s, api, biz, ALI_SECRET);
    post_form(c, &url, &form).await
}

const TOP_GET: &str = "taobao.item.seller.get";
const JD_GET: &str = "jingdong.ware.read.findWareById";

#[tokio::test]
async fn good_signatures_are_answered_on_all_three_platforms() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let b = top(
        &c,
        &s,
        TOP_GET,
        &[("fields", "num_iid,title,price,num"), ("num_iid", "123")],
    )
    .await;
    let item = &b["item_seller_get_response"]["item"];
    assert_eq!(item["num_iid"], 123);
    assert!(!item["title"].as_str().unwrap().is_empty());
    assert!(item["price"].as_str().unwrap().contains('.'));

    let b = jd(&c, &s, JD_GET, r#"{"wareId":"123"}"#).await;
    let ware = &b["jingdong_ware_read_findWareById_responce"]["ware"];
    assert_eq!(ware["wareId"], 123);
    // Same seed, same item on every platform.
    assert_eq!(ware["title"], item["title"]);

    let (status, b) = ali(&c, &s, Api::ItemGet, &[("offerId", "123")]).await;
    assert_eq!(status, 200, "{b}");
    assert_eq!(b["productInfo"]["subject"], item["title"]);

    // A signed GET with the params in the query is answered the same way.
    let query =
        serde_urlencoded::to_string(top_form(TOP_GET, &[("num_iid", "123")], TOP_SECRET)).unwrap();
    let r = c
        .get(format!("{}?{query}", s.endpoint(Platform::Taobao)))
        .send()
        .await
        .unwrap();
    let b: Value = r.json().await.unwrap();
    assert_eq!(
        b["item_seller_get_response"]["item"]["title"],
        item["title"]
    );

    let st = s.stats();
    assert_eq!(
        st.for_platform(Platform::Taobao, Api::ItemGet).unwrap().ok,
        2
    );
    for p in [Platform::Jd, Platform::Alibaba] {
        assert_eq!(st.for_platform(p, Api::ItemGet).unwrap().ok, 1, "{p}");
    }
    // The admin endpoint shows the same counters.
    let admin: Value = c
        .get(format!("{}/admin/stats", s.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(admin["totals"]["ok"], 4);
}

#[tokio::test]
async fn verification_failures_get_each_platforms_error() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let top_url = s.endpoint(Platform::Taobao);
    let biz = [("num_iid", "5")];

    // Bad signature.
    let (_, b) = post_form(&c, &top_url, &top_form(TOP_GET, &biz, "wrong-secret")).await;
    assert_eq!(b["error_response"]["code"], 25, "{b}");
    assert_eq!(b["error_response"]["sub_code"], "isv.invalid-signature");
    let (_, b) = post_form(
        &c,
        &s.endpoint(Platform::Jd),
        &jd_form(JD_GET, r#"{"wareId":"5"}"#, "nope"),
    )
    .await;
    assert_eq!(b["error_response"]["code"], "12", "{b}");
    let (url, form) = ali_request(&s, Api::ItemGet, &[("offerId", "5")], "nope");
    let (status, b) = post_form(&c, &url, &form).await;
    assert_eq!(
        (status, b["error_code"].as_str().unwrap()),
        (400, "gw.SignatureInvalid")
    );

    // Unsigned.
    let mut unsigned = top_form(TOP_GET, &biz, TOP_SECRET);
    unsigned.retain(|(k, _)| k != "sign");
    let (_, b) = post_form(&c, &top_url, &unsigned).await;
    assert_eq!(b["error_response"]["code"], 25);

    // Unknown app key.
    let mut other = top_form(TOP_GET, &biz, TOP_SECRET);
    other
        .iter_mut()
        .filter(|(k, _)| k == "app_key")
        .for_each(|(_, v)| *v = "999".into());
    let (_, b) = post_form(&c, &top_url, &other).await;
    assert_eq!(b["error_response"]["code"], 29);

    // Timestamp out of the allowed skew (signed correctly).
    let mut old: Vec<(String, String)> = top_form(TOP_GET, &biz, TOP_SECRET);
    old.retain(|(k, _)| k != "sign");
    old.iter_mut()
        .filter(|(k, _)| k == "timestamp")
        .for_each(|(_, v)| *v = "2020-01-01 00:00:00".into());
    let sig = top_sign(
        TOP_SECRET,
        SignMethod::HmacSha256,
        old.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    );
    old.push(("sign".into(), sig));
    let (_, b) = post_form(&c, &top_url, &old).await;
    assert_eq!(b["error_response"]["code"], 31, "{b}");

    // Missing business param, unknown method, unknown item.
    let b = top(&c, &s, TOP_GET, &[]).await;
    assert_eq!(b["error_response"]["code"], 40, "{b}");
    let b = top(&c, &s, "taobao.nothing.here", &biz).await;
    assert_eq!(b["error_response"]["code"], 22, "{b}");
    let b = top(&c, &s, TOP_GET, &[("num_iid", "99999999")]).await;
    assert_eq!(b["error_response"]["sub_code"], "isv.item-not-exist", "{b}");

    // 1688 unknown api and unknown app key in the path.
    let url = format!(
        "{}/param2/1/com.alibaba.product/alibaba.nope/{ALI_KEY}",
        s.endpoint(Platform::Alibaba)
    );
    let r = c.post(url).form(&[("a", "1")]).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error_code"],
        "gw.APIUnsupported"
    );

    let st = s.stats();
    let top_get = st.for_platform(Platform::Taobao, Api::ItemGet).unwrap();
    // Failed calls with a known app and method are counted, Fatal, and use quota.
    assert_eq!(top_get.errors_by_class.fatal, 5, "{top_get:?}");
    assert_eq!(top_get.quota_used_today, top_get.calls);
    assert!(st.totals.unattributed >= 3);
}

#[tokio::test]
async fn oversized_and_malformed_bodies_get_platform_errors() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let big = vec![b'a'; 2 * 1024 * 1024];
    let r = c
        .post(s.endpoint(Platform::Taobao))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["error_response"]["code"], 41, "{b}");

    let url = format!(
        "{}/param2/1/com.alibaba.product/alibaba.product.get/{ALI_KEY}",
        s.endpoint(Platform::Alibaba)
    );
    let r = c.post(&url).body(big).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 413);
    assert!(r.json::<Value>().await.unwrap()["error_code"].is_string());

    // Not UTF-8, not a form.
    let r = c
        .post(s.endpoint(Platform::Jd))
        .body(vec![0xff, 0xfe, 0x00, 0x3d])
        .send()
        .await
        .unwrap();
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["error_response"]["code"], "60", "{b}");
    // JD with a broken 360buy_param_json, correctly signed.
    let b = jd(&c, &s, JD_GET, "{not json").await;
    assert_eq!(b["error_response"]["code"], "60", "{b}");

    // The simulator still serves.
    let b = top(&c, &s, TOP_GET, &[("num_iid", "1")]).await;
    assert_eq!(b["item_seller_get_response"]["item"]["num_iid"], 1);
}

#[tokio::test]
async fn limit_overrun_answers_ban_seconds_on_each_platform() {
    let cfg = SimConfig::demo()
        .with_limit(Platform::Taobao, Api::ItemGet, 2, 1_000_000)
        .with_limit(Platform::Jd, Api::ItemGet, 2, 1_000_000)
        .with_limit(Platform::Alibaba, Api::ItemGet, 2, 1_000_000);
    let s = start(cfg).await;
    let c = client();
    let burst = 12;
    let tops =
        futures::future::join_all((0..burst).map(|_| top(&c, &s, TOP_GET, &[("num_iid", "7")])))
            .await;
    let limited: Vec<&Value> = tops
        .iter()
        .filter(|b| b["error_response"]["code"] == 7)
        .collect();
    assert!(!limited.is_empty(), "no TOP call was limited");
    assert_eq!(limited[0]["error_response"]["msg"], "App Call Limited");
    assert_eq!(
        limited[0]["error_response"]["sub_msg"],
        "This ban will last for 1 more seconds"
    );

    let jds =
        futures::future::join_all((0..burst).map(|_| jd(&c, &s, JD_GET, r#"{"wareId":7}"#))).await;
    let limited: Vec<&Value> = jds
        .iter()
        .filter(|b| b["error_response"]["code"] == "2")
        .collect();
    assert!(!limited.is_empty());
    assert!(limited[0]["error_response"]["en_desc"]
        .as_str()
        .unwrap()
        .contains("ban will last for 1 more seconds"));

    let alis = futures::future::join_all(
        (0..burst).map(|_| ali(&c, &s, Api::ItemGet, &[("offerId", "7")])),
    )
    .await;
    let limited: Vec<&(u16, Value)> = alis.iter().filter(|(st, _)| *st == 400).collect();
    assert!(!limited.is_empty());
    assert_eq!(limited[0].1["error_code"], "gw.QosAppFrequencyLimit");
    assert!(limited[0].1["error_message"]
        .as_str()
        .unwrap()
        .contains("1 more seconds"));

    let st = s.stats();
    for p in Platform::ALL {
        let a = st.for_platform(p, Api::ItemGet).unwrap();
        assert_eq!(a.calls, burst as u64);
        assert_eq!(a.ok + a.rejected_limit, a.calls, "{a:?}");
        assert!(a.rejected_limit >= 1);
    }
}

/// Answers of `n` concurrent calls, and how long the burst took.
async fn burst_of<F: std::future::Future<Output = bool>>(
    n: usize,
    call: impl Fn() -> F,
) -> (usize, Duration) {
    let t = Instant::now();
    let oks = futures::future::join_all((0..n).map(|_| call())).await;
    (oks.into_iter().filter(|ok| *ok).count(), t.elapsed())
}

/// How many a burst of `span` may have admitted at most: `per_window` per started second
/// for a sliding window, plus one token per whole second for a bucket. Exact (the lower
/// bound) when the burst took under a second, as it does unless the machine is starved.
fn admitted_bound(kind: LimitKind, first: usize, per_second: usize, span: Duration) -> usize {
    let whole = span.as_secs() as usize;
    match kind {
        LimitKind::Bucket => first + per_second * whole,
        _ => per_second * (whole + 1),
    }
}

#[tokio::test]
async fn sliding_and_bucket_limits_admit_their_burst_over_http() {
    let cfg = SimConfig::demo()
        .with_limit(Platform::Taobao, Api::ItemGet, 3, 1_000_000)
        .with_limit_kind(Platform::Taobao, Api::ItemGet, LimitKind::Sliding, None)
        .with_limit(Platform::Jd, Api::ItemGet, 1, 1_000_000)
        .with_limit_kind(Platform::Jd, Api::ItemGet, LimitKind::Bucket, Some(5));
    let s = start(cfg).await;
    let c = client();
    let n = 10;

    let (ok, span) = burst_of(n, || async {
        let b = top(&c, &s, TOP_GET, &[("num_iid", "7")]).await;
        if b["error_response"]["code"] == 7 {
            assert_eq!(
                b["error_response"]["sub_msg"],
                "This ban will last for 1 more seconds"
            );
        }
        b.get("item_seller_get_response").is_some()
    })
    .await;
    let most = admitted_bound(LimitKind::Sliding, 3, 3, span);
    assert!((3..=most).contains(&ok), "sliding: {ok} ok in {span:?}");

    let (ok, span) = burst_of(n, || async {
        let b = jd(&c, &s, JD_GET, r#"{"wareId":7}"#).await;
        if b["error_response"]["code"] == "2" {
            assert!(b["error_response"]["en_desc"]
                .as_str()
                .unwrap()
                .contains("ban will last for 1 more seconds"));
        }
        b["error_response"].is_null()
    })
    .await;
    let most = admitted_bound(LimitKind::Bucket, 5, 1, span);
    assert!((5..=most).contains(&ok), "bucket: {ok} ok in {span:?}");

    // At run time: 1688 item_get becomes a bucket of 4 refilled once a second.
    let drill: Value = c
        .post(format!("{}/admin/drill", s.base_url()))
        .body(r#"{"limit":{"api":"item_get","platform":"alibaba","per_second":1,"kind":"bucket","burst":4}}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(drill["limit_kinds"][0]["kind"], "bucket", "{drill}");
    assert_eq!(drill["limits"][0]["per_second"], 1, "{drill}");
    let (ok, span) = burst_of(n, || async {
        let (status, b) = ali(&c, &s, Api::ItemGet, &[("offerId", "7")]).await;
        if status == 400 {
            assert_eq!(b["error_code"], "gw.QosAppFrequencyLimit");
        }
        status == 200
    })
    .await;
    let most = admitted_bound(LimitKind::Bucket, 4, 1, span);
    assert!(
        (4..=most).contains(&ok),
        "drilled bucket: {ok} ok in {span:?}"
    );

    let stats: Value = c
        .get(format!("{}/admin/stats", s.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<(String, String, u64)> = stats["apis"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["api"] == "item_get")
        .map(|a| {
            (
                a["platform"].as_str().unwrap().to_string(),
                a["limit_kind"].as_str().unwrap().to_string(),
                a["limit_burst"].as_u64().unwrap(),
            )
        })
        .collect();
    for want in [
        ("taobao", "sliding", 3),
        ("jd", "bucket", 5),
        ("alibaba", "bucket", 4),
    ] {
        assert!(
            kinds
                .iter()
                .any(|(p, k, b)| (p.as_str(), k.as_str(), *b) == want),
            "{want:?} in {kinds:?}"
        );
    }
    let st = s.stats();
    for p in Platform::ALL {
        let a = st.for_platform(p, Api::ItemGet).unwrap();
        assert_eq!(a.calls, n as u64, "{a:?}");
        assert_eq!(a.ok + a.rejected_limit, a.calls, "{a:?}");
        assert_eq!(a.quota_used_today, a.calls, "{a:?}");
    }
}

#[tokio::test]
async fn daily_quota_counts_failed_calls_and_bans_until_reset() {
    let cfg = SimConfig::demo()
        .with_limit(Platform::Taobao, Api::ItemGet, 100, 3)
        .with_limit(Platform::Alibaba, Api::ItemGet, 100, 1);
    let s = start(cfg).await;
    let c = client();
    let url = s.endpoint(Platform::Taobao);
    for _ in 0..2 {
        let (_, b) = post_form(&c, &url, &top_form(TOP_GET, &[("num_iid", "3")], "bad")).await;
        assert_eq!(b["error_response"]["code"], 25);
    }
    let b = top(&c, &s, TOP_GET, &[("num_iid", "3")]).await;
    assert!(b.get("item_seller_get_response").is_some(), "{b}");
    // The two failed calls used the quota too: the fourth call is refused.
    let b = top(&c, &s, TOP_GET, &[("num_iid", "3")]).await;
    assert_eq!(b["error_response"]["code"], 7, "{b}");
    let sub = b["error_response"]["sub_msg"].as_str().unwrap();
    let secs: u64 = sub
        .strip_prefix("This ban will last for ")
        .and_then(|r| r.strip_suffix(" more seconds"))
        .unwrap()
        .parse()
        .unwrap();
    let to_reset = (syncfleet::time::QuotaDay::PLATFORM.next_reset(Utc::now()) - Utc::now())
        .num_seconds() as u64;
    assert!(
        secs.abs_diff(to_reset) <= 2,
        "ban {secs}s vs reset in {to_reset}s"
    );
    let a = s
        .stats()
        .for_platform(Platform::Taobao, Api::ItemGet)
        .unwrap()
        .clone();
    assert_eq!(
        (
            a.quota_used_today,
            a.rejected_quota,
            a.ok,
            a.errors_by_class.fatal
        ),
        (3, 1, 1, 2)
    );

    let (st, _) = ali(&c, &s, Api::ItemGet, &[("offerId", "3")]).await;
    assert_eq!(st, 200);
    let (st, b) = ali(&c, &s, Api::ItemGet, &[("offerId", "3")]).await;
    assert_eq!(
        (st, b["error_code"].as_str().unwrap()),
        (400, "gw.NoUsageLeftError")
    );
}

/// A TOP `item.add` with every field its `check()` requires, carrying `outer_id`.
fn top_item(title: &'static str, outer_id: &'static str) -> [(&'static str, &'static str); 10] {
    [
        ("cid", "50003948"),
        ("title", title),
        ("desc", "A mug, glazed."),
        ("price", "12.50"),
        ("num", "7"),
        ("type", "fixed"),
        ("stuff_status", "new"),
        ("location.state", "浙江"),
        ("location.city", "杭州"),
        ("outer_id", outer_id),
    ]
}

#[tokio::test]
async fn every_write_makes_a_product_and_repeated_codes_are_counted() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let add = top_item("Blue mug", "SF-42");
    let a = top(&c, &s, "taobao.item.add", &add).await;
    let b = top(&c, &s, "taobao.item.add", &add).await;
    // As TOP: no idempotency; a second product with the same code.
    let id = a["item_add_response"]["item"]["num_iid"].as_u64().unwrap();
    let id2 = b["item_add_response"]["item"]["num_iid"].as_u64().unwrap();
    assert_ne!(id, id2);
    // A write missing a required field is refused in TOP's words, and makes nothing.
    let refused = top(&c, &s, "taobao.item.add", &add[1..]).await;
    assert_eq!(refused["error_response"]["code"], 40, "{refused}");
    // The written item can be read back, and its code finds both.
    let got = top(&c, &s, TOP_GET, &[("num_iid", &id.to_string())]).await;
    assert_eq!(got["item_seller_get_response"]["item"]["title"], "Blue mug");
    let found = top(
        &c,
        &s,
        "taobao.items.custom.get",
        &[("outer_id", "SF-42"), ("fields", "num_iid,outer_id")],
    )
    .await;
    let items = found["items_custom_get_response"]["items"]["item"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(items.len(), 2, "{found}");

    let jd_add = r#"{"ware":{"title":"t","categoryId":"93948","itemNum":"SF-j"},"skus":[{"jdPrice":"1.00","stockNum":1}]}"#;
    let x = jd(&c, &s, "jingdong.ware.write.add", jd_add).await;
    let y = jd(&c, &s, "jingdong.ware.write.add", jd_add).await;
    assert_ne!(x, y);

    let stats = s.stats();
    let dup = |p| {
        stats
            .for_platform(p, Api::ItemAdd)
            .unwrap()
            .duplicate_writes
    };
    assert_eq!(dup(Platform::Taobao), 1);
    assert_eq!(dup(Platform::Jd), 1);
    assert_eq!(stats.totals.duplicate_writes, 2);
    assert_eq!(stats.totals.products, 4);
}

#[tokio::test]
async fn peak_per_second_counts_a_burst() {
    let s = start(SimConfig::demo().with_limit(Platform::Taobao, Api::ItemGet, 10_000, 1_000_000))
        .await;
    let c = client();
    let n = 40;
    let t = Instant::now();
    let answers =
        futures::future::join_all((0..n).map(|_| top(&c, &s, TOP_GET, &[("num_iid", "9")]))).await;
    let span_s = t.elapsed().as_secs() + 1;
    assert!(answers
        .iter()
        .all(|b| b.get("item_seller_get_response").is_some()));
    let a = s
        .stats()
        .for_platform(Platform::Taobao, Api::ItemGet)
        .unwrap()
        .clone();
    assert_eq!(a.calls, n);
    // A burst shorter than k seconds touches at most k + 1 wall-clock seconds, so one of
    // them saw at least n / (k + 1) calls (half of them when the burst is under a second).
    assert!(
        a.peak_per_second >= n / (span_s + 1) && a.peak_per_second <= n,
        "{a:?} over {span_s} s"
    );
}

#[tokio::test]
async fn drills_toggle_at_run_time() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let drill = |body: &'static str| {
        let c = c.clone();
        let url = format!("{}/admin/drill", s.base_url());
        async move {
            let r = c
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status().as_u16(), 200);
            r.json::<Value>().await.unwrap()
        }
    };
    let get = [("num_iid", "11")];

    let shown = drill(r#"{"outage":true}"#).await;
    assert_eq!(shown["outage"], true);
    let b = top(&c, &s, TOP_GET, &get).await;
    assert_eq!(
        (
            b["error_response"]["code"].as_u64(),
            b["error_response"]["sub_code"].as_str()
        ),
        (Some(10), Some("isp.service-unavailable"))
    );
    let b = jd(&c, &s, JD_GET, r#"{"wareId":"11"}"#).await;
    assert_eq!(b["error_response"]["code"], "66");
    let (st, _) = ali(&c, &s, Api::ItemGet, &[("offerId", "11")]).await;
    assert_eq!(st, 503);

    drill(r#"{"outage":false,"error_ratio":1.0}"#).await;
    let b = top(&c, &s, TOP_GET, &get).await;
    assert_eq!(b["error_response"]["code"], 10);

    drill(r#"{"error_ratio":0,"expired_session":true}"#).await;
    let b = top(&c, &s, TOP_GET, &get).await;
    assert_eq!(b["error_response"]["code"], 27);
    let (st, b) = ali(&c, &s, Api::ItemGet, &[("offerId", "11")]).await;
    assert_eq!((st, b["error_code"].as_str().unwrap()), (401, "401"));

    drill(r#"{"expired_session":false,"empty_field":"title"}"#).await;
    let b = top(&c, &s, TOP_GET, &get).await;
    assert_eq!(b["item_seller_get_response"]["item"]["title"], "");
    let (_, b) = ali(&c, &s, Api::ItemGet, &[("offerId", "11")]).await;
    assert_eq!(b["productInfo"]["subject"], "");

    drill(r#"{"empty_field":"","latency_ms":300}"#).await;
    let t = Instant::now();
    let b = top(&c, &s, TOP_GET, &get).await;
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(!b["item_seller_get_response"]["item"]["title"]
        .as_str()
        .unwrap()
        .is_empty());

    let shown = drill(r#"{"limit":{"api":"item_get","per_second":1,"daily":2}}"#).await;
    assert_eq!(shown["limits"][0]["daily"], 2);
    assert_eq!(
        s.stats()
            .for_platform(Platform::Jd, Api::ItemGet)
            .unwrap()
            .limit_daily,
        2
    );

    let cleared = drill(r#"{"clear":true}"#).await;
    assert_eq!(
        cleared,
        serde_json::to_value(syncfleet::sim::Drill::default()).unwrap()
    );
    let now: Value = c
        .get(format!("{}/admin/drill", s.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(now, cleared);
    let b = top(&c, &s, TOP_GET, &get).await;
    assert!(b.get("item_seller_get_response").is_some(), "{b}");
    assert_eq!(
        s.stats()
            .for_platform(Platform::Jd, Api::ItemGet)
            .unwrap()
            .limit_daily,
        SimConfig::demo().limit(Platform::Jd, Api::ItemGet).daily
    );

    // Bad drills are refused and change nothing.
    let r = c
        .post(format!("{}/admin/drill", s.base_url()))
        .body(r#"{"error_ratio":7}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(!s.drill().any());
    // The library API does the same.
    s.set_drill(DrillPatch {
        outage: Some(true),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(
        top(&c, &s, TOP_GET, &get).await["error_response"]["code"],
        10
    );
    s.clear_drills();
}

#[tokio::test]
async fn idle_close_drill_drops_requests_on_idle_connections() {
    let mut cfg = SimConfig::demo();
    cfg.idle_hold_s = 2;
    let s = start(cfg).await;
    s.set_drill(DrillPatch {
        idle_close_s: Some(1),
        ..Default::default()
    })
    .unwrap();
    // One keep-alive connection, kept in the pool across the idle gap.
    let c = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .pool_idle_timeout(Duration::from_secs(60))
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let url = s.endpoint(Platform::Taobao);
    let (_, b) = post_form(
        &c,
        &url,
        &top_form(TOP_GET, &[("num_iid", "1")], TOP_SECRET),
    )
    .await;
    assert!(b.get("item_seller_get_response").is_some());
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let t = Instant::now();
    let r = c
        .post(&url)
        .form(&top_form(TOP_GET, &[("num_iid", "2")], TOP_SECRET))
        .send()
        .await;
    assert!(
        r.is_err(),
        "a request on a connection idle past the drill must not be answered"
    );
    // Held, then closed (the hold is 2 s here).
    assert!(t.elapsed() >= Duration::from_millis(1500));
    let a = s
        .stats()
        .for_platform(Platform::Taobao, Api::ItemGet)
        .unwrap()
        .clone();
    assert_eq!((a.idle_closed, a.calls), (1, 1));
    // A fresh connection is served.
    let (_, b) = post_form(
        &c,
        &url,
        &top_form(TOP_GET, &[("num_iid", "3")], TOP_SECRET),
    )
    .await;
    assert!(b.get("item_seller_get_response").is_some(), "{b}");
}

#[tokio::test]
async fn order_pages_respect_window_and_page_size_and_traces_sign() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let method = "taobao.trades.sold.increment.get";
    let too_wide = top(
        &c,
        &s,
        method,
        &[
            ("fields", "tid,status,modified,payment"),
            ("start_modified", "2026-01-01 00:00:00"),
            ("end_modified", "2026-01-03 00:00:00"),
        ],
    )
    .await;
    assert_eq!(too_wide["error_response"]["code"], 41, "{too_wide}");
    // `fields` is required: TOP's own answer, code 40.
    let no_fields = top(
        &c,
        &s,
        method,
        &[
            ("start_modified", "2026-01-01 00:00:00"),
            ("end_modified", "2026-01-02 00:00:00"),
        ],
    )
    .await;
    assert_eq!(no_fields["error_response"]["code"], 40, "{no_fields}");
    assert_eq!(
        no_fields["error_response"]["sub_msg"], "Missing required arguments:fields",
        "{no_fields}"
    );
    // With use_has_next TOP answers has_next and drops the total.
    let b = top(
        &c,
        &s,
        method,
        &[
            ("fields", "tid,status,modified,payment"),
            ("start_modified", "2026-01-02 00:00:00"),
            ("end_modified", "2026-01-03 00:00:00"),
            ("use_has_next", "true"),
        ],
    )
    .await;
    let r = &b["trades_sold_increment_get_response"];
    assert!(
        r.get("total_results").is_none() && r["has_next"] == true,
        "{b}"
    );

    let (start, end) = ("2026-01-02 00:00:00", "2026-01-03 00:00:00");
    let mut seen = Vec::new();
    let mut total = 0;
    for page in 1..=100 {
        let page_s = page.to_string();
        let b = top(
            &c,
            &s,
            method,
            &[
                ("start_modified", start),
                ("end_modified", end),
                ("page_no", &page_s),
                ("page_size", "100"),
                ("fields", "tid,modified"),
            ],
        )
        .await;
        let r = &b["trades_sold_increment_get_response"];
        total = r["total_results"].as_u64().unwrap();
        let trades = r["trades"]["trade"].as_array().unwrap();
        // Only the fields asked for come back.
        assert!(trades.iter().all(|t| t.get("status").is_none()), "{b}");
        assert!(trades.len() <= 100);
        for t in trades {
            let m = t["modified"].as_str().unwrap();
            assert!(m >= start && m < end, "{m}");
            seen.push(t["tid"].as_u64().unwrap());
        }
        if page * 100 >= total {
            break;
        }
    }
    assert!(
        total > 100,
        "3000 orders over 7 days: one day has more than a page"
    );
    assert_eq!(seen.len() as u64, total);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len() as u64, total, "pages do not overlap");

    let mut signed = 0;
    let mut unsigned = 0;
    for tid in seen.iter().take(60) {
        let b = top(
            &c,
            &s,
            "taobao.logistics.trace.search",
            &[("tid", &tid.to_string())],
        )
        .await;
        let steps = b["logistics_trace_search_response"]["trace_list"]["transit_step_info"]
            .as_array()
            .unwrap()
            .clone();
        match steps.last().map(|s| s["action"].as_str().unwrap()) {
            Some("SIGNED") => {
                signed += 1;
                assert_eq!(b["logistics_trace_search_response"]["status"], "对方已签收");
            }
            // Shipped offline: "对方已签收" from the day it ships, whatever its steps say.
            Some(_) if tid % 10 == 7 => {
                assert_eq!(b["logistics_trace_search_response"]["status"], "对方已签收");
                unsigned += 1;
            }
            Some(_) => unsigned += 1,
            None => {}
        }
    }
    assert!(
        signed > 0 && unsigned > 0,
        "signed {signed}, unsigned {unsigned}"
    );

    // JD requires order_state and optional_fields, and serves at most 50 a page.
    let b = jd(&c, &s, "jingdong.pop.order.search", r#"{"start_date":"2026-01-02 00:00:00","end_date":"2026-01-03 00:00:00","page":"1","page_size":"50"}"#).await;
    assert_eq!(b["error_response"]["code"], "60", "{b}");
    let b = jd(&c, &s, "jingdong.pop.order.search", r#"{"start_date":"2026-01-02 00:00:00","end_date":"2026-01-03 00:00:00","order_state":"WAIT_SELLER_STOCK_OUT,WAIT_GOODS_RECEIVE_CONFIRM,FINISHED_L,TRADE_CANCELED,WAIT_PAY","optional_fields":"orderId,modified","page":"1","page_size":"100"}"#).await;
    assert_eq!(b["error_response"]["code"], "60", "{b}");
    let b = jd(&c, &s, "jingdong.pop.order.search", r#"{"start_date":"2026-01-02 00:00:00","end_date":"2026-01-03 00:00:00","order_state":"WAIT_SELLER_STOCK_OUT,WAIT_GOODS_RECEIVE_CONFIRM,FINISHED_L,TRADE_CANCELED,WAIT_PAY","optional_fields":"orderId,modified","page":"1","page_size":"50"}"#).await;
    let r = &b["jingdong_pop_order_search_responce"]["searchorderinfo_result"];
    // Each app is its own shop with its own orders: totals differ, the page size holds.
    assert!(r["orderTotal"].as_u64().unwrap() > 50, "{b}");
    let list = r["orderInfoList"].as_array().unwrap();
    assert_eq!(list.len(), 50);
    assert!(
        list.iter().all(|o| o.get("orderState").is_none()),
        "only the fields asked"
    );
    let (st, b) = ali(
        &c,
        &s,
        Api::OrderList,
        &[
            ("modifyStartTime", "20260102000000000+0800"),
            ("modifyEndTime", "20260103000000000+0800"),
            ("page", "1"),
            ("pageSize", "50"),
        ],
    )
    .await;
    assert_eq!(st, 200);
    assert!(b["totalRecord"].as_u64().unwrap() > 50);
    // 1688 serves at most 20 a page, without a word.
    assert_eq!(b["result"].as_array().unwrap().len(), 20);
}

#[tokio::test]
async fn reset_zeroes_stats_and_written_items() {
    let s = start(SimConfig::demo()).await;
    let c = client();
    let a = top(&c, &s, "taobao.item.add", &top_item("t", "SF-r")).await;
    let id = a["item_add_response"]["item"]["num_iid"]
        .as_u64()
        .unwrap()
        .to_string();
    assert!(s.stats().totals.calls > 0);
    let r = c
        .post(format!("{}/admin/reset", s.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let st = s.stats();
    assert_eq!((st.totals.calls, st.totals.quota_used_today), (0, 0));
    let b = top(&c, &s, TOP_GET, &[("num_iid", &id)]).await;
    assert_eq!(b["error_response"]["sub_code"], "isv.item-not-exist", "{b}");
    s.reset();
    assert_eq!(s.stats().totals.calls, 0);
    s.shutdown().await;
}

#[test]
fn cli_rejects_a_bad_sim_config_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.toml");
    std::fs::write(
        &path,
        "seed = 1\n[orders]\nsigned_share = 3.0\n[apps.taobao]\napp_key = \"k\"\nsecret = \"s\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_syncfleet"))
        .args(["sim", "--listen", "127.0.0.1:0", "--sim-config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sim.toml") && err.contains("orders.signed_share"),
        "{err}"
    );
}
