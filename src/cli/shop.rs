//! `syncfleet shop list | resume NAME`: the shops the app serves and the ones paused because
//! the platform refused their session (docs/design.md, "Shops").

use crate::cli::{Cli, CliError};
use crate::platform::Platform;
use crate::store::Store;
use clap::Subcommand;

/// The shop subcommands.
#[derive(Debug, Subcommand)]
pub enum ShopCommand {
    /// The configured shops (platform, weight, session variable) and every paused shop with
    /// why and since when. Exit 0 either way.
    List,
    /// Let a paused shop run again (after its seller authorised the app anew and its session
    /// variable holds the new session). A worker holding a different session for the shop
    /// resumes it by itself.
    Resume {
        /// The shop's name (`[shops.<name>]`, or the name a job gave).
        shop: String,
        /// Only its pause on this platform (default: on every platform).
        #[arg(long)]
        platform: Option<Platform>,
    },
}

pub(crate) async fn run(cli: &Cli, cmd: &ShopCommand) -> Result<(), CliError> {
    let store = Store::connect(&cli.db).await?;
    match cmd {
        ShopCommand::List => {
            let cfg = cli.load_config()?;
            let pauses = store.shop_pauses().await?;
            let mut any = false;
            for (name, shop) in cfg.shops() {
                any = true;
                let paused = pauses
                    .iter()
                    .any(|p| p.shop == name && p.platform == shop.platform);
                println!(
                    "{name:<20} {:<8} weight {:<4} session ${:<28} {}",
                    shop.platform.as_str(),
                    shop.weight,
                    shop.session_env,
                    if paused { "PAUSED" } else { "ok" }
                );
            }
            if !any {
                println!("no [shops] configured: each platform's own session is its one shop");
            }
            for p in &pauses {
                println!("{p}");
            }
            Ok(())
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
