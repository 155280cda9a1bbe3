//! GGUF reading and writing: a hardened, memory-mapped, zero-copy reader and a writer.
//!
//! # File layout (GGUF v2 and v3, little-endian)
//!
//! | field | type |
//! |---|---|
//! | magic | `b"GGUF"` |
//! | version | u32: 2 or 3 |
//! | tensor_count | u64 |
//! | metadata_kv_count | u64 |
//! | metadata | `metadata_kv_count` × (key: string, value type: u32, value) |
//! | tensor infos | `tensor_count` × (name: string, n_dims: u32, dims: n_dims × u64, type: u32, offset: u64) |
//! | padding | zeros to the next multiple of `general.alignment` (default 32) |
//! | data | each tensor at `data_offset + offset` |
//!
//! A string is a u64 byte length and the bytes; an array is a u32 element type, a u64 count and
//! the items (arrays may nest).
//!
//! # What the reader rejects
//!
//! [`parse`] (which [`GgufFile::open`] runs on the memory map) rejects, each with its own
//! [`GgufError`] variant naming the byte offset and key or tensor:
//!
//! * a bad magic; version 1; a big-endian file (the version field byte-swapped); other versions;
//! * a file that ends inside a field;
//! * counts and lengths the file cannot physically hold: `tensor_count` × 32 bytes or
//!   `metadata_kv_count` × 13 bytes beyond the rest of the file, string lengths past its end,
//!   array counts × the item's smallest on-disk size beyond it. These checks run before anything
//!   sized by the file is allocated, so a 40-byte file claiming 2⁶³ tensors fails at once;
//! * arrays nested more than [`MAX_ARRAY_DEPTH`] deep;
//! * unknown value types; bool bytes other than 0 and 1;
//! * metadata keys that are not UTF-8 or appear twice (string *values* are kept as raw bytes:
//!   real vocabularies hold tokens that are not UTF-8 on their own);
//! * `general.alignment` that is not a `u32`, or is 0 or not a power of two;
//! * tensor names that are not UTF-8, longer than [`MAX_TENSOR_NAME`] bytes, or repeated;
//! * `n_dims` outside 1..=4; a dimension of 0 (ggml tolerates it, but a zero-element tensor has
//!   nothing to decode and invites division by zero in row arithmetic, and no real model has one);
//!   an element count that overflows ggml's `int64_t`;
//! * removed and unknown ggml type ids ([`Format::from_id`]); `ne0` not a whole number of blocks;
//!   a byte size that overflows u64;
//! * tensor offsets that are not multiples of the alignment; tensor bytes past the end of the
//!   file; tensors whose bytes overlap (gaps and any order are accepted);
//! * type id 43 (F8_E4M3) unless laid out as 1 byte per element: the room the file gives the tensor
//!   (to the next tensor, or the end of the file) must not exceed its size padded to the alignment
//!   (spec §5: forks use id 43 for 34- and 132-byte block formats too).
//!
//! Tensor names may be up to 64 bytes (ggml's own loader, which stores a NUL, stops at 63).
//!
//! # Example
//!
//! ```
//! use gguf_dequant::gguf::{parse, GgufWriter, Value};
//! use gguf_dequant::Format;
//!
//! let mut w = GgufWriter::new();
//! w.metadata("general.name", "tiny")
//!     .tensor("w", vec![4, 2], Format::F32, vec![0u8; 32]);
//! let header = parse(&w.to_bytes()).unwrap();
//! assert_eq!(header.tensors[0].n_elements, 8);
//! assert_eq!(header.get("general.name").and_then(Value::as_str), Some("tiny"));
//! ```

mod error;
mod mmap;
mod reader;
pub mod split;
mod value;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::formats::Format;
use crate::{Error, Result};

pub use error::GgufError;
#[cfg(feature = "gpu")]
pub(crate) use mmap::read_exact_at_into;
pub use reader::parse;
pub use split::SplitError;
pub use value::{Array, GgufString, Value, ValueType};
pub use writer::{GgufWriter, SplitLimit};

/// Alignment of tensor data when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// Deepest array nesting the reader accepts (an array directly in a key-value pair is depth 1).
pub const MAX_ARRAY_DEPTH: usize = 8;
/// Longest tensor name, in bytes, the reader accepts.
pub const MAX_TENSOR_NAME: u64 = 64;

/// Everything before the data section, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// GGUF version: 2 or 3.
    pub version: u32,
    /// `general.alignment`, or 32.
    pub alignment: u64,
    /// Absolute byte offset of the data section.
    pub data_offset: u64,
    /// Metadata key-value pairs, in file order; keys are unique.
    pub metadata: Vec<(String, Value)>,
    /// Tensor infos, in file order; names are unique.
    pub tensors: Vec<TensorInfo>,
}

impl Header {
    /// The metadata value for `key` (a linear search).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor named `name` (a linear search).
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// One tensor's info record, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Name: UTF-8, at most [`MAX_TENSOR_NAME`] bytes, unique in the file.
    pub name: String,
    /// Dimensions in ggml order (`ne0` first, the fastest-varying); 1 to 4 of them, none 0.
    pub dims: Vec<u64>,
    /// The element format.
    pub format: Format,
    /// Offset of the data relative to the data section, as stored; a multiple of the alignment.
    pub offset: u64,
    /// Product of the dims.
    pub n_elements: u64,
    /// Bytes of data: `n_elements / block_elems * block_bytes`.
    pub n_bytes: u64,
    /// The shard of a split set holding the tensor (see [`GgufFile::shards`]); 0 for a single
    /// file, and always 0 from [`parse`].
    pub shard: usize,
}

/// One file of a [`GgufFile`]: the whole model for a single file, one shard of a split set.
#[derive(Debug)]
pub struct Shard {
    index: usize,
    path: PathBuf,
    map: mmap::Map,
    header: Header,
    /// A hash of the header's bytes (`..data_offset`) as parsed.
    header_hash: u64,
}

impl Shard {
    /// Maps and parses the file at `path` as shard `index`.
    fn open(path: PathBuf, index: usize) -> Result<Shard> {
        let io = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(io)?;
        let map = mmap::Map::of(&file).map_err(io)?;
        let mut header = parse(map.bytes()).map_err(|source| Error::Gguf {
            path: path.clone(),
            source,
        })?;
        for t in &mut header.tensors {
            t.shard = index;
        }
        let header_hash = hash_header(map.bytes(), header.data_offset);
        Ok(Shard {
            index,
            path,
            map,
            header,
            header_hash,
        })
    }

    /// Its position in the set (0 for a single file).
    pub fn index(&self) -> usize {
        self.index
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its validated header (its tensors carry [`TensorInfo::shard`] = [`Shard::index`]).
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Absolute byte offset of its data section.
    pub fn data_offset(&self) -> u64 {
        self.header.data_offset
    }

    /// The whole file, as mapped.
    pub fn bytes(&self) -> &[u8] {
        self.map.bytes()
    }

    /// Its length in bytes, as mapped.
    pub fn len(&self) -> u64 {
        self.map.bytes().len() as u64
    }

    /// Whether the file is empty (never, for a valid shard).
    pub fn is_empty(&self) -> bool {
        self.map.bytes().is_empty()
    }

    /// Whether the header bytes in the map are still the ones parsed at open (in-place writes
    /// show through the map). Compares a 64-bit hash of them, a few milliseconds for a header
    /// of megabytes (a large vocabulary), where parsing it again took ten times longer.
    pub fn header_unchanged(&self) -> bool {
        hash_header(self.map.bytes(), self.header.data_offset) == self.header_hash
    }

    /// Tells the OS that bytes `offset..offset + len` of the file will not be read again soon, so
    /// that their pages leave this process's resident set (Linux; nothing elsewhere). Streaming
    /// readers call it behind themselves to keep host memory bounded by their own buffers rather
    /// than by the file size. Reading the bytes again stays valid: they come back from the file.
    pub fn release(&self, offset: u64, len: u64) {
        let clamp = |x: u64| usize::try_from(x).unwrap_or(usize::MAX);
        self.map.release(clamp(offset), clamp(len));
    }

    /// How many pages of bytes `offset..offset + len` of the file the OS page cache holds now,
    /// and how many pages that range has (`mincore`, 4 KiB pages; Unix). `None` where the OS
    /// cannot tell.
    pub fn cached_pages(&self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let clamp = |x: u64| usize::try_from(x).unwrap_or(usize::MAX);
        self.map
            .cached_pages(clamp(offset), clamp(len))
            .map(|(a, b)| (a as u64, b as u64))
    }

    /// Asks the OS to drop bytes `offset..offset + len` of the file from the page cache (this
    /// process's mapping first, then `POSIX_FADV_DONTNEED`; Linux), so that the next read comes
    /// from the disk. Dirty pages and pages another process has mapped stay: check with
    /// [`Shard::cached_pages`].
    pub fn drop_cache(&self, offset: u64, len: u64) -> Result<()> {
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        self.release(offset, len);
        let file = File::open(&self.path).map_err(io)?;
        mmap::drop_cache(&file, offset, len).map_err(io)
    }
}

/// The hash of `bytes[..data_offset]` that [`Shard::header_unchanged`] compares (SipHash with
/// fixed keys: the same bytes always hash the same).
fn hash_header(bytes: &[u8], data_offset: u64) -> u64 {
    use std::hash::Hasher;
    let end = usize::try_from(data_offset).map_or(bytes.len(), |d| d.min(bytes.len()));
    let mut h = std::hash::DefaultHasher::new();
    h.write(&bytes[..end]);
    h.finish()
}

/// A memory-mapped, validated GGUF model: one file, or every shard of a split set.
///
/// Opening runs [`parse`] over the whole map of each file; afterwards every [`TensorInfo`] it
/// hands out has its bytes inside its shard's map, and [`tensor_data`](GgufFile::tensor_data)
/// is a zero-copy slice. Opening the first shard of a split set (see [`split`]) opens the whole
/// set: every shard is found beside it and validated, and the tensors of all shards are one list
/// (in shard order), named uniquely. The metadata is the first shard's (where writers put the
/// model's).
///
/// The map is only as stable as the file: if another process truncates the file while it is open,
/// reading a tensor past the new end kills the process with `SIGBUS` (a file already shorter when
/// mapped is an [`Error::Io`]); if it rewrites bytes in place, tensor values change but no length
/// or offset does, since the header is copied out of the map when the file is opened. For a file
/// that may be shrunk underneath (a download in progress), copy it first, or read it into memory
/// and use [`parse`].
#[derive(Debug)]
pub struct GgufFile {
    shards: Vec<Shard>,
    /// Every shard's tensors, in shard order.
    tensors: Vec<TensorInfo>,
    /// Indices into `tensors`, sorted by name.
    by_name: Vec<usize>,
}

impl GgufFile {
    /// Opens, maps and validates the file at `path`; the first shard of a split set opens the
    /// whole set.
    ///
    /// Errors: [`Error::Io`] if a file cannot be opened or mapped, [`Error::Gguf`] if one is not a
    /// valid GGUF file (see the [module docs](self)), [`Error::Split`] naming the shard at fault
    /// if the set is not whole and consistent: a shard missing, or one beside it named like a
    /// shard of the set but not one of them; `split.count`, `split.no` or
    /// `split.tensors.count` inconsistent; a tensor in two shards; or `path` a later shard.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let first = Shard::open(path.as_ref().to_path_buf(), 0)?;
        let at = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Split {
                path: path.clone(),
                source,
            }
        };
        let keys = split::keys(&first.header).map_err(at(&first.path))?;
        let mut shards = vec![first];
        if let Some(k) = keys {
            let first = &shards[0];
            if k.index != 0 {
                let name = first.path.file_name().and_then(|n| n.to_str());
                let first_name = match name.and_then(split::parse_shard_name) {
                    Some((prefix, ..)) => split::shard_name(prefix, 1, k.count),
                    None => "the shard with split.no 0".into(),
                };
                return Err(at(&first.path)(SplitError::NotFirst {
                    no: k.index + 1,
                    count: k.count,
                    index: k.index,
                    first: first_name,
                }));
            }
            let paths = if k.count == 1 {
                vec![first.path.clone()]
            } else {
                split::shard_paths(&first.path, k.count).map_err(at(&first.path))?
            };
            if let Some(extra) = split::extra_shards(&paths).first() {
                return Err(at(extra)(SplitError::Extra { count: k.count }));
            }
            for (index, path) in paths.into_iter().enumerate().skip(1) {
                if !path.exists() {
                    return Err(at(&path)(SplitError::Missing {
                        no: index as u64 + 1,
                        count: k.count,
                    }));
                }
                let shard = Shard::open(path, index)?;
                let err = at(&shard.path);
                let Some(sk) = split::keys(&shard.header).map_err(&err)? else {
                    return Err(err(SplitError::MissingKey {
                        key: split::SPLIT_COUNT,
                    }));
                };
                if sk.count != k.count {
                    return Err(err(SplitError::Count {
                        found: sk.count,
                        expected: k.count,
                    }));
                }
                if sk.index != index as u64 {
                    return Err(err(SplitError::Number {
                        found: sk.index,
                        expected: index as u64,
                    }));
                }
                if sk.tensors != k.tensors {
                    return Err(err(SplitError::TensorsCountMismatch {
                        found: sk.tensors,
                        expected: k.tensors,
                    }));
                }
                shards.push(shard);
            }
            let found: u64 = shards.iter().map(|s| s.header.tensors.len() as u64).sum();
            if found != k.tensors {
                return Err(at(&shards[0].path)(SplitError::TensorsCount {
                    count: k.count,
                    found,
                    declared: k.tensors,
                }));
            }
        }
        let tensors: Vec<TensorInfo> = shards
            .iter()
            .flat_map(|s| s.header.tensors.iter().cloned())
            .collect();
        let mut by_name: Vec<usize> = (0..tensors.len()).collect();
        by_name.sort_by(|&a, &b| tensors[a].name.cmp(&tensors[b].name));
        // Names are unique within a shard (the reader checks); across shards, check here.
        for pair in by_name.windows(2) {
            let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
            if a.name == b.name {
                let (first, later) = if a.shard <= b.shard { (a, b) } else { (b, a) };
                return Err(Error::Split {
                    path: shards[later.shard].path.clone(),
                    source: SplitError::DuplicateTensor {
                        name: later.name.clone(),
                        other: first.shard as u64 + 1,
                    },
                });
            }
        }
        Ok(GgufFile {
            shards,
            tensors,
            by_name,
        })
    }

    /// The path the model was opened from (the first shard's, for a split set).
    pub fn path(&self) -> &Path {
        &self.shards[0].path
    }

    /// Its files: one, or every shard of a split set in order.
    pub fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Whether the model is a split set of more than one file.
    pub fn is_split(&self) -> bool {
        self.shards.len() > 1
    }

    /// The paths of its files, in order.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// Bytes of all its files together.
    pub fn total_len(&self) -> u64 {
        self.shards.iter().map(Shard::len).sum()
    }

    /// GGUF version of the first file: 2 or 3.
    pub fn version(&self) -> u32 {
        self.shards[0].header.version
    }

    /// `general.alignment` of the first file, or 32.
    pub fn alignment(&self) -> u64 {
        self.shards[0].header.alignment
    }

    /// Metadata key-value pairs of the first file, in file order.
    pub fn metadata(&self) -> &[(String, Value)] {
        &self.shards[0].header.metadata
    }

    /// The metadata value for `key` (of the first file).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.shards[0].header.get(key)
    }

    /// Tensor infos of every file, in file (and shard) order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    /// The tensor named `name` (a binary search).
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.get(self.tensor_index(name)?)
    }

    /// The index into [`GgufFile::tensors`] of the tensor named `name` (a binary search).
    pub fn tensor_index(&self, name: &str) -> Option<usize> {
        let k = self
            .by_name
            .binary_search_by(|&i| {
                let n = self.tensors.get(i).map_or("", |t| t.name.as_str());
                n.cmp(name)
            })
            .ok()?;
        self.by_name.get(k).copied()
    }

    /// The shard holding `t`.
    pub fn shard_of(&self, t: &TensorInfo) -> Option<&Shard> {
        self.shards.get(t.shard)
    }

    /// The absolute byte offset of `t`'s first byte in its shard's file.
    pub fn tensor_offset(&self, t: &TensorInfo) -> Option<u64> {
        self.shard_of(t)?.data_offset().checked_add(t.offset)
    }

    /// The tensor's bytes: a zero-copy slice of its shard's map, exactly `t.n_bytes` long.
    ///
    /// `t` should come from this model; an info whose extent is not inside its shard (one from
    /// another file) gets an empty slice rather than a panic.
    pub fn tensor_data(&self, t: &TensorInfo) -> &[u8] {
        let Some(shard) = self.shard_of(t) else {
            return &[];
        };
        let range = self
            .tensor_offset(t)
            .and_then(|s| Some((s, s.checked_add(t.n_bytes)?)))
            .and_then(|(s, e)| Some(usize::try_from(s).ok()?..usize::try_from(e).ok()?));
        range.and_then(|r| shard.bytes().get(r)).unwrap_or_default()
    }

    /// [`Shard::release`] for bytes `from..from + len` of tensor `t`.
    pub fn release_tensor(&self, t: &TensorInfo, from: u64, len: u64) {
        if let (Some(shard), Some(start)) = (self.shard_of(t), self.tensor_offset(t)) {
            shard.release(start.saturating_add(from), len);
        }
    }
}
