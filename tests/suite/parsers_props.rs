//! Property tests of the input parsers on stable, through the same entry points as the fuzz
//! targets (`syncfleet::fuzzing`; docs/design.md, "Fuzzing"): arbitrary bytes, and inputs built
//! to look real (platform answers with fields of any value and type, config and spec text
//! with random keys and values, item files with random lines, BOMs and CRLF), each checked
//! against what the parser promises. Fixed cases at the end are inputs fuzzing found.

use chrono::{DateTime, TimeDelta};
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{json, Value};
use std::time::Duration;
use syncfleet::fuzzing::{self, ItemIds, Problem};
use syncfleet::jobs::spec::JobSpec;
use syncfleet::platform::{Api, ApiResponse, ErrorClass, Platform};

/// 256 cases a property: the module runs in seconds in a debug build. Failures are not
/// persisted to files: a case worth keeping becomes a fixed test below.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn text_of(chars: Vec<char>) -> String {
    chars.into_iter().collect()
}

/// Any text, weighted towards what the parsers look for.
fn any_text(max: usize) -> impl Strategy<Value = String> {
    let pieces = select(vec![
        "",
        " ",
        "\t",
        "\n",
        "\r\n",
        "#",
        "=",
        "\"",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "0",
        "1",
        "7",
        "-",
        ".",
        "\u{feff}",
        "limit",
        "ban will last for ",
        " more seconds",
        "频繁",
        "超限",
        "é",
        "\u{3000}",
        "\u{0}",
    ]);
    let piece = prop_oneof![
        pieces.prop_map(str::to_string),
        any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(piece, 0..max).prop_map(|v| v.concat())
}

fn platform() -> impl Strategy<Value = Platform> {
    select(Platform::ALL.to_vec())
}

fn api() -> impl Strategy<Value = Api> {
    select(Api::ALL.to_vec())
}

fn status() -> impl Strategy<Value = u16> {
    prop_oneof![
        select(vec![
            200u16, 201, 204, 301, 400, 401, 403, 404, 413, 429, 500, 502, 503, 504
        ]),
        100u16..600,
        any::<u16>(),
    ]
}

/// A JSON value of any type, shallow.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        any_text(8).prop_map(Value::String),
        select(vec!["0", "2", "7", "19", " 7 ", "-1", "1e3", "true", ""])
            .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(select(vec!["a", "code", "msg", "item"]), inner, 0..3)
                .prop_map(|m| Value::Object(
                    m.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
                )),
        ]
    })
}

/// A code given as a number, a string, with spaces, or as another type.
fn code_value(code: i64) -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(code)),
        Just(json!(code.to_string())),
        Just(json!(format!(" {code} "))),
    ]
}

fn all_results(
    platform: Platform,
    status: u16,
    body: &[u8],
) -> Vec<(Api, Result<ApiResponse, syncfleet::platform::CallError>)> {
    Api::ALL
        .into_iter()
        .map(|api| (api, fuzzing::response(platform, api, status, body)))
        .collect()
}

proptest! {
    #![proptest_config(config())]

    /// Any bytes, on every platform, API and a few statuses: no panic, and every answer
    /// keeps the properties of `fuzzing::check_response`.
    #[test]
    fn any_bytes_are_a_classified_answer(platform in platform(), body in prop::collection::vec(any::<u8>(), 0..300)) {
        prop_assert_eq!(fuzzing::fuzz_response(platform, &body), Ok(()));
    }

    /// Any JSON (shallow, of any type) likewise; and inside each platform's error and
    /// success wrappers.
    #[test]
    fn any_json_is_a_classified_answer(platform in platform(), v in any_json(), wrap in 0usize..4) {
        let body = match wrap {
            0 => v,
            1 => json!({"error_response": v}),
            2 => json!({"error_code": v, "error_message": "x", "result": {"success": false}}),
            _ => json!({
                "item_seller_get_response": {"item": v.clone()},
                "jingdong_ware_read_findWareById_responce": {"code": "0", "ware": v.clone()},
                "result": {"toReturn": v},
            }),
        };
        prop_assert_eq!(fuzzing::fuzz_response(platform, body.to_string().as_bytes()), Ok(()));
    }

    /// A body that is not JSON (an HTML page, a proxy's text) is never a success: at 200 it
    /// is an unknown answer (alert), at 5xx a retry, at 429 a rate limit.
    #[test]
    fn a_body_that_is_not_json_is_classified(platform in platform(), text in any_text(40), status in select(vec![200u16, 429, 502, 503])) {
        let body = format!("<html>{text}</html>");
        for (api, r) in all_results(platform, status, body.as_bytes()) {
            let e = match r {
                Ok(resp) => return Err(TestCaseError::fail(format!("{platform} {api} {status}: accepted as {resp:?}"))),
                Err(e) => e,
            };
            let expected = match status {
                200 => ErrorClass::Unknown,
                429 => ErrorClass::Slow,
                _ => ErrorClass::Retry,
            };
            prop_assert_eq!(e.class, expected, "{} {} {}: {}", platform, api, status, e);
        }
    }

    /// JSON that is not an object (a number, an array, a string) is never a success either.
    #[test]
    fn a_json_body_that_is_not_an_object_is_not_a_success(platform in platform(), v in any_json()) {
        prop_assume!(!v.is_object());
        for (api, r) in all_results(platform, 200, v.to_string().as_bytes()) {
            prop_assert!(r.is_err(), "{platform} {api}: {v} accepted as {r:?}");
        }
    }

    /// A failed HTTP status is never a success, whatever the body says.
    #[test]
    fn a_failed_status_is_never_a_success(platform in platform(), status in 300u16..600, ok in select(vec![
        r#"{"item_seller_get_response":{"item":{"num_iid":1}}}"#,
        r#"{"jingdong_ware_read_findWareById_responce":{"code":"0","ware":{"wareId":1}}}"#,
        r#"{"productInfo":{"productID":1}}"#,
    ])) {
        for (api, r) in all_results(platform, status, ok.as_bytes()) {
            prop_assert!(r.is_err(), "{platform} {api} {status}: {r:?}");
        }
    }

    /// TOP's `error_response` with a rate-limit code (4 to 8, as a number or a string) is a
    /// rate limit whatever its other fields; the app's daily count is the app's spent quota;
    /// a named ban is read.
    #[test]
    fn top_rate_limit_codes_are_slow(
        code in (4i64..=8).prop_flat_map(code_value),
        sub_code in prop_oneof![
            select(vec!["accesscontrol.limited-by-api-access-count", "accesscontrol.limited-by-app-access-count", "isv.x", ""]).prop_map(Value::from),
            any_json(),
        ],
        msg in any_json(),
        ban in prop::option::of(0u64..100_000),
        status in status(),
        api in api(),
    ) {
        let sub_msg = match ban {
            Some(s) => json!(format!("This ban will last for {s} more seconds")),
            None => Value::Null,
        };
        // A message that names a ban of its own is another test's business.
        prop_assume!(!msg.to_string().to_lowercase().contains("ban will last"));
        prop_assume!(!sub_code.to_string().to_lowercase().contains("ban will last"));
        let body = json!({"error_response": {"code": code, "msg": msg, "sub_code": sub_code, "sub_msg": sub_msg}});
        let e = fuzzing::response(Platform::Taobao, api, status, body.to_string().as_bytes()).unwrap_err();
        prop_assert_eq!(e.class, ErrorClass::Slow, "{}: {}", body, e);
        prop_assert!(e.is_rate_limit(), "{body}: {e:?}");
        prop_assert_eq!(e.ban, ban.map(Duration::from_secs), "{}", body);
        let app_count = sub_code == json!("accesscontrol.limited-by-app-access-count");
        prop_assert_eq!(e.app_quota, app_count, "{}", body);
        if app_count || ban.is_some_and(|s| s >= 3600) {
            prop_assert!(e.quota_spent, "{body}: {e:?}");
        }
    }

    /// JOS's code 2 (number, string, padded) is a rate limit, in `error_response` or in the
    /// response itself; code 19 is a refused session.
    #[test]
    fn jd_rate_limit_and_session_codes(
        (limit, code) in prop_oneof![
            code_value(2).prop_map(|v| (true, v)),
            code_value(19).prop_map(|v| (false, v)),
        ],
        inside in any::<bool>(),
        en in any_text(20),
        api in api(),
    ) {
        prop_assume!(!en.to_lowercase().contains("ban will last"));
        let err = json!({"code": code, "en_desc": en, "zh_desc": "调用受限"});
        let body = if inside {
            let key = format!("{}_responce", api.method(Platform::Jd).replace('.', "_"));
            json!({ key: err })
        } else {
            json!({"error_response": err})
        };
        let e = fuzzing::response(Platform::Jd, api, 200, body.to_string().as_bytes()).unwrap_err();
        if limit {
            prop_assert_eq!(e.class, ErrorClass::Slow, "{}: {}", body, e);
            prop_assert!(e.is_rate_limit());
        } else {
            prop_assert_eq!(e.class, ErrorClass::Fatal, "{}: {}", body, e);
            prop_assert!(e.session_refused);
        }
    }

    /// 1688's frequency and usage codes are rate limits at any status; no usage left is the
    /// app's spent quota.
    #[test]
    fn alibaba_rate_limit_codes_are_slow(code in select(vec!["gw.QosAppFrequencyLimit", "gw.NoUsageLeftError"]), msg in any_json(), status in status(), api in api()) {
        prop_assume!(!msg.to_string().to_lowercase().contains("ban will last"));
        let body = json!({"error_code": code, "error_message": msg});
        let e = fuzzing::response(Platform::Alibaba, api, status, body.to_string().as_bytes()).unwrap_err();
        prop_assert_eq!(e.class, ErrorClass::Slow, "{}: {}", body, e);
        let no_usage = code == "gw.NoUsageLeftError";
        prop_assert_eq!((e.quota_spent, e.app_quota), (no_usage, no_usage), "{}", body);
    }

    /// An item read parses with the id as text (number or string) and the stock bounded.
    #[test]
    fn item_reads_parse_their_fields(platform in platform(), id in prop_oneof![any::<u64>().prop_map(|n| json!(n)), select(vec!["1", "42", "007", " 9 ", "18446744073709551616"]).prop_map(Value::from)], num in any_json(), title in any_text(12)) {
        let item = match platform {
            Platform::Taobao => json!({"item_seller_get_response": {"item": {"num_iid": id, "title": title, "num": num}}}),
            Platform::Jd => json!({"jingdong_ware_read_findWareById_responce": {"code": "0", "ware": {"wareId": id, "title": title, "stockNum": num}}}),
            Platform::Alibaba => json!({"productInfo": {"productID": id, "subject": title, "productSaleInfo": {"amountOnSale": num}}}),
        };
        let r = fuzzing::response(platform, Api::ItemGet, 200, item.to_string().as_bytes());
        let Ok(ApiResponse::Item(got)) = r else {
            return Err(TestCaseError::fail(format!("{item}: {r:?}")));
        };
        let id_text = match &id { Value::String(s) => s.clone(), other => other.to_string() };
        prop_assert_eq!(&got.id, &id_text);
        prop_assert_eq!(&got.title, &title);
        let expected = match &num {
            Value::Number(n) => n.as_u64().unwrap_or(0).min(u64::from(u32::MAX)) as u32,
            Value::String(s) => s.trim().parse::<u64>().map(|n| n.min(u64::from(u32::MAX)) as u32).unwrap_or(0),
            _ => 0,
        };
        prop_assert_eq!(got.quantity, expected, "{}", item);
    }

    /// Order pages: every order's time is read as GMT+8, a malformed one is an error, never
    /// an order at another time.
    #[test]
    fn order_times_are_read_or_refused(platform in select(vec![Platform::Taobao, Platform::Jd]), secs in 0i64..4_000_000_000, garbage in prop::option::of(any_text(6))) {
        let at = DateTime::from_timestamp(secs, 0).unwrap_or_default();
        let mut modified = (at + TimeDelta::hours(8)).format("%Y-%m-%d %H:%M:%S").to_string();
        if let Some(g) = &garbage {
            modified.push_str(g);
        }
        let body = match platform {
            Platform::Taobao => json!({"trades_sold_increment_get_response": {"has_next": false, "trades": {"trade": [{"tid": 1, "modified": modified}]}}}),
            _ => json!({"jingdong_pop_order_search_responce": {"code": "0", "searchorderinfo_result": {"orderTotal": 1, "orderInfoList": [{"orderId": "1", "modified": modified}]}}}),
        };
        match fuzzing::response(platform, Api::OrderList, 200, body.to_string().as_bytes()) {
            // A time that cannot be read sets the order aside (quarantined), never misread.
            Ok(ApiResponse::OrderPage(p)) => {
                prop_assert_eq!(p.orders.len() + p.unreadable.len(), 1);
                if garbage.as_deref().is_none_or(|g| g.trim().is_empty()) {
                    prop_assert_eq!(p.orders.len(), 1, "{}", modified);
                    prop_assert_eq!(p.orders[0].modified, at, "{}", modified);
                } else if p.unreadable.len() == 1 {
                    prop_assert_eq!(p.unreadable[0].id.as_deref(), Some("1"));
                }
            }
            Ok(other) => return Err(TestCaseError::fail(format!("{other:?}"))),
            Err(e) => {
                prop_assert!(garbage.is_some(), "{modified}: {e}");
                prop_assert_eq!(e.class, ErrorClass::Unknown);
            }
        }
    }

    /// Classification of any code, sub-code, status, clock and text keeps the error
    /// properties on every platform.
    #[test]
    fn any_classification_keeps_the_error_properties(code in any_text(6), sub_code in any_text(6), status in status(), secs in 0i64..172_800, text in any_text(30)) {
        let now = DateTime::from_timestamp(1_767_225_600 + secs, 0).unwrap_or_default();
        let c = fuzzing::classify(&code, &sub_code, status, &text, now);
        prop_assert_eq!(fuzzing::check_classification(&c), Ok(()));
        prop_assert_eq!(fuzzing::fuzz_classify(format!("{code}\n{sub_code}\n{status}\n{secs}\n{text}").as_bytes()), Ok(()));
    }

    /// "ban will last for N more seconds" is read in any case, anywhere in the text.
    #[test]
    fn a_named_ban_is_read_in_any_case(before in any_text(10), after in any_text(10), n in any::<u32>(), upper in prop::collection::vec(any::<bool>(), 32)) {
        prop_assume!(!before.to_ascii_lowercase().contains("ban will last for "));
        let mark: String = "ban will last for "
            .chars()
            .zip(upper.iter().cycle())
            .map(|(c, up)| if *up { c.to_ascii_uppercase() } else { c })
            .collect();
        let text = format!("{before}{mark}{n} More Seconds{after}");
        let c = fuzzing::classify("999", "", 200, &text, fuzzing::fixed_now());
        prop_assert_eq!(c.ban, Some(Duration::from_secs(u64::from(n))), "{}", text);
    }

    /// Text that mentions a limit is slow, in any letter case.
    #[test]
    fn limit_words_are_slow(before in any_text(10), after in any_text(10), word in select(vec!["limit", "too many", "频繁", "超限", "exceed", "throttl"]), upper in any::<bool>()) {
        let word = if upper { word.to_uppercase() } else { word.to_string() };
        let c = fuzzing::classify("", "", 200, &format!("{before}{word}{after}"), fuzzing::fixed_now());
        prop_assert_eq!(c.keyword, ErrorClass::Slow);
        // An unmapped code falls back to the keywords on every platform.
        for e in [&c.taobao, &c.jd, &c.alibaba] {
            prop_assert_eq!(e.class, ErrorClass::Slow, "{}", e);
        }
    }
}

// ---- config files ------------------------------------------------------------------------

const SECTIONS: [&str; 14] = [
    "platforms.taobao",
    "platforms.jd",
    "platforms.ebay",
    "gates.default",
    "gates.\"taobao.item_get\"",
    "gates.\"jd.nope\"",
    "shops.acme",
    "link",
    "link.retry",
    "link.breaker",
    "link.timeouts.detail",
    "queue",
    "day",
    "bogus",
];

const KEYS: [&str; 30] = [
    "endpoint",
    "app_key",
    "secret_env",
    "session_env",
    "sign_method",
    "per_second_cap",
    "daily_quota",
    "connect_timeout_ms",
    "idle_keepalive_s",
    "platform_idle_close_s",
    "pool_wait_ms",
    "rate",
    "burst",
    "concurrency",
    "p95_ms",
    "interactive_share",
    "boundary_band_ms",
    "pacing",
    "platform",
    "weight",
    "task_budget_ms",
    "max_attempts",
    "budget_ratio",
    "initial_open_ms",
    "read_ms",
    "connect_ms",
    "chunk_size",
    "push_batch",
    "seconds",
    "colour",
];

/// A float as TOML writes it (`nan`, `inf`, `-inf`, or Rust's own digits).
fn toml_float(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else {
        format!("{f:?}")
    }
}

/// Any i64, often near the ends of the range (where sums overflow) or small.
fn big_int() -> impl Strategy<Value = i64> {
    prop_oneof![any::<i64>(), (i64::MAX - 1000)..=i64::MAX, 0i64..100_000]
}

fn toml_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        select(vec![
            "0",
            "1",
            "-1",
            "20",
            "600",
            "86400",
            "9223372036854775807",
            "-9223372036854775808",
            "nan",
            "inf",
            "-inf",
            "-0.0",
            "0.5",
            "1e308",
            "true",
            "false",
            "\"http://127.0.0.1:7800/router/rest\"",
            "\"taobao\"",
            "\"even\"",
            "\"md5\"",
            "\"X_SECRET\"",
            "\"\"",
            "[1, 2]",
            "{ a = 1 }",
        ])
        .prop_map(str::to_string),
        any::<f64>().prop_map(toml_float),
        any_text(6).prop_map(|s| format!("{:?}", s)),
    ]
}

const PLATFORM_OK: &str = "[platforms.taobao]\nendpoint = \"http://127.0.0.1:7800/router/rest\"\napp_key = \"k\"\nsecret_env = \"X_SECRET\"\n";

fn config_text() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        select(SECTIONS.to_vec()).prop_map(|s| format!("[{s}]")),
        (select(KEYS.to_vec()), toml_value()).prop_map(|(k, v)| format!("{k} = {v}")),
        (select(KEYS.to_vec()), toml_value()).prop_map(|(k, v)| format!("{k} = {v}")),
        any_text(8),
    ];
    (any::<bool>(), prop::collection::vec(line, 0..16)).prop_map(|(base, lines)| {
        let mut text = if base {
            PLATFORM_OK.to_string()
        } else {
            String::new()
        };
        for l in lines {
            text.push_str(&l);
            text.push('\n');
        }
        text
    })
}

fn lines_of(problems: &[Problem]) -> Vec<(String, Option<usize>, bool)> {
    problems
        .iter()
        .map(|p| (p.key.clone(), p.line, p.warning))
        .collect()
}

proptest! {
    #![proptest_config(config())]

    /// Any text, and config-like text with random sections, keys and values: no panic, and
    /// what `fuzzing::check_config` says of every config holds.
    #[test]
    fn any_config_text_keeps_the_config_properties(text in prop_oneof![any_text(60), config_text()]) {
        prop_assert_eq!(fuzzing::check_config(&text, &fuzzing::config_file(&text)), Ok(()));
    }

    /// A file saved with CRLF line ends reads as the same config: same verdict, same keys
    /// and lines in the problems.
    #[test]
    fn crlf_line_ends_read_the_same(text in config_text()) {
        // A CR of the text's own would be a bare CR after the conversion.
        prop_assume!(!text.contains('\r'));
        let crlf = text.replace('\n', "\r\n");
        let (lf, cr) = (fuzzing::config_file(&text), fuzzing::config_file(&crlf));
        match (&lf, &cr) {
            (Ok(_), Ok(_)) => {}
            (Err(a), Err(b)) => prop_assert_eq!(lines_of(a), lines_of(b)),
            _ => return Err(TestCaseError::fail(format!("LF {lf:?} but CRLF {cr:?}"))),
        }
    }

    /// An unknown key is refused, naming it and its line, wherever it is put.
    #[test]
    fn an_unknown_key_names_its_line(section in select(vec!["queue", "link", "link.retry", "link.breaker", "gates.default", "day", "jobs", "probe"]), blank in 0usize..4, key in select(vec!["colour", "chunk_sise", "rates", "x"])) {
        let mut text = String::from(PLATFORM_OK);
        text.push_str(&"\n".repeat(blank));
        text.push_str(&format!("[{section}]\n{key} = 1\n"));
        let line = text.lines().count();
        let problems = fuzzing::config_file(&text).unwrap_err();
        prop_assert_eq!(problems[0].line, Some(line), "{:?}", problems);
        prop_assert!(problems[0].shown.contains(key), "{problems:?}");
    }

    /// Every timeout, budget and limit number a config can hold is accepted or refused,
    /// never a crash (sums of timeouts against the budget included).
    #[test]
    fn big_numbers_are_refused_not_a_crash(pool in big_int(), connect in big_int(), read in big_int(), budget in big_int(), rate in any::<f64>(), p95 in big_int()) {
        let rate = toml_float(rate);
        let text = format!(
            "{PLATFORM_OK}pool_wait_ms = {pool}\nconnect_timeout_ms = {connect}\n[link]\ntask_budget_ms = {budget}\n[link.timeouts.detail]\nconnect_ms = {connect}\nread_ms = {read}\n[gates.default]\nrate = {rate}\np95_ms = {p95}\n"
        );
        prop_assert_eq!(fuzzing::check_config(&text, &fuzzing::config_file(&text)), Ok(()));
    }
}

// ---- job specs ---------------------------------------------------------------------------

fn spec_value() -> impl Strategy<Value = String> {
    prop_oneof![
        select(vec![
            "\"listing\"",
            "\"orders\"",
            "\"logistics\"",
            "\"bogus\"",
            "\"taobao\"",
            "\"jd\"",
            "\"alibaba\"",
            "\"1688\"",
            "\"ebay\"",
            "\"shop-1\"",
            "\"\"",
            "\" \"",
            "true",
            "600",
            "-1",
            "[\"1\", \"2\"]",
            "[\"0\"]",
            "[]",
            "\"items.txt\"",
            "\"-\"",
            "\"/abs/items.txt\"",
            "\"interactive\"",
            "\"bulk\"",
            "\"2026-01-01T00:00:00Z\"",
            "\"2026-01-08T00:00:00+08:00\"",
            "\"2025-01-01T00:00:00Z\"",
            "\"9999-12-31T23:59:59Z\"",
            "\"0001-01-01T00:00:00Z\"",
            "2026-01-02T00:00:00Z",
        ])
        .prop_map(str::to_string),
        any_text(6).prop_map(|s| format!("{:?}", s)),
        prop::collection::vec(any_text(4), 0..4).prop_map(|v| format!("{v:?}")),
    ]
}

fn spec_text() -> impl Strategy<Value = String> {
    let key = select(vec![
        "kind",
        "from",
        "to",
        "items_file",
        "items",
        "to_shop",
        "relist",
        "allow_stale_source_s",
        "platform",
        "shop",
        "since",
        "until",
        "lane",
        "colour",
    ]);
    prop::collection::vec((key, spec_value()), 0..9).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k} = {v}\n"))
            .collect()
    })
}

proptest! {
    #![proptest_config(config())]

    /// Any text and spec-like text: no panic, and `fuzzing::check_job_spec` holds (an
    /// accepted spec validates and survives the ledger's JSON).
    #[test]
    fn any_spec_text_keeps_the_spec_properties(text in prop_oneof![any_text(40), spec_text()]) {
        prop_assert_eq!(fuzzing::fuzz_job_spec(text.as_bytes()), Ok(()));
    }

    /// An orders window is accepted exactly when it is ordered and at most 366 days long.
    #[test]
    fn an_orders_window_is_ordered_and_bounded(start in 0i64..4_000_000_000, len in -1_000_000i64..40_000_000) {
        let since = DateTime::from_timestamp(start, 0).unwrap_or_default();
        let until = since + TimeDelta::seconds(len);
        let text = format!(
            "kind = \"orders\"\nplatform = \"taobao\"\nshop = \"s\"\nsince = \"{}\"\nuntil = \"{}\"\n",
            since.to_rfc3339(),
            until.to_rfc3339()
        );
        let ok = len > 0 && len <= 366 * 86_400;
        let r = fuzzing::job_spec(&text);
        prop_assert_eq!(r.is_ok(), ok, "{}: {:?}", text, r);
    }

    /// A listing names two platforms; to itself it is refused.
    #[test]
    fn a_listing_goes_to_another_platform(from in platform(), to in platform()) {
        let text = format!("kind = \"listing\"\nfrom = \"{from}\"\nto = \"{to}\"\nitems = [\"1\"]\n");
        let r = fuzzing::job_spec(&text);
        prop_assert_eq!(r.is_ok(), from != to, "{:?}", r);
        if let Ok(JobSpec::Listing { to_shop, .. }) = r {
            prop_assert_eq!(to_shop, "default");
        }
    }
}

// ---- item files --------------------------------------------------------------------------

/// One line of an item file, without its line end.
#[derive(Debug, Clone)]
enum Line {
    /// An id with leading zeros and blanks around it.
    Id {
        zeros: usize,
        digits: String,
        pad_left: String,
        pad_right: String,
    },
    Blank(String),
    Comment(String),
    /// Not an id: letters, signs, decimals, zero, too long, inner blanks, full-width digits.
    Bad(String),
    /// Bytes that are not UTF-8.
    NotUtf8,
}

fn blank() -> impl Strategy<Value = String> {
    prop::collection::vec(select(vec![' ', '\t', '\u{3000}', '\u{a0}', '\u{b}']), 0..3)
        .prop_map(text_of)
}

fn item_line() -> impl Strategy<Value = Line> {
    prop_oneof![
        6 => (0usize..3, select(('1'..='9').collect::<Vec<_>>()), prop::collection::vec(select(('0'..='9').collect::<Vec<_>>()), 0..12), blank(), blank())
            .prop_map(|(zeros, first, rest, pad_left, pad_right)| Line::Id { zeros, digits: format!("{first}{}", text_of(rest)), pad_left, pad_right }),
        1 => blank().prop_map(Line::Blank),
        1 => any_text(6).prop_map(|t| Line::Comment(format!("#{}", t.replace(['\n', '\r'], "")))),
        1 => select(vec!["abc", "-1", "+5", "1.5", "0", "000", "12 34", "１２", "1e3", "123456789012345678901", "0x10", "\u{feff}7"])
            .prop_map(|s| Line::Bad(s.to_string())),
        1 => Just(Line::NotUtf8),
    ]
}

fn line_bytes(line: &Line) -> Vec<u8> {
    match line {
        Line::Id {
            zeros,
            digits,
            pad_left,
            pad_right,
        } => format!("{pad_left}{}{digits}{pad_right}", "0".repeat(*zeros)).into_bytes(),
        Line::Blank(s) | Line::Comment(s) | Line::Bad(s) => s.clone().into_bytes(),
        Line::NotUtf8 => vec![b'1', 0xff, 0xfe],
    }
}

/// What a correct reader makes of the lines: the ids (trimmed, zeros dropped, first
/// occurrence kept) and duplicates, or the first bad line (1-based).
fn expected_items(lines: &[Line], bom: bool) -> Result<(Vec<String>, usize), usize> {
    let mut ids: Vec<String> = Vec::new();
    let mut duplicates = 0;
    for (i, line) in lines.iter().enumerate() {
        let lineno = i + 1;
        let mut text = match line {
            Line::NotUtf8 => return Err(lineno),
            other => String::from_utf8(line_bytes(other)).unwrap_or_default(),
        };
        // One BOM at the very start of the file is not data; anywhere else it is.
        if lineno == 1 {
            if bom {
                text.insert(0, '\u{feff}');
            }
            if let Some(rest) = text.strip_prefix('\u{feff}') {
                text = rest.to_string();
            }
        }
        let id = text.trim();
        if id.is_empty() || id.starts_with('#') {
            continue;
        }
        let valid = id.len() <= 20
            && id.bytes().all(|b| b.is_ascii_digit())
            && id.bytes().any(|b| b != b'0');
        if !valid {
            return Err(lineno);
        }
        let id = id.trim_start_matches('0').to_string();
        if ids.contains(&id) {
            duplicates += 1;
        } else {
            ids.push(id);
        }
    }
    Ok((ids, duplicates))
}

fn item_file_bytes(lines: &[Line], bom: bool, crlf: bool, final_eol: bool) -> Vec<u8> {
    let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
    let mut out = Vec::new();
    if bom {
        out.extend_from_slice("\u{feff}".as_bytes());
    }
    for (i, line) in lines.iter().enumerate() {
        out.extend(line_bytes(line));
        if i + 1 < lines.len() || final_eol {
            out.extend_from_slice(eol);
        }
    }
    out
}

proptest! {
    #![proptest_config(config())]

    /// Any bytes: no panic, and `fuzzing::check_item_file` holds (ids are 1 to 20 digits
    /// without a leading zero, each once; a refusal names a line of the file).
    #[test]
    fn any_bytes_keep_the_item_file_properties(data in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        any_text(60).prop_map(String::into_bytes),
    ]) {
        prop_assert_eq!(fuzzing::fuzz_item_file(&data), Ok(()));
    }

    /// Item files of random lines, with or without a BOM, with LF or CRLF, with or without a
    /// last line end: the ids are exactly the trimmed ids in order, each once, and a bad
    /// line stops the read naming its 1-based line.
    #[test]
    fn item_files_read_every_id_or_name_the_first_bad_line(
        lines in prop::collection::vec(item_line(), 0..30),
        bom in any::<bool>(),
        crlf in any::<bool>(),
        final_eol in any::<bool>(),
    ) {
        let data = item_file_bytes(&lines, bom, crlf, final_eol);
        let got = fuzzing::item_file(&data);
        prop_assert_eq!(fuzzing::check_item_file(&data, &got), Ok(()));
        match (expected_items(&lines, bom), got) {
            (Ok((ids, duplicates)), Ok(ItemIds { ids: got_ids, duplicates: got_dups, .. })) => {
                prop_assert_eq!(got_ids, ids);
                prop_assert_eq!(got_dups, duplicates);
            }
            (Err(line), Err(p)) => {
                prop_assert_eq!(p.line, Some(line), "{}", p.shown);
                prop_assert!(p.shown.starts_with(&format!("{}:{line}: ", fuzzing::ITEMS_PATH)), "{}", p.shown);
            }
            (want, got) => return Err(TestCaseError::fail(format!("expected {want:?}, read {got:?}"))),
        }
    }

    /// A listing's inline items are read by the same rules as a file.
    #[test]
    fn inline_items_read_like_a_file(lines in prop::collection::vec(item_line(), 1..10)) {
        prop_assume!(!lines.iter().any(|l| matches!(l, Line::NotUtf8)));
        let items: Vec<String> = lines.iter().map(|l| String::from_utf8(line_bytes(l)).unwrap_or_default()).collect();
        let spec = JobSpec::Listing {
            from: Platform::Alibaba,
            to: Platform::Taobao,
            items_file: None,
            items: items.clone(),
            to_shop: "default".into(),
            relist: false,
            allow_stale_source_s: None,
            lane: Default::default(),
            map_file: None,
            map: None,
            shop_listing: Default::default(),
        };
        let text = fuzzing::inline_items_text(&spec).unwrap_or_default();
        prop_assert_eq!(fuzzing::item_file(text.as_bytes()).is_ok(), expected_items(&lines, false).is_ok());
    }
}

/// Progress is reported every 10,000 lines, and a bad line far down is still named.
#[test]
fn long_item_files_report_progress_and_far_lines() {
    let mut text: String = (1..=25_000).map(|i| format!("{i}\n")).collect();
    let got = fuzzing::item_file(text.as_bytes()).unwrap();
    assert_eq!(got.ids.len(), 25_000);
    assert_eq!(got.progress, vec![10_000, 20_000]);
    text.push_str("oops\n");
    let err = fuzzing::item_file(text.as_bytes()).unwrap_err();
    assert_eq!(err.line, Some(25_001), "{}", err.shown);
}

// ---- found by fuzzing and property tests -------------------------------------------------

/// 1688 answered an empty (or any non-JSON) 200 body to an order list or a trace with an
/// empty page or trace: an order sync would have skipped its window without a word.
#[test]
fn an_empty_or_html_1688_answer_is_not_an_empty_page() {
    for body in [
        &b""[..],
        b"<html>maintenance</html>",
        b"[]",
        b"\"ok\"",
        b"42",
    ] {
        for api in Api::ALL {
            let e = fuzzing::response(Platform::Alibaba, api, 200, body).unwrap_err();
            assert_eq!(
                (e.class, e.code.as_str()),
                (ErrorClass::Unknown, "parse"),
                "{api}"
            );
        }
    }
}

/// Timeouts whose sum passes u64::MAX overflowed the timeout-chain check (a panic in a debug
/// build, a wrapped sum passing the check in a release build).
#[test]
fn timeouts_summing_past_u64_max_are_refused() {
    let text = format!(
        "{PLATFORM_OK}pool_wait_ms = 1601\n[link.timeouts.detail]\nconnect_ms = 9223372036854775138\nread_ms = 9223372036854774877\n"
    );
    let problems = fuzzing::config_file(&text).unwrap_err();
    assert!(
        problems.iter().any(|p| p.key == "link.timeouts.detail"),
        "{problems:?}"
    );
}
