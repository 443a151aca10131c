//! One byte per descriptor number, for every number a descriptor can have (0..=i32::MAX): a
//! static first page, then pages of 65,536 bytes mapped (anonymous, zeroed) the first time a
//! number in them is set and installed with compare-and-swap. Our own rather than a crate's:
//! the library has no dependencies, and this must be async-signal-safe (no malloc, no lock)
//! because a signal handler may close or accept. A page once installed is never unmapped
//! (each costs 64 KiB of address space, touched only where used); a page lost in a race
//! is unmapped by the thread that lost.

use core::sync::atomic::Ordering::{AcqRel, Acquire};
use core::sync::atomic::{AtomicPtr, AtomicU8};

use super::*;

const PAGE_BITS: u32 = 16;
const PAGE: usize = 1 << PAGE_BITS;
/// Pages for the numbers 0..=i32::MAX.
const PAGES: usize = (c_int::MAX as usize >> PAGE_BITS) + 1;
const MAP_PRIVATE_ANONYMOUS: c_int = 0x02 | 0x20;

/// A byte per descriptor number; 0 for a number never set.
pub struct FdBytes {
    first: [AtomicU8; PAGE],
    pages: [AtomicPtr<AtomicU8>; PAGES],
}

impl FdBytes {
    #[allow(clippy::new_without_default)]
    pub const fn new() -> FdBytes {
        FdBytes {
            first: [const { AtomicU8::new(0) }; PAGE],
            pages: [const { AtomicPtr::new(core::ptr::null_mut()) }; PAGES],
        }
    }

    /// The byte of `fd`, if its page exists (`make`: mapping it if not).
    pub fn get(&self, fd: c_int, make: bool) -> Option<&AtomicU8> {
        let n = usize::try_from(fd).ok()?;
        let (page, index) = (n >> PAGE_BITS, n & (PAGE - 1));
        if page == 0 {
            return self.first.get(index);
        }
        let slot = self.pages.get(page)?;
        let mut base = slot.load(Acquire);
        if base.is_null() {
            if !make {
                return None;
            }
            base = install(slot)?;
        }
        // SAFETY: `base` is an installed page: a mapping of PAGE zeroed bytes (AtomicU8 has
        // the layout of u8) that is never unmapped, and index < PAGE.
        Some(unsafe { &*base.add(index) })
    }

    /// Calls `each` with the byte of every number in `first..=last` whose page exists.
    pub fn each_in(&self, first: c_int, last: c_int, mut each: impl FnMut(&AtomicU8)) {
        let (Ok(first), Ok(last)) = (usize::try_from(first), usize::try_from(last)) else {
            return;
        };
        let mut n = first;
        while n <= last {
            let page_end = (n | (PAGE - 1)).min(last);
            if let Some(start) = self.get(n as c_int, false) {
                let start = start as *const AtomicU8;
                for i in 0..=(page_end - n) {
                    // SAFETY: bytes n..=page_end lie in the same page as `start` (n's byte).
                    each(unsafe { &*start.add(i) });
                }
            }
            n = page_end + 1;
        }
    }
}

/// Maps a zeroed page and installs it in `slot`, or takes the page another thread installed
/// first (unmapping its own). None when no memory could be mapped.
fn install(slot: &AtomicPtr<AtomicU8>) -> Option<*mut AtomicU8> {
    // SAFETY: an anonymous private mapping, new memory nobody else refers to.
    let page =
        unsafe { mmap(core::ptr::null_mut(), PAGE, PROT_READ_WRITE, MAP_PRIVATE_ANONYMOUS, -1, 0) };
    if page == MAP_FAILED {
        return None;
    }
    let page = page.cast::<AtomicU8>();
    match slot.compare_exchange(core::ptr::null_mut(), page, AcqRel, Acquire) {
        Ok(_) => Some(page),
        Err(theirs) => {
            // SAFETY: our own mapping, never published.
            unsafe { sys_munmap(page as usize, PAGE) };
            Some(theirs)
        }
    }
}
