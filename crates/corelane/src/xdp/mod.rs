//! Kernel bypass for UDP: AF_XDP lanes. corelane emits its own XDP program for the bound
//! address and port, loads it with bpf(2) and attaches it through a bpf_link, so the kernel
//! removes it when the last descriptor closes (exit, signal, panic, SIGKILL). Matching frames
//! go to one AF_XDP socket per RX queue; everything else goes on to the kernel's stack.
//!
//! * `program` emits the XDP program (with `asm`, a tiny instruction encoder).
//! * `attach` owns the lifecycle: what the interface carries, left-over corelane programs,
//!   programs of others (never replaced), the link.
//! * [`frame`] is the checked parser the lanes read frames with.
//! * [`crate::tune::busy_poll`] holds the device settings preferred busy polling runs with.
//! * [`rx`] sets up the sockets and reads them; [`tx`] pushes frames, [`route`] finds where
//!   they go.

mod asm;
mod attach;
mod error;
pub mod frame;
mod iface;
pub(crate) mod netlink;
mod program;
pub mod route;
pub mod rx;
pub mod tx;

pub use attach::{leave_netlink_attached_program, programs_on, Attachment, Ceiling};
pub use error::XdpError;
pub use iface::Interface;
pub use program::PROGRAM_NAME;

use serde::{Deserialize, Serialize};

/// Which XDP and AF_XDP mode to ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpMode {
    /// Native zero-copy, else native copy, else generic, each step saying why.
    Auto,
    /// Native XDP and a zero-copy socket, or an error.
    Zerocopy,
    /// Native XDP, copy-mode socket.
    Copy,
    /// Generic (skb) XDP, copy-mode socket: works on any interface, slowest.
    Generic,
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "zerocopy" => Ok(Self::Zerocopy),
            "copy" => Ok(Self::Copy),
            "generic" => Ok(Self::Generic),
            _ => Err(format!("unknown XDP mode {s:?}: use auto, zerocopy, copy or generic")),
        }
    }
}

/// Whether this process may load XDP programs and open AF_XDP sockets, as the error a user can
/// act on: no AF_XDP in the kernel, or no privilege.
pub fn check_available() -> Result<(), XdpError> {
    crate::sys::xsk::af_xdp_available().map_err(|e| match e.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => XdpError::NoAfXdp,
        Some(libc::EPERM | libc::EACCES) => XdpError::NotPermitted,
        _ => XdpError::io("cannot open an AF_XDP socket", e),
    })
}
