//! [`GgufError`]: one variant per rule the reader enforces.

use crate::formats::{Format, TypeIdError};

use super::value::ValueType;

/// Why a byte slice is not a GGUF file this crate accepts.
///
/// One variant per rejection rule. Every message says what is wrong and where: the byte offset in
/// the file (of the field being read, or of the tensor-info record for tensor rules), and the
/// metadata key or tensor name when it is known. Names and keys that are not valid UTF-8 are shown
/// lossily. Keys and names are file bytes, so messages show them quoted and escaped like Rust string
/// literals (`"a\n\u{1b}"`): a message is one line with no control characters, whatever the file
/// holds (no forged log lines, no terminal escape sequences).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The file ends inside a fixed-size field.
    #[error("truncated at byte {offset} reading {what} (file is {file_len} bytes)")]
    Truncated {
        /// Offset of the field that does not fit.
        offset: u64,
        /// The field, e.g. `tensor_count` or `type of tensor "x"`.
        what: String,
        /// File length in bytes.
        file_len: u64,
    },
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: magic at byte 0 is {found:02x?}, expected \"GGUF\" (47 47 55 46)")]
    BadMagic {
        /// The four bytes found.
        found: [u8; 4],
    },
    /// GGUF version 1 (32-bit counts and lengths) is not supported.
    #[error("GGUF version 1 (at byte 4) is not supported: only versions 2 and 3 are")]
    Version1,
    /// The version field reads as a byte-swapped 2 or 3: a big-endian file.
    #[error(
        "big-endian GGUF is not supported (version field at byte 4 reads {raw:#010x} little-endian, \
         i.e. version {swapped} big-endian)"
    )]
    BigEndian {
        /// The version field read little-endian.
        raw: u32,
        /// Its byte swap.
        swapped: u32,
    },
    /// A version other than 1, 2 or 3.
    #[error("GGUF version {version} (at byte 4) is not supported: only versions 2 and 3 are")]
    UnsupportedVersion {
        /// The version field.
        version: u32,
    },
    /// More tensors than the rest of the file could describe (each info takes at least 32 bytes).
    #[error(
        "tensor_count {count} at byte 8 is impossible: each tensor info takes at least 32 bytes \
         and only {remaining} bytes follow the header"
    )]
    TensorCount {
        /// The claimed count.
        count: u64,
        /// Bytes after the 24-byte header.
        remaining: u64,
    },
    /// More metadata pairs than the rest of the file could hold (each takes at least 13 bytes).
    #[error(
        "metadata_kv_count {count} at byte 16 is impossible: each key-value pair takes at least \
         13 bytes and only {remaining} bytes follow the header"
    )]
    MetadataCount {
        /// The claimed count.
        count: u64,
        /// Bytes after the 24-byte header.
        remaining: u64,
    },
    /// A string length runs past the end of the file.
    #[error(
        "{what}: string length {len} at byte {offset} runs past the end of the file \
         ({remaining} bytes follow the length)"
    )]
    StringLength {
        /// Offset of the u64 length.
        offset: u64,
        /// Which string, e.g. `key of metadata pair #3` or `value of "general.name"`.
        what: String,
        /// The claimed length.
        len: u64,
        /// Bytes after the length field.
        remaining: u64,
    },
    /// An array count whose items could not fit in the rest of the file.
    #[error(
        "metadata {key:?}: array of {count} {item_type} items at byte {offset} is impossible \
         (each takes at least {min_size} bytes, {remaining} bytes follow)"
    )]
    ArrayLength {
        /// Offset of the u64 count.
        offset: u64,
        /// The metadata key.
        key: String,
        /// The claimed count.
        count: u64,
        /// The element type.
        item_type: ValueType,
        /// Fewest bytes one item takes.
        min_size: u64,
        /// Bytes after the count field.
        remaining: u64,
    },
    /// Arrays nested deeper than [`MAX_ARRAY_DEPTH`](super::MAX_ARRAY_DEPTH).
    #[error("metadata {key:?}: arrays nested deeper than {max} levels at byte {offset}")]
    NestingTooDeep {
        /// Offset of the element type that would open one level too many.
        offset: u64,
        /// The metadata key.
        key: String,
        /// The nesting limit.
        max: usize,
    },
    /// A value or array element type id that GGUF does not define.
    #[error("metadata {key:?}: unknown value type {type_id} at byte {offset}")]
    UnknownValueType {
        /// Offset of the u32 type id.
        offset: u64,
        /// The metadata key.
        key: String,
        /// The type id.
        type_id: u32,
    },
    /// A bool byte other than 0 or 1.
    #[error("metadata {key:?}: bool byte {byte:#04x} at byte {offset} is neither 0 nor 1")]
    BadBool {
        /// Offset of the byte.
        offset: u64,
        /// The metadata key.
        key: String,
        /// The byte.
        byte: u8,
    },
    /// A metadata key that is not valid UTF-8.
    #[error("metadata key at byte {offset} is not valid UTF-8: {lossy:?}")]
    KeyNotUtf8 {
        /// Offset of the key's length field.
        offset: u64,
        /// The key, lossily decoded.
        lossy: String,
    },
    /// A metadata key that appears twice.
    #[error("metadata key {key:?} at byte {offset} appears twice")]
    DuplicateKey {
        /// Offset of the second occurrence's length field.
        offset: u64,
        /// The key.
        key: String,
    },
    /// `general.alignment` is present but not a `u32`.
    #[error("metadata \"general.alignment\" at byte {offset} must be a u32, found {found}")]
    AlignmentType {
        /// Offset of the value's type id.
        offset: u64,
        /// The type found.
        found: ValueType,
    },
    /// `general.alignment` is zero or not a power of two.
    #[error(
        "metadata \"general.alignment\" at byte {offset} is {alignment}: it must be a non-zero \
         power of two"
    )]
    BadAlignment {
        /// Offset of the value.
        offset: u64,
        /// The value.
        alignment: u32,
    },
    /// A tensor name that is not valid UTF-8.
    #[error("tensor #{index} at byte {offset}: name is not valid UTF-8: {lossy:?}")]
    TensorNameNotUtf8 {
        /// Offset of the tensor-info record.
        offset: u64,
        /// Index of the tensor in the file.
        index: u64,
        /// The name, lossily decoded.
        lossy: String,
    },
    /// A tensor name longer than [`MAX_TENSOR_NAME`](super::MAX_TENSOR_NAME) bytes.
    #[error("tensor #{index} at byte {offset}: name of {len} bytes is longer than {max} bytes")]
    TensorNameTooLong {
        /// Offset of the tensor-info record.
        offset: u64,
        /// Index of the tensor in the file.
        index: u64,
        /// The name's length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Two tensors with the same name.
    #[error("tensor {name:?} at byte {offset}: the name appears twice")]
    DuplicateTensor {
        /// Offset of the second record.
        offset: u64,
        /// The name.
        name: String,
    },
    /// `n_dims` outside 1..=4.
    #[error("tensor {name:?} at byte {offset}: n_dims is {n_dims}, must be 1 to 4")]
    DimCount {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// The value read.
        n_dims: u32,
    },
    /// A dimension of 0 (a zero-element tensor).
    #[error("tensor {name:?} at byte {offset}: dimension {axis} is 0 (dims {dims:?})")]
    ZeroDim {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// Which dimension (0 = ne0).
        axis: usize,
        /// All dims, ggml order.
        dims: Vec<u64>,
    },
    /// The product of the dims overflows ggml's `int64_t` element count.
    #[error("tensor {name:?} at byte {offset}: element count of dims {dims:?} overflows int64")]
    ElementCountOverflow {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// The dims, ggml order.
        dims: Vec<u64>,
    },
    /// A removed or unknown ggml type id.
    #[error("tensor {name:?} at byte {offset}: {source}")]
    TensorType {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// Why the id is not a format.
        #[source]
        source: TypeIdError,
    },
    /// `ne0` is not a whole number of blocks.
    #[error(
        "tensor {name:?} at byte {offset}: ne0 = {ne0} is not a multiple of the {format} block \
         size {block_elems}"
    )]
    RowNotBlockMultiple {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// The first dimension.
        ne0: u64,
        /// The tensor's format.
        format: Format,
        /// Elements per block.
        block_elems: u64,
    },
    /// The tensor's byte size overflows `u64`.
    #[error(
        "tensor {name:?} at byte {offset}: {n_elements} {format} elements overflow a u64 byte size"
    )]
    ByteSizeOverflow {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// Element count.
        n_elements: u64,
        /// The tensor's format.
        format: Format,
    },
    /// A tensor offset that is not a multiple of the alignment.
    #[error(
        "tensor {name:?} at byte {offset}: data offset {tensor_offset} is not a multiple of the \
         alignment {alignment}"
    )]
    UnalignedOffset {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// The tensor's offset, relative to the data section.
        tensor_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor whose bytes do not lie inside the file.
    #[error(
        "tensor {name:?} at byte {offset}: its {n_bytes} bytes at data offset {tensor_offset} \
         (data section at byte {data_offset}) run past the end of the file ({file_len} bytes)"
    )]
    TensorOutOfFile {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// The tensor's offset, relative to the data section.
        tensor_offset: u64,
        /// The tensor's size.
        n_bytes: u64,
        /// Absolute start of the data section.
        data_offset: u64,
        /// File length.
        file_len: u64,
    },
    /// Two tensors whose bytes overlap.
    #[error(
        "tensor {name:?} at byte {offset}: its bytes at data offset {tensor_offset} overlap \
         tensor {other:?} ({other_offset}..{other_end})"
    )]
    TensorOverlap {
        /// Offset of the tensor-info record of the later-starting tensor.
        offset: u64,
        /// The later-starting tensor.
        name: String,
        /// Its offset, relative to the data section.
        tensor_offset: u64,
        /// The tensor it overlaps.
        other: String,
        /// The other tensor's start, relative to the data section.
        other_offset: u64,
        /// The other tensor's end, relative to the data section.
        other_end: u64,
    },
    /// A type id 43 (F8_E4M3) tensor that is not laid out as one byte per element.
    #[error(
        "tensor {name:?} at byte {offset}: type F8_E4M3 (id 43) with {n_elements} elements is \
         given {room} bytes in the file; only the 1-byte-per-element variant is supported \
         (spec §5: other forks use id 43 for block formats)"
    )]
    F8E4M3Size {
        /// Offset of the tensor-info record.
        offset: u64,
        /// The tensor.
        name: String,
        /// Element count.
        n_elements: u64,
        /// Bytes from the tensor's start to the next tensor or the end of the file.
        room: u64,
    },
}
