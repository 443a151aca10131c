//! A lane's pipes for sending files by splice: lent to a connection only while a file body is
//! in flight, back to the lane when it is sent, so an idle connection holds none. At most
//! [`PipePool::MAX_LENT`] per lane (two descriptors each); past that, a file goes out by read
//! and send through the connection's output buffer instead.

use crate::sys::pipe::Pipe;

#[derive(Debug)]
pub(crate) struct PipePool {
    free: Vec<Pipe>,
    lent: usize,
    recycle: bool,
}

impl PipePool {
    /// Pipes lent at once per lane: 512 descriptors, against the 1,024 of a default soft
    /// RLIMIT_NOFILE (the io_uring lane's connections use none: they are fixed files).
    pub const MAX_LENT: usize = 256;
    /// Free pipes kept for the next file; beyond it returned pipes are closed.
    const KEEP: usize = 16;
    /// Bytes each pipe is asked to hold: a 1 MiB file goes in with one splice.
    pub const BYTES: usize = 1 << 20;

    /// `recycle`: keep returned pipes for the next file (seed 001's buffer recycling).
    pub fn new(recycle: bool) -> Self {
        Self { free: Vec::new(), lent: 0, recycle }
    }

    /// A pipe for one file body, or `None` when this lane has lent its share or the kernel
    /// refuses another pipe (out of descriptors): then the file is sent from the output.
    pub fn lend(&mut self) -> Option<Pipe> {
        if self.lent >= Self::MAX_LENT {
            return None;
        }
        let pipe = match self.free.pop() {
            Some(pipe) => pipe,
            None => Pipe::new(Self::BYTES).ok()?,
        };
        self.lent += 1;
        Some(pipe)
    }

    /// Takes a lent pipe back. One still holding bytes (a connection ended mid-file) is
    /// closed: its pages are another response's.
    pub fn give(&mut self, pipe: Pipe) {
        self.lent = self.lent.saturating_sub(1);
        if self.recycle && pipe.queued() == 0 && self.free.len() < Self::KEEP {
            self.free.push(pipe);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// Past its share a lane lends no pipe (the file goes by read and send), and a pipe that
    /// comes back holding bytes is never lent again.
    #[test]
    fn lending_is_bounded_and_a_dirty_pipe_is_not_reused() {
        // 512 descriptors: more than a default soft limit leaves beside other tests.
        use rustix::process::{getrlimit, setrlimit, Resource};
        let limit = getrlimit(Resource::Nofile);
        let raised = rustix::process::Rlimit { current: limit.maximum, ..limit };
        let _ = setrlimit(Resource::Nofile, raised);
        let mut pool = PipePool::new(true);
        let mut lent: Vec<Pipe> = (0..PipePool::MAX_LENT).map_while(|_| pool.lend()).collect();
        assert_eq!(lent.len(), PipePool::MAX_LENT);
        assert!(pool.lend().is_none(), "lent past the lane's share");
        let file = tempfile::tempfile().unwrap();
        file.set_len(4096).unwrap();
        let mut dirty = lent.pop().unwrap();
        assert_eq!(dirty.fill_from(file.as_fd(), 0, 4096).unwrap(), 4096);
        pool.give(dirty);
        assert_eq!(pool.free.len(), 0, "a pipe holding bytes is closed");
        for pipe in lent {
            pool.give(pipe);
        }
        assert_eq!((pool.lent, pool.free.len()), (0, PipePool::KEEP));
    }
}
