//! The bpf(2) commands corelane's XDP path needs, written out here because no well-kept crate
//! covers them without libbpf or clang: map creation and updates, program load (with the
//! verifier's log), `BPF_LINK_CREATE` for XDP, and the object queries that tell whose program
//! an interface carries. Every attribute block is 128 zeroed bytes (larger than any command's
//! part of `union bpf_attr` used here) with fields written at their uapi offsets.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_GET_FD_BY_ID: libc::c_long = 13;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;

/// `BPF_MAP_TYPE_PERCPU_ARRAY`.
pub(crate) const MAP_PERCPU_ARRAY: u32 = 6;
/// `BPF_MAP_TYPE_XSKMAP`.
pub(crate) const MAP_XSKMAP: u32 = 17;
const PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP`, the attach type of an XDP link.
const ATTACH_XDP: u32 = 37;
const LINK_TYPE_XDP: u32 = 6;

/// The attribute block of one bpf(2) call: 128 bytes, 8-aligned like `union bpf_attr`.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Default for Attr {
    fn default() -> Self {
        Self([0; 128])
    }
}

impl Attr {
    fn u32_at(&mut self, offset: usize, value: u32) -> &mut Self {
        self.0[offset..offset + 4].copy_from_slice(&value.to_ne_bytes());
        self
    }

    fn u64_at(&mut self, offset: usize, value: u64) -> &mut Self {
        self.0[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
        self
    }

    /// A NUL-terminated name of at most 15 bytes in a 16-byte field.
    fn name_at(&mut self, offset: usize, name: &str) -> &mut Self {
        let n = name.len().min(15);
        self.0[offset..offset + 16].fill(0);
        self.0[offset..offset + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }

    fn get_u32(&self, offset: usize) -> u32 {
        u32_in(&self.0, offset)
    }
}

fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a 128-byte block the kernel reads (and for some commands writes) for
    // the duration of the call; every pointer stored in it points into memory the caller keeps
    // alive across this call (see each user). The size passed is the block's size.
    let res = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            std::mem::size_of::<Attr>() as libc::c_uint,
        )
    };
    if res < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(res)
    }
}

fn fd_of(res: libc::c_long) -> OwnedFd {
    // SAFETY: the command returned a new file descriptor that nothing else owns.
    unsafe { OwnedFd::from_raw_fd(res as libc::c_int) }
}

fn raw(fd: BorrowedFd<'_>) -> u32 {
    fd.as_raw_fd() as u32
}

/// Creates a map (`BPF_MAP_CREATE`).
pub(crate) fn map_create(
    kind: u32,
    key_size: u32,
    value_size: u32,
    entries: u32,
    name: &str,
) -> io::Result<OwnedFd> {
    let mut attr = Attr::default();
    attr.u32_at(0, kind).u32_at(4, key_size).u32_at(8, value_size).u32_at(12, entries);
    attr.name_at(28, name);
    bpf(BPF_MAP_CREATE, &mut attr).map(fd_of)
}

/// Sets `key` to `value` in a map whose key and value are 4 bytes (an XSKMAP entry).
pub(crate) fn map_update_u32(map: BorrowedFd<'_>, key: u32, value: u32) -> io::Result<()> {
    let mut attr = Attr::default();
    // `key` and `value` live on this frame for the whole call.
    attr.u32_at(0, raw(map))
        .u64_at(8, &key as *const u32 as u64)
        .u64_at(16, &value as *const u32 as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Removes `key` from a map with 4-byte keys.
pub(crate) fn map_delete_u32(map: BorrowedFd<'_>, key: u32) -> io::Result<()> {
    let mut attr = Attr::default();
    attr.u32_at(0, raw(map)).u64_at(8, &key as *const u32 as u64);
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
}

/// Reads entry `key` of a per-CPU array of u64 counters, summed over CPUs. The kernel writes
/// one value per possible CPU, so the map is checked to be such an array (4-byte keys, 8-byte
/// values) and the buffer has a slot for every CPU this machine may ever bring up.
pub(crate) fn percpu_sum_u64(map: BorrowedFd<'_>, key: u32) -> io::Result<u64> {
    // struct bpf_map_info: type at 0, key_size at 8, value_size at 12.
    let mut info = [0u8; 24];
    obj_info(map, &mut info)?;
    if u32_in(&info, 0) != MAP_PERCPU_ARRAY || u32_in(&info, 8) != 4 || u32_in(&info, 12) != 8 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a per-CPU array of u64 counters with u32 keys",
        ));
    }
    let mut values = vec![0u64; possible_cpus()?];
    let mut attr = Attr::default();
    attr.u32_at(0, raw(map))
        .u64_at(8, &key as *const u32 as u64)
        .u64_at(16, values.as_mut_ptr() as u64);
    bpf(BPF_MAP_LOOKUP_ELEM, &mut attr)?;
    Ok(values.iter().sum())
}

/// One past the highest CPU the kernel may ever bring up (/sys/devices/system/cpu/possible,
/// "0-3" or "0,2-7"): at least the number of slots a per-CPU map value has. Read once.
fn possible_cpus() -> io::Result<usize> {
    static POSSIBLE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    let parse = || {
        let text = std::fs::read_to_string("/sys/devices/system/cpu/possible").ok()?;
        let max = text.trim().split([',', '-']).map(|n| n.parse::<usize>().ok()).max()??;
        Some(max + 1)
    };
    POSSIBLE.get_or_init(parse).ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, "cannot read /sys/devices/system/cpu/possible")
    })
}

/// Loads an XDP program (`BPF_PROG_LOAD`); on refusal the verifier's log is in the error.
pub(crate) fn prog_load_xdp(insns: &[u64], name: &str) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = Attr::default();
    attr.u32_at(0, PROG_TYPE_XDP)
        .u32_at(4, insns.len() as u32)
        .u64_at(8, insns.as_ptr() as u64)
        .u64_at(16, license.as_ptr() as u64)
        .u32_at(68, ATTACH_XDP)
        .name_at(48, name);
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(fd_of(fd)),
        Err(first) if first.raw_os_error() == Some(libc::EACCES) => {
            // Ask again with the log on so the error says what the verifier refused.
            attr.u32_at(24, 1).u32_at(28, log.len() as u32).u64_at(32, log.as_mut_ptr() as u64);
            match bpf(BPF_PROG_LOAD, &mut attr) {
                Ok(fd) => Ok(fd_of(fd)),
                Err(e) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]);
                    let tail: Vec<&str> = text.lines().rev().take(6).collect();
                    Err(io::Error::new(
                        e.kind(),
                        format!(
                            "{e}; verifier: {}",
                            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                        ),
                    ))
                }
            }
        }
        Err(e) => Err(e),
    }
}

/// Attaches an XDP program to an interface through a bpf_link (`BPF_LINK_CREATE`): the
/// program stays attached exactly as long as the returned descriptor (or a copy) is open.
/// `flags` is `XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`; a link never replaces a program
/// already attached (EBUSY).
pub(crate) fn link_create_xdp(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut attr = Attr::default();
    attr.u32_at(0, raw(prog)).u32_at(4, ifindex).u32_at(8, ATTACH_XDP).u32_at(12, flags);
    bpf(BPF_LINK_CREATE, &mut attr).map(fd_of)
}

/// What a loaded program is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgInfo {
    pub id: u32,
    pub name: String,
}

/// Opens the program with `id` (`BPF_PROG_GET_FD_BY_ID`).
pub(crate) fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    let mut attr = Attr::default();
    attr.u32_at(0, id);
    bpf(BPF_PROG_GET_FD_BY_ID, &mut attr).map(fd_of)
}

/// Fills `info` with `BPF_OBJ_GET_INFO_BY_FD`.
fn obj_info(fd: BorrowedFd<'_>, info: &mut [u8]) -> io::Result<()> {
    let mut attr = Attr::default();
    attr.u32_at(0, raw(fd)).u32_at(4, info.len() as u32).u64_at(8, info.as_mut_ptr() as u64);
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr).map(drop)
}

fn u32_in(bytes: &[u8], offset: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&bytes[offset..offset + 4]);
    u32::from_ne_bytes(word)
}

/// The id and name of the program behind `fd` (struct bpf_prog_info: id at 4, name at 64).
pub(crate) fn prog_info(fd: BorrowedFd<'_>) -> io::Result<ProgInfo> {
    let mut info = [0u8; 80];
    obj_info(fd, &mut info)?;
    let name = &info[64..80];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(ProgInfo { id: u32_in(&info, 4), name: String::from_utf8_lossy(&name[..end]).into_owned() })
}

/// The ids of every XDP link on `ifindex` and the program each holds, found by walking the
/// kernel's links (`BPF_LINK_GET_NEXT_ID`); links that vanish during the walk are skipped.
pub(crate) fn xdp_links_on(ifindex: u32) -> io::Result<Vec<(u32, u32)>> {
    let mut found = Vec::new();
    let mut id = 0u32;
    loop {
        let mut attr = Attr::default();
        attr.u32_at(0, id);
        match bpf(BPF_LINK_GET_NEXT_ID, &mut attr) {
            Ok(_) => id = attr.get_u32(4),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(found),
            Err(e) => return Err(e),
        }
        let mut attr = Attr::default();
        attr.u32_at(0, id);
        let Ok(fd) = bpf(BPF_LINK_GET_FD_BY_ID, &mut attr).map(fd_of) else { continue };
        let mut info = [0u8; 64];
        use std::os::fd::AsFd;
        if obj_info(fd.as_fd(), &mut info).is_err() {
            continue;
        }
        // struct bpf_link_info: type at 0, id at 4, prog_id at 8, xdp.ifindex at 16.
        if u32_in(&info, 0) == LINK_TYPE_XDP && u32_in(&info, 16) == ifindex {
            found.push((u32_in(&info, 4), u32_in(&info, 8)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_fields_land_at_their_offsets() {
        let mut a = Attr::default();
        a.u32_at(0, 1).u32_at(4, 2).u32_at(12, 3).name_at(28, "abcdefghijklmnopq");
        assert_eq!(u32_in(&a.0, 0), 1);
        assert_eq!(u32_in(&a.0, 4), 2);
        assert_eq!(u32_in(&a.0, 12), 3);
        assert_eq!(&a.0[28..44], b"abcdefghijklmno\0");
    }

    /// The kernel writes a per-CPU value for every possible CPU: a map whose values are wider
    /// than 8 bytes (or any other kind of map) would overrun the reader's buffer, so it is
    /// refused before the lookup; the right map reads back its sum.
    #[test]
    fn a_per_cpu_read_refuses_a_map_whose_values_would_overrun_the_buffer() {
        let wide = match map_create(MAP_PERCPU_ARRAY, 4, 64, 1, "cl_test_wide") {
            Ok(fd) => fd,
            Err(e) => {
                eprintln!("skipped: cannot create a BPF map here ({e})");
                return;
            }
        };
        use std::os::fd::AsFd;
        let err = percpu_sum_u64(wide.as_fd(), 0).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let xsk = map_create(MAP_XSKMAP, 4, 4, 1, "cl_test_xsk").unwrap();
        assert!(percpu_sum_u64(xsk.as_fd(), 0).is_err());
        let counters = map_create(MAP_PERCPU_ARRAY, 4, 8, 1, "cl_test_ok").unwrap();
        assert_eq!(percpu_sum_u64(counters.as_fd(), 0).unwrap(), 0);
    }
}
