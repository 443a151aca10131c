//! The `corelane` command: clap subcommands over the library and the lab, nothing else.
#![deny(unsafe_code)]
#![warn(clippy::too_many_lines)]

mod apply;
mod args;
mod copy;
mod guard;
mod http;
mod lab;
mod metrics;
mod plan;
mod progress;
mod report;
mod run;
mod topo;
mod udp;
mod udp_latency;
mod write_file;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Multicore-aware packet, connection and file I/O for Linux, proved by measurement.
#[derive(Debug, Parser)]
#[command(name = "corelane", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Send or receive UDP datagrams with batched syscalls, GSO/GRO and reuseport lanes.
    #[command(subcommand)]
    Udp(udp::UdpCommand),
    /// Serve HTTP from per-CPU lanes that recycle their buffers, connection slots and events.
    #[command(subcommand)]
    Serve(http::ServeCommand),
    /// Load an HTTP server with closed-loop connections; requests/s and latency percentiles.
    #[command(subcommand)]
    Load(http::LoadCommand),
    /// Copy a file or (with -r) a tree by the fastest method, never leaving a half-written file.
    Copy(copy::CopyArgs),
    /// Run an experiment and print its table (`corelane lab` lists them).
    Lab(lab::LabArgs),
    /// Draw saved lab runs (`lab NAME --json FILE`) as one self-contained HTML page of charts.
    Report(report::ReportArgs),
    /// Show the CPUs, caches, NUMA nodes and NICs (queues, masks, interrupts) of this machine.
    Topo(topo::TopoArgs),
    /// Propose interrupt, syscall and application CPUs for a NIC (core partitioning).
    Plan(plan::PlanArgs),
    /// Show (dry run) or make (--yes) the changes a plan asks for, saving the old values.
    Apply(apply::ApplyArgs),
    /// Restore the settings saved by `corelane apply --yes`.
    Revert(apply::RevertArgs),
    /// Run an unmodified program on the application CPUs, its network system calls on
    /// syscall threads pinned to the syscall CPUs (core partitioning); returns its exit status.
    Run(run::RunArgs),
    /// Run a program for the lab on a remote host, ending it when stdin closes.
    #[command(hide = true)]
    Guard(guard::GuardArgs),
    /// Write a kernel setting or a file of the lab's private directory on a remote host.
    #[command(hide = true)]
    WriteFile(write_file::WriteFileArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Udp(cmd) => udp::run(cmd),
        Command::Serve(cmd) => http::serve(cmd),
        Command::Load(cmd) => http::load(cmd),
        Command::Copy(args) => copy::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Report(args) => report::run(args),
        Command::Topo(args) => topo::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Apply(args) => apply::run_apply(args),
        Command::Revert(args) => apply::run_revert(args),
        Command::Run(args) => run::run(args),
        Command::Guard(args) => guard::run(args),
        Command::WriteFile(args) => write_file::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // Our errors often quote their cause already; print each cause only once.
            let mut message = e.to_string();
            for cause in e.chain().skip(1) {
                let text = cause.to_string();
                if !message.contains(&text) {
                    message.push_str(": ");
                    message.push_str(&text);
                }
            }
            eprintln!("corelane: {message}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every `--help` of every command, however deep, speaks the user's words: the studies by
    /// their technique, never by our numbering of them or of our issues.
    #[test]
    fn no_help_names_a_seed_or_an_issue() {
        fn walk(command: &mut clap::Command, path: &str, found: &mut Vec<String>) {
            let help = command.render_long_help().to_string();
            for line in help.lines() {
                let lower = line.to_lowercase();
                if lower.contains("seed") || lower.contains("issue") {
                    found.push(format!("{path}: {line}"));
                }
            }
            for sub in command.get_subcommands_mut() {
                let path = format!("{path} {}", sub.get_name());
                walk(sub, &path, found);
            }
        }
        let mut found = Vec::new();
        let mut cli = super::Cli::command();
        cli.build();
        walk(&mut cli, "corelane", &mut found);
        assert!(found.is_empty(), "help text naming a seed or an issue:\n{}", found.join("\n"));
    }
}
