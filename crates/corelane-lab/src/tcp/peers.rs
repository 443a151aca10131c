//! `lab tcp`'s peers on the hosts that run them: nginx and lighttpd serve on the rx host
//! (their configurations in its private run directory when it is another machine), wrk loads
//! from the (first) tx host, each under `corelane guard` there like corelane's own rows. A
//! peer is skipped only when its program is missing on the host that must run it, in one
//! line naming that host and the package to install.

use crate::host::Host;
use crate::stage::load::split;
use crate::stage::servers::{self, Peer, ServerKind, Stage};
use crate::testbed::{PeerStep, Testbed};
use crate::LabError;

/// The host that runs `peer`: the servers on the rx side, the load generator on the tx side.
fn host_of(testbed: &Testbed, peer: Peer) -> Host {
    match peer {
        Peer::Wrk => testbed.tx(),
        Peer::Nginx | Peer::Lighttpd => testbed.rx(),
    }
}

/// The peers of `asked` whose program is found on the host that runs them; each missing one
/// goes to `skipped` with the reason.
pub fn available(testbed: &Testbed, asked: &[Peer], skipped: &mut Vec<String>) -> Vec<Peer> {
    let mut found = Vec::new();
    for &peer in asked {
        let host = host_of(testbed, peer);
        match host.find_program(peer.program()) {
            Some(_) => found.push(peer),
            None => skipped.push(peer.not_installed(&host)),
        }
    }
    found
}

/// What the peer rows would run on each host (what a dry run shows): each server's
/// configuration written and the server started on the rx host, `corelane load` on every
/// load host for each workload, wrk on the tx host against corelane's default server.
pub fn steps(stage: &Stage<'_>, peers: &[Peer]) -> Result<Vec<PeerStep>, LabError> {
    let testbed = stage.testbed;
    let rx = testbed.rx().name();
    let load = testbed.load_hosts();
    let connections = split(stage.connections as u64, load.len());
    let mut steps = Vec::new();
    for &peer in peers {
        let step = |host: &str, command: String| PeerStep {
            row: row_of(peer),
            host: host.to_string(),
            command,
        };
        let kind = match peer {
            Peer::Nginx => ServerKind::Nginx,
            Peer::Lighttpd => ServerKind::Lighttpd,
            Peer::Wrk => {
                let default = servers::CONFIGS.iter().find(|c| c.id == "recycling");
                let server = ServerKind::Corelane(*default.unwrap_or(&servers::CONFIGS[0]));
                steps.push(step(&rx, servers::server_launch(stage, server)?.shown()));
                let tx = testbed.tx().name();
                steps.push(step(&tx, servers::wrk_launch(stage)?.shown()));
                continue;
            }
        };
        let dir = servers::conf_dir(stage);
        let written = match kind {
            ServerKind::Lighttpd => format!("write {dir}/lighttpd.conf and {dir}/www/index.txt"),
            _ => format!("write {dir}/nginx.conf"),
        };
        steps.push(step(&rx, written));
        steps.push(step(&rx, servers::server_launch(stage, kind)?.shown()));
        for close in [false, true] {
            for (l, &n) in load.iter().zip(&connections) {
                let mut words = vec![l.host.corelane()?];
                words.extend(servers::load_args(stage, n, close));
                steps.push(step(&l.host.name(), shell_words::join(words)));
            }
        }
    }
    Ok(steps)
}

/// How a dry run heads a peer's steps.
fn row_of(peer: Peer) -> String {
    match peer {
        Peer::Nginx => "nginx (1 worker, return 200), keep-alive then close".into(),
        Peer::Lighttpd => "lighttpd (1 process, static file), keep-alive then close".into(),
        Peer::Wrk => "load generators: wrk beside corelane load, same corelane server".into(),
    }
}
