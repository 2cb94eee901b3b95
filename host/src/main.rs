//! The `streamline` command line.

mod cli;

use clap::Parser;

fn main() {
    let args = cli::Cli::parse();
    if let Err(e) = cli::run(args) {
        // One clear line, no backtrace.
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
