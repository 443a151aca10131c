//! Keeping this program's own code in memory while a ring the kernel fills without waiting is
//! read (AF_XDP): mlock(2) over the executable's read-only mappings (its code and constants),
//! munlock on drop. A lane that meets a path for the first time on a cold page cache would
//! otherwise wait on the disk for it while its RX ring overflows.

use std::io;
use std::os::unix::fs::MetadataExt;

use super::syscall;

/// The executable's read-only mappings, locked in memory for as long as this value lives.
#[derive(Debug)]
pub(crate) struct CodeLock {
    ranges: Vec<(usize, usize)>,
}

/// The `start-end` address ranges of `maps` (the text of /proc/self/maps) that map the file
/// `(dev, ino)` without write permission.
fn read_only_ranges_of(maps: &str, dev: u64, ino: u64) -> Vec<(usize, usize)> {
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_ascii_whitespace();
            let (range, perms) = (fields.next()?, fields.next()?);
            let (_offset, device, inode) = (fields.next()?, fields.next()?, fields.next()?);
            let (maj, min) = device.split_once(':')?;
            let same_file = u32::from_str_radix(maj, 16).ok()? == major
                && u32::from_str_radix(min, 16).ok()? == minor
                && inode.parse::<u64>().ok()? == ino;
            if !same_file || perms.contains('w') {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end > start).then_some((start, end))
        })
        .collect()
}

impl CodeLock {
    /// Locks the executable's read-only mappings (reading them from disk now if they are not in
    /// memory). Fails as mlock does (EPERM or ENOMEM: no CAP_IPC_LOCK and RLIMIT_MEMLOCK too
    /// small), with nothing left locked.
    pub(crate) fn executable() -> io::Result<Self> {
        let exe = std::fs::metadata("/proc/self/exe")?;
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        let wanted = read_only_ranges_of(&maps, exe.dev(), exe.ino());
        if wanted.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no mapping of the executable in /proc/self/maps",
            ));
        }
        let mut lock = Self { ranges: Vec::new() };
        for (start, end) in wanted {
            // SAFETY: mlock reads and writes no memory of ours: it only pins the pages of the
            // given range (the kernel checks that the range is mapped).
            syscall!(mlock(start as *const libc::c_void, end - start))?;
            lock.ranges.push((start, end));
        }
        Ok(lock)
    }
}

impl Drop for CodeLock {
    fn drop(&mut self) {
        for &(start, end) in &self.ranges {
            // SAFETY: as mlock above: unpins the range, touches no memory.
            let _ = syscall!(munlock(start as *const libc::c_void, end - start));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_files_read_only_mappings_are_taken() {
        let maps = "\
55d0a0000000-55d0a0200000 r--p 00000000 fd:01 1234 /usr/bin/corelane
55d0a0200000-55d0a0800000 r-xp 00200000 fd:01 1234 /usr/bin/corelane
55d0a0800000-55d0a0830000 rw-p 00800000 fd:01 1234 /usr/bin/corelane
7f0000000000-7f0000100000 r-xp 00000000 fd:01 999 /usr/lib/libc.so.6
7f0000200000-7f0000300000 r-xp 00000000 fd:02 1234 /other/fs/same-inode
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]
";
        let got = read_only_ranges_of(maps, libc::makedev(0xfd, 1), 1234);
        assert_eq!(got, vec![(0x55d0a0000000, 0x55d0a0200000), (0x55d0a0200000, 0x55d0a0800000)]);
    }

    #[test]
    fn this_test_binary_can_lock_its_own_code_and_lets_go_on_drop() {
        let locked_kb = || {
            std::fs::read_to_string("/proc/self/status")
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("VmLck:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
                .unwrap()
        };
        let lock = match CodeLock::executable() {
            Ok(lock) => lock,
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
                eprintln!("skipped: mlock not permitted here ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let bytes: usize = lock.ranges.iter().map(|(start, end)| end - start).sum();
        assert!(bytes > 0);
        assert!(locked_kb() * 1024 >= bytes as u64, "VmLck below what was locked");
        drop(lock);
    }
}
