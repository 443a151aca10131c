//! The kernel's sockets, as the recvmmsg and io_uring backends bind them: a shared socket,
//! or a `ReuseportGroup` (optionally steered by CPU), per address; GRO where the kernel
//! takes it.

use std::sync::Arc;

use socket2::{Socket, Type};

use super::{BindRequest, Bound, Keeps, ReceiveBatch};
use crate::reuseport::ReuseportGroup;
use crate::udp::socket::{bind_receiver, local_addr, settle_gro, slot_bytes, SocketMode, Steering};
use crate::udp::UdpError;

/// Binds every address of `request`, then `lane` makes each lane's receiver over its
/// sockets with buffers of `slot` bytes.
pub(super) fn bind(
    request: &BindRequest<'_>,
    lane: impl Fn(Vec<Arc<Socket>>, usize) -> Box<dyn ReceiveBatch>,
) -> Result<Bound, UdpError> {
    let mut lane_sockets: Vec<Vec<Arc<Socket>>> = vec![Vec::new(); request.threads];
    let mut addrs = Vec::new();
    let reuseport = request.sockets == SocketMode::Reuseport;
    let members = if reuseport { request.threads } else { 1 };
    for &addr in request.addrs {
        let group = ReuseportGroup::bind(
            addr,
            members,
            Type::DGRAM,
            |a| bind_receiver(a, reuseport, request.rcvbuf),
            local_addr,
        )?;
        if request.steering == Steering::Cpu {
            group.steer_by_cpu(&request.placement.lane_cpus(request.threads)).map_err(|e| {
                UdpError::io("the kernel refused the reuseport CPU-steering program", e)
            })?;
        }
        addrs.push(group.addr());
        let sockets: Vec<Arc<Socket>> = group.into_sockets().into_iter().map(Arc::new).collect();
        // Shared: every lane reads the one socket; reuseport: lane i owns socket i.
        for (lane, lane_sockets) in lane_sockets.iter_mut().enumerate() {
            lane_sockets.push(Arc::clone(&sockets[lane % sockets.len()]));
        }
    }
    let rcvbuf_bytes = lane_sockets[0][0].recv_buffer_size().ok();
    let gro =
        settle_gro(request.gro, lane_sockets.iter().flatten(), "receiving datagram by datagram");
    let slot = slot_bytes(request.slot, gro.active);
    let lanes = lane_sockets.into_iter().map(|sockets| lane(sockets, slot)).collect();
    Ok(Bound { lanes, addrs, gro, rcvbuf_bytes, slot, note: None, run: Keeps::boxed(()) })
}
