//! `corelane plan`: propose interrupt, syscall and application CPUs for a NIC.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use corelane::topology::{read_nics, CpuList, Topology};
use corelane::tune::{plan, Placement};

use crate::args::outln;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PolicyArg {
    /// IRQ CPUs on distinct cores near the NIC; apps off the busy cores' SMT siblings.
    Spread,
    /// Everything as close to the NIC as possible (the syscall CPU is the IRQ CPU's sibling).
    Pack,
    /// Like spread, but nothing leaves the NIC's NUMA node.
    Fenced,
    /// Name the CPUs yourself with --irq-cpus, --syscall-cpus and --app-cpus.
    Custom,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Toml,
    Json,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The network interface whose interrupts and queues the plan places.
    #[arg(long)]
    nic: String,
    /// Application CPUs to use (all that remain when absent).
    #[arg(long)]
    lanes: Option<usize>,
    #[arg(long, value_enum, default_value_t = PolicyArg::Spread)]
    policy: PolicyArg,
    #[arg(long, value_name = "CPUS")]
    irq_cpus: Option<CpuList>,
    #[arg(long, value_name = "CPUS")]
    syscall_cpus: Option<CpuList>,
    #[arg(long, value_name = "CPUS")]
    app_cpus: Option<CpuList>,
    /// Interrupt moderation to set (ethtool rx-usecs, seed 001's ITR), where the driver has it.
    #[arg(long, value_name = "USECS")]
    rx_usecs: Option<u32>,
    #[arg(long, value_enum, default_value_t = FormatArg::Toml)]
    format: FormatArg,
    /// Write the plan to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Read sysfs and procfs under this directory instead of /.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let topo = Topology::read_from(&args.root)?;
    let nics = read_nics(&args.root);
    let Some(nic) = nics.iter().find(|n| n.name == args.nic) else {
        let names: Vec<&str> = nics.iter().map(|n| n.name.as_str()).collect();
        anyhow::bail!(
            "no network interface `{}` here: choose one of {}",
            args.nic,
            names.join(", ")
        );
    };
    let placement = match args.policy {
        PolicyArg::Spread => Placement::Spread,
        PolicyArg::Pack => Placement::Pack,
        PolicyArg::Fenced => Placement::Fenced,
        PolicyArg::Custom => Placement::Custom {
            irq: args.irq_cpus.unwrap_or_default(),
            syscall: args.syscall_cpus.unwrap_or_default(),
            app: args.app_cpus.unwrap_or_default(),
        },
    };
    let mut proposal = plan(&topo, nic, args.lanes, &placement)?;
    if let Some(usecs) = args.rx_usecs {
        let has_coalescing = nic.settings.as_ref().and_then(|s| s.coalesce).is_some();
        anyhow::ensure!(
            has_coalescing,
            "{} has no interrupt moderation to set (its driver does not implement ethtool coalescing; veth and loopback never do)",
            nic.name
        );
        proposal.rx_usecs = Some(usecs);
    }
    let text = match args.format {
        FormatArg::Toml => {
            toml::to_string_pretty(&proposal).context("cannot format the plan as TOML")?
        }
        FormatArg::Json => serde_json::to_string_pretty(&proposal)?,
    };
    match &args.output {
        Some(path) => {
            corelane::fs::write_atomic(path, text.as_bytes())
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => {
            outln!("{}", text.trim_end());
        }
    }
    Ok(ExitCode::SUCCESS)
}
