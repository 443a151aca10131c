//! The XDP program's lifecycle on one interface. Before attaching, what the interface carries
//! is read over rtnetlink and each program named: corelane's own program attached without a
//! link (left by a killed run of an older or netlink-attaching corelane) is removed exactly
//! (`XDP_FLAGS_REPLACE` against its descriptor); corelane's program held by a live link is
//! another run's, and anything else is someone else's: both are refused, never replaced.
//! corelane then attaches through a bpf_link, which the kernel drops when the last descriptor
//! of it closes: on exit, on a signal's default action, on panic and on SIGKILL alike.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use super::netlink::{self, FLAG_DRV, FLAG_SKB};
use super::program::{self, Action, PROGRAM_NAME};
use super::{Interface, XdpError};
use crate::sys::bpf;

/// corelane's program attached to an interface, for as long as this value lives.
#[derive(Debug)]
pub struct Attachment {
    /// Dropping it detaches the program (the kernel's bpf_link).
    _link: OwnedFd,
    _prog: OwnedFd,
    map: OwnedFd,
    pub iface: Interface,
    pub prog_id: u32,
    /// Native (driver) XDP, or generic (skb) XDP.
    pub native: bool,
    /// The id of a left-over corelane program removed first, if there was one.
    pub removed_stale: Option<u32>,
}

/// Names every program on `iface`; removes a left-over corelane one, refuses anything else.
fn clear(iface: &Interface) -> Result<Option<u32>, XdpError> {
    let attached = netlink::attached(iface.index)
        .map_err(|e| XdpError::io(format!("cannot read {}'s XDP state", iface.name), e))?;
    let mut removed = None;
    for a in attached {
        let fd = bpf::prog_fd_by_id(a.prog_id)
            .map_err(|e| XdpError::io(format!("cannot open XDP program {}", a.prog_id), e))?;
        let info = bpf::prog_info(fd.as_fd())
            .map_err(|e| XdpError::io(format!("cannot read XDP program {}", a.prog_id), e))?;
        if info.name != PROGRAM_NAME {
            return Err(XdpError::Foreign {
                dev: iface.name.clone(),
                id: a.prog_id,
                name: info.name,
            });
        }
        let links = bpf::xdp_links_on(iface.index)
            .map_err(|e| XdpError::io("cannot list the kernel's bpf links", e))?;
        if let Some((link, _)) = links.iter().find(|(_, prog)| *prog == a.prog_id) {
            return Err(XdpError::Busy { dev: iface.name.clone(), id: a.prog_id, link: *link });
        }
        netlink::detach_exactly(iface.index, a.mode, fd.as_fd()).map_err(|e| {
            XdpError::io(format!("cannot remove the left-over corelane program {}", a.prog_id), e)
        })?;
        removed = Some(a.prog_id);
    }
    Ok(removed)
}

/// Why a native attach was refused, in words.
pub(crate) fn native_refusal(e: &io::Error) -> String {
    format!("native XDP refused by the driver ({e})")
}

impl Attachment {
    /// Loads the program for `addr` with `action` and attaches it through a link. An error of
    /// kind `Unsupported` (EOPNOTSUPP, EINVAL) from a native attach lets the caller fall back.
    fn attach(
        iface: &Interface,
        addr: SocketAddr,
        map: OwnedFd,
        action: Action,
        native: bool,
    ) -> Result<Self, XdpError> {
        let removed_stale = clear(iface)?;
        let insns = program::emit(addr, action);
        let prog = bpf::prog_load_xdp(&insns, PROGRAM_NAME)
            .map_err(|e| XdpError::io("the kernel refused corelane's XDP program", e))?;
        let prog_id = bpf::prog_info(prog.as_fd()).map(|i| i.id).unwrap_or(0);
        let flags = if native { FLAG_DRV } else { FLAG_SKB };
        let link = match bpf::link_create_xdp(prog.as_fd(), iface.index, flags) {
            Ok(link) => link,
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                // Attached by someone between our look and our attach: name it.
                clear(iface)?;
                return Err(XdpError::io(
                    format!("{} got an XDP program meanwhile", iface.name),
                    e,
                ));
            }
            Err(e)
                if native
                    && matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL | 524)) =>
            {
                return Err(XdpError::ModeRefused {
                    mode: "native",
                    dev: iface.name.clone(),
                    reason: native_refusal(&e),
                });
            }
            Err(e) => return Err(XdpError::io(format!("cannot attach XDP to {}", iface.name), e)),
        };
        Ok(Self {
            _link: link,
            _prog: prog,
            map,
            iface: iface.clone(),
            prog_id,
            native,
            removed_stale,
        })
    }

    /// Attaches a program redirecting `addr`'s frames to the XSKMAP (keyed by RX queue).
    pub(crate) fn redirect(
        iface: &Interface,
        addr: SocketAddr,
        native: bool,
    ) -> Result<Self, XdpError> {
        let entries = iface.rx_queues.max(1);
        let map = bpf::map_create(bpf::MAP_XSKMAP, 4, 4, entries, "corelane_xsks")
            .map_err(|e| XdpError::io("cannot create the XSKMAP", e))?;
        let action = Action::Redirect { xskmap_fd: map.as_raw_fd() };
        Self::attach(iface, addr, map, action, native)
    }

    /// Sends queue `queue`'s matching frames to the AF_XDP socket `xsk`.
    pub(crate) fn register(&self, queue: u32, xsk: std::os::fd::BorrowedFd<'_>) -> io::Result<()> {
        bpf::map_update_u32(self.map.as_fd(), queue, xsk.as_raw_fd() as u32)
    }

    /// Matching frames of `queue` go back to the stack.
    pub(crate) fn unregister(&self, queue: u32) -> io::Result<()> {
        bpf::map_delete_u32(self.map.as_fd(), queue)
    }
}

/// The XDP_DROP ceiling: the same match, dropped and counted in the driver, the most any XDP
/// consumer of this interface can take.
#[derive(Debug)]
pub struct Ceiling {
    attachment: Attachment,
}

impl Ceiling {
    /// Attaches the dropping program for `addr` on `dev` (native mode).
    pub fn attach(dev: &str, addr: SocketAddr) -> Result<Self, XdpError> {
        super::check_available()?;
        let iface = Interface::by_name(dev)?;
        let map = bpf::map_create(bpf::MAP_PERCPU_ARRAY, 4, 8, 1, "corelane_drops")
            .map_err(|e| XdpError::io("cannot create the drop counter", e))?;
        let action = Action::Drop { counter_fd: map.as_raw_fd() };
        let attachment = Attachment::attach(&iface, addr, map, action, true)?;
        Ok(Self { attachment })
    }

    /// Frames dropped so far.
    pub fn dropped(&self) -> io::Result<u64> {
        bpf::percpu_sum_u64(self.attachment.map.as_fd(), 0)
    }

    pub fn prog_id(&self) -> u32 {
        self.attachment.prog_id
    }
}

/// For tests of the lifecycle: loads corelane's redirecting program for `addr` under `name`
/// and attaches it to `dev` the old way, without a link, as a killed run of a
/// netlink-attaching corelane leaves it (with `PROGRAM_NAME`), or as another tool's program
/// sits there (any other name); it stays after this process exits. Returns its id.
#[doc(hidden)]
pub fn leave_netlink_attached_program(
    dev: &str,
    addr: SocketAddr,
    name: &str,
) -> Result<u32, XdpError> {
    let iface = Interface::by_name(dev)?;
    let map = bpf::map_create(bpf::MAP_XSKMAP, 4, 4, 1, "corelane_xsks")
        .map_err(|e| XdpError::io("cannot create the XSKMAP", e))?;
    let insns = program::emit(addr, Action::Redirect { xskmap_fd: map.as_raw_fd() });
    let prog = bpf::prog_load_xdp(&insns, name)
        .map_err(|e| XdpError::io("the kernel refused corelane's XDP program", e))?;
    netlink::attach_without_link(iface.index, FLAG_DRV, prog.as_fd())
        .map_err(|e| XdpError::io("cannot attach through netlink", e))?;
    Ok(bpf::prog_info(prog.as_fd()).map(|i| i.id).unwrap_or(0))
}

/// The ids of the XDP programs `dev` carries now (for tests and the lab's checks).
pub fn programs_on(dev: &str) -> Result<Vec<u32>, XdpError> {
    let iface = Interface::by_name(dev)?;
    Ok(netlink::attached(iface.index)
        .map_err(|e| XdpError::io("cannot read XDP state", e))?
        .into_iter()
        .map(|a| a.prog_id)
        .collect())
}
