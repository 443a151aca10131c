//! What a program `corelane run` starts does in the child between fork and exec: ask the
//! kernel to SIGKILL it when its parent thread ends (`PR_SET_PDEATHSIG`), then check that the
//! parent is still the process that forked it. If that parent died before the prctl took
//! effect, the child was already reparented (to a subreaper or init) and no signal will
//! ever come: it exits at once instead of running unsupervised.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// The exit status of a child whose parent was gone before it could exec.
pub(crate) const ORPHANED_STATUS: i32 = 125;

/// Makes `cmd`'s child die with the thread that spawns it (that thread must live as long as
/// the supervision: the kernel sends the signal when the *thread* that forked ends).
pub(crate) fn die_with_parent(cmd: &mut Command) {
    let parent = rustix::process::getpid();
    let hook = move || {
        rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
        if rustix::process::getppid() != Some(parent) {
            // SAFETY: _exit is async-signal-safe and ends this forked child at once, without
            // running the parent's atexit handlers or flushing its copied stdio buffers.
            unsafe { libc::_exit(ORPHANED_STATUS) };
        }
        Ok(())
    };
    // SAFETY: the hook runs in the forked child before exec and only makes async-signal-safe
    // system calls (prctl, getppid, _exit); it allocates nothing and takes no lock.
    unsafe { cmd.pre_exec(hook) };
}
