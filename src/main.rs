use clap::Parser;
use syncfleet::app::logging::{self, LogOptions};
use syncfleet::cli::{self, Cli};

fn main() {
    let cli = Cli::parse();
    // The demo prints a results table: keep per-call lines and routine info out of it.
    let default_filter = match cli.command {
        cli::Command::Demo(_) => "warn",
        _ => "info",
    };
    let format = cli.log_format;
    // Non-blocking: a slow stderr must not stall the workers. The guard is finished below,
    // before `process::exit` (which runs no destructors) and before our own last lines.
    let log = logging::init_with(LogOptions {
        format,
        default_filter,
        metrics: cli.command.wants_metrics(),
        non_blocking: true,
    });
    let mut builder = if cli.command.single_threaded() {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            log.finish();
            logging::print_error(
                format,
                &format!("error: cannot start the async runtime: {e}"),
                1,
            );
            std::process::exit(1);
        }
    };
    let result = runtime.block_on(cli::run(cli));
    log.finish();
    logging::report_dropped(format);
    let code = match result {
        Ok(()) => 0,
        Err(e) => {
            logging::print_error(format, &e.to_string(), e.code);
            e.code
        }
    };
    std::process::exit(code);
}
