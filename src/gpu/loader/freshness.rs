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

/// Opens every shard again for reads (with `O_DIRECT` where `o_direct`) and checks that each is
/// the mapped one: same length, same header bytes.
pub(super) fn open_direct(file: &GgufFile, o_direct: bool) -> Result<Vec<std::fs::File>> {
    file.shards()
        .iter()
        .map(|s| open_shard(s, o_direct))
        .collect()
}

/// An `O_DIRECT` refusal (`EINVAL`: the file system does not take it, e.g. tmpfs or some
/// overlays) as an error that says so; other errors as they are.
pub(super) fn direct_refused(e: std::io::Error) -> std::io::Error {
    if e.kind() == std::io::ErrorKind::InvalidInput {
        std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "the file system refuses O_DIRECT reads; use the `read` or `mmap` source",
        )
    } else {
        e
    }
}

fn open_shard(shard: &Shard, o_direct: bool) -> Result<std::fs::File> {
    use std::io::Read;
    let io = |source| Error::Io {
        path: shard.path().to_path_buf(),
        source,
    };
    // The header check below reads through a buffered handle; `O_DIRECT` reads (aligned) go
    // through a second one.
    let direct = if o_direct {
        Some(open_o_direct(shard.path()).map_err(|e| io(direct_refused(e)))?)
    } else {
        None
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
    match direct {
        Some(d) if same_file(&d, &f).map_err(io)? => Ok(d),
        Some(_) => Err(file_changed(
            shard.path(),
            "it was replaced while it was being opened".into(),
        )),
        None => Ok(f),
    }
}

/// Whether two handles are of one file (device and inode; `true` where the OS cannot tell).
fn same_file(a: &std::fs::File, b: &std::fs::File) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (a, b) = (a.metadata()?, b.metadata()?);
        Ok((a.dev(), a.ino()) == (b.dev(), b.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        Ok(true)
    }
}

#[cfg(target_os = "linux")]
fn open_o_direct(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_o_direct(_: &Path) -> std::io::Result<std::fs::File> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "O_DIRECT reads are only implemented on Linux",
    ))
}
