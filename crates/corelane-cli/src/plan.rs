//! `corelane plan`: propose interrupt, syscall and application CPUs for a NIC.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use corelane::topology::{is_interface_name, queue_owners, read_nics, CpuList, Nic, Topology};
use corelane::tune::{plan_stack, Plan, RolePolicy};

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
    /// Interrupt moderation to set (ethtool rx-usecs, the web-serving study's ITR), where the driver has it.
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

/// Sets interrupt moderation on every device of the plan whose driver has it; a device
/// without it gets a note, and a plan where none has it is refused.
fn set_rx_usecs(proposal: &mut Plan, nics: &[Nic], usecs: u32) -> anyhow::Result<()> {
    let has_coalescing = |name: &str| {
        nics.iter()
            .any(|n| n.name == name && n.settings.as_ref().and_then(|s| s.coalesce).is_some())
    };
    if proposal.lower.is_empty() {
        anyhow::ensure!(
            has_coalescing(&proposal.device.nic),
            "{} has no interrupt moderation to set (its driver does not implement ethtool coalescing; veth and loopback never do)",
            proposal.device.nic
        );
        proposal.device.rx_usecs = Some(usecs);
        return Ok(());
    }
    for device in &mut proposal.lower {
        if has_coalescing(&device.nic) {
            device.rx_usecs = Some(usecs);
        } else {
            proposal.notes.push(format!(
                "{}: its driver does not implement ethtool coalescing: --rx-usecs left out",
                device.nic
            ));
        }
    }
    anyhow::ensure!(
        proposal.lower.iter().any(|d| d.rx_usecs.is_some()),
        "none of the devices under {} has interrupt moderation to set (their drivers do not implement ethtool coalescing)",
        proposal.device.nic
    );
    Ok(())
}

pub fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        is_interface_name(&args.nic),
        "`{}` is not an interface name: 1 to 15 characters, none of them '/', ':', whitespace or NUL (see `ip link`)",
        args.nic.escape_debug()
    );
    let topo = Topology::read_from(&args.root)?;
    let nics = read_nics(&args.root)?;
    let Some(nic) = nics.iter().find(|n| n.name == args.nic) else {
        let names: Vec<&str> = nics.iter().map(|n| n.name.as_str()).collect();
        anyhow::bail!(
            "no network interface `{}` here: choose one of {}",
            args.nic,
            names.join(", ")
        );
    };
    let placement = match args.policy {
        PolicyArg::Spread => RolePolicy::Spread,
        PolicyArg::Pack => RolePolicy::Pack,
        PolicyArg::Fenced => RolePolicy::Fenced,
        PolicyArg::Custom => RolePolicy::Custom {
            irq: args.irq_cpus.unwrap_or_default(),
            syscall: args.syscall_cpus.unwrap_or_default(),
            app: args.app_cpus.unwrap_or_default(),
        },
    };
    // A VLAN, bond, bridge or macvlan has no queues of its own that matter: the devices
    // below it do.
    let owners = queue_owners(&nics, &nic.name);
    let mut proposal = plan_stack(&topo, nic, &owners, args.lanes, &placement)?;
    if let Some(usecs) = args.rx_usecs {
        set_rx_usecs(&mut proposal, &nics, usecs)?;
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
