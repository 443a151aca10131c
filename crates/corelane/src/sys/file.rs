//! File calls rustix does not offer: creat(2), which seed 002 compares with open(2).

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::syscall;

/// `creat(path, mode)`: the historical call, equivalent to open(O_CREAT|O_WRONLY|O_TRUNC).
pub(crate) fn creat(path: &Path, mode: u32) -> io::Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let fd = syscall!(creat(c_path.as_ptr(), mode as libc::mode_t))?;
    // SAFETY: creat returned a new, valid descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
