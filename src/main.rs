use clap::Parser;
use syncfleet::cli::{self, Cli};

fn main() {
    let cli = Cli::parse();
    // The demo prints a results table: keep per-call lines and routine info out of it.
    let default_filter = match cli.command {
        cli::Command::Demo(_) => "warn",
        _ => "info",
    };
    syncfleet::logging::init_with_default(cli.log_format, default_filter);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = match runtime.block_on(cli::run(cli)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            e.code
        }
    };
    std::process::exit(code);
}
