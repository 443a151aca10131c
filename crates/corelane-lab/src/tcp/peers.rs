//! `lab tcp`'s peers on the hosts that run them: nginx and lighttpd serve on the rx host
//! (their configurations in its private run directory when it is another machine), wrk loads
//! from every load host (the connections split, as `corelane load`'s), each under `corelane
//! guard` there like corelane's own rows. A peer is skipped only when its program is missing
//! on a host that must run it, in one line per such host naming it and the package to
//! install.

use crate::host::Host;
use crate::stage::load::split;
use crate::stage::servers::{self, Peer, ServerKind, Stage};
use crate::stage::wrk;
use crate::testbed::{PeerStep, Testbed};
use crate::LabError;

/// The hosts that run `peer`: the servers on the rx side, the load generator on every load
/// host.
fn hosts_of(testbed: &Testbed, peer: Peer) -> Vec<Host> {
    match peer {
        Peer::Wrk => testbed.load_hosts().into_iter().map(|l| l.host).collect(),
        Peer::Nginx | Peer::Lighttpd => vec![testbed.rx()],
    }
}

/// The peers of `asked` whose program is found on every host that runs them; a peer missing
/// on any of its hosts is left out, each such host's line in `skipped`.
pub fn available(testbed: &Testbed, asked: &[Peer], skipped: &mut Vec<String>) -> Vec<Peer> {
    let mut found = Vec::new();
    for &peer in asked {
        let missing: Vec<Host> = hosts_of(testbed, peer)
            .into_iter()
            .filter(|host| host.find_program(peer.program()).is_none())
            .collect();
        if missing.is_empty() {
            found.push(peer);
        }
        skipped.extend(missing.iter().map(|host| peer.not_installed(host)));
    }
    found
}

/// What the peer rows would run on each host (what a dry run shows): each server's
/// configuration written and the server started on the rx host, `corelane load` on every
/// load host for each workload, wrk and then corelane load on every load host (each its
/// part of the connections) against corelane's default server.
pub fn steps(stage: &Stage<'_>, peers: &[Peer]) -> Result<Vec<PeerStep>, LabError> {
    let testbed = stage.testbed;
    let rx = testbed.rx().name();
    let load = testbed.load_hosts();
    let mut steps = Vec::new();
    for &peer in peers {
        let step = |host: &str, command: String| PeerStep {
            row: row_of(peer),
            host: host.to_string(),
            command,
        };
        // corelane load on every load host, each its part of the connections.
        let load_steps = |close: bool| -> Result<Vec<PeerStep>, LabError> {
            let connections = split(stage.connections as u64, load.len());
            let mut out = Vec::new();
            for (l, &n) in load.iter().zip(&connections) {
                let mut words = vec![l.host.corelane()?];
                words.extend(servers::load_args(stage, n, close));
                out.push(step(&l.host.name(), shell_words::join(words)));
            }
            Ok(out)
        };
        let kind = match peer {
            Peer::Nginx => ServerKind::Nginx,
            Peer::Lighttpd => ServerKind::Lighttpd,
            Peer::Wrk => {
                let server = ServerKind::Corelane(servers::default_config());
                steps.push(step(&rx, servers::server_launch(stage, server)?.shown()));
                let parts = wrk::connections(stage.connections, load.len())?;
                for (l, &n) in load.iter().zip(&parts) {
                    steps.push(step(&l.host.name(), wrk::launch(stage, &l.host, n)?.shown()));
                }
                steps.extend(load_steps(false)?);
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
            steps.extend(load_steps(close)?);
        }
    }
    Ok(steps)
}

/// How a dry run heads a peer's steps.
fn row_of(peer: Peer) -> String {
    match peer {
        Peer::Nginx => "nginx (1 worker, return 200), keep-alive then close".into(),
        Peer::Lighttpd => "lighttpd (1 process, static file), keep-alive then close".into(),
        Peer::Wrk => {
            "load generators: wrk beside corelane load, same corelane server, from every load host"
                .into()
        }
    }
}
