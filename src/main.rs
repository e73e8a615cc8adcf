//! The `cairn` binary: parses the command line and dispatches to `cairn::cli::commands`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = cairn::cli::Cli::parse();
    cairn::cli::run(cli)
}
