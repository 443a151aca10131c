//! Looking up a user (getpwnam_r, so NSS sources count as they do for nginx) and giving up
//! root for it. glibc's setgroups, setgid and setuid change every thread of the process (its
//! SIGSETXID broadcast), unlike the raw syscalls, which change only the caller: that is why
//! these are libc calls and not rustix's per-thread `set_thread_*`.

use std::ffi::{CStr, CString};
use std::io;

use super::syscall;

/// A user's ids from the password database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ids {
    pub uid: u32,
    pub gid: u32,
}

/// `name`'s uid and primary gid, `None` if there is no such user.
pub(crate) fn lookup_user(name: &str) -> io::Result<Option<Ids>> {
    let Ok(cname) = CString::new(name) else { return Ok(None) };
    let mut buf = vec![0u8; 16 << 10];
    loop {
        // SAFETY: passwd is plain data; all-zero is a valid value that getpwnam_r overwrites.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: cname is NUL-terminated; pwd, buf (with its true length) and found are live,
        // writable and owned here for the duration of the call.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                &mut found,
            )
        };
        match rc {
            0 if found.is_null() => return Ok(None),
            0 => return Ok(Some(Ids { uid: pwd.pw_uid, gid: pwd.pw_gid })),
            libc::ERANGE if buf.len() < (1 << 20) => buf.resize(buf.len() * 4, 0),
            // "Not found" is reported as one of these by some NSS modules.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The name of the user with `uid`, if the password database has one.
pub(crate) fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0u8; 16 << 10];
    // SAFETY: as in lookup_user.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: pwd, buf (with its true length) and found are live and writable for the call.
    let rc =
        unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points to a NUL-terminated string inside buf, still alive.
    Some(unsafe { CStr::from_ptr(pwd.pw_name) }.to_string_lossy().into_owned())
}

/// Empties the supplementary groups, then sets the real, effective and saved gid, then uid,
/// of every thread of the process.
pub(crate) fn become_user(ids: Ids) -> io::Result<()> {
    // SAFETY: an empty list (count 0, null pointer) is read from nothing.
    syscall!(setgroups(0, std::ptr::null()))?;
    // SAFETY: no pointer arguments.
    syscall!(setgid(ids.gid))?;
    // SAFETY: no pointer arguments.
    syscall!(setuid(ids.uid))?;
    Ok(())
}

/// Tries setuid(0) (it must fail once root is given up) and says whether it succeeded.
pub(crate) fn can_become_root() -> bool {
    // SAFETY: no pointer arguments.
    syscall!(setuid(0)).is_ok()
}

/// The calling thread's (real, effective, saved) uids and gids, and its supplementary groups.
pub(crate) fn current_ids() -> io::Result<([u32; 3], [u32; 3], usize)> {
    let (mut ru, mut eu, mut su) = (0, 0, 0);
    let (mut rg, mut eg, mut sg) = (0, 0, 0);
    // SAFETY: three uid_t on this frame, each written once.
    syscall!(getresuid(&mut ru, &mut eu, &mut su))?;
    // SAFETY: three gid_t on this frame, each written once.
    syscall!(getresgid(&mut rg, &mut eg, &mut sg))?;
    // SAFETY: size 0 asks only for the count; nothing is written through the null pointer.
    let groups = syscall!(getgroups(0, std::ptr::null_mut()))?;
    Ok(([ru, eu, su], [rg, eg, sg], groups as usize))
}
