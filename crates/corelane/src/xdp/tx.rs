//! Sending through AF_XDP: a socket bound to one TX queue of an interface, frames written
//! straight into its UMEM and pushed through the TX ring (one sendto kick per batch in copy
//! mode). Sending needs no XDP program.

use std::io;
use std::time::{Duration, Instant};

use super::rx::FRAME_SIZE;

/// The sending socket's frames and ring entries (its RX side is unused but must exist).
const TX_FRAMES: u32 = 2048;
use super::{Interface, XdpError};
use crate::sys::xsk::{XskConfig, XskSocket};

/// An AF_XDP socket used for sending.
#[derive(Debug)]
pub struct XskTx {
    socket: XskSocket,
    pub iface: Interface,
}

impl XskTx {
    /// Binds to queue `queue` of `dev`, zero-copy if the driver has it, else copy mode;
    /// returns whether zero-copy is on as the second value.
    pub fn open(dev: &str, queue: u32) -> Result<(Self, bool), XdpError> {
        super::check_available()?;
        let iface = Interface::by_name(dev)?;
        let mut config = XskConfig {
            ifindex: iface.index,
            queue,
            rx_frames: TX_FRAMES,
            tx_frames: TX_FRAMES,
            frame_size: FRAME_SIZE,
            fill_ring: TX_FRAMES,
            rx_ring: TX_FRAMES,
            tx_ring: TX_FRAMES,
            zerocopy: Some(true),
            busy_poll_us: None,
        };
        let socket = match XskSocket::bind(&config) {
            Ok(s) => s,
            Err(_) => {
                config.zerocopy = Some(false);
                XskSocket::bind(&config).map_err(|e| {
                    XdpError::io(
                        format!("cannot bind an AF_XDP socket to queue {queue} of {dev}"),
                        e,
                    )
                })?
            }
        };
        let zerocopy = socket.zerocopy();
        Ok((Self { socket, iface }, zerocopy))
    }

    /// The largest frame one UMEM slot holds.
    pub fn max_frame(&self) -> usize {
        FRAME_SIZE as usize
    }

    /// Queues up to `n` frames, each written by `build(i, slot)` returning its length, and
    /// kicks the kernel; returns how many went (fewer when the ring or the UMEM is full).
    pub fn send(&mut self, n: u32, build: impl FnMut(u32, &mut [u8]) -> usize) -> io::Result<u32> {
        self.socket.transmit(n, build)
    }

    /// Sends every frame of `frames`, waiting up to `timeout` for room and for the kernel to
    /// complete them all.
    pub fn send_all(&mut self, frames: &[Vec<u8>], timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut next = 0;
        while next < frames.len() || self.socket.tx_in_flight() > 0 {
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "AF_XDP TX did not complete"));
            }
            let left = (frames.len() - next).min(64) as u32;
            let sent = self.send(left, |i, slot| {
                let f = &frames[next + i as usize];
                let n = f.len().min(slot.len());
                slot[..n].copy_from_slice(&f[..n]);
                n
            })?;
            next += sent as usize;
            if sent == 0 {
                // Nothing queued: kick the kernel for completions and give it a moment.
                let _ = self.send(0, |_, _| 0);
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        Ok(())
    }
}
