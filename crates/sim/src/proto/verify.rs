//! The checks every call passes before its business params are read: timestamp, signature
//! and session, each in its platform's spelling.

use super::{form_get, parse_gmt8, Call, Failure, Params, TOP_TIME};
use crate::platform::sign::{self, SignMethod};
use crate::platform::Platform;
use crate::state::Sim;
use crate::tokens::Holder;
use chrono::{DateTime, Utc};
use serde_json::Value;

/// Timestamp, signature and session; returns the business params and the shop whose session
/// signed the call (empty for the app's own session). A refused shop's session is answered
/// with the session error, and counted for that shop.
pub(super) fn verify(
    sim: &Sim,
    call: &Call,
    now: DateTime<Utc>,
    expired: bool,
) -> Result<(Params, String), Failure> {
    let app = &sim.apps[call.app].cfg;
    let skew = sim.cfg.timestamp_skew_s as i64;
    let within = |t: DateTime<Utc>| (now - t).num_seconds().abs() <= skew;
    let form = &call.form;
    let given_sign;
    let expected;
    let session_param;
    match call.platform {
        Platform::Taobao => {
            // TOP's Python SDK (topsdk) sends milliseconds since the epoch instead.
            let ts = form_get(form, "timestamp").and_then(|s| {
                parse_gmt8(s, TOP_TIME).or_else(|| {
                    s.parse::<i64>()
                        .ok()
                        .and_then(DateTime::<Utc>::from_timestamp_millis)
                })
            });
            if !ts.is_some_and(within) {
                return Err(Failure::Timestamp);
            }
            let method = match form_get(form, "sign_method") {
                None => SignMethod::Md5,
                Some(m) => SignMethod::parse(m).ok_or(Failure::Invalid("sign_method".into()))?,
            };
            given_sign = form_get(form, "sign");
            expected = sign::top_sign(
                app.secret.expose(),
                method,
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            session_param = "session";
        }
        Platform::Jd => {
            let ts = form_get(form, "timestamp")
                .and_then(|s| DateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.3f%z").ok())
                .map(|t| t.with_timezone(&Utc));
            if !ts.is_some_and(within) {
                return Err(Failure::Timestamp);
            }
            given_sign = form_get(form, "sign");
            expected = sign::jd_sign(
                app.secret.expose(),
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            session_param = "access_token";
        }
        Platform::Alibaba => {
            let Some(ts) = form_get(form, "_aop_timestamp") else {
                return Err(Failure::Missing("_aop_timestamp".into()));
            };
            let ts = ts
                .parse::<i64>()
                .ok()
                .and_then(DateTime::<Utc>::from_timestamp_millis);
            if !ts.is_some_and(within) {
                return Err(Failure::Timestamp);
            }
            given_sign = form_get(form, "_aop_signature");
            expected = sign::alibaba_sign(
                app.secret.expose(),
                &call.url_path,
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            );
            session_param = "access_token";
        }
    }
    if !given_sign.is_some_and(|s| sign::signatures_match(&expected, s)) {
        return Err(Failure::Signature);
    }
    let given = form_get(form, session_param);
    let shop = match crate::tokens::holder(sim, call.app, given, now.timestamp_millis()) {
        Holder::App => String::new(),
        Holder::Shop(name) => {
            if sim.with_drill(|d| d.refused_shops.contains(&name)) {
                sim.shop_refused(call.platform, &name, call.api);
                return Err(Failure::Session);
            }
            name
        }
        // The shop's token has ended: the platform's own session error.
        Holder::Ended(name) => {
            sim.tokens.count_ended(call.platform, &name);
            sim.shop_refused(call.platform, &name, call.api);
            return Err(Failure::Session);
        }
        Holder::Unknown => return Err(Failure::Session),
    };
    if expired {
        return Err(Failure::Session);
    }
    let params = match call.platform {
        Platform::Jd => {
            let raw = form_get(form, "360buy_param_json")
                .ok_or_else(|| Failure::Missing("360buy_param_json".into()))?;
            match serde_json::from_str::<Value>(raw) {
                Ok(Value::Object(m)) => Params::Json(m),
                _ => return Err(Failure::Invalid("360buy_param_json".into())),
            }
        }
        _ => Params::Form(form.clone()),
    };
    Ok((params, shop))
}
