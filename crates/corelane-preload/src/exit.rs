//! The syscall threads' CPU time when the process ends: at exit(3) and return from main (the
//! library's fini), and at `_exit`/`_Exit` (interposed). A process killed by a signal records
//! nothing here; `corelane run` reads the threads' schedstat itself from the ids each record
//! holds (THREAD_TIDS, SQPOLL_TID).

use crate::lane;
use crate::stats;
use crate::sys::*;
use crate::uring;

/// Every syscall thread's CPU time, exact to this moment.
pub extern "C" fn record_at_exit() {
    if let Some(ns) = uring::sqpoll_cpu_ns() {
        stats::set_cpu(0, ns);
    }
    lane::record_threads_cpu();
    lane::at_exit();
}

#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub extern "C" fn _exit(status: c_int) -> ! {
    record_at_exit();
    real::exit_now(false, status)
}

#[allow(unsafe_code)] // an export (`#[no_mangle]`): the interposer's contract with C
#[no_mangle]
pub extern "C" fn _Exit(status: c_int) -> ! {
    record_at_exit();
    real::exit_now(true, status)
}
