//! The crate's one `unsafe` module (design notes §5 rule 8): a read-only memory map of a whole
//! file, and the few OS calls around it that Rust's standard library does not wrap: which pages
//! of a file the page cache holds (`mincore`), dropping them (`posix_fadvise`), and reading a
//! file straight into a GPU staging buffer's write-only mapping (`pread`).
//!
//! # What the map can and cannot guarantee
//!
//! A memory map is only as stable as the file under it, and another process may always change a
//! file we opened (file locks on Linux are advisory):
//!
//! * **The file shrinks** (truncated, or rewritten in place by a download that restarts): touching
//!   a mapped page past the new end raises `SIGBUS` and the process dies. No check can rule this
//!   out, since the truncation can happen between any check and the read. [`Map::of`] re-reads the
//!   file length after mapping and refuses a file that is already shorter than the map, which
//!   closes the window only up to that moment. Rust cannot turn `SIGBUS` into an error without a
//!   signal handler and `sigsetjmp`-style recovery, which is far more `unsafe` than this module.
//! * **The file is modified in place**: bytes we already read may change. [`super::parse`] copies
//!   everything it validates (counts, lengths, offsets, names, metadata) out of the map into owned
//!   values, and [`super::GgufFile::tensor_data`] bounds-checks each slice against the map's fixed
//!   length, so a concurrent writer can change the *values* of tensor bytes (garbage numbers out)
//!   but not any length or offset the crate relies on. Codecs accept every byte pattern.
//! * **The file grows**: the map keeps the length it was created with; later bytes are not seen.
//!
//! Callers that cannot rule out a concurrent writer that shrinks the file (a download still in
//! progress, a shared directory) should copy the file first, or read it into memory and use
//! [`super::parse`] on the bytes.

use std::fs::File;
use std::io;

/// The page size `mincore` counts in. 4 KiB on every platform that this crate's page-cache
/// figures are measured on; a larger real page only makes the counts coarser.
pub(crate) const PAGE: usize = 4096;

/// A read-only memory map of a whole file.
#[derive(Debug)]
pub(crate) struct Map(memmap2::Mmap);

impl Map {
    /// Maps all of `file` read-only, then checks the file is still at least as long as the map.
    #[allow(unsafe_code)]
    pub(crate) fn of(file: &File) -> io::Result<Map> {
        // SAFETY: `Mmap::map` is unsafe because the mapped bytes are only as immutable as the file:
        // if another process truncates the file while we hold the map, touching a page past the
        // new end raises SIGBUS and the process dies; if it writes to the file, bytes behind our
        // `&[u8]` change. Neither can be prevented by this process (see the module docs); we map
        // read-only, never hand out the map mutably and never write to the file, so this process
        // never causes either, and everything the reader validates is copied out of the map
        // before it is relied on, so a concurrent write can change tensor values but not the
        // bounds of any slice. (Contract wording after ripgrep's `grep-searcher` mmap.)
        let map = unsafe { memmap2::Mmap::map(file)? };
        // The length the map was made with came from an earlier `fstat`; if the file has shrunk
        // since, fail now with an error rather than later with SIGBUS.
        let now = file.metadata()?.len();
        if now < map.len() as u64 {
            return Err(io::Error::other(format!(
                "file shrank from {} to {now} bytes while being memory-mapped",
                map.len()
            )));
        }
        Ok(Map(map))
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Drops the pages behind `offset..offset + len` from this process's resident set (Linux
    /// `MADV_DONTNEED`; nothing elsewhere). The bytes stay readable: touching them again reads them
    /// back from the file. Out-of-range requests are clamped; failures are ignored (it is advice).
    #[allow(unsafe_code)]
    pub(crate) fn release(&self, offset: usize, len: usize) {
        let offset = offset.min(self.0.len());
        let len = len.min(self.0.len() - offset);
        #[cfg(target_os = "linux")]
        if len > 0 {
            // SAFETY: `MADV_DONTNEED` on a read-only, file-backed mapping discards this process's
            // copies of the pages; the next access faults them in again from the file, so every
            // outstanding `&[u8]` into the map keeps reading the file's bytes. The only way those
            // bytes could differ from before is the concurrent-writer case that the contract of
            // `Map::of` above already covers (no private page of ours is ever written, so nothing
            // is lost by discarding it).
            let _ = unsafe {
                self.0
                    .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, offset, len)
            };
        }
    }

    /// How many of the pages behind `offset..offset + len` the page cache holds, and how many
    /// there are (`mincore`, Unix); `None` where that cannot be asked.
    #[allow(unsafe_code)]
    pub(crate) fn cached_pages(&self, offset: usize, len: usize) -> Option<(usize, usize)> {
        let offset = offset.min(self.0.len()) / PAGE * PAGE;
        let len = len.min(self.0.len() - offset);
        if len == 0 {
            return Some((0, 0));
        }
        #[cfg(unix)]
        {
            let pages = len.div_ceil(PAGE);
            let mut vec = vec![0u8; pages];
            // SAFETY: `offset` is a multiple of the page size inside the map (whose start is
            // page-aligned), `offset + len` is inside the map, and `vec` has one byte per page
            // of that range, which is all `mincore` writes. It reads no mapped byte, so a
            // truncated file cannot fault here.
            let rc = unsafe {
                libc::mincore(
                    self.0.as_ptr().add(offset) as *mut libc::c_void,
                    len,
                    vec.as_mut_ptr().cast(),
                )
            };
            (rc == 0).then(|| (vec.iter().filter(|&&b| b & 1 == 1).count(), pages))
        }
        #[cfg(not(unix))]
        None
    }
}

/// Asks the kernel to drop bytes `offset..offset + len` of `file` from the page cache
/// (`POSIX_FADV_DONTNEED`, Linux). Clean pages that no process has mapped go; dirty or mapped
/// ones stay, so callers check with [`Map::cached_pages`] what actually went.
#[allow(unsafe_code)]
pub(crate) fn drop_cache(file: &File, offset: u64, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::io::AsRawFd;
        let off = |x: u64| libc::off_t::try_from(x).map_err(io::Error::other);
        let (offset, len) = (off(offset)?, off(len)?);
        // SAFETY: `posix_fadvise` only reads its integer arguments; the descriptor is open for
        // the duration of the call (borrowed from `file`). Advice never changes file contents.
        let rc = unsafe {
            libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED)
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(rc))
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = (file, offset, len);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "dropping a file's page cache is only implemented on Linux",
        ))
    }
}

/// Reads `dst.len()` bytes of `file` at `offset` into `dst` (a write-only view of a mapped
/// staging buffer), with no copy in between. Fails with `UnexpectedEof` where the file ends
/// first.
#[cfg(feature = "gpu")]
#[allow(unsafe_code)]
pub(crate) fn read_exact_at_into(
    file: &File,
    mut offset: u64,
    mut dst: wgpu::WriteOnly<'_, [u8]>,
) -> io::Result<()> {
    while !dst.is_empty() {
        #[cfg(unix)]
        let n = {
            use std::os::unix::io::AsRawFd;
            let want = dst.len().min(1 << 30);
            let ptr = dst.as_raw_element_ptr();
            let at = libc::off_t::try_from(offset).map_err(io::Error::other)?;
            // SAFETY: `ptr` points to `dst.len()` writable bytes that `dst` borrows exclusively
            // for its lifetime ('a of a live mapping), and `want <= dst.len()`. `pread` only
            // writes into them (the kernel's copy; nothing reads the write-only memory), and
            // the descriptor is borrowed from `file` for the call.
            let rc = unsafe { libc::pread(file.as_raw_fd(), ptr.as_ptr().cast(), want, at) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            rc as usize
        };
        #[cfg(not(unix))]
        let n = {
            use std::io::{Read, Seek};
            let mut buf = vec![0u8; dst.len().min(1 << 20)];
            let mut f = file;
            f.seek(io::SeekFrom::Start(offset))?;
            let n = f.read(&mut buf)?;
            dst.slice(..n).copy_from_slice(&buf[..n]);
            n
        };
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        offset += n as u64;
        dst = dst.into_slice(n..);
    }
    Ok(())
}
