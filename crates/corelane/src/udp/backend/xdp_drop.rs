//! The XDP_DROP ceiling: the same match as `xdp`, dropped and counted in the driver, the most
//! any XDP consumer of the interface can take. Its one lane reads the drop counter every
//! 10 ms and reports it as datagrams; nothing reaches user space.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use super::ReceiveBatch;
use crate::udp::check::LaneTally;
use crate::udp::UdpError;
use crate::xdp::{Ceiling, Interface};

/// Attaches the dropping program for `addr` (on `dev`, or the interface holding it): the one
/// lane and what the summary says of it.
pub(in crate::udp) fn bind(
    addr: SocketAddr,
    dev: Option<&str>,
) -> Result<(Box<dyn ReceiveBatch>, String), UdpError> {
    let iface = Interface::for_address(addr, dev)?;
    let ceiling = Ceiling::attach(&iface.name, addr)?;
    let note = format!(
        "XDP_DROP ceiling on {} (program {}): datagrams counted are frames dropped in the driver",
        iface.name,
        ceiling.prog_id()
    );
    Ok((Box::new(DropLane { ceiling, last: 0 }), note))
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
