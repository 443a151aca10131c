//! `corelane topo`: the CPUs this machine offers lanes.

use std::process::ExitCode;

use clap::Args;
use corelane::topology::Topology;

#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: TopoArgs) -> anyhow::Result<ExitCode> {
    let topo = Topology::read()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&topo)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} online CPUs: {}", topo.cpus.len(), topo.online());
    for c in &topo.cpus {
        println!(
            "cpu {:>3}  package {}  core {:>3}  node {}  smt {:?}  llc shared with {:?}",
            c.cpu, c.package, c.core, c.numa_node, c.smt_siblings, c.llc_shared
        );
    }
    Ok(ExitCode::SUCCESS)
}
