//! The `metaroce` command. Everything happens in the library; this file
//! parses the arguments, sets up logging and maps the outcome to an exit code.

use std::process::ExitCode;

use clap::Parser;

// mimalloc instead of the system allocator: the controller allocates on
// every reaction (entries, maps, gRPC frames) from many tasks at once, and
// glibc's malloc made that a quarter of its CPU, with lock contention
// between threads. The reaction bench (which uses the same allocator) went
// from 23-32 ms to 8-10 ms p50 under the digest storm with it. The
// `system-alloc` feature keeps the system allocator instead, for heap
// profilers that hook malloc (heaptrack): mimalloc maps its own memory.
#[cfg(not(feature = "system-alloc"))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let cli = metaroce_cli::Cli::parse();
    metaroce_cli::init_tracing(&cli);
    match metaroce_cli::run(cli) {
        Ok(code) => code.into(),
        Err(err) if metaroce_cli::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            metaroce_cli::exit_code_of(&err).into()
        }
    }
}

/// Output to a reader that went away (`metaroce ... | head -1`) ends the
/// command quietly. Our own writes return the error; this catches the
/// `eprintln!` of progress lines and anything else the standard library
/// prints, which panics on a closed pipe.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let text = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if text.starts_with("failed printing to std") && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}
