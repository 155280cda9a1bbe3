//! The crate's one `unsafe`: a read-only memory map of a whole file (design notes §5 rule 8).
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
}
