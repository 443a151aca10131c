//! Keeping this program's own code in memory while a ring the kernel fills without waiting is
//! read (AF_XDP): mlock(2) over the executable's read-only mappings (its code and constants),
//! munlock on drop. A lane that meets a path for the first time on a cold page cache would
//! otherwise wait on the disk for it while its RX ring overflows.

use std::io;

use super::syscall;

/// The executable's read-only mappings, locked in memory for as long as this value lives.
/// Locks do not nest (munlock lets go of a page however often it was locked): one per process.
#[derive(Debug)]
pub(crate) struct CodeLock {
    ranges: Vec<(usize, usize)>,
}

/// One line of /proc/self/maps: its address range, permissions and the file it maps (device
/// and inode as the kernel prints them there).
struct Mapping<'a> {
    start: usize,
    end: usize,
    perms: &'a str,
    file: (&'a str, &'a str),
}

fn mapping(line: &str) -> Option<Mapping<'_>> {
    let mut fields = line.split_ascii_whitespace();
    let (range, perms) = (fields.next()?, fields.next()?);
    let (_offset, device, inode) = (fields.next()?, fields.next()?, fields.next()?);
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    (end > start).then_some(Mapping { start, end, perms, file: (device, inode) })
}

/// The address ranges of `maps` (the text of /proc/self/maps) that map, without write
/// permission, the same file as the mapping holding `code` (an address of this program's own
/// code). The file is named by the device and inode the maps line itself prints: stat of
/// /proc/self/exe can name another (overlayfs, btrfs subvolumes), and would then match nothing.
fn read_only_ranges_of(maps: &str, code: usize) -> Vec<(usize, usize)> {
    let all: Vec<Mapping<'_>> = maps.lines().filter_map(mapping).collect();
    let Some(ours) = all.iter().find(|m| (m.start..m.end).contains(&code)) else {
        return Vec::new();
    };
    if ours.file.1 == "0" {
        return Vec::new(); // anonymous: not a file's code
    }
    all.iter()
        .filter(|m| m.file == ours.file && !m.perms.contains('w'))
        .map(|m| (m.start, m.end))
        .collect()
}

impl CodeLock {
    /// Locks the executable's read-only mappings (reading them from disk now if they are not in
    /// memory). Fails as mlock does (EPERM or ENOMEM: no CAP_IPC_LOCK and RLIMIT_MEMLOCK too
    /// small), with nothing left locked.
    pub(crate) fn executable() -> io::Result<Self> {
        let maps = std::fs::read_to_string("/proc/self/maps")?;
        let wanted = read_only_ranges_of(&maps, Self::executable as *const () as usize);
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
        let ours = vec![(0x55d0a0000000, 0x55d0a0200000), (0x55d0a0200000, 0x55d0a0800000)];
        assert_eq!(read_only_ranges_of(maps, 0x55d0a0200100), ours, "from the code's own line");
        assert_eq!(
            read_only_ranges_of(maps, 0x7f0000200010),
            vec![(0x7f0000200000, 0x7f0000300000)]
        );
        assert!(read_only_ranges_of(maps, 0x7ffd00000010).is_empty(), "anonymous");
        assert!(read_only_ranges_of(maps, 0x1000).is_empty(), "not mapped");
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
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM | libc::ENOMEM)) => {
                eprintln!("skipped: mlock not permitted here ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        };
        let bytes: usize = lock.ranges.iter().map(|(start, end)| end - start).sum();
        assert!(bytes > 0);
        let held = locked_kb();
        assert!(held * 1024 >= bytes as u64, "VmLck below what was locked");
        drop(lock);
        assert!(locked_kb() * 1024 <= (held * 1024).saturating_sub(bytes as u64), "not let go");
    }
}
