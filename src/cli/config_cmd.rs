//! `syncfleet config check`.

use super::{Cli, CliError};
use crate::config::Config;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config: unknown keys, burst/rate bounds, keep-alive vs idle close, the
    /// timeout chain, secrets present in the environment (platforms, shops, the hooks'
    /// signing key), the listing map `[listing] map` names, and `--redis` (its form and the
    /// certificate files the environment names; no connection is made). Whatever `work`
    /// would refuse at start is an error here. Exit 2 on any error.
    Check,
}

pub(crate) async fn run(cli: &Cli, cmd: &ConfigCommand) -> Result<(), CliError> {
    match cmd {
        ConfigCommand::Check => {
            let cfg = Config::load(&cli.config)?;
            let mut errors = 0;
            for w in &cfg.warnings {
                println!("{w}");
            }
            for (platform, pc) in &cfg.platforms {
                for res in [pc.secret().map(|_| ()), pc.session().map(|_| ())] {
                    if let Err(msg) = res {
                        // Missing secrets are reported, never their values.
                        println!(
                            "error: {}: key `platforms.{platform}`: {msg}",
                            cfg.file.display()
                        );
                        errors += 1;
                    }
                }
            }
            // Each shop's session (and refresh token) variable, as a worker reads them.
            for (name, shop) in cfg.shops() {
                let vars = std::iter::once(&shop.session_env).chain(shop.refresh_env.as_ref());
                for var in vars {
                    if let Err(missing) = crate::config::read_secret_env(var) {
                        println!(
                            "error: {}: key `shops.{name}`: {missing}",
                            cfg.file.display()
                        );
                        errors += 1;
                    }
                }
            }
            // The hooks' signing key, when hooks are on.
            if let Err(missing) = cfg.hooks.secret() {
                println!(
                    "error: {}: key `hooks.secret_env`: {missing}",
                    cfg.file.display()
                );
                errors += 1;
            }
            // `--redis`: its form and the certificate files the environment names.
            if let Some(url) = &cli.redis {
                if let Err(e) = crate::redis_conn::target(url) {
                    println!("error: --redis {}: {e}", crate::secret::redact_url(url));
                    errors += 1;
                }
            }
            // The listing map `[listing] map` names: read and checked as enqueue would.
            if let Some(map) = cfg.listing_map_file() {
                if let Err(e) = crate::config::listing_map::ListingMap::load(&map) {
                    println!("{e}");
                    errors += e.0.len();
                }
            }
            if errors > 0 {
                return Err(CliError::input(format!(
                    "{errors} problem(s) in {}",
                    cfg.file.display()
                )));
            }
            println!(
                "{}: ok ({} platform(s), {} gate entr(ies), {} warning(s))",
                cfg.file.display(),
                cfg.platforms.len(),
                cfg.gates.len(),
                cfg.warnings.len()
            );
            Ok(())
        }
    }
}
