//! Split GGUF sets: one model in several files (`name-00001-of-00004.gguf` …), as llama.cpp's
//! `gguf-split` and gguf-py's `GGUFWriter(split_max_tensors=…, split_max_size=…)` write them.
//!
//! Every shard is a valid GGUF file on its own and carries three keys: `split.no` (its 0-based
//! position, u16), `split.count` (shards in the set, u16) and `split.tensors.count` (tensors in
//! the whole set, i32). The first shard holds the model's metadata; the others hold only the
//! split keys and their tensors (a first shard with no tensors at all is allowed: gguf-py's
//! `small_first_shard`). Shard `k` (1-based) of `n` is named `{prefix}-{k:05}-of-{n:05}.gguf`.

use std::path::{Path, PathBuf};

use super::value::ValueType;
use super::Header;

/// The key holding a shard's 0-based position in its set.
pub const SPLIT_NO: &str = "split.no";
/// The key holding the number of shards in the set.
pub const SPLIT_COUNT: &str = "split.count";
/// The key holding the number of tensors in the whole set.
pub const SPLIT_TENSORS_COUNT: &str = "split.tensors.count";

/// Why a set of shards is not one model this crate accepts. Wrapped by
/// [`crate::Error::Split`] with the path of the shard at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SplitError {
    /// A split key of the wrong type, or out of range.
    #[error("metadata {key:?} must be an integer in 0..={max}, found {found}")]
    KeyType {
        /// The key.
        key: &'static str,
        /// The largest value the key may take.
        max: u64,
        /// The value found, as text.
        found: String,
    },
    /// A shard without one of the split keys.
    #[error("metadata {key:?} is missing: not a shard of a split set")]
    MissingKey {
        /// The key.
        key: &'static str,
    },
    /// `split.count` is 0.
    #[error("split.count is 0")]
    ZeroCount,
    /// The file opened is a later shard, not the first.
    #[error("this is shard {no} of {count} (split.no {index}): open the first shard, {first}")]
    NotFirst {
        /// Its 1-based number.
        no: u64,
        /// Shards in the set.
        count: u64,
        /// Its `split.no`.
        index: u64,
        /// The first shard's file name.
        first: String,
    },
    /// The first shard's file name does not say where the others are.
    #[error(
        "shard 1 of a {count}-file split set must be named PREFIX-00001-of-{count:05}.gguf \
         to find the others"
    )]
    Name {
        /// Shards in the set.
        count: u64,
    },
    /// A shard of the set is not there.
    #[error("shard {no} of {count} is missing")]
    Missing {
        /// Its 1-based number.
        no: u64,
        /// Shards in the set.
        count: u64,
    },
    /// A file named like a shard of this set that is not one of its shards.
    #[error("a file named like a shard of this {count}-shard set lies beside it")]
    Extra {
        /// Shards in the set.
        count: u64,
    },
    /// A shard whose `split.count` differs from the first shard's.
    #[error("split.count is {found}, the first shard says {expected}")]
    Count {
        /// Its `split.count`.
        found: u64,
        /// The first shard's.
        expected: u64,
    },
    /// A shard whose `split.no` is not its position in the set (a duplicated or misnamed shard).
    #[error("split.no is {found}, expected {expected} for shard {} of the set", expected + 1)]
    Number {
        /// Its `split.no`.
        found: u64,
        /// Its position (0-based).
        expected: u64,
    },
    /// A shard whose `split.tensors.count` differs from the first shard's.
    #[error("split.tensors.count is {found}, the first shard says {expected}")]
    TensorsCountMismatch {
        /// Its value.
        found: u64,
        /// The first shard's.
        expected: u64,
    },
    /// The shards hold a different number of tensors than `split.tensors.count` says.
    #[error("the {count} shards hold {found} tensors, split.tensors.count says {declared}")]
    TensorsCount {
        /// Shards in the set.
        count: u64,
        /// Tensors found in all shards.
        found: u64,
        /// `split.tensors.count`.
        declared: u64,
    },
    /// A tensor name in two shards.
    #[error("tensor {name:?} is also in shard {other} of the set")]
    DuplicateTensor {
        /// The name.
        name: String,
        /// The 1-based number of the other shard holding it.
        other: u64,
    },
}

/// The split keys of one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SplitKeys {
    /// `split.no`.
    pub index: u64,
    /// `split.count`.
    pub count: u64,
    /// `split.tensors.count`.
    pub tensors: u64,
}

fn integer(header: &Header, key: &'static str, max: u64) -> Result<Option<u64>, SplitError> {
    let Some(v) = header.get(key) else {
        return Ok(None);
    };
    match v.as_u64().filter(|&n| n <= max) {
        Some(n) => Ok(Some(n)),
        None => Err(SplitError::KeyType {
            key,
            max,
            found: match v.value_type() {
                ValueType::String | ValueType::Array => v.value_type().to_string(),
                _ => format!("{v:?}"),
            },
        }),
    }
}

/// The split keys of `header`: `None` when it has none of them (a file on its own); an error when
/// it has some but not all, or any is not an integer in range (`split.no` and `split.count` are
/// u16 in llama.cpp, `split.tensors.count` an i32).
pub(crate) fn keys(header: &Header) -> Result<Option<SplitKeys>, SplitError> {
    let index = integer(header, SPLIT_NO, u16::MAX.into())?;
    let count = integer(header, SPLIT_COUNT, u16::MAX.into())?;
    let tensors = integer(header, SPLIT_TENSORS_COUNT, i32::MAX as u64)?;
    let (index, count, tensors) = match (index, count, tensors) {
        (None, None, None) => return Ok(None),
        (Some(i), Some(c), Some(t)) => (i, c, t),
        (None, ..) => return Err(SplitError::MissingKey { key: SPLIT_NO }),
        (_, None, _) => return Err(SplitError::MissingKey { key: SPLIT_COUNT }),
        (.., None) => {
            return Err(SplitError::MissingKey {
                key: SPLIT_TENSORS_COUNT,
            })
        }
    };
    if count == 0 {
        return Err(SplitError::ZeroCount);
    }
    Ok(Some(SplitKeys {
        index,
        count,
        tensors,
    }))
}

/// The file name of shard `no` (1-based) of `count` with `prefix`.
pub fn shard_name(prefix: &str, no: u64, count: u64) -> String {
    format!("{prefix}-{no:05}-of-{count:05}.gguf")
}

/// `(prefix, no, count)` of a file name `{prefix}-{no:05}-of-{count:05}.gguf` (the numbers may
/// have more than 5 digits).
pub fn parse_shard_name(name: &str) -> Option<(&str, u64, u64)> {
    let stem = name.strip_suffix(".gguf")?;
    let (head, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = head.rsplit_once('-')?;
    let digits = |s: &str| s.len() >= 5 && s.bytes().all(|b| b.is_ascii_digit());
    if prefix.is_empty() || !digits(no) || !digits(count) {
        return None;
    }
    Some((prefix, no.parse().ok()?, count.parse().ok()?))
}

/// The paths of every shard of the set whose first shard is `first`, in order (what gguf-py's
/// `GGUFWriter.format_shard_names` produces for the same set), checking the name against `count`.
pub(crate) fn shard_paths(first: &Path, count: u64) -> Result<Vec<PathBuf>, SplitError> {
    let name = first.file_name().and_then(|n| n.to_str());
    let parsed = name.and_then(parse_shard_name);
    let Some((prefix, 1, n)) = parsed else {
        return Err(SplitError::Name { count });
    };
    if n != count {
        return Err(SplitError::Name { count });
    }
    Ok((1..=count)
        .map(|k| first.with_file_name(shard_name(prefix, k, count)))
        .collect())
}

/// Files beside the set named `{prefix}-NNNNN-of-MMMMM.gguf` with the set's prefix that are not
/// among `shards` (another count, or a number past the count), in name order.
pub(crate) fn extra_shards(shards: &[PathBuf]) -> Vec<PathBuf> {
    let Some(first) = shards.first() else {
        return Vec::new();
    };
    let Some((prefix, ..)) = first
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_shard_name)
    else {
        return Vec::new();
    };
    let dir = match first.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut extra: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let same_prefix = name
                .to_str()
                .and_then(parse_shard_name)
                .is_some_and(|(p, ..)| p == prefix);
            same_prefix
                && !shards
                    .iter()
                    .any(|s| s.file_name() == Some(name.as_os_str()))
        })
        .map(|e| first.with_file_name(e.file_name()))
        .collect();
    extra.sort();
    extra
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_names_round_trip() {
        assert_eq!(shard_name("m", 2, 4), "m-00002-of-00004.gguf");
        assert_eq!(
            parse_shard_name("a-b-00002-of-00004.gguf"),
            Some(("a-b", 2, 4))
        );
        assert_eq!(
            parse_shard_name("m-123456-of-123456.gguf"),
            Some(("m", 123456, 123456))
        );
        for bad in [
            "m-0002-of-00004.gguf",
            "m-00002-of-00004.bin",
            "-00001-of-00002.gguf",
            "m-0000x-of-00004.gguf",
            "model.gguf",
        ] {
            assert_eq!(parse_shard_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn shard_paths_follow_the_first() {
        let p = shard_paths(Path::new("/d/m-00001-of-00003.gguf"), 3).unwrap();
        assert_eq!(p[2], Path::new("/d/m-00003-of-00003.gguf"));
        assert_eq!(
            shard_paths(Path::new("/d/m-00001-of-00004.gguf"), 3),
            Err(SplitError::Name { count: 3 })
        );
        assert_eq!(
            shard_paths(Path::new("/d/m.gguf"), 2),
            Err(SplitError::Name { count: 2 })
        );
    }
}
