//! Parsing `config/sim.toml`: the shipped file, errors naming file, key or line, limit entries
//! falling back to `default`, and the limit kinds.

use super::*;
use std::path::Path;

#[test]
fn shipped_file_parses_with_demo_apps() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/sim.toml");
    let cfg = SimConfig::load(&path).unwrap();
    let top = cfg.app(Platform::Taobao).unwrap();
    assert_eq!(top.app_key, "10000001");
    assert_eq!(top.secret.expose(), "sim-taobao-secret");
    assert_eq!(
        cfg.app(Platform::Jd).unwrap().session.expose(),
        "sim-jd-token"
    );
    assert_eq!(cfg.app(Platform::Alibaba).unwrap().app_key, "1000001");
    assert!(cfg.limit(Platform::Taobao, Api::ItemGet).per_second > 0);
}

#[test]
fn unknown_key_names_file_and_line() {
    let err = SimConfig::parse(Path::new("sim.toml"), "seed = 1\nbogus = 2\n").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("sim.toml:2"), "{msg}");
    assert!(msg.contains("bogus"), "{msg}");
}

#[test]
fn bad_values_name_their_keys() {
    let text = r#"
[apps.taobao]
app_key = "k"
secret = "s"
[limits."taobao.nope"]
per_second = 1
[limits."jd.item_get"]
per_second = 0
[orders]
signed_share = 2.0
"#;
    let msg = SimConfig::parse(Path::new("x.toml"), text)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("limits.\"taobao.nope\""), "{msg}");
    assert!(msg.contains("limits.\"jd.item_get\".per_second"), "{msg}");
    assert!(msg.contains("orders.signed_share"), "{msg}");
}

#[test]
fn limit_entries_fall_back_to_default() {
    let text = r#"
[apps.jd]
app_key = "k"
secret = "s"
[limits.default]
per_second = 7
daily = 70
[limits."jd.order_list"]
daily = 5
"#;
    let cfg = SimConfig::parse(Path::new("x.toml"), text).unwrap();
    assert_eq!(cfg.limit(Platform::Jd, Api::ItemGet).per_second, 7);
    let ol = cfg.limit(Platform::Jd, Api::OrderList);
    assert_eq!((ol.per_second, ol.daily), (7, 5));
    assert_eq!((ol.kind, ol.burst), (LimitKind::Fixed, None));
}

#[test]
fn limit_kinds_parse_inherit_and_validate() {
    let text = r#"
[apps.jd]
app_key = "k"
secret = "s"
[limits.default]
kind = "sliding"
[limits."jd.item_get"]
per_second = 10
kind = "bucket"
burst = 30
[limits."jd.order_list"]
per_second = 5
"#;
    let cfg = SimConfig::parse(Path::new("x.toml"), text).unwrap();
    let ig = cfg.limit(Platform::Jd, Api::ItemGet);
    assert_eq!(
        (ig.per_second, ig.kind, ig.burst),
        (10, LimitKind::Bucket, Some(30))
    );
    let ol = cfg.limit(Platform::Jd, Api::OrderList);
    assert_eq!((ol.kind, ol.burst), (LimitKind::Sliding, None));
    assert_eq!(
        cfg.limit(Platform::Jd, Api::ItemAdd).kind,
        LimitKind::Sliding
    );

    let bad = |limit: &str| {
        let text = format!("[apps.jd]\napp_key = \"k\"\nsecret = \"s\"\n{limit}");
        SimConfig::parse(Path::new("x.toml"), &text)
            .unwrap_err()
            .to_string()
    };
    let msg = bad("[limits.\"jd.item_get\"]\nkind = \"leaky\"\n");
    assert!(msg.contains("x.toml:5") && msg.contains("leaky"), "{msg}");
    let msg = bad("[limits.\"jd.item_get\"]\nkind = \"bucket\"\nburst = 0\n");
    assert!(msg.contains("limits.\"jd.item_get\".burst"), "{msg}");
}

#[test]
fn with_limit_kind_keeps_the_rates() {
    let cfg = SimConfig::demo()
        .with_limit(Platform::Taobao, Api::ItemGet, 3, 9)
        .with_limit_kind(Platform::Taobao, Api::ItemGet, LimitKind::Bucket, Some(6));
    let l = cfg.limit(Platform::Taobao, Api::ItemGet);
    assert_eq!(
        (l.per_second, l.daily, l.kind, l.burst),
        (3, 9, LimitKind::Bucket, Some(6))
    );
}
