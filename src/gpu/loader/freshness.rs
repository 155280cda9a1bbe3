//! Is the file still the one that was mapped? Size, modification time and header checks before,
//! during and after a load, so that a file written to or replaced meanwhile is an error and never
//! a torn model.

use std::time::SystemTime;

use crate::{Error, GgufFile, Result};

pub(super) fn file_changed(file: &GgufFile, reason: String) -> Error {
    Error::FileChanged {
        path: file.path().to_path_buf(),
        reason,
    }
}

/// Size and modification time of the file at its path, checked against the map.
pub(super) fn snapshot(file: &GgufFile) -> Result<(u64, Option<SystemTime>)> {
    let meta = std::fs::metadata(file.path()).map_err(|source| Error::Io {
        path: file.path().to_path_buf(),
        source,
    })?;
    let mapped = file.bytes().len() as u64;
    if meta.len() != mapped {
        return Err(file_changed(
            file,
            format!("it is {} bytes now, {mapped} when mapped", meta.len()),
        ));
    }
    // In-place writes show through the map: the header parsed at open must still be there.
    let same = crate::gguf::parse(file.bytes()).is_ok_and(|h| h == *file.header());
    if !same {
        return Err(file_changed(
            file,
            "its header is no longer the one parsed when it was opened".into(),
        ));
    }
    Ok((meta.len(), meta.modified().ok()))
}

/// Opens the file again for direct reads and checks that it is the mapped one: same length, same
/// header bytes.
pub(super) fn open_direct(file: &GgufFile) -> Result<std::fs::File> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: file.path().to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(file.path()).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len != file.bytes().len() as u64 {
        return Err(file_changed(
            file,
            format!("it is {len} bytes now, {} when mapped", file.bytes().len()),
        ));
    }
    let header = &file.bytes()[..(file.data_offset() as usize).min(file.bytes().len())];
    let mut buf = vec![0u8; 1 << 16];
    for want in header.chunks(buf.len()) {
        let got = &mut buf[..want.len()];
        f.read_exact(got).map_err(io)?;
        if got != want {
            return Err(file_changed(
                file,
                "its header differs from the mapped one".into(),
            ));
        }
    }
    Ok(f)
}
