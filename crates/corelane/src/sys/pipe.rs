//! A pipe that carries a file's pages to a socket without a copy through user space: the file
//! is spliced in (the pipe takes references to its page-cache pages), the socket's splice
//! takes them out. No unsafe code: rustix covers pipe2, F_SETPIPE_SZ and splice(2).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::pipe::{PipeFlags, SpliceFlags};

/// A pipe and the bytes it holds.
#[derive(Debug)]
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    queued: usize,
}

impl Pipe {
    /// A pipe asked to hold `capacity` bytes (F_SETPIPE_SZ); it keeps the kernel's default
    /// (64 KiB) when the size is refused (over /proc/sys/fs/pipe-max-size, or the user's pipe
    /// pages spent).
    pub fn new(capacity: usize) -> io::Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let capacity = rustix::pipe::fcntl_setpipe_size(&write, capacity)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&write))?;
        Ok(Self { read, write, capacity, queued: 0 })
    }

    /// Bytes in the pipe, not yet taken by the socket.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// The end the socket's splice reads from.
    pub fn read_end(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Splices up to `len` bytes of `file` from `offset` into the pipe, as much as it has
    /// room for; returns the count, short (even 0) when the file ends first.
    pub fn fill_from(
        &mut self,
        file: BorrowedFd<'_>,
        offset: u64,
        len: usize,
    ) -> io::Result<usize> {
        let want = len.min(self.capacity - self.queued);
        let mut at = offset;
        let mut got = 0;
        while got < want {
            match rustix::pipe::splice(
                file,
                Some(&mut at),
                &self.write,
                None,
                want - got,
                SpliceFlags::NONBLOCK,
            ) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => {}
                // Full: a pipe's room is counted in pages, and a file's first page may be
                // partial, so a pipe can fill before `capacity` bytes.
                Err(rustix::io::Errno::AGAIN) if got > 0 => break,
                Err(e) => return Err(e.into()),
            }
        }
        self.queued += got;
        Ok(got)
    }

    /// Counts `n` bytes as taken out by the socket.
    pub fn drained(&mut self, n: usize) {
        self.queued = self.queued.saturating_sub(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_file_range_goes_through_the_pipe_whole() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&data).unwrap();
        let mut pipe = Pipe::new(1 << 20).unwrap();
        assert!(pipe.capacity >= 64 << 10);
        let n = pipe.fill_from(file.as_fd(), 1000, 100_000).unwrap();
        assert_eq!((n, pipe.queued()), (100_000.min(pipe.capacity), n));
        let mut out = vec![0u8; n];
        std::fs::File::from(pipe.read.try_clone().unwrap()).read_exact(&mut out).unwrap();
        assert!(out == data[1000..1000 + n]);
        // Past the end: nothing, not an error.
        pipe.drained(n);
        assert_eq!(pipe.fill_from(file.as_fd(), 300_000, 10).unwrap(), 0);
    }
}
