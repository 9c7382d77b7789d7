//! The `metaroce` command. Everything happens in the library; this file
//! parses the arguments, sets up logging and maps the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

// mimalloc instead of the system allocator: the controller allocates on
// every reaction (entries, maps, gRPC frames) from many tasks at once, and
// glibc's malloc made that a quarter of its CPU, with lock contention
// between threads. The reaction bench (which uses the same allocator) went
// from 23-32 ms to 8-10 ms p50 under the digest storm with it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = metaroce_cli::Cli::parse();
    metaroce_cli::init_tracing(&cli);
    match metaroce_cli::run(cli) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("error: {err:#}");
            metaroce_cli::Exit::Failure.into()
        }
    }
}
