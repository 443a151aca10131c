//! `corelane write-file`: how the lab writes a kernel setting or a file of its private
//! directory on a namespace or remote host, as it does here (`corelane::fs::write_in_place`:
//! an existing file opened as it is, a missing one only created new, no symlink followed).
//! Not for people; hidden from `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct WriteFileArgs {
    /// The file to write.
    path: PathBuf,
    /// What to write (the whole file).
    #[arg(allow_hyphen_values = true)]
    contents: String,
}

pub fn run(args: WriteFileArgs) -> anyhow::Result<ExitCode> {
    corelane::fs::write_in_place(&args.path, args.contents.as_bytes())
        .with_context(|| format!("cannot write {}", args.path.display()))?;
    Ok(ExitCode::SUCCESS)
}
