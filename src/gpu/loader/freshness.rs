//! Is each file still the one that was mapped? Size, modification time, identity and header
//! checks of every shard before, during and after a load, so that a file written to or replaced
//! meanwhile is an error naming it, and never a torn model.

use std::path::Path;
use std::time::SystemTime;

use crate::gguf::Shard;
use crate::{Error, GgufFile, Result};

pub(super) fn file_changed(path: &Path, reason: String) -> Error {
    Error::FileChanged {
        path: path.to_path_buf(),
        reason,
    }
}

/// What identifies one shard's file at its path: length, modification time and (on Unix) the
/// device and inode, so that a file renamed over it is seen even with the same size and time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    id: Option<(u64, u64)>,
}

fn stamp(shard: &Shard) -> Result<Stamp> {
    let meta = std::fs::metadata(shard.path()).map_err(|source| Error::Io {
        path: shard.path().to_path_buf(),
        source,
    })?;
    #[cfg(unix)]
    let id = {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    };
    #[cfg(not(unix))]
    let id = None;
    Ok(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        id,
    })
}

/// Every shard's stamp, each checked against its map: same length, same header.
pub(super) fn snapshot(file: &GgufFile) -> Result<Vec<Stamp>> {
    file.shards()
        .iter()
        .map(|shard| {
            let s = stamp(shard)?;
            if s.len != shard.len() {
                return Err(file_changed(
                    shard.path(),
                    format!("it is {} bytes now, {} when mapped", s.len, shard.len()),
                ));
            }
            // In-place writes show through the map: the header parsed at open must still be there.
            if !shard.header_unchanged() {
                return Err(file_changed(
                    shard.path(),
                    "its header is no longer the one parsed when it was opened".into(),
                ));
            }
            Ok(s)
        })
        .collect()
}

/// Fails naming the first shard whose stamp differs from `before`'s.
pub(super) fn unchanged_since(file: &GgufFile, before: &[Stamp]) -> Result<()> {
    let now = snapshot(file)?;
    for ((shard, a), b) in file.shards().iter().zip(before).zip(&now) {
        if a != b {
            let reason = if a.id != b.id {
                "it was replaced while it was being loaded"
            } else {
                "it was modified while it was being loaded"
            };
            return Err(file_changed(shard.path(), reason.into()));
        }
    }
    Ok(())
}

/// Opens every shard again for direct reads and checks that each is the mapped one: same length,
/// same header bytes.
pub(super) fn open_direct(file: &GgufFile) -> Result<Vec<std::fs::File>> {
    file.shards().iter().map(open_shard).collect()
}

fn open_shard(shard: &Shard) -> Result<std::fs::File> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: shard.path().to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(shard.path()).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len != shard.len() {
        return Err(file_changed(
            shard.path(),
            format!("it is {len} bytes now, {} when mapped", shard.len()),
        ));
    }
    let bytes = shard.bytes();
    let header = &bytes[..(shard.data_offset() as usize).min(bytes.len())];
    let mut buf = vec![0u8; 1 << 16];
    for want in header.chunks(buf.len()) {
        let got = &mut buf[..want.len()];
        f.read_exact(got).map_err(io)?;
        if got != want {
            return Err(file_changed(
                shard.path(),
                "its header differs from the mapped one".into(),
            ));
        }
    }
    Ok(f)
}
