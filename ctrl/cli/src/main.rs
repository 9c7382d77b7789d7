//! The `metaroce` command. Everything happens in the library; this file
//! parses the arguments, sets up logging and maps the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = metaroce_cli::Cli::parse();
    metaroce_cli::init_tracing(cli.verbose);
    match metaroce_cli::run(cli) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("error: {err:#}");
            metaroce_cli::Exit::Failure.into()
        }
    }
}
