//! The ways to move bytes from one file to another, each counting its system calls.

use std::io;
use std::os::fd::BorrowedFd;
use std::str::FromStr;

use rustix::fs::{copy_file_range, sendfile};
use rustix::io::{pread, pwrite};
use rustix::pipe::{pipe, splice, SpliceFlags};
use serde::Serialize;

use crate::sys::uring;

/// A copy method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CopyMethod {
    /// read(2)/write(2) through a user buffer: two crossings per buffer (the large-file study's baseline).
    ReadWrite,
    /// read/write with O_DIRECT on both files and a page-aligned buffer.
    Direct,
    /// sendfile(2): the kernel copies from the page cache, one call per chunk.
    Sendfile,
    /// splice(2) through a pipe: two calls per chunk, no copy to user space.
    Splice,
    /// copy_file_range(2): one call per chunk; file systems may share or reflink the data.
    CopyFileRange,
    /// io_uring reads and writes, a batch of chunks per io_uring_enter.
    IoUring,
    /// FICLONE: the copy shares the source's extents (btrfs, xfs, bcachefs); no data moves.
    /// Chosen by `--reflink`, never named as a method.
    Ficlone,
}

/// How the destination is created, as the large-file study compares: `creat` makes a named temporary with
/// creat(2)'s flags (O_CREAT|O_WRONLY|O_TRUNC, through open(2) so that O_EXCL|O_NOFOLLOW can be
/// added: creat(2) itself would follow a symlink planted at the name); `open` makes an unnamed
/// one with O_TMPFILE where the file system has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CreateCall {
    Creat,
    Open,
}

impl CopyMethod {
    pub const ALL: [CopyMethod; 6] = [
        CopyMethod::ReadWrite,
        CopyMethod::Direct,
        CopyMethod::Sendfile,
        CopyMethod::Splice,
        CopyMethod::CopyFileRange,
        CopyMethod::IoUring,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CopyMethod::ReadWrite => "read-write",
            CopyMethod::Direct => "direct",
            CopyMethod::Sendfile => "sendfile",
            CopyMethod::Splice => "splice",
            CopyMethod::CopyFileRange => "copy-file-range",
            CopyMethod::IoUring => "io-uring",
            CopyMethod::Ficlone => "ficlone",
        }
    }
}

impl FromStr for CopyMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|m| m.name()).collect();
            format!("unknown copy method `{s}`: choose auto or one of {}", names.join(", "))
        })
    }
}

/// Chunk size for the kernel-side methods: large enough that calls are few (8 per GiB), small
/// enough that Ctrl-C and progress are seen several times a second.
pub(crate) const KERNEL_CHUNK: usize = 128 << 20;
/// The pipe size splice asks for (the default is 64 KiB; bigger moves more per call pair).
pub(crate) const SPLICE_PIPE: usize = 1 << 20;

/// Copies `len` bytes at `offset` of `src` to the same offset of `dst`; `keep_going(bytes)` is
/// asked after every chunk (progress, Ctrl-C). Returns the data-moving calls made.
pub(crate) fn transfer(
    method: CopyMethod,
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    offset: u64,
    len: u64,
    buffer: &mut [u8],
    keep_going: &mut dyn FnMut(u64) -> bool,
) -> io::Result<u64> {
    let mut calls = 0u64;
    // `step(at, want)` moves up to `want` bytes at offset `at` (relative to `offset`) and
    // returns how many it moved and the calls it made.
    let mut drive = |chunk: usize, step: &mut dyn FnMut(u64, usize) -> io::Result<(usize, u64)>| {
        let mut done = 0u64;
        while done < len {
            let (n, c) = step(done, (len - done).min(chunk as u64) as usize)?;
            calls += c;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "source shrank during the copy",
                ));
            }
            done += n as u64;
            if !keep_going(done) {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "copy interrupted"));
            }
        }
        Ok(())
    };
    match method {
        CopyMethod::ReadWrite | CopyMethod::Direct => {
            let direct = method == CopyMethod::Direct;
            let size = buffer.len();
            drive(size, &mut |at, want| {
                // O_DIRECT needs whole blocks: ask for the rounded-up length; the file's end
                // makes the last read short, and the caller's ftruncate trims the tail.
                let ask = if direct { want.next_multiple_of(4096).min(size) } else { want };
                let got = pread(src, &mut buffer[..ask], offset + at)?.min(want);
                let put = if direct { got.next_multiple_of(4096).min(size) } else { got };
                let (mut written, mut c) = (0, 1);
                while written < put {
                    written += pwrite(dst, &buffer[written..put], offset + at + written as u64)?;
                    c += 1;
                }
                Ok((got, c))
            })?;
        }
        CopyMethod::Sendfile => {
            rustix::fs::seek(dst, rustix::fs::SeekFrom::Start(offset))?;
            let mut at_in = offset;
            drive(KERNEL_CHUNK, &mut |_, want| {
                Ok((sendfile(dst, src, Some(&mut at_in), want)?, 1))
            })?;
        }
        CopyMethod::Splice => {
            let (pipe_r, pipe_w) = pipe()?;
            // A bigger pipe moves more per pair of calls; the default is 64 KiB.
            let capacity =
                rustix::pipe::fcntl_setpipe_size(&pipe_w, SPLICE_PIPE).unwrap_or(1 << 16);
            let (mut at_in, mut at_out) = (offset, offset);
            drive(capacity, &mut |_, want| {
                let n = splice(src, Some(&mut at_in), &pipe_w, None, want, SpliceFlags::MOVE)?;
                let (mut out, mut c) = (0, 1);
                while out < n {
                    out +=
                        splice(&pipe_r, None, dst, Some(&mut at_out), n - out, SpliceFlags::MOVE)?;
                    c += 1;
                }
                Ok((n, c))
            })?;
        }
        CopyMethod::CopyFileRange => {
            let (mut at_in, mut at_out) = (offset, offset);
            drive(KERNEL_CHUNK, &mut |_, want| {
                Ok((copy_file_range(src, Some(&mut at_in), dst, Some(&mut at_out), want)?, 1))
            })?;
        }
        CopyMethod::Ficlone => {
            // The whole file at once (FICLONE has no range): the caller passes one extent.
            rustix::fs::ioctl_ficlone(dst, src)?;
            calls += 1;
        }
        CopyMethod::IoUring => {
            let chunk = buffer.len().clamp(4096, 8 << 20);
            calls += uring::copy_range(src, dst, offset, len, chunk, 4, keep_going)?;
        }
    }
    Ok(calls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for m in CopyMethod::ALL {
            assert_eq!(m.name().parse::<CopyMethod>(), Ok(m));
        }
        assert!("rsync".parse::<CopyMethod>().unwrap_err().contains("copy-file-range"));
    }
}
