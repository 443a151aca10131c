//! The sources `udp echo` never answers, whatever the datagram says: its own address and port
//! (an answer would come straight back to it), any unspecified address (sent to, it means
//! this host) and port 0 (no one can be listening there).

use std::net::{IpAddr, SocketAddr};

/// Why a source is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// This echo's own address and port, or an unspecified address.
    Itself,
    Port0,
}

/// The echo's own addresses on its port.
#[derive(Debug, Clone)]
pub struct SourceCheck {
    port: u16,
    /// The bound address; for a wildcard bind, every address of the host (read once at start).
    own: Vec<IpAddr>,
    /// Bound to a wildcard: any loopback address is this host too.
    wildcard: bool,
}

impl SourceCheck {
    /// For an echo bound to `bound`; `host_addresses` are the host's addresses, used when the
    /// bound address is a wildcard.
    pub fn new(bound: SocketAddr, host_addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        let wildcard = bound.ip().is_unspecified();
        let own = if wildcard {
            host_addresses.into_iter().map(|ip| ip.to_canonical()).collect()
        } else {
            vec![bound.ip().to_canonical()]
        };
        Self { port: bound.port(), own, wildcard }
    }

    /// Whether to refuse `source`: one compare unless it comes from this echo's port.
    pub fn refuse(&self, source: SocketAddr) -> Option<Refused> {
        if source.port() == 0 {
            return Some(Refused::Port0);
        }
        let ip = source.ip().to_canonical();
        if ip.is_unspecified() {
            return Some(Refused::Itself);
        }
        if source.port() != self.port {
            return None;
        }
        let own = (self.wildcard && ip.is_loopback()) || self.own.contains(&ip);
        own.then_some(Refused::Itself)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn own_address_port_0_and_unspecified_are_refused() {
        let c = SourceCheck::new(at("127.0.0.1:7000"), []);
        assert_eq!(c.refuse(at("127.0.0.1:7000")), Some(Refused::Itself));
        assert_eq!(c.refuse(at("[::ffff:127.0.0.1]:7000")), Some(Refused::Itself));
        assert_eq!(c.refuse(at("127.0.0.1:0")), Some(Refused::Port0));
        assert_eq!(c.refuse(at("0.0.0.0:5")), Some(Refused::Itself));
        assert_eq!(c.refuse(at("127.0.0.1:7001")), None);
        assert_eq!(c.refuse(at("127.0.0.2:7000")), None, "bound to one address only");
        let any = SourceCheck::new(at("[::]:7000"), ["10.1.2.3".parse().unwrap()]);
        assert_eq!(any.refuse(at("10.1.2.3:7000")), Some(Refused::Itself));
        assert_eq!(any.refuse(at("127.0.0.9:7000")), Some(Refused::Itself));
        assert_eq!(any.refuse(at("[::1]:7000")), Some(Refused::Itself));
        assert_eq!(any.refuse(at("10.1.2.4:7000")), None);
    }
}
