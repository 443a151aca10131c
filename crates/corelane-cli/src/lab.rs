//! `corelane lab`: run experiments.

use std::process::ExitCode;

use clap::Args;

#[derive(Debug, Args)]
pub struct LabArgs {}

pub fn run(_args: LabArgs) -> anyhow::Result<ExitCode> {
    Ok(ExitCode::SUCCESS)
}
