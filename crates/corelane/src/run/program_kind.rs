//! Programs whose system calls the preloaded library cannot carry, recognised from their ELF
//! file before `corelane run` starts them: a statically linked program (no PT_INTERP: no
//! dynamic loader, so LD_PRELOAD is never read) and a Go program (its runtime makes its system
//! calls itself, never through libc; known by its `.go.buildinfo` section or its Go build-id
//! note). They still run; `corelane run` says that their calls are not carried.
//!
//! The file is hostile input: every read is bounded and checked, nothing here panics, and
//! a file that cannot be read or parsed is simply not judged (a script, whose interpreter is
//! what runs, is not judged either).

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Why a program's calls cannot be carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotCarried {
    /// No PT_INTERP: the dynamic loader, which reads LD_PRELOAD, never runs.
    Static,
    /// The Go runtime makes its system calls itself.
    Go,
}

impl NotCarried {
    /// What the program is, as the one-line note says it.
    pub fn what(self) -> &'static str {
        match self {
            NotCarried::Static => "a statically linked program: the system-call library cannot be loaded into it",
            NotCarried::Go => "a Go program: its runtime makes its system calls itself, not through the C library the system-call library stands in front of",
        }
    }
}

/// The most bytes read for one table (program headers, section headers, section names,
/// notes, the dynamic section).
const TABLE_LIMIT: u64 = 1 << 20;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_NOTE: u32 = 4;
const DT_SONAME: u64 = 14;
const NT_GO_BUILDID: u32 = 4;

/// The file `command[0]` names, found as the program's spawn finds it: a name with a `/` as
/// it is, else the first executable regular file in the program's PATH (else corelane's).
pub fn resolve(command: &[OsString], env: &[(OsString, OsString)]) -> Option<PathBuf> {
    let name = command.first()?;
    if name.as_bytes().contains(&b'/') {
        return Some(PathBuf::from(name));
    }
    let path = env
        .iter()
        .find(|(n, _)| n == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| {
        candidate.metadata().is_ok_and(|m| m.is_file())
            && rustix::fs::access(candidate, rustix::fs::Access::EXEC_OK).is_ok()
    })
}

/// Whether the program at `path` is one whose calls cannot be carried (None: it can, or the
/// file is not an ELF this could read).
pub fn not_carried(path: &Path) -> Option<NotCarried> {
    // Non-blocking, so a FIFO named as the program never hangs the open; only a regular
    // file is read (a device or a FIFO is not judged, and exec refuses it).
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let elf = Elf::read(&file)?;
    if elf.is_go(&file) {
        return Some(NotCarried::Go);
    }
    elf.is_static(&file).then_some(NotCarried::Static)
}

/// The few header fields needed, from a 64-bit ELF of either byte order.
struct Elf {
    big: bool,
    phoff: u64,
    phentsize: u64,
    phnum: u64,
    shoff: u64,
    shentsize: u64,
    shnum: u64,
    shstrndx: u64,
}

/// `len` bytes at `offset`, or None (too long, or short of the file).
fn read_at(file: &File, offset: u64, len: u64) -> Option<Vec<u8>> {
    if len > TABLE_LIMIT {
        return None;
    }
    let mut buf = vec![0u8; usize::try_from(len).ok()?];
    file.read_exact_at(&mut buf, offset).ok()?;
    Some(buf)
}

impl Elf {
    fn read(file: &File) -> Option<Elf> {
        let h = read_at(file, 0, 64)?;
        if h[..4] != *b"\x7fELF" || h[4] != 2 {
            return None;
        }
        let big = match h[5] {
            1 => false,
            2 => true,
            _ => return None,
        };
        let e = Elf {
            big,
            phoff: 0,
            phentsize: 0,
            phnum: 0,
            shoff: 0,
            shentsize: 0,
            shnum: 0,
            shstrndx: 0,
        };
        Some(Elf {
            phoff: e.int(&h, 32, 8)?,
            shoff: e.int(&h, 40, 8)?,
            phentsize: e.int(&h, 54, 2)?,
            phnum: e.int(&h, 56, 2)?,
            shentsize: e.int(&h, 58, 2)?,
            shnum: e.int(&h, 60, 2)?,
            shstrndx: e.int(&h, 62, 2)?,
            ..e
        })
    }

    /// The `size`-byte integer at `at` of `bytes`, in the file's byte order.
    fn int(&self, bytes: &[u8], at: usize, size: usize) -> Option<u64> {
        let field = bytes.get(at..at.checked_add(size)?)?;
        let fold = |value: u64, byte: &u8| value << 8 | u64::from(*byte);
        Some(if self.big { field.iter().fold(0, fold) } else { field.iter().rev().fold(0, fold) })
    }

    /// Each program header as (type, offset, file size).
    fn segments(&self, file: &File) -> Vec<(u32, u64, u64)> {
        let Some(table) = (self.phentsize >= 56)
            .then(|| read_at(file, self.phoff, self.phentsize.checked_mul(self.phnum)?))
            .flatten()
        else {
            return Vec::new();
        };
        table
            .chunks_exact(self.phentsize as usize)
            .filter_map(|p| {
                Some((self.int(p, 0, 4)? as u32, self.int(p, 8, 8)?, self.int(p, 32, 8)?))
            })
            .collect()
    }

    /// No loader named (PT_INTERP) and not itself a loader run by hand (a shared object
    /// with a DT_SONAME, such as ld.so, which reads LD_PRELOAD).
    fn is_static(&self, file: &File) -> bool {
        let segments = self.segments(file);
        if segments.is_empty() || segments.iter().any(|s| s.0 == PT_INTERP) {
            return false;
        }
        let named = segments.iter().filter(|s| s.0 == PT_DYNAMIC).any(|&(_, offset, size)| {
            read_at(file, offset, size).is_some_and(|d| {
                d.chunks_exact(16).any(|entry| self.int(entry, 0, 8) == Some(DT_SONAME))
            })
        });
        !named
    }

    /// A `.go.buildinfo` section, or a note of owner "Go" and type NT_GO_BUILDID.
    fn is_go(&self, file: &File) -> bool {
        self.section_names(file).iter().any(|n| n == b".go.buildinfo")
            || self.segments(file).iter().filter(|s| s.0 == PT_NOTE).any(|&(_, offset, size)| {
                read_at(file, offset, size).is_some_and(|notes| self.has_go_note(&notes))
            })
    }

    fn has_go_note(&self, notes: &[u8]) -> bool {
        let align4 = |n: u64| n.checked_add(3).map(|n| n & !3);
        let mut at = 0usize;
        for _ in 0..4096 {
            let (Some(namesz), Some(descsz), Some(kind)) =
                (self.int(notes, at, 4), self.int(notes, at + 4, 4), self.int(notes, at + 8, 4))
            else {
                return false;
            };
            let name = notes.get(at + 12..).and_then(|rest| rest.get(..namesz as usize));
            if kind == u64::from(NT_GO_BUILDID) && name == Some(b"Go\0") {
                return true;
            }
            let next = align4(namesz)
                .zip(align4(descsz))
                .and_then(|(n, d)| (at as u64).checked_add(12 + n + d));
            match next.and_then(|n| usize::try_from(n).ok()) {
                Some(n) if n > at => at = n,
                _ => return false,
            }
        }
        false
    }

    /// Every section's name (none when the table is missing or unreadable).
    fn section_names(&self, file: &File) -> Vec<Vec<u8>> {
        let names = || -> Option<Vec<Vec<u8>>> {
            if self.shentsize < 64 || self.shstrndx >= self.shnum {
                return None;
            }
            let table = read_at(file, self.shoff, self.shentsize.checked_mul(self.shnum)?)?;
            let entry = |i: u64| table.get((i * self.shentsize) as usize..)?.get(..64);
            let strtab = entry(self.shstrndx)?;
            let strings = read_at(file, self.int(strtab, 24, 8)?, self.int(strtab, 32, 8)?)?;
            let name = |s: &[u8]| -> Option<Vec<u8>> {
                let rest = strings.get(self.int(s, 0, 4)? as usize..)?;
                Some(rest.split(|&b| b == 0).next()?.to_vec())
            };
            Some((0..self.shnum).filter_map(|i| name(entry(i)?)).collect())
        };
        names().unwrap_or_default()
    }
}

/// The program's name as the note prints it.
pub fn shown(path: &Path) -> std::borrow::Cow<'_, str> {
    path.to_string_lossy()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO named as the program is not opened for a blocking read (it would wait for a
    /// writer forever): it is not judged, at once.
    #[test]
    fn a_fifo_named_as_the_program_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from_raw_mode(0o700))
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(not_carried(&fifo)));
        let judged = rx.recv_timeout(std::time::Duration::from_secs(2));
        assert_eq!(judged, Ok(None), "a FIFO hung the program's check");
    }

    #[test]
    fn a_dynamic_program_and_a_script_are_carried_and_garbage_is_not_judged() {
        assert_eq!(not_carried(Path::new("/bin/sh")), None);
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("script");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(not_carried(&script), None);
        for bytes in [&b"\x7fELF\x02\x01"[..], &[0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0xff, 0xff]] {
            let mut header = bytes.to_vec();
            header.resize(64, 0xff);
            std::fs::write(&script, &header).unwrap();
            assert_eq!(not_carried(&script), None, "{header:?}");
        }
    }

    /// A little-endian ELF64 of `segments` (type, offset, size) and named sections, with the
    /// bytes `extra` at offset 1024.
    fn crafted(segments: &[(u32, u64, u64)], sections: &[&str], extra: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 1024];
        f[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
        f[16] = 2;
        let put = |f: &mut Vec<u8>, at: usize, v: u64, n: usize| {
            f[at..at + n].copy_from_slice(&v.to_le_bytes()[..n]);
        };
        put(&mut f, 32, 64, 8);
        put(&mut f, 54, 56, 2);
        put(&mut f, 56, segments.len() as u64, 2);
        for (i, &(kind, offset, size)) in segments.iter().enumerate() {
            let at = 64 + 56 * i;
            put(&mut f, at, u64::from(kind), 4);
            put(&mut f, at + 8, offset, 8);
            put(&mut f, at + 32, size, 8);
        }
        f.extend(extra);
        if !sections.is_empty() {
            let mut strings = b"\0.shstrtab\0".to_vec();
            let strtab_at = f.len() as u64;
            let mut names = vec![0u64, 1];
            for name in sections {
                names.push(strings.len() as u64);
                strings.extend(name.as_bytes());
                strings.push(0);
            }
            f.extend(&strings);
            let shoff = f.len();
            put(&mut f, 40, shoff as u64, 8);
            put(&mut f, 58, 64, 2);
            put(&mut f, 60, names.len() as u64, 2);
            put(&mut f, 62, 1, 2);
            f.resize(shoff + 64 * names.len(), 0);
            for (i, &name) in names.iter().enumerate() {
                put(&mut f, shoff + 64 * i, name, 4);
            }
            put(&mut f, shoff + 64 + 24, strtab_at, 8);
            put(&mut f, shoff + 64 + 32, strings.len() as u64, 8);
        }
        f
    }

    fn judge(bytes: &[u8]) -> Option<NotCarried> {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), bytes).unwrap();
        not_carried(file.path())
    }

    #[test]
    fn static_and_go_programs_are_told_from_crafted_files() {
        let load = (1, 0, 1024);
        assert_eq!(judge(&crafted(&[load], &[], &[])), Some(NotCarried::Static));
        assert_eq!(judge(&crafted(&[load, (PT_INTERP, 1024, 8)], &[], b"/lib/ld\0")), None);
        // A loader run by hand (a DT_SONAME in its dynamic section) reads LD_PRELOAD itself.
        let soname = [14u64.to_le_bytes(), 1u64.to_le_bytes()].concat();
        assert_eq!(judge(&crafted(&[load, (PT_DYNAMIC, 1024, 16)], &[], &soname)), None);
        let go = crafted(&[load, (PT_INTERP, 1024, 8)], &[".text", ".go.buildinfo"], b"/lib/ld\0");
        assert_eq!(judge(&go), Some(NotCarried::Go));
        let mut note = [3u32.to_le_bytes(), 4u32.to_le_bytes(), 4u32.to_le_bytes()].concat();
        note.extend(b"Go\0\0abcd");
        assert_eq!(judge(&crafted(&[load, (PT_NOTE, 1024, 20)], &[], &note)), Some(NotCarried::Go));
        // Tables past the end, or absurdly large, are not read.
        assert_eq!(
            judge(&crafted(&[load, (PT_NOTE, 1 << 40, 1 << 40)], &[], &[])),
            Some(NotCarried::Static)
        );
        let mut cut = go.clone();
        cut.truncate(go.len() - 10);
        assert_eq!(
            judge(&cut),
            None,
            "an unreadable section table is not judged Go (it has PT_INTERP)"
        );
    }

    #[test]
    fn the_program_is_found_in_the_programs_path() {
        let env = vec![(OsString::from("PATH"), OsString::from("/nonexistent:/bin:/usr/bin"))];
        let found = resolve(&[OsString::from("sh")], &env).unwrap();
        assert!(found.ends_with("sh") && found.starts_with("/"), "{found:?}");
        assert_eq!(resolve(&[OsString::from("./x")], &env), Some(PathBuf::from("./x")));
        assert_eq!(resolve(&[OsString::from("corelane-no-such")], &env), None);
    }
}
