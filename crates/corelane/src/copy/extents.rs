//! Where a file has data: SEEK_DATA/SEEK_HOLE walk the extents so that holes stay holes.

use std::os::fd::BorrowedFd;

use rustix::fs::{seek, SeekFrom};

/// The data extents `(offset, length)` of a file of `size` bytes. A file system that does not
/// know holes reports one extent covering the whole file.
pub(crate) fn data_extents(fd: BorrowedFd<'_>, size: u64) -> Vec<(u64, u64)> {
    let mut extents = Vec::new();
    let mut pos = 0;
    while pos < size {
        let data = match seek(fd, SeekFrom::Data(pos)) {
            Ok(d) => d,
            // ENXIO: no data past `pos`, the rest is a hole.
            Err(rustix::io::Errno::NXIO) => break,
            Err(_) => return vec![(0, size)],
        };
        if data >= size {
            break;
        }
        let hole = seek(fd, SeekFrom::Hole(data)).unwrap_or(size).min(size);
        extents.push((data, hole - data));
        pos = hole;
    }
    extents
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Seek, Write};
    use std::os::fd::AsFd;

    #[test]
    fn finds_data_between_holes() {
        let mut f = tempfile::tempfile().unwrap();
        f.seek(std::io::SeekFrom::Start(1 << 20)).unwrap();
        f.write_all(&[1u8; 4096]).unwrap();
        f.set_len(3 << 20).unwrap();
        let extents = data_extents(f.as_fd(), 3 << 20);
        // File systems without hole support report the whole file; those with it, the block.
        assert!(extents == vec![(1 << 20, 4096)] || extents == vec![(0, 3 << 20)], "{extents:?}");
    }

    #[test]
    fn an_empty_file_has_no_extents() {
        let f = std::fs::File::open("/dev/null").unwrap();
        assert!(data_extents(f.as_fd(), 0).is_empty());
    }
}
