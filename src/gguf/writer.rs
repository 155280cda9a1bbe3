//! [`GgufWriter`]: builds GGUF v2/v3 files.

use std::borrow::Cow;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::formats::Format;

use super::split;
use super::value::{Array, GgufString, Value};
use super::DEFAULT_ALIGNMENT;

/// Where [`GgufWriter::split`] cuts a model into shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitLimit {
    /// At most this many tensors per shard (gguf-py's `split_max_tensors`).
    Tensors(usize),
    /// At most this many bytes of tensor data per shard, unless one tensor alone is larger
    /// (gguf-py's `split_max_size`).
    Bytes(u64),
}

/// One tensor to write.
#[derive(Clone, Debug)]
struct PendingTensor<'a> {
    name: GgufString,
    dims: Vec<u64>,
    type_id: u32,
    bytes: Cow<'a, [u8]>,
}

/// Builds a GGUF file: header, metadata, tensor infos, and an aligned data section with zero
/// padding. Tensor offsets are computed by the writer, in the order tensors are added.
///
/// The writer writes what it is given and validates nothing: it can produce files the reader
/// rejects (duplicate keys, non-UTF-8 names, wrong byte counts, version 1, a bad
/// `general.alignment`), which is what tests of the reader need. Tensor bytes may be borrowed
/// (`&[u8]`, e.g. from another file's map) or owned (`Vec<u8>`).
///
/// ```
/// use gguf_dequant::gguf::{GgufWriter, Value};
/// use gguf_dequant::Format;
///
/// let mut w = GgufWriter::new();
/// w.alignment(64)
///     .metadata("general.architecture", "llama")
///     .metadata("llama.block_count", Value::U32(1))
///     .tensor("token_embd.weight", vec![32, 2], Format::Q8_0, vec![0u8; 2 * 34]);
/// let bytes = w.to_bytes();
/// assert_eq!(&bytes[..4], b"GGUF");
/// ```
#[derive(Clone, Debug)]
pub struct GgufWriter<'a> {
    version: u32,
    alignment: u64,
    metadata: Vec<(GgufString, Value)>,
    tensors: Vec<PendingTensor<'a>>,
}

impl Default for GgufWriter<'_> {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl<'a> GgufWriter<'a> {
    /// An empty version-3 file with the default alignment (32).
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Sets the version field (default 3). Versions 2 and 3 have the same layout; any other value
    /// is written as given, with the same layout.
    pub fn version(&mut self, version: u32) -> &mut Self {
        self.version = version;
        self
    }

    /// Lays the data section out at multiples of `alignment` and records it as
    /// `general.alignment` (a `u32`; a `u64` if it does not fit), replacing an earlier value of that
    /// key. An alignment of 0 lays out unpadded; a non-power of two pads to its multiples.
    pub fn alignment(&mut self, alignment: u64) -> &mut Self {
        self.alignment = alignment;
        let value = u32::try_from(alignment).map_or(Value::U64(alignment), Value::U32);
        let key = GgufString::from("general.alignment");
        match self.metadata.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.metadata.push((key, value)),
        }
        self
    }

    /// Appends a metadata pair. Keys are written as given, repeats included; setting
    /// `general.alignment` here does not change the layout (use [`alignment`](Self::alignment)).
    pub fn metadata(&mut self, key: impl Into<GgufString>, value: impl Into<Value>) -> &mut Self {
        self.metadata.push((key.into(), value.into()));
        self
    }

    /// Appends a tensor: `dims` in ggml order (`ne0` first), `bytes` its data.
    pub fn tensor(
        &mut self,
        name: impl Into<GgufString>,
        dims: impl Into<Vec<u64>>,
        format: Format,
        bytes: impl Into<Cow<'a, [u8]>>,
    ) -> &mut Self {
        self.tensor_raw(name, dims, format.id(), bytes)
    }

    /// Appends a tensor with a raw ggml type id, which need not be a live [`Format`].
    pub fn tensor_raw(
        &mut self,
        name: impl Into<GgufString>,
        dims: impl Into<Vec<u64>>,
        type_id: u32,
        bytes: impl Into<Cow<'a, [u8]>>,
    ) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.into(),
            type_id,
            bytes: bytes.into(),
        });
        self
    }

    /// Writes the file. Tensor `i` starts at the first multiple of the alignment after tensor
    /// `i - 1`'s bytes; each tensor, the last included, is followed by zero padding to the
    /// alignment.
    pub fn write_to(&self, mut out: impl Write) -> io::Result<()> {
        let align = self.alignment.max(1);
        let pad = |n: u64| (align - n % align) % align;

        let mut head = Vec::new();
        head.extend_from_slice(b"GGUF");
        head.extend_from_slice(&self.version.to_le_bytes());
        head.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        head.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (key, value) in &self.metadata {
            put_string(&mut head, key.as_bytes());
            head.extend_from_slice(&value.value_type().id().to_le_bytes());
            put_value(&mut head, value);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            put_string(&mut head, t.name.as_bytes());
            head.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                head.extend_from_slice(&d.to_le_bytes());
            }
            head.extend_from_slice(&t.type_id.to_le_bytes());
            head.extend_from_slice(&offset.to_le_bytes());
            let n = t.bytes.len() as u64;
            offset = offset.saturating_add(n).saturating_add(pad(n));
        }
        let head_pad = pad(head.len() as u64);
        head.resize(head.len() + head_pad as usize, 0);
        out.write_all(&head)?;

        let zeros = vec![0u8; align.min(1 << 16) as usize];
        for t in &self.tensors {
            out.write_all(&t.bytes)?;
            let mut p = pad(t.bytes.len() as u64);
            while p > 0 {
                let k = p.min(zeros.len() as u64);
                out.write_all(&zeros[..k as usize])?;
                p -= k;
            }
        }
        out.flush()
    }

    /// The model cut into the shards of a split set, as gguf-py's
    /// `GGUFWriter(split_max_tensors=…, split_max_size=…)` cuts it: tensors in order, a new shard
    /// started when the current one holds `limit` tensors, or when the next tensor would take it
    /// past `limit` bytes of tensor data (a shard always gets at least one tensor). Every shard
    /// gets the split keys (`split.no` u16, `split.count` u16, `split.tensors.count` i32) and the
    /// alignment; the first keeps all the metadata. One shard is the model as it is, without keys.
    pub fn split(&self, limit: SplitLimit) -> Vec<GgufWriter<'_>> {
        let mut groups: Vec<Vec<usize>> = vec![Vec::new()];
        let mut bytes = 0u64;
        for (i, t) in self.tensors.iter().enumerate() {
            let n = t.bytes.len() as u64;
            let current = groups.last().map_or(0, Vec::len);
            let full = match limit {
                SplitLimit::Tensors(max) => current >= max.max(1),
                SplitLimit::Bytes(max) => bytes.saturating_add(n) > max,
            };
            if current > 0 && full {
                groups.push(Vec::new());
                bytes = 0;
            }
            if let Some(g) = groups.last_mut() {
                g.push(i);
            }
            bytes = bytes.saturating_add(n);
        }
        let count = groups.len();
        let shard = |k: usize, tensors: &[usize]| -> GgufWriter<'_> {
            let mut w = GgufWriter::new();
            w.version = self.version;
            w.alignment = self.alignment;
            w.metadata = if k == 0 {
                self.metadata.clone()
            } else {
                self.metadata
                    .iter()
                    .filter(|(key, _)| key.as_bytes() == b"general.alignment")
                    .cloned()
                    .collect()
            };
            if count > 1 {
                w.metadata(split::SPLIT_NO, Value::U16(k as u16))
                    .metadata(split::SPLIT_COUNT, Value::U16(count as u16))
                    .metadata(
                        split::SPLIT_TENSORS_COUNT,
                        Value::I32(self.tensors.len() as i32),
                    );
            }
            for t in tensors.iter().filter_map(|&i| self.tensors.get(i)) {
                w.tensors.push(PendingTensor {
                    name: t.name.clone(),
                    dims: t.dims.clone(),
                    type_id: t.type_id,
                    bytes: Cow::Borrowed(&t.bytes),
                });
            }
            w
        };
        groups
            .iter()
            .enumerate()
            .map(|(k, g)| shard(k, g))
            .collect()
    }

    /// Writes the [`split`](Self::split) of the model beside `path` and returns the paths written:
    /// `{stem}-00001-of-0000N.gguf` … (gguf-py's names for the same `path`), or `path` itself
    /// when the model is one shard.
    pub fn write_split(&self, path: &Path, limit: SplitLimit) -> io::Result<Vec<PathBuf>> {
        let shards = self.split(limit);
        let count = shards.len() as u64;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| io::Error::other("the path has no UTF-8 file stem"))?;
        let mut paths = Vec::with_capacity(shards.len());
        for (k, w) in shards.iter().enumerate() {
            let p = if count == 1 {
                path.to_path_buf()
            } else {
                path.with_file_name(split::shard_name(stem, k as u64 + 1, count))
            };
            let file = std::fs::File::create(&p)?;
            w.write_to(io::BufWriter::new(file))?;
            paths.push(p);
        }
        Ok(paths)
    }

    /// The file as bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::new();
        // Writing to a Vec cannot fail.
        let _ = self.write_to(&mut v);
        v
    }
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s);
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I8(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(b) => out.push(u8::from(*b)),
        Value::String(s) => put_string(out, s.as_bytes()),
        Value::Array(a) => put_array(out, a),
    }
}

fn put_array(out: &mut Vec<u8>, a: &Array) {
    out.extend_from_slice(&a.value_type().id().to_le_bytes());
    out.extend_from_slice(&(a.len() as u64).to_le_bytes());
    macro_rules! each {
        ($v:expr) => {
            for x in $v {
                out.extend_from_slice(&x.to_le_bytes());
            }
        };
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => each!(v),
        Array::U16(v) => each!(v),
        Array::I16(v) => each!(v),
        Array::U32(v) => each!(v),
        Array::I32(v) => each!(v),
        Array::U64(v) => each!(v),
        Array::I64(v) => each!(v),
        Array::F32(v) => each!(v),
        Array::F64(v) => each!(v),
        Array::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        Array::String(v) => {
            for s in v {
                put_string(out, s.as_bytes());
            }
        }
        Array::Array(v) => {
            for inner in v {
                put_array(out, inner);
            }
        }
    }
}
