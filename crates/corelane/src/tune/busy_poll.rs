//! Preferred busy polling for AF_XDP lanes: the lane's own system calls run its queue's NAPI
//! (SO_PREFER_BUSY_POLL, SO_BUSY_POLL, SO_BUSY_POLL_BUDGET on the socket), and the device
//! keeps its "interrupts" deferred meanwhile: `napi_defer_hard_irqs` empty polls may pass
//! before the device re-arms them, and `gro_flush_timeout` is the timer that polls instead
//! when the lane does not (Documentation/networking/napi.rst, "Preferred busy polling").
//!
//! The two device settings are changed for the run only. [`DeviceNapi`] opens the named
//! device's files once, through descriptors (openat2 beneath `/sys`, then the file beneath the
//! device's directory with no symlink followed), reads what they hold, writes the run's values
//! and writes the old ones back through the same descriptors when dropped. A run killed with
//! SIGKILL cannot drop anything: its revert file (the same format `corelane apply` writes,
//! saved before the first change) is restored by a keeper process.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};

use crate::tune::{Change, IfName};

/// The device settings preferred busy polling runs with: two empty polls before the device
/// re-arms its interrupt (or on veth, the sender's wake-up), and 200 µs as the timer that
/// polls the queue while the lane is busy elsewhere (the values the kernel's documentation
/// and xdpsock use).
pub const DEFER_HARD_IRQS: u32 = 2;
pub const GRO_FLUSH_TIMEOUT_NS: u64 = 200_000;

/// The files a run changes, relative to the device's sysfs directory.
pub const FILES: [&str; 2] = ["napi_defer_hard_irqs", "gro_flush_timeout"];

/// Beneath a held directory, following no symlink and no magic link.
const STRICT: ResolveFlags =
    ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS).union(ResolveFlags::NO_MAGICLINKS);

/// The directory of `nic` in sysfs under `root` (`/` on a live machine), opened once:
/// `class/net/NIC` beneath `ROOT/sys`. sysfs makes that name a symlink into `devices/`, which
/// is followed only because it stays beneath `/sys`. Opened for reading (not `O_PATH`) so a
/// run can lock it.
fn device_dir(root: &Path, nic: &IfName) -> io::Result<OwnedFd> {
    let sys = rustix::fs::open(
        root.join("sys"),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let rel = format!("class/net/{}", nic.as_str());
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let beneath = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);
    Ok(rustix::fs::openat2(&sys, rel, flags, Mode::empty(), beneath)?)
}

/// One of [`FILES`] of the device whose directory is `dir`, for reading and writing.
fn device_file(dir: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    if !FILES.contains(&name) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a busy-poll setting"));
    }
    let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat2(dir, name, flags, Mode::empty(), STRICT)?)
}

fn read_value(fd: &OwnedFd) -> io::Result<String> {
    let mut buf = [0u8; 64];
    let n = rustix::io::pread(fd, &mut buf, 0)?;
    Ok(String::from_utf8_lossy(&buf[..n]).trim().to_string())
}

fn write_value(fd: &OwnedFd, value: &str) -> io::Result<()> {
    // sysfs takes each write whole and ignores the size; a plain file (a test's fake sysfs)
    // must lose its old, longer value.
    let _ = rustix::fs::ftruncate(fd, 0);
    let n = rustix::io::pwrite(fd, value.as_bytes(), 0)?;
    if n != value.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write to a sysfs setting"));
    }
    Ok(())
}

/// Writes `value` to the setting `name` of `nic` under `root`, through descriptors (how a
/// revert file's busy-poll entries are restored).
pub(crate) fn write_device_file(
    root: &Path,
    nic: &IfName,
    name: &str,
    value: &str,
) -> io::Result<()> {
    let dir = device_dir(root, nic)?;
    write_value(&device_file(&dir, name)?, value)
}

/// One setting held open: what it held before and what the run writes.
#[derive(Debug)]
struct Held {
    name: &'static str,
    fd: OwnedFd,
    before: String,
    to: String,
}

/// A device's busy-poll settings, held open for a run and restored when dropped.
#[derive(Debug)]
pub struct DeviceNapi {
    /// The device's sysfs directory, locked (`flock`, exclusive) for the run: a second run
    /// on the same device would record this run's values as the ones to restore.
    _lock: OwnedFd,
    nic: IfName,
    root: PathBuf,
    held: Vec<Held>,
    applied: bool,
}

impl DeviceNapi {
    /// Opens `nic`'s two settings under `root` and reads what they hold; changes nothing yet.
    /// With `ifindex`, the sysfs directory must be that interface's (sysfs shows the network
    /// namespace it was mounted in, which may not be this process's). Refused while another
    /// run holds the device.
    pub fn open(root: &Path, nic: &str, ifindex: Option<u32>) -> io::Result<Self> {
        let nic = IfName::parse(nic).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let dir = device_dir(root, &nic)?;
        if let Err(e) =
            rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            let busy = format!(
                "another run is busy polling {} (its settings are held until it ends): {e}",
                nic.as_str()
            );
            return Err(io::Error::new(io::ErrorKind::WouldBlock, busy));
        }
        if let Some(want) = ifindex {
            let file = rustix::fs::openat2(
                &dir,
                "ifindex",
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
                STRICT,
            )?;
            let found = read_value(&file)?;
            if found.parse::<u32>().ok() != Some(want) {
                let other = format!(
                    "/sys/class/net/{} is interface {found}, not this network namespace's {want}: mount this namespace's sysfs (ip netns exec does)",
                    nic.as_str()
                );
                return Err(io::Error::new(io::ErrorKind::InvalidInput, other));
            }
        }
        let values = [DEFER_HARD_IRQS.to_string(), GRO_FLUSH_TIMEOUT_NS.to_string()];
        let mut held = Vec::new();
        for (name, to) in FILES.into_iter().zip(values) {
            let fd = device_file(&dir, name)?;
            let before = read_value(&fd)?;
            held.push(Held { name, fd, before, to });
        }
        Ok(Self { _lock: dir, nic, root: root.to_path_buf(), held, applied: false })
    }

    /// The changes, as `corelane apply`'s revert file records them.
    pub fn changes(&self) -> Vec<Change> {
        let dir = self.root.join("sys/class/net").join(self.nic.as_str());
        let change =
            |h: &Held| Change { path: dir.join(h.name), from: h.before.clone(), to: h.to.clone() };
        self.held.iter().map(change).collect()
    }

    /// Writes the run's values through the held descriptors; on a failure half-way, writes
    /// back what was already changed.
    pub fn apply(&mut self) -> io::Result<()> {
        for (i, h) in self.held.iter().enumerate() {
            if let Err(e) = write_value(&h.fd, &h.to) {
                for done in &self.held[..i] {
                    let _ = write_value(&done.fd, &done.before);
                }
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot write {} to {}/{}: {e}", h.to, self.nic.as_str(), h.name),
                ));
            }
        }
        self.applied = true;
        Ok(())
    }

    /// Writes back what every setting held before, last first.
    pub fn restore(&mut self) -> io::Result<()> {
        if !std::mem::take(&mut self.applied) {
            return Ok(());
        }
        let mut first_error = None;
        for h in self.held.iter().rev() {
            if let Err(e) = write_value(&h.fd, &h.before) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// The interface.
    pub fn interface(&self) -> &str {
        self.nic.as_str()
    }

    /// What each setting holds now, read through the held descriptors.
    pub fn current(&self) -> io::Result<Vec<(&'static str, String)>> {
        self.held.iter().map(|h| Ok((h.name, read_value(&h.fd)?))).collect()
    }
}

impl Drop for DeviceNapi {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs: `sys/class/net/NIC` a symlink into `sys/devices/virtual/net/NIC`, as
    /// the kernel makes it.
    fn fake_sysfs(nic: &str) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("sys/devices/virtual/net").join(nic);
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("napi_defer_hard_irqs"), "0\n").unwrap();
        std::fs::write(dev.join("gro_flush_timeout"), "0\n").unwrap();
        std::fs::create_dir_all(root.path().join("sys/class/net")).unwrap();
        let link = root.path().join("sys/class/net").join(nic);
        std::os::unix::fs::symlink(format!("../../devices/virtual/net/{nic}"), link).unwrap();
        root
    }

    #[test]
    fn applies_through_descriptors_and_restores_on_drop() {
        let root = fake_sysfs("veth9");
        let dev = root.path().join("sys/devices/virtual/net/veth9");
        let mut napi = DeviceNapi::open(root.path(), "veth9", None).unwrap();
        napi.apply().unwrap();
        assert_eq!(std::fs::read_to_string(dev.join("napi_defer_hard_irqs")).unwrap(), "2");
        let changes = napi.changes();
        assert_eq!(changes[1].to, "200000");
        assert_eq!(changes[1].from, "0");
        drop(napi);
        assert_eq!(std::fs::read_to_string(dev.join("gro_flush_timeout")).unwrap(), "0");
    }

    /// A second run on a device is refused while the first holds it (it would record the
    /// first run's values as the ones to restore), and so is a sysfs directory that is not
    /// the interface asked for (another namespace's device of the same name).
    #[test]
    fn a_second_run_and_another_namespaces_device_are_refused() {
        let root = fake_sysfs("veth9");
        let dev = root.path().join("sys/devices/virtual/net/veth9");
        std::fs::write(dev.join("ifindex"), "7\n").unwrap();
        let mut first = DeviceNapi::open(root.path(), "veth9", Some(7)).unwrap();
        first.apply().unwrap();
        let second = DeviceNapi::open(root.path(), "veth9", Some(7)).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock, "{second}");
        drop(first);
        assert_eq!(std::fs::read_to_string(dev.join("gro_flush_timeout")).unwrap(), "0");
        let other = DeviceNapi::open(root.path(), "veth9", Some(8)).unwrap_err();
        assert!(other.to_string().contains("not this network namespace"), "{other}");
        DeviceNapi::open(root.path(), "veth9", Some(7)).unwrap();
    }

    /// The device directory may be a symlink only into `/sys`; a setting file that is a
    /// symlink (to anywhere) is refused, and so is a name that is no interface name.
    #[test]
    fn symlinks_out_of_sys_and_planted_files_are_refused() {
        let root = fake_sysfs("veth9");
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("napi_defer_hard_irqs"), "secret").unwrap();
        std::fs::write(outside.path().join("gro_flush_timeout"), "secret").unwrap();
        let evil = root.path().join("sys/class/net/evil0");
        std::os::unix::fs::symlink(outside.path(), &evil).unwrap();
        assert!(DeviceNapi::open(root.path(), "evil0", None).is_err(), "a link out of /sys");
        let planted = root.path().join("sys/devices/virtual/net/plant0");
        std::fs::create_dir_all(&planted).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("napi_defer_hard_irqs"),
            planted.join("napi_defer_hard_irqs"),
        )
        .unwrap();
        std::fs::write(planted.join("gro_flush_timeout"), "0").unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/net/plant0",
            root.path().join("sys/class/net/plant0"),
        )
        .unwrap();
        assert!(DeviceNapi::open(root.path(), "plant0", None).is_err(), "a symlinked setting file");
        for bad in ["../../../etc", "a/b", ""] {
            assert!(DeviceNapi::open(root.path(), bad, None).is_err(), "{bad:?}");
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("gro_flush_timeout")).unwrap(),
            "secret"
        );
    }
}
