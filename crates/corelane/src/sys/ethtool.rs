//! The ethtool ioctl (SIOCETHTOOL) for the NIC settings a plan touches: channel (queue)
//! counts, RX flow hashing and interrupt coalescing; and the driver's statistics (ethtool -S). It acts in the calling thread's network
//! namespace; reading needs no privilege, writing needs CAP_NET_ADMIN.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::syscall;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_SCOALESCE: u32 = 0x0f;
const ETHTOOL_GRXFH: u32 = 0x29;
const ETHTOOL_SRXFH: u32 = 0x2a;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_SCHANNELS: u32 = 0x3d;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// More statistics than any driver has (mlx5 has a few thousand): a count above it is
/// refused, and the buffers are always this large (see `stats`).
const MAX_STATS: usize = 1 << 16;

/// struct ifreq with the ethtool command's address in its union.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _rest: [u8; 16],
}

/// The fixed-size struct of an ethtool command, its `cmd` field first.
///
/// # Safety
/// For every command this module puts in its `cmd` field, the kernel reads and writes within
/// the struct (so it is the command's complete struct), and any bytes make a valid value.
unsafe trait Command {}

// SAFETY: struct ethtool_channels, complete, all u32s; ETHTOOL_{G,S}CHANNELS only.
unsafe impl Command for Channels {}
// SAFETY: struct ethtool_coalesce, complete, all u32s; ETHTOOL_{G,S}COALESCE only.
unsafe impl Command for CoalesceRaw {}
// SAFETY: the head of struct ethtool_rxnfc, all ETHTOOL_{G,S}RXFH copy; integers only.
unsafe impl Command for RxFlowHash {}

/// Runs one ethtool command on `ifname`; `cmd` is the command's whole struct.
fn ethtool<T: Command>(ifname: &str, cmd: &mut T) -> io::Result<()> {
    // SAFETY: a `Command` is the complete struct of its command, so the kernel reads and
    // writes within `*cmd`.
    unsafe { ethtool_raw(ifname, (cmd as *mut T).cast()) }
}

/// Runs the ethtool command whose struct starts at `cmd`.
///
/// # Safety
/// `cmd` must point to writable memory as large as the kernel will read or write for this
/// command: for the variable-length ones (strings, statistics) the kernel uses the device's
/// count at the time of the call, not a length the caller gives.
unsafe fn ethtool_raw(ifname: &str, cmd: *mut libc::c_void) -> io::Result<()> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {ifname:?}"),
        ));
    }
    // SAFETY: no pointer arguments.
    let fd = syscall!(socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0))?;
    // SAFETY: socket() returned a new descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: cmd, _rest: [0; 16] };
    for (dst, src) in req.name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: `req` (on this frame) is a struct ifreq whose data pointer is `cmd`, which the
    // caller keeps large enough for the command (this function's contract).
    syscall!(ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfReq)).map(drop)
}

/// Queue counts: the maximum the device allows and the current setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[repr(C)]
pub struct Channels {
    #[serde(skip)]
    cmd: u32,
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_other: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub tx: u32,
    pub other: u32,
    pub combined: u32,
}

pub(crate) fn channels(ifname: &str) -> io::Result<Channels> {
    let mut c = Channels { cmd: ETHTOOL_GCHANNELS, ..Channels::default() };
    ethtool(ifname, &mut c)?;
    Ok(c)
}

/// Sets the combined (or, for devices without combined queues, rx and tx) queue count.
pub(crate) fn set_queue_count(ifname: &str, count: u32) -> io::Result<()> {
    let mut c = channels(ifname)?;
    c.cmd = ETHTOOL_SCHANNELS;
    if c.max_combined > 0 {
        c.combined = count;
    } else {
        c.rx = count.min(c.max_rx.max(1));
        c.tx = count.min(c.max_tx.max(1));
    }
    ethtool(ifname, &mut c)
}

/// struct ethtool_coalesce: the command and its 22 settings.
#[repr(C)]
struct CoalesceRaw {
    cmd: u32,
    fields: [u32; 22],
}

const RX_USECS: usize = 0;
const RX_FRAMES: usize = 1;
const ADAPTIVE_RX: usize = 9;

/// The receive interrupt moderation a plan reads and sets (the web-serving study's ITR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Coalesce {
    pub rx_usecs: u32,
    pub rx_frames: u32,
    pub adaptive_rx: bool,
}

fn coalesce_raw(ifname: &str) -> io::Result<CoalesceRaw> {
    let mut c = CoalesceRaw { cmd: ETHTOOL_GCOALESCE, fields: [0; 22] };
    ethtool(ifname, &mut c)?;
    Ok(c)
}

pub(crate) fn coalesce(ifname: &str) -> io::Result<Coalesce> {
    let c = coalesce_raw(ifname)?;
    Ok(Coalesce {
        rx_usecs: c.fields[RX_USECS],
        rx_frames: c.fields[RX_FRAMES],
        adaptive_rx: c.fields[ADAPTIVE_RX] != 0,
    })
}

/// Sets rx-usecs (and turns adaptive moderation off, which would override it).
pub(crate) fn set_rx_usecs(ifname: &str, usecs: u32) -> io::Result<()> {
    let mut c = coalesce_raw(ifname)?;
    c.cmd = ETHTOOL_SCOALESCE;
    c.fields[RX_USECS] = usecs;
    c.fields[ADAPTIVE_RX] = 0;
    ethtool(ifname, &mut c)
}

/// The head of struct ethtool_rxnfc, all that ETHTOOL_{G,S}RXFH use (the kernel copies only
/// these fields for them, for compatibility with the original ABI).
#[repr(C)]
struct RxFlowHash {
    cmd: u32,
    flow_type: u32,
    data: u64,
}

/// Flow types (TCP_V4_FLOW, UDP_V4_FLOW, TCP_V6_FLOW, UDP_V6_FLOW).
pub const FLOW_TYPES: [(&str, u32); 4] = [("tcp4", 1), ("udp4", 2), ("tcp6", 5), ("udp6", 6)];

/// The RXH_* bits and ethtool's letters for them: m v t s d f n.
const HASH_FIELDS: [(char, u64); 7] = [
    ('m', 1 << 1),
    ('v', 1 << 2),
    ('t', 1 << 3),
    ('s', 1 << 4),
    ('d', 1 << 5),
    ('f', 1 << 6),
    ('n', 1 << 7),
];

/// ethtool's letters for a hash field set (`sdfn`: addresses and both ports).
pub fn hash_letters(bits: u64) -> String {
    HASH_FIELDS.iter().filter(|(_, b)| bits & b != 0).map(|(c, _)| *c).collect()
}

pub fn hash_bits(letters: &str) -> Option<u64> {
    letters
        .chars()
        .try_fold(0u64, |acc, ch| HASH_FIELDS.iter().find(|(c, _)| *c == ch).map(|(_, b)| acc | b))
}

pub(crate) fn rx_flow_hash(ifname: &str, flow_type: u32) -> io::Result<u64> {
    let mut r = RxFlowHash { cmd: ETHTOOL_GRXFH, flow_type, data: 0 };
    ethtool(ifname, &mut r)?;
    Ok(r.data)
}

pub(crate) fn set_rx_flow_hash(ifname: &str, flow_type: u32, bits: u64) -> io::Result<()> {
    let mut r = RxFlowHash { cmd: ETHTOOL_SRXFH, flow_type, data: bits };
    ethtool(ifname, &mut r)
}

/// Two u32 fields side by side in one u64 word, in memory order.
fn pair(first: u32, second: u32) -> u64 {
    let [a, b, c, d] = first.to_ne_bytes();
    let [e, f, g, h] = second.to_ne_bytes();
    u64::from_ne_bytes([a, b, c, d, e, f, g, h])
}

/// The two u32 fields of one u64 word, in memory order.
fn unpair(word: u64) -> (u32, u32) {
    let [a, b, c, d, e, f, g, h] = word.to_ne_bytes();
    (u32::from_ne_bytes([a, b, c, d]), u32::from_ne_bytes([e, f, g, h]))
}

/// The driver's statistics, by name, as `ethtool -S` lists them (empty where it has none).
pub(crate) fn stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    // struct ethtool_sset_info: cmd, reserved, sset_mask, then one u32 count per set asked.
    let mut info = [pair(ETHTOOL_GSSET_INFO, 0), 1 << ETH_SS_STATS, 0];
    // SAFETY: one set asked for, so the kernel writes one u32 count after the 16-byte head:
    // within the 24 bytes of `info`.
    unsafe { ethtool_raw(ifname, info.as_mut_ptr().cast())? };
    if info[1] & (1 << ETH_SS_STATS) == 0 {
        return Ok(Vec::new());
    }
    let count = unpair(info[2]).0 as usize;
    if count > MAX_STATS {
        return Err(io::Error::other(format!("{ifname} claims {count} statistics")));
    }
    // The kernel writes as many names and values as the device has *at each call*, whatever
    // length we pass, and a device can grow its statistics between calls (a new channel
    // count): the buffers hold MAX_STATS, far above any driver's count (zeroed pages cost
    // nothing until written). A count past MAX_STATS was refused above and is refused again
    // below from the kernel's own answer.
    // struct ethtool_gstrings: cmd, string_set, len, then len names of 32 bytes each.
    let mut names = vec![0u32; 3 + MAX_STATS * ETH_GSTRING_LEN / 4];
    names[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_STATS, count as u32]);
    // SAFETY: room for MAX_STATS names after the 12-byte head (see above).
    unsafe { ethtool_raw(ifname, names.as_mut_ptr().cast())? };
    // struct ethtool_stats: cmd, n_stats, then n_stats u64 values.
    let mut values = vec![0u64; 1 + MAX_STATS];
    values[0] = pair(ETHTOOL_GSTATS, count as u32);
    // SAFETY: room for MAX_STATS values after the 8-byte head (see above).
    unsafe { ethtool_raw(ifname, values.as_mut_ptr().cast())? };
    if names[2] as usize > MAX_STATS || unpair(values[0]).1 as usize > MAX_STATS {
        return Err(io::Error::other(format!("{ifname} grew past {MAX_STATS} statistics")));
    }
    // The counts the kernel answered may be smaller than asked if the device changed in
    // between: read no more than all three say.
    let n = count.min(names[2] as usize).min(unpair(values[0]).1 as usize);
    let words = &names[3..3 + n * ETH_GSTRING_LEN / 4];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok(bytes
        .chunks_exact(ETH_GSTRING_LEN)
        .zip(&values[1..])
        .take(n)
        .map(|(raw, value)| {
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            (String::from_utf8_lossy(&raw[..end]).into_owned(), *value)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_letters_round_trip() {
        assert_eq!(hash_letters(hash_bits("sdfn").unwrap()), "sdfn");
        assert_eq!(hash_bits("sdx"), None);
    }

    #[test]
    fn loopback_has_no_channels_and_a_bad_name_is_refused() {
        // The loopback device implements none of these operations: a clean error, no panic.
        assert!(channels("lo").is_err());
        assert!(coalesce("lo").is_err());
        assert!(channels("a-name-far-too-long-for-ifreq").is_err());
        assert!(stats("a-name-far-too-long-for-ifreq").is_err());
    }
}
