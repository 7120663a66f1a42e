//! `syncfleet config check`.

use super::{Cli, CliError};
use crate::config::Config;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the config: unknown keys, burst/rate bounds, keep-alive vs idle close, the
    /// timeout chain, secrets present in the environment, the listing map `[listing] map`
    /// names. Exit 2 on any error.
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
