//! What a dry run of `lab latency` lists: each pair's commands on each host — the server on
//! the rx host (nginx's configuration written first), the ping-pong client on the first
//! load host, and every load host's share of the lowest offered load — started and written
//! nothing.

use super::sides::{self, Where};
use super::{hosts, LatencyOptions, Pair};
use crate::stage::load::split;
use crate::stage::servers::{self, ServerKind, Stage};
use crate::testbed::PeerStep;
use crate::LabError;

/// The steps of every pair in `pairs`, in order.
pub fn steps(
    at: &Where<'_>,
    stage: &Stage<'_>,
    pairs: &[Pair],
    opts: &LatencyOptions,
) -> Result<Vec<PeerStep>, LabError> {
    let rx = at.rx.name();
    let mut steps = Vec::new();
    for pair in pairs {
        let rates = match pair {
            Pair::Udp { .. } => &opts.udp_rates,
            Pair::Http { .. } => &opts.http_rates,
        };
        let row = row_of(pair, at, rates);
        let mut step = |host: String, command: String| {
            steps.push(PeerStep { row: row.clone(), host, command })
        };
        let lowest = rates.first().copied();
        let shares = hosts::shares(lowest, at.load)?;
        match *pair {
            Pair::Udp { server, client } => {
                step(rx.clone(), sides::udp_server_launch(at, server, client)?.shown());
                let first = &at.load[0].host;
                step(
                    first.name(),
                    sides::udp_client_launch(at, first, server, client, None)?.shown(),
                );
                for (l, &share) in at.load.iter().zip(&shares).filter(|_| lowest.is_some()) {
                    let launch = sides::udp_client_launch(at, &l.host, server, client, share)?;
                    step(l.host.name(), launch.shown());
                }
            }
            Pair::Http { server } => {
                let kind = sides::http_kind(server);
                if kind == ServerKind::Nginx {
                    step(rx.clone(), format!("write {}/nginx.conf", servers::conf_dir(stage)));
                }
                step(rx.clone(), servers::server_launch(stage, kind)?.shown());
                let connections = split(stage.connections as u64, at.load.len());
                for ((l, share), c) in at.load.iter().zip(&shares).zip(connections) {
                    let mut words = vec![l.host.corelane()?];
                    let rate = share.unwrap_or(0);
                    words.extend(sides::http_load_args(stage, rate, c, stage.duration));
                    step(l.host.name(), shell_words::join(words));
                }
            }
        }
    }
    Ok(steps)
}

/// How a dry run heads a pair's steps: its loads and where they come from.
fn row_of(pair: &Pair, at: &Where<'_>, rates: &[u64]) -> String {
    let rates: Vec<String> = rates.iter().map(u64::to_string).collect();
    let hosts = at.load.len();
    let load = format!(
        "{}/s offered, each split over {hosts} load host{} (shown at the lowest)",
        rates.join(", "),
        if hosts == 1 { "" } else { "s" }
    );
    match pair {
        Pair::Udp { .. } => {
            format!("{}: ping-pong from {}, then {load}", pair.label(), at.load[0].host.name())
        }
        Pair::Http { .. } => format!("{}: {load}", pair.label()),
    }
}
