//! The `metaroce` command line: argument definitions and the commands
//! behind them. `main.rs` only calls [`run`].

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit codes, stated once so that scripts can rely on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything worked, every file was valid.
    Ok = 0,
    /// A topology or scenario had problems (each was printed), or a run hit a limit.
    Invalid = 1,
    /// Arguments were wrong (clap's own code for usage errors).
    Usage = 2,
    /// Something failed to run: a file could not be read or written.
    Failure = 3,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> Self {
        ExitCode::from(e as u8)
    }
}

/// An error whose exit code is not [`Exit::Failure`]: wrong arguments
/// ([`usage`]) or bad input. `main` finds it anywhere in the
/// error's chain, so context may be added on the way up.
#[derive(Debug)]
pub struct ExitError {
    pub exit: Exit,
    pub message: String,
}

impl std::fmt::Display for ExitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExitError {}

/// Wrong arguments: exit 2.
pub(crate) fn usage(message: impl Into<String>) -> anyhow::Error {
    ExitError { exit: Exit::Usage, message: message.into() }.into()
}

/// The exit code an error stands for: 3 unless it carries another.
pub fn exit_code_of(err: &anyhow::Error) -> Exit {
    err.chain().find_map(|e| e.downcast_ref::<ExitError>()).map_or(Exit::Failure, |e| e.exit)
}

/// True when the error is a write to a closed pipe (`metaroce ... | head`):
/// the reader has all it wanted, so the command ends quietly.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `println!` that returns the write error instead of panicking on a
/// closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)?
    }};
}

/// `print!` that returns the write error instead of panicking.
macro_rules! outp {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)?
    }};
}

mod controller;
mod host;
mod links;
mod program;
mod runs;
mod serve;
mod sim;
mod suite;
mod sweep;
mod topo;

const EXIT_CODES: &str = "Exit codes: 0 success; 1 the topology, scenario, snapshot or P4Info has problems \
(all are printed), or a simulation hit a limit; \
2 wrong arguments; 3 a file could not be read or written, or switches could not be reached.\n\
Logging: -v for more, or METAROCE_LOG=debug.";

/// Congestion-aware adaptive routing for RoCEv2 fabrics.
#[derive(Debug, Parser)]
#[command(
    name = "metaroce",
    version,
    about = "Congestion-aware adaptive routing for RoCEv2 fabrics",
    after_help = EXIT_CODES
)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check, inspect, generate and draw topology files.
    #[command(subcommand)]
    Topo(topo::TopoCommand),
    /// Simulate a scenario on the packet-level fabric model.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// Run the controller, take and restore snapshots, replay recordings.
    #[command(subcommand)]
    Controller(controller::ControllerCommand),
    /// Host side: serve this host's RoCE NIC counters, or scrape an exporter.
    #[command(subcommand)]
    Host(host::HostCommand),
    /// Check this host for RoCE problems: PASS/WARN/FAIL per check, with the fix.
    Doctor(host::DoctorArgs),
}

/// Logs go to stderr so that command output stays clean on stdout. A
/// running controller says at the default level what it did to each switch
/// (its own info lines; not every event, not the driver's).
pub fn init_tracing(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let daemon = matches!(cli.command, Command::Controller(controller::ControllerCommand::Run(_)));
    let default = match cli.verbose {
        0 if daemon => "warn,metaroce_controller=info",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("METAROCE_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    // Colours only on a terminal: a log redirected to a file stays plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

/// Runs a parsed command.
pub fn run(cli: Cli) -> anyhow::Result<Exit> {
    match cli.command {
        Command::Topo(cmd) => topo::run(cmd),
        Command::Sim(cmd) => sim::run(cmd),
        Command::Controller(cmd) => controller::run(cmd),
        Command::Host(cmd) => host::run(cmd),
        Command::Doctor(args) => host::doctor(args),
    }
}
