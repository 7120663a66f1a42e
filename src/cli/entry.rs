//! The program's whole life in the library: logging, the async runtime, the command, the exit
//! code. `src/main.rs` only calls [`main`]. Here and not in the program because the program's
//! crate would otherwise compile the commands' whole async call tree itself (their futures are
//! first polled by its `block_on`), a second time beside the library's copy in a release build,
//! which shares no generic code between crates: the release build's longest unit
//! (docs/design.md, "Layers"; BENCHMARKS.md, "The house").

use clap::Parser;

use crate::app::logging::{self, LogOptions};

/// Parse the command line, run the command, and exit with its code (`process::exit`: nothing
/// waits for the runtime's blocking threads, and no destructor runs after the log is finished).
pub fn main() -> ! {
    let cli = super::Cli::parse();
    if !cli.command.serves() {
        // A report piped into `head` ends quietly when `head` has read enough, as Unix tools
        // do, instead of panicking on the closed pipe. Rust ignores SIGPIPE so that a socket
        // write fails with an error rather than killing the process; its sockets send with
        // MSG_NOSIGNAL either way, so only pipes (stdout) see the default again. Long-running
        // commands keep ignoring it.
        // SAFETY: called before any thread is started; SIG_DFL is a valid disposition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // The demo prints a results table: keep per-call lines and routine info out of it.
    let default_filter = match cli.command {
        super::Command::Demo(_) => "warn",
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
    let result = runtime.block_on(super::run(cli));
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
