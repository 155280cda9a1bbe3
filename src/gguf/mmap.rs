//! The crate's one `unsafe`: a read-only memory map of a whole file (design notes §5 rule 8).

use std::fs::File;
use std::io;

/// A read-only memory map of a whole file.
#[derive(Debug)]
pub(crate) struct Map(memmap2::Mmap);

impl Map {
    /// Maps all of `file` read-only.
    #[allow(unsafe_code)]
    pub(crate) fn of(file: &File) -> io::Result<Map> {
        // SAFETY: This is acceptable because the only way for memory map undefined behavior to
        // occur is if the underlying file is truncated or modified while we hold the map, and we
        // can't really do anything about that: another process may always write to a file we
        // opened. If it is truncated, touching a page past the new end raises SIGBUS and the
        // process dies; if it is modified, bytes we already validated (lengths, offsets) may change
        // underneath us. We map read-only and never hand out the map mutably, so this process
        // never causes either. Callers that cannot rule out concurrent writers should copy the
        // file first. (Contract wording after ripgrep's `grep-searcher` mmap.)
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Map(map))
    }

    /// The mapped bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}
