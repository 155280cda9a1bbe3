//! [`parse`]: the whole validation of a GGUF file, on a byte slice.
//!
//! Untrusted-input discipline (design notes §5 rule 7): reads go through `get(range)`, arithmetic on
//! file values is checked, and every count or length is bounded by the bytes left in the file
//! *before* anything sized by it is allocated, so host memory stays a small multiple of the file
//! size whatever the header claims. Array nesting is capped at [`MAX_ARRAY_DEPTH`], so the stack is
//! bounded too.

use std::collections::HashSet;

use crate::formats::Format;

use super::error::GgufError;
use super::value::{Array, GgufString, Value, ValueType};
use super::{Header, TensorInfo, DEFAULT_ALIGNMENT, MAX_ARRAY_DEPTH, MAX_TENSOR_NAME};

type Result<T> = std::result::Result<T, GgufError>;

/// Size of the fixed header: magic, version, tensor_count, metadata_kv_count.
const HEADER_BYTES: u64 = 24;
/// Fewest bytes one tensor info takes: name length, n_dims, one dim, type, offset.
const MIN_TENSOR_INFO: u64 = 8 + 4 + 8 + 4 + 8;
/// Fewest bytes one metadata pair takes: key length, value type, a one-byte value.
const MIN_KV: u64 = 8 + 4 + 1;

/// A read position over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn file_len(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn remaining(&self) -> u64 {
        self.bytes.len().saturating_sub(self.pos) as u64
    }

    /// The next `n` bytes, or `Truncated` naming `what`.
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        let slice = usize::try_from(n)
            .ok()
            .and_then(|n| self.pos.checked_add(n))
            .and_then(|end| self.bytes.get(self.pos..end));
        match slice {
            Some(s) => {
                self.pos += s.len();
                Ok(s)
            }
            None => Err(GgufError::Truncated {
                offset: self.offset(),
                what: what(),
                file_len: self.file_len(),
            }),
        }
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A u64-length-prefixed string's bytes; a length beyond the end of the file is `StringLength`.
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        let offset = self.offset();
        let len = self.u64(&|| format!("length of {}", what()))?;
        if len > self.remaining() {
            return Err(GgufError::StringLength {
                offset,
                what: what(),
                len,
                remaining: self.remaining(),
            });
        }
        self.take(len, what)
    }
}

/// Parses and validates a whole GGUF file held in `bytes`.
///
/// This is the complete validation that [`GgufFile::open`](super::GgufFile::open) runs on the memory
/// map, and the fuzz entry point: it never panics, returns in time linear in `bytes.len()`, and
/// allocates at most a small multiple of `bytes.len()`. Tensor extents are checked against
/// `bytes.len()`. See the [module docs](super) for every rule.
pub fn parse(bytes: &[u8]) -> Result<Header> {
    let mut c = Cursor { bytes, pos: 0 };

    let magic: [u8; 4] = c.array(&|| "magic".into())?;
    if &magic != b"GGUF" {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32(&|| "version".into())?;
    match version {
        2 | 3 => {}
        1 => return Err(GgufError::Version1),
        v if v >= 0x0100_0000 && matches!(v.swap_bytes(), 2 | 3) => {
            return Err(GgufError::BigEndian {
                raw: v,
                swapped: v.swap_bytes(),
            })
        }
        v => return Err(GgufError::UnsupportedVersion { version: v }),
    }
    let tensor_count = c.u64(&|| "tensor_count".into())?;
    let kv_count = c.u64(&|| "metadata_kv_count".into())?;
    let remaining = c.remaining();
    debug_assert_eq!(c.offset(), HEADER_BYTES);
    if tensor_count
        .checked_mul(MIN_TENSOR_INFO)
        .is_none_or(|n| n > remaining)
    {
        return Err(GgufError::TensorCount {
            count: tensor_count,
            remaining,
        });
    }
    if kv_count.checked_mul(MIN_KV).is_none_or(|n| n > remaining) {
        return Err(GgufError::MetadataCount {
            count: kv_count,
            remaining,
        });
    }

    // Metadata. Both counts are now bounded by the file size, so these allocations are too.
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut keys: HashSet<&[u8]> = HashSet::with_capacity(kv_count as usize);
    let mut alignment = DEFAULT_ALIGNMENT;
    for i in 0..kv_count {
        let key_offset = c.offset();
        let key_bytes = c.string(&|| format!("key of metadata pair #{i}"))?;
        let key = match std::str::from_utf8(key_bytes) {
            Ok(k) => k,
            Err(_) => {
                return Err(GgufError::KeyNotUtf8 {
                    offset: key_offset,
                    lossy: String::from_utf8_lossy(key_bytes).into_owned(),
                })
            }
        };
        if !keys.insert(key_bytes) {
            return Err(GgufError::DuplicateKey {
                offset: key_offset,
                key: key.to_owned(),
            });
        }
        let type_offset = c.offset();
        let type_id = c.u32(&|| format!("value type of {key:?}"))?;
        let ty = value_type(type_id, type_offset, key)?;
        let value_offset = c.offset();
        let value = read_value(&mut c, ty, key, 0)?;
        if key == "general.alignment" {
            alignment = match value {
                Value::U32(a) if a != 0 && a.is_power_of_two() => a.into(),
                Value::U32(a) => {
                    return Err(GgufError::BadAlignment {
                        offset: value_offset,
                        alignment: a,
                    })
                }
                ref other => {
                    return Err(GgufError::AlignmentType {
                        offset: type_offset,
                        found: other.value_type(),
                    })
                }
            };
        }
        metadata.push((key.to_owned(), value));
    }

    // Tensor infos.
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(tensor_count as usize);
    let mut info_offsets: Vec<u64> = Vec::with_capacity(tensor_count as usize);
    let mut names: HashSet<&[u8]> = HashSet::with_capacity(tensor_count as usize);
    for index in 0..tensor_count {
        let offset = c.offset();
        let t = read_tensor_info(&mut c, index, alignment, &mut names)?;
        tensors.push(t);
        info_offsets.push(offset);
    }

    // The data section starts at the first multiple of the alignment after the infos.
    let data_offset = align_up(c.offset(), alignment).ok_or_else(|| GgufError::Truncated {
        offset: c.offset(),
        what: "data section".into(),
        file_len: c.file_len(),
    })?;
    let file_len = c.file_len();

    // Every tensor's bytes inside the file.
    for (t, &offset) in tensors.iter().zip(&info_offsets) {
        let end = data_offset
            .checked_add(t.offset)
            .and_then(|s| s.checked_add(t.n_bytes));
        if end.is_none_or(|e| e > file_len) {
            return Err(GgufError::TensorOutOfFile {
                offset,
                name: t.name.clone(),
                tensor_offset: t.offset,
                n_bytes: t.n_bytes,
                data_offset,
                file_len,
            });
        }
    }

    // No two tensors share a byte (ggml's own loader goes further and requires them packed in
    // file order; we accept any order and gaps, but an overlap is never what a writer meant).
    // Sums below cannot overflow: every extent was just checked to end inside the file.
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| tensors.get(i).map_or(0, |t| t.offset));
    for pair in order.windows(2) {
        let (Some(a), Some(b)) = (tensors.get(pair[0]), tensors.get(pair[1])) else {
            continue;
        };
        if a.offset + a.n_bytes > b.offset {
            return Err(GgufError::TensorOverlap {
                offset: info_offsets.get(pair[1]).copied().unwrap_or(0),
                name: b.name.clone(),
                tensor_offset: b.offset,
                other: a.name.clone(),
                other_offset: a.offset,
                other_end: a.offset + a.n_bytes,
            });
        }
    }

    // Spec §5: id 43 is ambiguous across forks; accept it only as 1 byte per element. The byte size
    // is implied by the type, so the evidence of a block variant is the room the file gives the
    // tensor: up to the next tensor's start (or the end of the file) it must not exceed the
    // 1-byte-per-element size padded to the alignment, as every GGUF writer lays tensors out.
    for (k, &i) in order.iter().enumerate() {
        let Some(t) = tensors.get(i) else { continue };
        if t.format != Format::F8_E4M3 {
            continue;
        }
        let end = match order.get(k + 1).and_then(|&j| tensors.get(j)) {
            Some(next) => next.offset,
            None => file_len.saturating_sub(data_offset),
        };
        let room = end.saturating_sub(t.offset);
        let padded = align_up(t.n_bytes, alignment).unwrap_or(u64::MAX);
        if t.n_bytes != t.n_elements || room > padded {
            return Err(GgufError::F8E4M3Size {
                offset: info_offsets.get(i).copied().unwrap_or(0),
                name: t.name.clone(),
                n_elements: t.n_elements,
                room,
            });
        }
    }

    Ok(Header {
        version,
        alignment,
        data_offset,
        metadata,
        tensors,
    })
}

/// `x` rounded up to a multiple of `align` (a power of two), if that fits in a u64.
fn align_up(x: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    x.checked_add(mask).map(|v| v & !mask)
}

fn value_type(type_id: u32, offset: u64, key: &str) -> Result<ValueType> {
    ValueType::from_id(type_id).ok_or_else(|| GgufError::UnknownValueType {
        offset,
        key: key.to_owned(),
        type_id,
    })
}

/// Reads one value of type `ty`; `depth` is the number of arrays it sits in.
fn read_value(c: &mut Cursor<'_>, ty: ValueType, key: &str, depth: usize) -> Result<Value> {
    let what = || format!("value of {key:?}");
    Ok(match ty {
        ValueType::U8 => Value::U8(u8::from_le_bytes(c.array(&what)?)),
        ValueType::I8 => Value::I8(i8::from_le_bytes(c.array(&what)?)),
        ValueType::U16 => Value::U16(u16::from_le_bytes(c.array(&what)?)),
        ValueType::I16 => Value::I16(i16::from_le_bytes(c.array(&what)?)),
        ValueType::U32 => Value::U32(u32::from_le_bytes(c.array(&what)?)),
        ValueType::I32 => Value::I32(i32::from_le_bytes(c.array(&what)?)),
        ValueType::U64 => Value::U64(u64::from_le_bytes(c.array(&what)?)),
        ValueType::I64 => Value::I64(i64::from_le_bytes(c.array(&what)?)),
        ValueType::F32 => Value::F32(f32::from_le_bytes(c.array(&what)?)),
        ValueType::F64 => Value::F64(f64::from_le_bytes(c.array(&what)?)),
        ValueType::Bool => {
            let offset = c.offset();
            let [b] = c.array(&what)?;
            Value::Bool(bool_byte(b, offset, key)?)
        }
        ValueType::String => Value::String(GgufString::new(c.string(&what)?)),
        ValueType::Array => Value::Array(read_array(c, key, depth + 1)?),
    })
}

fn bool_byte(byte: u8, offset: u64, key: &str) -> Result<bool> {
    match byte {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(GgufError::BadBool {
            offset,
            key: key.to_owned(),
            byte,
        }),
    }
}

/// Reads an array's element type, count and items; `depth` counts this array (the outermost is 1).
fn read_array<'a>(c: &mut Cursor<'a>, key: &str, depth: usize) -> Result<Array> {
    let type_offset = c.offset();
    let type_id = c.u32(&|| format!("array element type of {key:?}"))?;
    let ty = value_type(type_id, type_offset, key)?;
    if ty == ValueType::Array && depth >= MAX_ARRAY_DEPTH {
        return Err(GgufError::NestingTooDeep {
            offset: type_offset,
            key: key.to_owned(),
            max: MAX_ARRAY_DEPTH,
        });
    }
    let count_offset = c.offset();
    let count = c.u64(&|| format!("array count of {key:?}"))?;
    let remaining = c.remaining();
    let total_min = count.checked_mul(ty.min_size());
    if total_min.is_none_or(|n| n > remaining) {
        return Err(GgufError::ArrayLength {
            offset: count_offset,
            key: key.to_owned(),
            count,
            item_type: ty,
            min_size: ty.min_size(),
            remaining,
        });
    }
    // `count` items of at least `min_size` bytes fit in the rest of the file, so `count` fits in a
    // usize and every allocation below is bounded by the file size.
    let n = count as usize;
    let items = |c: &mut Cursor<'a>| -> Result<&'a [u8]> {
        c.take(count * ty.min_size(), &|| format!("items of {key:?}"))
    };
    macro_rules! fixed {
        ($variant:ident, $t:ty) => {{
            let bytes = items(c)?;
            Array::$variant(
                bytes
                    .chunks_exact(std::mem::size_of::<$t>())
                    .map(|ch| {
                        let mut a = [0u8; std::mem::size_of::<$t>()];
                        a.copy_from_slice(ch);
                        <$t>::from_le_bytes(a)
                    })
                    .collect(),
            )
        }};
    }
    Ok(match ty {
        ValueType::U8 => Array::U8(items(c)?.to_vec()),
        ValueType::I8 => fixed!(I8, i8),
        ValueType::U16 => fixed!(U16, u16),
        ValueType::I16 => fixed!(I16, i16),
        ValueType::U32 => fixed!(U32, u32),
        ValueType::I32 => fixed!(I32, i32),
        ValueType::U64 => fixed!(U64, u64),
        ValueType::I64 => fixed!(I64, i64),
        ValueType::F32 => fixed!(F32, f32),
        ValueType::F64 => fixed!(F64, f64),
        ValueType::Bool => {
            let start = c.offset();
            let bytes = items(c)?;
            let mut v = Vec::with_capacity(n);
            for (k, &b) in bytes.iter().enumerate() {
                v.push(bool_byte(b, start + k as u64, key)?);
            }
            Array::Bool(v)
        }
        ValueType::String => {
            let mut v = Vec::with_capacity(n);
            for k in 0..count {
                let s = c.string(&|| format!("item {k} of {key:?}"))?;
                v.push(GgufString::new(s));
            }
            Array::String(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(n);
            for _ in 0..count {
                v.push(read_array(c, key, depth + 1)?);
            }
            Array::Array(v)
        }
    })
}

fn read_tensor_info<'a>(
    c: &mut Cursor<'a>,
    index: u64,
    alignment: u64,
    names: &mut HashSet<&'a [u8]>,
) -> Result<TensorInfo> {
    let offset = c.offset();
    let name_what = || format!("name of tensor #{index}");
    let len_offset = c.offset();
    let len = c.u64(&|| format!("length of {}", name_what()))?;
    if len > c.remaining() {
        return Err(GgufError::StringLength {
            offset: len_offset,
            what: name_what(),
            len,
            remaining: c.remaining(),
        });
    }
    if len > MAX_TENSOR_NAME {
        return Err(GgufError::TensorNameTooLong {
            offset,
            index,
            len,
            max: MAX_TENSOR_NAME,
        });
    }
    let name_bytes = c.take(len, &name_what)?;
    let name = std::str::from_utf8(name_bytes).map_err(|_| GgufError::TensorNameNotUtf8 {
        offset,
        index,
        lossy: String::from_utf8_lossy(name_bytes).into_owned(),
    })?;
    if !names.insert(name_bytes) {
        return Err(GgufError::DuplicateTensor {
            offset,
            name: name.to_owned(),
        });
    }

    let n_dims = c.u32(&|| format!("n_dims of tensor {name:?}"))?;
    if !(1..=4).contains(&n_dims) {
        return Err(GgufError::DimCount {
            offset,
            name: name.to_owned(),
            n_dims,
        });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for axis in 0..n_dims {
        dims.push(c.u64(&|| format!("dim {axis} of tensor {name:?}"))?);
    }
    // ggml accepts ne = 0, but a zero-element tensor holds nothing to dequantise and invites
    // divide-by-zero in row arithmetic downstream; no real model has one, so we reject it.
    if let Some(axis) = dims.iter().position(|&d| d == 0) {
        return Err(GgufError::ZeroDim {
            offset,
            name: name.to_owned(),
            axis,
            dims,
        });
    }
    // ggml counts elements in int64_t.
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| i64::try_from(n).is_ok());
    let Some(n_elements) = n_elements else {
        return Err(GgufError::ElementCountOverflow {
            offset,
            name: name.to_owned(),
            dims,
        });
    };

    let type_id = c.u32(&|| format!("type of tensor {name:?}"))?;
    let format = Format::from_id(type_id).map_err(|source| GgufError::TensorType {
        offset,
        name: name.to_owned(),
        source,
    })?;
    let block_elems = format.block_elems() as u64;
    let ne0 = dims.first().copied().unwrap_or(0);
    if ne0.checked_rem(block_elems) != Some(0) {
        return Err(GgufError::RowNotBlockMultiple {
            offset,
            name: name.to_owned(),
            ne0,
            format,
            block_elems,
        });
    }
    let Some(n_bytes) = format.bytes_for(n_elements) else {
        return Err(GgufError::ByteSizeOverflow {
            offset,
            name: name.to_owned(),
            n_elements,
            format,
        });
    };

    let tensor_offset = c.u64(&|| format!("offset of tensor {name:?}"))?;
    if tensor_offset.checked_rem(alignment) != Some(0) {
        return Err(GgufError::UnalignedOffset {
            offset,
            name: name.to_owned(),
            tensor_offset,
            alignment,
        });
    }

    Ok(TensorInfo {
        name: name.to_owned(),
        dims,
        format,
        offset: tensor_offset,
        n_elements,
        n_bytes,
        shard: 0,
    })
}
