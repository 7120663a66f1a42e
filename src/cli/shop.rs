//! `syncfleet shop ...`: the shops the app serves (docs/design.md, "Shops", "Shops in the
//! ledger", "Onboarding a seller"): the config's `[shops]` and the ledger's directory, the
//! ones paused because the platform refused their session, and the directory's commands.

use crate::cli::{Cli, CliError};
use crate::config::{read_secret_env, Config, DEFAULT_WEIGHT};
use crate::jobs::onboard::{OnboardError, Onboarded, Onboarding, ShopTokens};
use crate::platform::Platform;
use crate::seal::SealKeys;
use crate::secret::Secret;
use crate::store::{LedgerShop, Store};
use clap::Subcommand;
use std::sync::Arc;
use std::time::Duration;

/// The shop subcommands.
#[derive(Debug, Subcommand)]
pub enum ShopCommand {
    /// Every shop: the config's `[shops]`, the ledger's (added with `shop add` or through
    /// OAuth), and every paused shop with why and since when. Exit 0 either way.
    List,
    /// One shop of the ledger: weight, seller, when added, its token's state. Exit 2 when the
    /// ledger has no such shop.
    Show {
        /// The shop's name.
        shop: String,
        /// Its platform (needed only when two platforms have a shop of that name).
        #[arg(long)]
        platform: Option<Platform>,
    },
    /// Add a shop to the ledger with tokens you already hold (read from environment
    /// variables, never from the command line), or give a shop new tokens. Running workers
    /// serve it from their next look (within a heartbeat), with no restart. Needs the token
    /// key (SYNCFLEET_TOKEN_KEY or SYNCFLEET_TOKEN_KEY_FILE).
    Add {
        /// The shop's name: what jobs and schedules name (letters, digits, `-`, `_`, `.`).
        shop: String,
        /// The platform it sells on.
        #[arg(long)]
        platform: Platform,
        /// The variable holding its access token (TOP session).
        #[arg(long, value_name = "VAR")]
        session_env: String,
        /// The variable holding its refresh token: with it the access token is renewed
        /// before it ends.
        #[arg(long, value_name = "VAR")]
        refresh_env: Option<String>,
        /// Seconds the access token has left, if known (else it is renewed at the first
        /// look, when a refresh token is given).
        #[arg(long, value_name = "SECONDS")]
        expires_in: Option<u64>,
        /// Its share among the shops with work waiting (1 to 1000).
        #[arg(long, default_value_t = DEFAULT_WEIGHT)]
        weight: u32,
        /// The seller's name as change messages carry it (TOP `user_nick`, 1688 `userInfo`);
        /// default: the shop's name.
        #[arg(long)]
        seller: Option<String>,
    },
    /// Remove a shop from the ledger: its tokens are deleted, its schedules paused, and
    /// workers stop calling for it within a heartbeat (its pending items wait; `job cancel`
    /// ends them). Exit 2 when no such shop is served.
    Remove {
        /// The shop's name.
        shop: String,
        /// Its platform.
        #[arg(long)]
        platform: Platform,
    },
    /// Print the address to send a seller to: the platform's authorisation page for this
    /// app, coming back to `[platforms.<p>] redirect_uri` (the dashboard's `/oauth/callback`
    /// adds the shop). Valid for 30 minutes.
    AuthorizeUrl {
        /// The platform.
        #[arg(long)]
        platform: Platform,
        /// The shop's name once added (default: the seller's name on the platform).
        #[arg(long)]
        shop: Option<String>,
    },
    /// Exchange an authorisation code for the shop's tokens and add the shop (when the
    /// seller's browser came back to a callback that is not the dashboard's).
    Authorize {
        /// The platform.
        #[arg(long)]
        platform: Platform,
        /// The `code` the callback received (single use; TOP and 1688 end it within minutes).
        #[arg(long)]
        code: String,
        /// The `state` the callback received, when the link came from `authorize-url`
        /// (checked; it names the shop).
        #[arg(long)]
        state: Option<String>,
        /// The shop's name (default: the state's, else the seller's name).
        #[arg(long)]
        shop: Option<String>,
        /// Its weight (1 to 1000).
        #[arg(long, default_value_t = DEFAULT_WEIGHT)]
        weight: u32,
    },
    /// Seal every shop's tokens in the ledger under the token key's first key. Rotate a key:
    /// put the new key first in SYNCFLEET_TOKEN_KEY with the old one after it on every
    /// worker, run this, then drop the old key. Workers keep running throughout.
    Rekey,
    /// Let a paused shop run again (after its seller authorised the app anew and its session
    /// holds the new token). A worker holding a different session for the shop resumes it by
    /// itself.
    Resume {
        /// The shop's name (`[shops.<name>]`, the ledger's, or the name a job gave).
        shop: String,
        /// Only its pause on this platform (default: on every platform).
        #[arg(long)]
        platform: Option<Platform>,
    },
}

impl From<OnboardError> for CliError {
    fn from(e: OnboardError) -> Self {
        if e.is_input_error() {
            CliError::input(e.to_string())
        } else {
            CliError::runtime(e.to_string())
        }
    }
}

fn token_keys() -> Result<Option<SealKeys>, CliError> {
    SealKeys::from_env().map_err(|e| CliError::input(e.to_string()))
}

fn onboarding(cfg: Config, store: &Store) -> Result<Onboarding, CliError> {
    Ok(Onboarding::new(
        Arc::new(cfg),
        store.clone(),
        token_keys()?,
    )?)
}

fn said(o: &Onboarded) -> String {
    format!(
        "shop {} on {}: {}{}{}; workers serve it from their next look",
        o.shop,
        o.platform,
        if o.new { "added" } else { "authorised anew" },
        o.seller
            .as_deref()
            .map(|s| format!(", seller {s}"))
            .unwrap_or_default(),
        if o.renewable {
            ", token renewed before it ends"
        } else {
            ", no refresh token: its token is not renewed"
        }
    )
}

fn describe(s: &LedgerShop) -> String {
    let token = match (s.removed_at, s.token_remaining_ms, &s.token_error) {
        (Some(at), _, _) => format!("REMOVED {}", at.format("%Y-%m-%d %H:%M:%S UTC")),
        (None, _, Some(e)) => format!("token renewal failing: {e}"),
        (None, Some(ms), None) if ms <= 0 => "token ENDED".to_string(),
        (None, Some(ms), None) => format!("token ends in {}", human(ms)),
        (None, None, None) => "token end not known".to_string(),
    };
    format!(
        "{:<20} {:<8} weight {:<4} ledger  seller {:<16} {}{}",
        s.shop,
        s.platform.as_str(),
        s.weight,
        s.seller.as_deref().unwrap_or("-"),
        token,
        if s.renewable { ", renewed" } else { "" }
    )
}

fn human(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        s if s >= 86_400 => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
        s if s >= 3600 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        s => format!("{}m {}s", s / 60, s % 60),
    }
}

fn now_s() -> i64 {
    crate::clock::Clock::system().utc().timestamp()
}

pub(crate) async fn run(cli: &Cli, cmd: &ShopCommand) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
    match cmd {
        ShopCommand::List => {
            let cfg = cli.load_config()?;
            let pauses = store.shop_pauses().await?;
            let ledger = store.ledger_shops().await?;
            let paused =
                |p: Platform, name: &str| pauses.iter().any(|x| x.shop == name && x.platform == p);
            for (name, shop) in cfg.shops() {
                println!(
                    "{name:<20} {:<8} weight {:<4} config  session ${:<22} {}",
                    shop.platform.as_str(),
                    shop.weight,
                    shop.session_env,
                    if paused(shop.platform, name) {
                        "PAUSED"
                    } else {
                        "ok"
                    }
                );
            }
            for s in ledger.iter().filter(|s| s.removed_at.is_none()) {
                println!(
                    "{}{}",
                    describe(s),
                    if paused(s.platform, &s.shop) {
                        ", PAUSED"
                    } else {
                        ""
                    }
                );
            }
            if cfg.shops().next().is_none() && ledger.iter().all(|s| s.removed_at.is_some()) {
                println!(
                    "no shops configured or added: each platform's own session is its one shop"
                );
            }
            for p in &pauses {
                println!("{p}");
            }
            Ok(())
        }
        ShopCommand::Show { shop, platform } => {
            let matches: Vec<LedgerShop> = store
                .ledger_shops()
                .await?
                .into_iter()
                .filter(|s| &s.shop == shop && platform.is_none_or(|p| p == s.platform))
                .collect();
            let s = match matches.as_slice() {
                [one] => one,
                [] => {
                    return Err(CliError::input(format!(
                        "the ledger has no shop `{shop}`{} (`syncfleet shop list` shows them all)",
                        platform.map(|p| format!(" on {p}")).unwrap_or_default()
                    )))
                }
                _ => {
                    return Err(CliError::input(format!(
                        "shop `{shop}` is on several platforms: say which with --platform"
                    )))
                }
            };
            println!("{}", describe(s));
            println!("added {}", s.added_at.format("%Y-%m-%d %H:%M:%S UTC"));
            if let Some(pause) = store.shop_pause(s.platform, &s.shop).await? {
                println!("{pause}");
            }
            Ok(())
        }
        ShopCommand::Add {
            shop,
            platform,
            session_env,
            refresh_env,
            expires_in,
            weight,
            seller,
        } => {
            let read = |var: &str| read_secret_env(var).map_err(|e| CliError::input(e.to_string()));
            let tokens = ShopTokens {
                access: read(session_env)?,
                refresh: refresh_env.as_deref().map(read).transpose()?,
                lifetime: expires_in.map(Duration::from_secs),
            };
            let added = onboarding(cli.load_config()?, &store)?
                .add(*platform, shop, *weight, seller.clone(), tokens)
                .await?;
            println!("{}", said(&added));
            Ok(())
        }
        ShopCommand::Remove { shop, platform } => {
            if !store.remove_ledger_shop(*platform, shop).await? {
                return Err(CliError::input(format!(
                    "no shop `{shop}` on {platform} is served from the ledger (`syncfleet shop list`)"
                )));
            }
            println!(
                "shop {shop} on {platform}: removed, its tokens deleted and its schedules paused; \
                 workers stop calling for it within a heartbeat"
            );
            Ok(())
        }
        ShopCommand::AuthorizeUrl { platform, shop } => {
            let url = onboarding(cli.load_config()?, &store)?.link(
                *platform,
                shop.as_deref(),
                now_s(),
            )?;
            println!("{url}");
            Ok(())
        }
        ShopCommand::Authorize {
            platform,
            code,
            state,
            shop,
            weight,
        } => {
            let o = onboarding(cli.load_config()?, &store)?;
            let code = Secret::new(code.clone());
            let added = match (state, shop) {
                (Some(state), None) => {
                    o.complete(*platform, &code, state, *weight, now_s())
                        .await?
                }
                (Some(_), Some(_)) => {
                    return Err(CliError::input(
                        "give --state or --shop, not both: the state names the shop",
                    ))
                }
                (None, shop) => {
                    o.exchange(*platform, &code, shop.as_deref(), *weight)
                        .await?
                }
            };
            println!("{}", said(&added));
            Ok(())
        }
        ShopCommand::Rekey => {
            let cfg = cli.load_config()?;
            let ring = token_keys()?.ok_or_else(|| {
                CliError::input(
                    "no token key: set SYNCFLEET_TOKEN_KEY (the new key first, the old ones after it)",
                )
            })?;
            let report = crate::jobs::tokens::rekey(&cfg, &store, &ring).await?;
            println!(
                "rekey: {} shop(s) sealed under key {}, {} already were{}",
                report.resealed,
                ring.ids().first().map(String::as_str).unwrap_or("?"),
                report.current,
                if report.unopened.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} could not be opened with these keys: {}",
                        report.unopened.len(),
                        report.unopened.join(", ")
                    )
                }
            );
            if report.unopened.is_empty() {
                Ok(())
            } else {
                Err(CliError::runtime(
                    "some shops' tokens are sealed under a key this process does not hold: add it to SYNCFLEET_TOKEN_KEY (after the first) and run rekey again",
                ))
            }
        }
        ShopCommand::Resume { shop, platform } => {
            let n = store.resume_shop(*platform, shop, None).await?;
            if n == 0 {
                return Err(CliError::input(format!(
                    "shop `{shop}` is not paused{}",
                    platform.map(|p| format!(" on {p}")).unwrap_or_default()
                )));
            }
            println!(
                "shop {shop}: resumed ({n} pause(s) lifted); its tasks run on their next look"
            );
            Ok(())
        }
    }
}
