//! `syncfleet call PLATFORM API key=value...`: one signed call through the adapter and the
//! API's gate (in its lane: interactive by default, a person is waiting); prints the response
//! JSON and its error class. With `--redis` the call books in the fleet's gate and counts in
//! its day like every worker's.

use super::{Cli, CliError};
use crate::clock::Clock;
use crate::platform::client::{check_body, with_raw_defaults};
use crate::platform::{Api, Platform, UnknownName};
use crate::throttle::{GateOutcome, Lane};
use clap::Args;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct CallArgs {
    /// taobao, jd or alibaba.
    pub(crate) platform: String,
    /// item_get, item_add, order_list or logistics_trace.
    pub(crate) api: String,
    /// Business params in the platform's own names, e.g. `num_iid=1` (taobao),
    /// `wareId=1` (jd, sent as 360buy_param_json), `offerId=1` (alibaba).
    pub(crate) params: Vec<String>,
    /// Whole-call timeout in ms (default: the API class's read timeout in link.timeouts).
    #[arg(long)]
    pub(crate) timeout_ms: Option<u64>,
    /// The lane the call takes at its gate: `interactive` (default) or `bulk`.
    #[arg(long, default_value = "interactive")]
    pub(crate) lane: Lane,
}

/// Split `key=value` arguments; a missing `=` or an empty key is bad input.
pub(crate) fn parse_params(args: &[String]) -> Result<Vec<(String, String)>, CliError> {
    args.iter()
        .map(|a| match a.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(CliError::input(format!("param `{a}` is not key=value"))),
        })
        .collect()
}

pub(crate) async fn run(cli: &Cli, args: &CallArgs) -> Result<(), CliError> {
    let platform: Platform = args
        .platform
        .parse()
        .map_err(|e: UnknownName| CliError::input(e.to_string()))?;
    let api: Api = args
        .api
        .parse()
        .map_err(|e: UnknownName| CliError::input(e.to_string()))?;
    let params = with_raw_defaults(platform, api, &parse_params(&args.params)?);
    let cfg = cli.load_config()?;
    let pc = cfg.platform(platform).ok_or_else(|| {
        CliError::input(format!(
            "{}: no [platforms.{platform}] section",
            cfg.file.display()
        ))
    })?;
    // The error names the missing environment variable, never a value.
    let client = pc.client(platform).map_err(|e| {
        CliError::input(format!("{}: platforms.{platform}: {e}", cfg.file.display()))
    })?;
    let timeout = Duration::from_millis(
        args.timeout_ms
            .unwrap_or(cfg.link.timeouts.for_class(api.class()).read_ms),
    );
    // The gate first: a call from the terminal counts in the app's limits like any other.
    let gates = cli
        .topology()
        .gates(&cfg, crate::topology::FLEET_NAMESPACE)
        .await
        .map_err(|e| CliError::runtime(e.to_string()))?;
    let permit = gates
        .acquire(platform, api, args.lane, cfg.gate(platform, api).max_wait)
        .await
        .map_err(|refusal| CliError::runtime(format!("{platform}.{api} gate: {refusal}")))?;
    let sent = Clock::system().wall();
    let outcome = match client.exchange(api, &params, timeout).await {
        Ok(raw) => {
            let pretty =
                serde_json::to_string_pretty(&raw.body).unwrap_or_else(|_| raw.body.to_string());
            println!("{pretty}");
            check_body(
                platform,
                api,
                raw.http_status,
                &raw.body,
                Clock::system().utc(),
            )
        }
        Err(e) => Err(e),
    };
    drop(permit);
    gates.report_sent(platform, api, GateOutcome::of(&outcome), sent);
    gates.flush().await;
    // The call counts against the app's quota like a worker's: into the ledger's calls, when
    // there is a ledger (what `report` and an embedded `gate show` read).
    if let Ok(store) = crate::store::Store::connect_existing(&cli.db).await {
        let record = crate::store::CallRecord {
            minute: Clock::system().utc(),
            platform,
            api,
            class: outcome.as_ref().map_or_else(
                |e| crate::store::CallClass::from(e.class),
                |_| crate::store::CallClass::Ok,
            ),
            calls: 1,
            useful: 0,
        };
        if let Err(e) = store.record_calls(&[record]).await {
            tracing::warn!("the call was not recorded in the ledger: {e}");
        }
    }
    match outcome {
        Ok(()) => {
            println!("class: ok");
            Ok(())
        }
        Err(e) => {
            println!("class: {}", e.class_line());
            Err(CliError::runtime(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_need_an_equals_sign() {
        let ok = parse_params(&["num_iid=12".into(), "q=a=b".into(), "empty=".into()]).unwrap();
        assert_eq!(
            ok,
            vec![
                ("num_iid".into(), "12".into()),
                ("q".into(), "a=b".into()),
                ("empty".into(), String::new())
            ]
        );
        let err = parse_params(&["num_iid12".into()]).unwrap_err();
        assert_eq!(err.code, 2);
        assert!(err.message.contains("num_iid12"));
        assert_eq!(parse_params(&["=1".into()]).unwrap_err().code, 2);
    }
}
