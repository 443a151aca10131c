//! A remote host's machine as `corelane topo --json` prints it there, read into types: its
//! processor packages and NUMA nodes (for `lab affinity`'s model) and its NICs' packets per
//! RX queue (for the rx NIC's counters). Every field the lab reads is required: a renamed or
//! missing one is an error naming the field and the host, never a silent "1 package" or an
//! empty queue list. The document as printed is kept beside the types for the report.

use serde::Deserialize;

use crate::host::Host;
use crate::LabError;

/// What the lab reads of `corelane topo --json`.
#[derive(Debug, Clone, Deserialize)]
pub struct HostTopology {
    pub cpus: Vec<Cpu>,
    pub numa_nodes: Vec<NumaNode>,
    pub nics: Vec<Nic>,
}

/// One online CPU and where it sits.
#[derive(Debug, Clone, Deserialize)]
pub struct Cpu {
    pub cpu: usize,
    pub package: usize,
    pub numa_node: usize,
}

/// A NUMA node.
#[derive(Debug, Clone, Deserialize)]
pub struct NumaNode {
    pub node: usize,
}

/// A network interface.
#[derive(Debug, Clone, Deserialize)]
pub struct Nic {
    pub name: String,
    /// `null` where ethtool does not answer; the field itself must be there (a plain
    /// `Option` would read a missing one as `null`).
    #[serde(deserialize_with = "Option::deserialize")]
    pub settings: Option<NicSettings>,
}

/// A NIC's ethtool settings, of which the lab reads one.
#[derive(Debug, Clone, Deserialize)]
pub struct NicSettings {
    /// Packets per RX queue; empty where the driver does not count them per queue.
    pub rx_queue_packets: Vec<u64>,
}

impl HostTopology {
    /// The processor packages its CPUs are on.
    pub fn packages(&self) -> usize {
        let mut packages: Vec<usize> = self.cpus.iter().map(|c| c.package).collect();
        packages.sort_unstable();
        packages.dedup();
        packages.len()
    }

    /// The packets per RX queue of `nic` (empty where the driver does not count them per
    /// queue); a NIC the host does not show is an error naming it.
    pub fn rx_queue_packets(&self, nic: &str) -> Result<Vec<u64>, String> {
        let found = self.nics.iter().find(|n| n.name == nic);
        let found = found.ok_or_else(|| format!("`corelane topo --json` shows no NIC {nic}"))?;
        Ok(found.settings.as_ref().map_or_else(Vec::new, |s| s.rx_queue_packets.clone()))
    }
}

/// A host's `corelane topo --json` reply: the document as printed and what the lab reads of it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub document: serde_json::Value,
    pub topology: HostTopology,
}

/// Runs `corelane topo --json` on `host` (`corelane` is the binary there) and reads it.
pub fn read(host: &Host, corelane: &str) -> Result<Reply, LabError> {
    let text = host.run(corelane, &["topo", "--json"])?;
    parse(&host.name(), &text)
}

/// `text`, `host`'s `corelane topo --json` reply, read; what does not fit is a one-line
/// error naming the host and the field. serde_json refuses nesting past 128 levels: no reply
/// overflows the stack.
pub fn parse(host: &str, text: &str) -> Result<Reply, LabError> {
    let refused = |e: serde_json::Error| {
        LabError::Remote {
        host: host.to_string(),
        problem: format!(
            "`corelane topo --json` printed what the lab cannot read ({e}): is corelane there the same version?"
        ),
    }
    };
    let document: serde_json::Value = serde_json::from_str(text).map_err(refused)?;
    let topology = HostTopology::deserialize(&document).map_err(refused)?;
    Ok(Reply { document, topology })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's `corelane topo --json`, built from the library's types as the CLI
    /// prints them.
    fn this_machine() -> String {
        let report =
            corelane::topology::MachineReport::read_from(std::path::Path::new("/")).unwrap();
        serde_json::to_string_pretty(&report).unwrap()
    }

    #[test]
    fn reads_what_corelane_topo_prints() {
        let reply = parse("rx.example", &this_machine()).unwrap();
        assert!(reply.topology.packages() >= 1);
        assert!(!reply.topology.cpus.is_empty());
        assert_eq!(
            reply.document["cpus"].as_array().map(Vec::len),
            Some(reply.topology.cpus.len())
        );
        let lo = reply.topology.rx_queue_packets("lo");
        assert!(lo.is_ok(), "{lo:?}");
        let none = reply.topology.rx_queue_packets("nosuchnic0").unwrap_err();
        assert!(none.contains("nosuchnic0"), "{none}");
    }

    /// A renamed field is refused naming the field and the host; the untyped reading took a
    /// CPU without `package` for none and reported "1 package".
    #[test]
    fn a_renamed_field_is_refused_by_name() {
        let text = this_machine();
        for (field, renamed) in [
            ("\"package\"", "\"socket\""),
            ("\"numa_nodes\"", "\"nodes\""),
            ("\"settings\"", "\"ethtool\""),
            ("\"name\"", "\"ifname\""),
        ] {
            assert!(text.contains(field), "{field} not in {text}");
            let err = parse("rx.example", &text.replace(field, renamed)).unwrap_err().to_string();
            let name = field.trim_matches('"');
            assert!(err.contains("rx.example") && err.contains(&format!("`{name}`")), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn a_missing_queue_count_is_refused_by_name() {
        let text = r#"{"cpus":[{"cpu":0,"package":0,"numa_node":0}],"numa_nodes":[],
            "nics":[{"name":"d0","settings":{"channels":null}}]}"#;
        let err = parse("rx.example", text).unwrap_err().to_string();
        assert!(err.contains("`rx_queue_packets`") && err.contains("rx.example"), "{err}");
        let ok = text.replace(r#""channels":null"#, r#""rx_queue_packets":[5,6]"#);
        assert_eq!(parse("h", &ok).unwrap().topology.rx_queue_packets("d0"), Ok(vec![5, 6]));
        let deep = "[".repeat(100_000);
        assert!(parse("h", &deep).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Any reply parses or is refused, never panics.
        #[test]
        fn any_topo_reply_parses_without_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            json in r#"\{"cpus":\[\],"numa_nodes":\[\],"nics":\[\{"name":"d0","settings":\{"rx_queue_packets":\[[-0-9.e, "\[\]{}]{0,40}\]\}\}\]\}"#,
        ) {
            let _ = parse("h", &String::from_utf8_lossy(&bytes));
            if let Ok(reply) = parse("h", &json) {
                let _ = reply.topology.rx_queue_packets("d0");
            }
        }
    }
}
