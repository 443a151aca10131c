//! `corelane guard`: how the lab runs a process on a remote host (see
//! `corelane_lab::remote::guard`). Not for people; hidden from `--help`.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use crate::args::parse_duration;

#[derive(Debug, Args)]
pub struct GuardArgs {
    /// End the program after this long, whatever else happens (with --revert-on-close, restore
    /// then; without it, a revert keeper holds until stdin closes).
    #[arg(long, value_parser = parse_duration, required_unless_present_any = ["revert_on_close", "clock", "remove_on_close"])]
    life: Option<Duration>,
    /// Run no program: for each line read, print this host's wall clock (nanoseconds since the
    /// Unix epoch), until stdin closes; how the lab measures the host's clock against its own.
    #[arg(long, conflicts_with_all = ["command", "revert_on_close", "start_at"])]
    clock: bool,
    /// Run no program: hold until stdin closes, then restore what this revert file saved.
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    revert_on_close: Option<std::path::PathBuf>,
    /// Run no program: hold until stdin closes, then, if the lab run that made this private
    /// directory is gone (killed), remove the directory whole.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["command", "revert_on_close", "clock"])]
    remove_on_close: Option<std::path::PathBuf>,
    /// Start the program at this time (nanoseconds since the Unix epoch on this host's
    /// clock), not now: how the lab starts the load on several hosts together.
    #[arg(long, value_name = "EPOCH_NS", conflicts_with = "revert_on_close")]
    start_at: Option<u64>,
    /// The program and its arguments.
    #[arg(
        required_unless_present_any = ["revert_on_close", "clock", "remove_on_close"],
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<String>,
}

pub fn run(args: GuardArgs) -> anyhow::Result<ExitCode> {
    if args.clock {
        corelane_lab::remote::clock::answer(&mut std::io::stdin().lock(), &mut std::io::stdout())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = &args.remove_on_close {
        corelane_lab::workdir::remove_when_closed(dir, std::io::stdin().lock())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(file) = &args.revert_on_close {
        let life = args.life.unwrap_or(Duration::MAX);
        corelane_lab::remote::guard::keep(file, life, &mut std::io::stdout())?;
        return Ok(ExitCode::SUCCESS);
    }
    let (program, rest) = args.command.split_first().expect("clap requires the command");
    let life = args.life.expect("clap requires --life with a command");
    let start_at = args.start_at.map(|ns| std::time::UNIX_EPOCH + Duration::from_nanos(ns));
    let (status, _) =
        corelane_lab::remote::guard::run(program, rest, life, start_at, &mut std::io::stdout())?;
    Ok(ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8))
}
