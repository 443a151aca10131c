//! Copying a byte range through io_uring: a batch of reads into owned buffers, then the
//! matching writes, with one io_uring_enter per batch instead of one syscall per chunk.

use std::io;
#[cfg(test)]
use std::os::fd::AsFd;
use std::os::fd::{AsRawFd, BorrowedFd};

use io_uring::{opcode, types, IoUring};

/// Submits what is queued and waits until `want` completions are reaped into `out` as
/// (user_data, result), retrying io_uring_enter when a signal interrupts it (EINTR).
fn reap(ring: &mut IoUring, want: usize, out: &mut Vec<(u64, i32)>) -> io::Result<()> {
    out.clear();
    while out.len() < want {
        match ring.submit_and_wait(want - out.len()) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        out.extend(ring.completion().map(|c| (c.user_data(), c.result())));
    }
    Ok(())
}

/// A read or write the kernel asks to be tried again.
fn retryable(result: i32) -> bool {
    result == -libc::EINTR || result == -libc::EAGAIN
}

/// Copies `len` bytes at `offset` from `src` to the same offset of `dst` in chunks of `chunk`
/// bytes, `depth` chunks in flight; `keep_going` is asked between batches. Returns the number
/// of io_uring_enter calls made.
///
/// Every submitted read and write is reaped before this returns, on every path: the kernel
/// writes into and reads from `buffers` until its completion arrives, so freeing them earlier
/// would hand it freed memory. If the ring itself fails while operations are in flight (not
/// EINTR, which is retried), the buffers are leaked rather than freed.
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
    let mut in_flight = false;
    let result =
        copy_batches(&mut ring, &mut buffers, src, dst, offset, len, keep_going, &mut in_flight);
    if in_flight {
        // The ring failed with operations in flight: their buffers must outlive them.
        std::mem::forget(buffers);
    }
    result
}

/// Where one read of a batch starts (relative to the range's offset) and how many bytes it
/// asks for.
type Chunk = (u64, u32);

/// [`copy_range`]'s batches: reads of up to one chunk per buffer, then writes of what they
/// returned, until `len` bytes are copied; `in_flight` is true while the kernel holds buffers.
#[allow(clippy::too_many_arguments)]
fn copy_batches(
    ring: &mut IoUring,
    buffers: &mut [Vec<u8>],
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    keep_going: &mut dyn FnMut(u64) -> bool,
    in_flight: &mut bool,
) -> io::Result<u64> {
    let (mut done, mut calls) = (0u64, 0u64);
    let mut reaped = Vec::with_capacity(buffers.len());
    // Interrupted batches tried again before giving up (a signal storm, not a lost byte).
    let mut retries_left = 1000;
    while done < len {
        let batch = queue_reads(ring, buffers, src, offset, len, done);
        *in_flight = true;
        reap(ring, batch.len(), &mut reaped)?;
        *in_flight = false;
        calls += 1;
        let (mut got, read_interrupted) = read_results(&reaped, batch.len())?;
        let writes = queue_writes(ring, buffers, dst, offset, &batch, &got);
        *in_flight = true;
        reap(ring, writes, &mut reaped)?;
        *in_flight = false;
        calls += 1;
        let write_interrupted = write_results(&reaped, &mut got)?;
        let next = copied_prefix_end(&batch, &got, done);
        if next == done {
            if (read_interrupted || write_interrupted) && retries_left > 0 {
                retries_left -= 1;
                continue;
            }
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

/// Queues reads of up to one chunk per buffer from `done` on (not past `len`); returns the
/// chunks queued, the i-th read into `buffers[i]`.
fn queue_reads(
    ring: &mut IoUring,
    buffers: &mut [Vec<u8>],
    src: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    done: u64,
) -> Vec<Chunk> {
    let chunk = buffers.first().map_or(1, Vec::len);
    let mut batch = Vec::with_capacity(buffers.len());
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
        // SAFETY: `buf` lives in `buffers`, which the caller frees only after every
        // completion of this batch has been reaped (or leaks while `in_flight`), and the fd
        // stays open for the call (io_uring_enter(2)). The ring holds 2 x depth entries,
        // so the push cannot fail.
        if unsafe { ring.submission().push(&read) }.is_err() {
            break;
        }
        batch.push((at, n));
    }
    batch
}

/// The bytes each of a batch's `count` reads returned, and whether one was interrupted (it
/// counts as 0 bytes, to be read again); a read's error fails the copy.
fn read_results(reaped: &[(u64, i32)], count: usize) -> io::Result<(Vec<usize>, bool)> {
    let mut got = vec![0usize; count];
    let mut failure = None;
    let mut interrupted = false;
    for &(i, r) in reaped {
        match r {
            r if r >= 0 => got[i as usize] = r as usize,
            r if retryable(r) => interrupted = true,
            r => failure = Some(io::Error::from_raw_os_error(-r)),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((got, interrupted)),
    }
}

/// Queues writes of what each read returned (a short read at EOF writes less); returns how
/// many were queued.
fn queue_writes(
    ring: &mut IoUring,
    buffers: &[Vec<u8>],
    dst: BorrowedFd<'_>,
    offset: u64,
    batch: &[Chunk],
    got: &[usize],
) -> usize {
    let mut writes = 0;
    for (i, &(at, _)) in batch.iter().enumerate() {
        if got[i] == 0 {
            continue;
        }
        let write =
            opcode::Write::new(types::Fd(dst.as_raw_fd()), buffers[i].as_ptr(), got[i] as u32)
                .offset(offset + at)
                .build()
                .user_data(i as u64);
        // SAFETY: as for the reads; the buffers are not touched until the writes are reaped.
        if unsafe { ring.submission().push(&write) }.is_err() {
            break;
        }
        writes += 1;
    }
    writes
}

/// Lowers `got` to what each write wrote, and says whether one was interrupted; a write's
/// error fails the copy.
fn write_results(reaped: &[(u64, i32)], got: &mut [usize]) -> io::Result<bool> {
    let mut failure = None;
    let mut interrupted = false;
    for &(i, r) in reaped {
        if r < 0 && retryable(r) {
            // Written again with its batch: the same bytes at the same offset.
            got[i as usize] = 0;
            interrupted = true;
        } else if r < 0 {
            failure = Some(io::Error::from_raw_os_error(-r));
        } else if r as usize != got[i as usize] {
            // A short write: keep the prefix, copy the rest again.
            got[i as usize] = r as usize;
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(interrupted),
    }
}

/// Where the batch's contiguous copied prefix ends: after a short read or write, later chunks
/// are copied again (rewriting the same bytes) rather than leaving a gap.
fn copied_prefix_end(batch: &[Chunk], got: &[usize], done: u64) -> u64 {
    batch.iter().zip(got).find(|((_, n), g)| (**g as u32) < *n).map_or_else(
        || batch.last().map_or(done, |(at, n)| at + u64::from(*n)),
        |((at, _), g)| at + *g as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    fn copied(len: usize, chunk: usize) -> (Vec<u8>, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
        let mut src = tempfile::tempfile().unwrap();
        src.write_all(&data).unwrap();
        let mut dst = tempfile::tempfile().unwrap();
        copy_range(src.as_fd(), dst.as_fd(), 0, len as u64, chunk, 4, &mut |_| true).unwrap();
        let mut out = Vec::new();
        dst.rewind().unwrap();
        dst.read_to_end(&mut out).unwrap();
        (data, out)
    }

    #[test]
    fn copies_whole_and_partial_batches() {
        for (len, chunk) in [(1, 4096), (4096 * 4, 4096), (4096 * 9 + 17, 4096), (100_000, 3000)] {
            let (a, b) = copied(len, chunk);
            assert!(a == b, "len {len} chunk {chunk}");
        }
    }

    /// A stop between batches returns an error only after every operation was reaped; the
    /// next ring on the same files works (nothing is left in flight on the descriptors).
    #[test]
    fn a_stop_mid_copy_leaves_nothing_in_flight() {
        let src = tempfile::tempfile().unwrap();
        src.set_len(1 << 20).unwrap();
        let dst = tempfile::tempfile().unwrap();
        let err =
            copy_range(src.as_fd(), dst.as_fd(), 0, 1 << 20, 4096, 4, &mut |_| false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::Interrupted);
        copy_range(src.as_fd(), dst.as_fd(), 0, 1 << 20, 4096, 4, &mut |_| true).unwrap();
    }
}
