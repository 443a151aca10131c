//! The process's `environ`, read and edited by the constructor.

use super::*;

// ---- environ ------------------------------------------------------------------------------

extern "C" {
    static mut environ: *mut *mut c_char;
}

/// Upper bound on the entries read from `environ` (a hostile environment is bounded too).
const MAX_ENVIRON: usize = 1 << 16;

/// A copy of every `environ` entry (`NAME=value` bytes), in order.
///
/// Called only from the library's constructor, before main, while the process has one thread.
pub fn environ_entries() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // SAFETY: `environ` is NULL or a NULL-terminated array of NUL-terminated strings (the
    // process's environment); no other thread exists yet to change it.
    unsafe {
        let list = environ;
        if list.is_null() {
            return out;
        }
        for i in 0..MAX_ENVIRON {
            let entry = *list.add(i);
            if entry.is_null() {
                break;
            }
            out.push(core::ffi::CStr::from_ptr(entry).to_bytes().to_vec());
        }
    }
    out
}

/// Applies an edit of `environ` made by [`crate::environ::without_library`] over the same
/// entries: `keep[i]` is None to drop entry i (its pointer leaves the array, the rest move
/// down), or the bytes entry i becomes, which are never longer than it (written in place).
///
/// Called only from the library's constructor, before main, while the process has one thread.
pub fn environ_apply(keep: &[Option<Vec<u8>>]) {
    // SAFETY: as in `environ_entries`; the entries are the ones it read (same count, same
    // order, nothing has run in between). A rewritten entry is written inside its own string
    // (never longer, the NUL included), and pointers only move towards the start of the array.
    unsafe {
        let list = environ;
        if list.is_null() {
            return;
        }
        let mut to = 0;
        for (from, kept) in keep.iter().enumerate() {
            let entry = *list.add(from);
            if entry.is_null() {
                break;
            }
            let Some(bytes) = kept else { continue };
            let old = core::ffi::CStr::from_ptr(entry).to_bytes().len();
            if bytes.len() <= old {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), entry.cast::<u8>(), bytes.len());
                *entry.add(bytes.len()) = 0;
            }
            *list.add(to) = entry;
            to += 1;
        }
        *list.add(to) = core::ptr::null_mut();
    }
}
