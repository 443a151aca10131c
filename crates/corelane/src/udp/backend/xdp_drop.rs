//! The XDP_DROP ceiling: the same match as `xdp`, dropped and counted in the driver, the most
//! any XDP consumer of the interface can take. Its one lane reads the drop counter every
//! 10 ms and reports it as datagrams; nothing reaches user space.

use std::io;
use std::time::Duration;

use super::xdp::{bound_over_port, hold_port};
use super::{Backend, BackendOptions, BindRequest, Bound, Keeps, ReceiveBatch, RecvBackend};
use crate::udp::check::LaneTally;
use crate::udp::UdpError;
use crate::xdp::{Ceiling, Interface};

/// The XDP_DROP ceiling.
pub(in crate::udp) struct XdpDrop {}

impl Backend for XdpDrop {
    fn name(&self) -> &'static str {
        "xdp-drop"
    }

    fn about(&self) -> &'static str {
        "the ceiling: the same match as xdp dropped and counted in the driver (needs root; \
         --xdp-dev)"
    }

    fn options(&self) -> &'static [&'static str] {
        &["--xdp-dev"]
    }

    fn configure(&self, _: &BackendOptions) -> RecvBackend {
        RecvBackend::XdpDrop
    }

    /// Holds the port and attaches the dropping program for its address (on the interface
    /// asked for, or the one holding it): the one lane and what the summary says of it.
    fn bind(&self, request: &BindRequest<'_>) -> Result<Bound, UdpError> {
        let (port, addr) = hold_port(request)?;
        let iface = Interface::for_address(addr, request.interface)?;
        let ceiling = Ceiling::attach(&iface.name, addr)?;
        let note = format!(
            "XDP_DROP ceiling on {} (program {}): datagrams counted are frames dropped in the \
             driver",
            iface.name,
            ceiling.prog_id()
        );
        let lane: Box<dyn ReceiveBatch> = Box::new(DropLane { ceiling, last: 0 });
        Ok(bound_over_port(request, addr, vec![lane], note, Keeps::boxed(port)))
    }

    fn reads_headers(&self) -> bool {
        false
    }
}

/// The ceiling's counter and its last reading; the program detaches when the lane drops.
#[derive(Debug)]
struct DropLane {
    ceiling: Ceiling,
    last: u64,
}

impl ReceiveBatch for DropLane {
    fn start(&mut self) -> io::Result<()> {
        self.last = self.ceiling.dropped()?;
        Ok(())
    }

    fn receive(&mut self, tally: &mut LaneTally) -> io::Result<bool> {
        std::thread::sleep(Duration::from_millis(10));
        let now = self.ceiling.dropped()?;
        tally.count_only(now.saturating_sub(self.last));
        tally.end_batch();
        self.last = now;
        Ok(false)
    }
}
