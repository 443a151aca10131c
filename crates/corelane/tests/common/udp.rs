//! A UDP receiver on its own thread, as the tests drive one from the sending side.

use std::thread;

use corelane::lane::StopSignal;
use corelane::udp::{Receiver, RecvSummary};

/// Runs `receiver` on its own thread until the returned signal stops it (or one of its own
/// limits, a duration or a datagram count, ends it first).
pub fn spawn_receiver(receiver: Receiver) -> (StopSignal, thread::JoinHandle<RecvSummary>) {
    let stop = StopSignal::new();
    let rx_stop = stop.clone();
    (stop, thread::spawn(move || receiver.run(&rx_stop, |_| {}).expect("the receiver runs")))
}
