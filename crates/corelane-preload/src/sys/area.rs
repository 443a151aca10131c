//! The counters' shared mapping.

use core::sync::atomic::{AtomicU32, AtomicU64};

use super::*;

// ---- The counters' mapping -------------------------------------------------------------

/// A shared mapping of a file, made once and never unmapped: its words can be handed out as
/// `&'static` atomics.
#[derive(Clone, Copy)]
pub struct Area {
    base: usize,
    len: usize,
}

impl Area {
    /// Maps `len` bytes of `fd` shared, read-write, if `fd` is (device, inode) and at least
    /// `len` long. Only fstat and mmap: the fd's offset and flags stay as they were.
    pub fn map(fd: c_int, dev: u64, ino: u64, len: usize) -> Option<Area> {
        let (d, i, size) = sys_fstat(fd)?;
        if (d, i) != (dev, ino) || size < len as u64 {
            return None;
        }
        // SAFETY: a fresh shared mapping of `len` bytes of a file at least that long (the
        // creator sealed it against shrinking, so no access faults); nothing else is mapped
        // over.
        let base = unsafe { mmap(core::ptr::null_mut(), len, PROT_READ_WRITE, MAP_SHARED, fd, 0) };
        (base != MAP_FAILED).then_some(Area { base: base as usize, len })
    }

    /// The 64-bit word at byte `offset`, if it lies inside and is aligned.
    pub fn u64_at(self, offset: usize) -> Option<&'static AtomicU64> {
        (offset % 8 == 0 && offset.checked_add(8)? <= self.len).then(|| {
            // SAFETY: inside the mapping, aligned, and the mapping is never unmapped; other
            // processes write it too, hence atomics only.
            unsafe { &*((self.base + offset) as *const AtomicU64) }
        })
    }

    /// The 32-bit word at byte `offset`, if it lies inside and is aligned.
    pub fn u32_at(self, offset: usize) -> Option<&'static AtomicU32> {
        (offset % 4 == 0 && offset.checked_add(4)? <= self.len).then(|| {
            // SAFETY: as in `u64_at`.
            unsafe { &*((self.base + offset) as *const AtomicU32) }
        })
    }
}
