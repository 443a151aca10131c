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
    #[arg(long, value_parser = parse_duration, required_unless_present = "revert_on_close")]
    life: Option<Duration>,
    /// Run no program: hold until stdin closes, then restore what this revert file saved.
    #[arg(long, value_name = "FILE", conflicts_with = "command")]
    revert_on_close: Option<std::path::PathBuf>,
    /// The program and its arguments.
    #[arg(
        required_unless_present = "revert_on_close",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    command: Vec<String>,
}

pub fn run(args: GuardArgs) -> anyhow::Result<ExitCode> {
    if let Some(file) = &args.revert_on_close {
        let life = args.life.unwrap_or(Duration::MAX);
        corelane_lab::remote::guard::keep(file, life, &mut std::io::stdout())?;
        return Ok(ExitCode::SUCCESS);
    }
    let (program, rest) = args.command.split_first().expect("clap requires the command");
    let life = args.life.expect("clap requires --life with a command");
    let (status, _) =
        corelane_lab::remote::guard::run(program, rest, life, &mut std::io::stdout())?;
    Ok(ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8))
}
