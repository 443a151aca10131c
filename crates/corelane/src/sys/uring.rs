//! Copying a byte range through io_uring: a batch of reads into owned buffers, then the
//! matching writes, with one io_uring_enter per batch instead of one syscall per chunk.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{opcode, types, IoUring};

/// Copies `len` bytes at `offset` from `src` to the same offset of `dst` in chunks of `chunk`
/// bytes, `depth` chunks in flight; `keep_going` is asked between batches. Returns the number
/// of io_uring_enter calls made.
pub(crate) fn copy_range(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    chunk: usize,
    depth: usize,
    keep_going: &mut dyn FnMut(u64) -> bool,
) -> io::Result<u64> {
    let depth = depth.clamp(1, 64);
    let mut ring = IoUring::new((depth * 2) as u32)?;
    let mut buffers: Vec<Vec<u8>> = (0..depth).map(|_| vec![0u8; chunk]).collect();
    let (mut done, mut calls) = (0u64, 0u64);
    while done < len {
        // Reads for up to `depth` chunks.
        let mut batch = Vec::with_capacity(depth);
        for (i, buf) in buffers.iter_mut().enumerate() {
            let at = done + (i * chunk) as u64;
            if at >= len {
                break;
            }
            let n = (len - at).min(chunk as u64) as u32;
            let read = opcode::Read::new(types::Fd(src.as_raw_fd()), buf.as_mut_ptr(), n)
                .offset(offset + at)
                .build()
                .user_data(i as u64);
            // SAFETY: `buf` lives in `buffers` until every completion of this batch has been
            // reaped below, and the fd stays open for the call (io_uring_enter(2)).
            unsafe { ring.submission().push(&read) }
                .map_err(|_| io::Error::other("io_uring queue full"))?;
            batch.push((at, n));
        }
        ring.submit_and_wait(batch.len())?;
        calls += 1;
        let mut got = vec![0usize; batch.len()];
        for cqe in ring.completion().take(batch.len()) {
            let r = cqe.result();
            if r < 0 {
                return Err(io::Error::from_raw_os_error(-r));
            }
            got[cqe.user_data() as usize] = r as usize;
        }
        // Writes of what each read returned (a short read at EOF writes less).
        for (i, &(at, _)) in batch.iter().enumerate() {
            let write =
                opcode::Write::new(types::Fd(dst.as_raw_fd()), buffers[i].as_ptr(), got[i] as u32)
                    .offset(offset + at)
                    .build()
                    .user_data(i as u64);
            // SAFETY: as above; the buffers are not touched until the writes complete.
            unsafe { ring.submission().push(&write) }
                .map_err(|_| io::Error::other("io_uring queue full"))?;
        }
        ring.submit_and_wait(batch.len())?;
        calls += 1;
        for cqe in ring.completion().take(batch.len()) {
            let r = cqe.result();
            if r < 0 {
                return Err(io::Error::from_raw_os_error(-r));
            }
            let i = cqe.user_data() as usize;
            if r as usize != got[i] {
                return Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "short write through io_uring",
                ));
            }
        }
        // Advance over the contiguous prefix: after a short read, later chunks are copied again
        // (rewriting the same bytes) rather than leaving a gap.
        let next = batch.iter().zip(&got).find(|((_, n), g)| (**g as u32) < *n).map_or_else(
            || batch.last().map_or(done, |(at, n)| at + u64::from(*n)),
            |((at, _), g)| at + *g as u64,
        );
        if next == done {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "source shrank during the copy",
            ));
        }
        done = next;
        if !keep_going(done) {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "copy interrupted"));
        }
    }
    Ok(calls)
}
