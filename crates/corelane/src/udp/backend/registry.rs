//! The table of receive backends: one line each ([`backends!`]) declares its [`RecvBackend`]
//! variant, the options it carries with their defaults, and the type in its own file that
//! implements [`Backend`]. Names, parsing, help and the options a backend takes all follow
//! from that type, so nothing outside its file and its line here names a backend.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::{mmsg, uring, xdp, xdp_drop, xdp_return, Backend};
use crate::udp::UdpError;
use crate::xdp::XdpMode;

/// Declares [`RecvBackend`] from one line per backend: its variant (with its options and
/// their defaults) and the type that implements [`Backend`] (built from those options).
macro_rules! backends {
    ($($(#[doc = $doc:literal])+
       $variant:ident $({ $($field:ident: $ty:ty = $default:expr),+ })? => $file:ident::$unit:ident,)+) => {
        /// How a lane asks the kernel for datagrams (by name: [`RecvBackend::ALL`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum RecvBackend {
            $($(#[doc = $doc])+ $variant $({ $($field: $ty),+ })?,)+
        }

        impl RecvBackend {
            /// Every backend, with its options' defaults, in the order help lists them.
            pub const ALL: &'static [RecvBackend] =
                &[$(RecvBackend::$variant $({ $($field: $default),+ })?,)+];

            /// The backend's own type, built from the variant's options.
            pub(in crate::udp) fn unit(self) -> Box<dyn Backend> {
                match self {
                    $(RecvBackend::$variant $({ $($field),+ })? => {
                        Box::new($file::$unit { $($($field),+)? })
                    })+
                }
            }
        }
    };
}

backends! {
    /// recvmmsg batches (optionally with UDP_GRO); the echo answers with sendmmsg.
    Mmsg => mmsg::Mmsg,
    /// io_uring: one multishot receive per socket into a ring of provided buffers, one
    /// datagram per completion; with `sqpoll_cpu`, an SQPOLL thread on that CPU submits for
    /// the lane (the core-partitioning study's syscall thread).
    Uring { sqpoll_cpu: Option<usize> = None } => uring::Uring,
    /// AF_XDP: corelane's XDP program redirects the bound address and port's frames to one
    /// AF_XDP socket per RX queue, each read by its own lane (`ReceiverConfig::interface`
    /// names the interface when the address does not).
    Xdp { mode: XdpMode = XdpMode::Auto, busy_poll_us: Option<u32> = None } => xdp::Xdp,
    /// The floor of an AF_XDP delivery: the same program and sockets as `Xdp` (native copy
    /// or as `mode` says), and lanes that only hand each frame back to the fill ring and count
    /// it, reading nothing: what a delivery costs before any lane looks at a frame.
    XdpReturn { mode: XdpMode = XdpMode::Auto } => xdp_return::XdpReturn,
    /// The ceiling of any XDP consumer: the same match dropped (XDP_DROP) and counted in the
    /// driver; the count is reported as datagrams, and nothing reaches user space.
    XdpDrop => xdp_drop::XdpDrop,
}

impl RecvBackend {
    /// The name the command line takes and the reports print (`uring+sqpoll` for io_uring
    /// with an SQPOLL thread).
    pub fn name(self) -> &'static str {
        self.unit().name()
    }

    /// One line on what the backend is, for the command line's help.
    pub fn about(self) -> &'static str {
        self.unit().about()
    }

    /// Whether `udp echo` can answer with it.
    pub fn echoes(self) -> bool {
        self.unit().echo().is_some()
    }

    /// Whether its lanes read each datagram's header (checks and flow groups need them).
    pub fn reads_headers(self) -> bool {
        self.unit().reads_headers()
    }

    /// The backend with the command line's backend options applied; an option it does not
    /// take is refused, naming the backends that do.
    pub fn configure(self, options: &BackendOptions) -> Result<Self, UdpError> {
        let unit = self.unit();
        match options.given().find(|flag| !unit.options().contains(flag)) {
            None => Ok(unit.configure(options)),
            Some(flag) => Err(UdpError::BackendOption {
                flag,
                backend: unit.name(),
                takers: names(Self::ALL.iter().filter(|b| b.unit().options().contains(&flag))),
            }),
        }
    }
}

/// `a`, `a or b`, `a, b or c`.
pub(in crate::udp) fn names<'a>(backends: impl Iterator<Item = &'a RecvBackend>) -> String {
    let names: Vec<&str> = backends.map(|b| b.name()).collect();
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, first)) => format!("{} or {last}", first.join(", ")),
        None => String::new(),
    }
}

impl fmt::Display for RecvBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// As its name (`mmsg`, `uring`, `uring+sqpoll`, `xdp`, `xdp-return`, `xdp-drop`).
impl Serialize for RecvBackend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A backend by its name, with its options' defaults (see [`RecvBackend::configure`]).
impl FromStr for RecvBackend {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL.iter().copied().find(|b| b.name() == s).ok_or_else(|| {
            format!("unknown receive backend {s:?}: use {}", names(Self::ALL.iter()))
        })
    }
}

/// The command line's options that belong to one backend or another (each backend says
/// which it takes; the others are refused by [`RecvBackend::configure`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendOptions {
    /// `--sqpoll`: the CPU of an SQPOLL thread.
    pub sqpoll_cpu: Option<usize>,
    /// `--xdp-mode`.
    pub xdp_mode: Option<XdpMode>,
    /// `--busy-poll`: preferred busy polling of each lane's queue, in microseconds.
    pub busy_poll_us: Option<u32>,
    /// `--xdp-dev`: an interface was named.
    pub interface: bool,
}

impl BackendOptions {
    /// The flags given.
    fn given(&self) -> impl Iterator<Item = &'static str> {
        [
            ("--sqpoll", self.sqpoll_cpu.is_some()),
            ("--xdp-mode", self.xdp_mode.is_some()),
            ("--busy-poll", self.busy_poll_us.is_some()),
            ("--xdp-dev", self.interface),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_backend_parses_from_the_name_it_prints() {
        for &backend in RecvBackend::ALL {
            assert_eq!(backend.name().parse::<RecvBackend>(), Ok(backend));
            assert!(!backend.about().is_empty(), "{backend} has no help line");
        }
        let unknown = "recvfrom".parse::<RecvBackend>().unwrap_err();
        assert_eq!(
            unknown,
            "unknown receive backend \"recvfrom\": use mmsg, uring, xdp, xdp-return or xdp-drop"
        );
    }

    #[test]
    fn an_option_goes_only_with_the_backends_that_take_it() {
        let sqpoll = BackendOptions { sqpoll_cpu: Some(1), ..BackendOptions::default() };
        assert_eq!(
            RecvBackend::Uring { sqpoll_cpu: None }.configure(&sqpoll).unwrap(),
            RecvBackend::Uring { sqpoll_cpu: Some(1) }
        );
        let refused = RecvBackend::Mmsg.configure(&sqpoll).unwrap_err().to_string();
        assert_eq!(refused, "--sqpoll does not go with --backend mmsg: it is for uring");
        let refused = RecvBackend::Xdp { mode: XdpMode::Auto, busy_poll_us: None }
            .configure(&sqpoll)
            .unwrap_err()
            .to_string();
        assert_eq!(refused, "--sqpoll does not go with --backend xdp: it is for uring");
        let busy = BackendOptions { busy_poll_us: Some(50), ..BackendOptions::default() };
        let refused = RecvBackend::XdpDrop.configure(&busy).unwrap_err().to_string();
        assert_eq!(refused, "--busy-poll does not go with --backend xdp-drop: it is for xdp");
        let dev = BackendOptions { interface: true, ..BackendOptions::default() };
        let refused = RecvBackend::Mmsg.configure(&dev).unwrap_err().to_string();
        assert_eq!(
            refused,
            "--xdp-dev does not go with --backend mmsg: it is for xdp, xdp-return or xdp-drop"
        );
        let xdp = RecvBackend::Xdp { mode: XdpMode::Auto, busy_poll_us: None };
        let opts = BackendOptions {
            xdp_mode: Some(XdpMode::Generic),
            busy_poll_us: Some(50),
            interface: true,
            ..BackendOptions::default()
        };
        assert_eq!(
            xdp.configure(&opts).unwrap(),
            RecvBackend::Xdp { mode: XdpMode::Generic, busy_poll_us: Some(50) }
        );
    }

    /// The receive's run, lanes, seconds and report are the same for every backend: none of
    /// them names one of the XDP backends or their state (that lives in `backend/`).
    #[test]
    fn the_receive_names_no_backend_of_its_own() {
        let files = [
            ("recv.rs", include_str!("../recv.rs")),
            ("recv_lane.rs", include_str!("../recv_lane.rs")),
            ("recv_watch.rs", include_str!("../recv_watch.rs")),
            ("recv_report.rs", include_str!("../recv_report.rs")),
        ];
        for (file, text) in files {
            let lower = text.to_lowercase();
            for name in ["xdp", "xsk"] {
                assert!(!lower.contains(name), "{file} names {name}");
            }
        }
    }

    #[test]
    fn only_the_kernel_socket_backends_echo() {
        let echoing: Vec<_> = RecvBackend::ALL.iter().filter(|b| b.echoes()).collect();
        assert_eq!(names(echoing.into_iter()), "mmsg or uring");
    }
}
