//! GGUF files for tests: well-formed ones through the library's [`GgufWriter`], and [`Raw`]
//! hand-assembled bytes for malformed and hostile ones no writer produces.

use std::path::Path;

use gguf_dequant::gguf::GgufWriter;
use gguf_dequant::{Format, GgufFile};

use super::rng::random_blocks;

/// The bytes of a file built by `f` with the library's writer.
pub fn build(f: impl FnOnce(&mut GgufWriter<'static>)) -> Vec<u8> {
    let mut w = GgufWriter::new();
    f(&mut w);
    w.to_bytes()
}

/// Appends 1-D tensors of random blocks with finite scales ([`random_blocks`]): `(name, format,
/// blocks)`, tensor `i` from seed `seed + i`.
pub fn random_tensors<'w>(
    w: &'w mut GgufWriter<'static>,
    tensors: &[(&str, Format, usize)],
    seed: u64,
) -> &'w mut GgufWriter<'static> {
    for (i, &(name, f, blocks)) in tensors.iter().enumerate() {
        let n = (blocks * f.block_elems()) as u64;
        w.tensor(name, vec![n], f, random_blocks(f, blocks, seed + i as u64));
    }
    w
}

/// Writes `w` to `path` and opens it.
pub fn save(w: &GgufWriter<'_>, path: &Path) -> GgufFile {
    std::fs::write(path, w.to_bytes()).unwrap();
    GgufFile::open(path).unwrap()
}

/// `w` written as `name` in a new temporary directory (removed when the `TempDir` drops), opened.
pub fn temp_file(w: &GgufWriter<'_>, name: &str) -> (tempfile::TempDir, GgufFile) {
    let dir = tempfile::tempdir().unwrap();
    let file = save(w, &dir.path().join(name));
    (dir, file)
}

/// Hand-assembled GGUF bytes (little-endian), for files no sane writer produces.
#[derive(Clone, Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version, tensor_count, metadata_kv_count.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw(b"GGUF".to_vec());
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    pub fn u8(&mut self, x: u8) -> &mut Self {
        self.0.push(x);
        self
    }
    pub fn u32(&mut self, x: u32) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    pub fn u64(&mut self, x: u64) -> &mut Self {
        self.0.extend_from_slice(&x.to_le_bytes());
        self
    }
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    /// A GGUF string: u64 length, bytes.
    pub fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).raw(s)
    }
    /// A metadata key and its value type.
    pub fn key(&mut self, key: &[u8], ty: u32) -> &mut Self {
        self.str(key).u32(ty)
    }
    /// A tensor info: name, n_dims, dims, ggml type, offset (`n_dims` is `dims.len()`).
    pub fn tensor(&mut self, name: &[u8], dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.tensor_n(name, dims.len() as u32, dims, ty, offset)
    }
    /// A tensor info whose `n_dims` field need not match the dims written.
    pub fn tensor_n(
        &mut self,
        name: &[u8],
        n_dims: u32,
        dims: &[u64],
        ty: u32,
        offset: u64,
    ) -> &mut Self {
        self.str(name).u32(n_dims);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    /// Zero padding to a multiple of `align`, then `n` bytes of data (0x11 each).
    pub fn data(&mut self, align: usize, n: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self.0.resize(self.0.len() + n, 0x11);
        self
    }
    /// The bytes so far.
    pub fn bytes(&self) -> Vec<u8> {
        self.0.clone()
    }
}

/// A small model-shaped file: `token_embd.weight`, `blk.0..4.{attn_q,ffn_down}.weight` and
/// `output.weight` in several formats (2-D, rows of 256 values), random finite blocks from
/// `seed`, with `general.name` and an architecture key.
pub fn model_writer(seed: u64) -> GgufWriter<'static> {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", "llama")
        .metadata("general.name", "split-test")
        .metadata("llama.block_count", gguf_dequant::gguf::Value::U32(4));
    let formats = [Format::Q4_K, Format::Q8_0, Format::F16, Format::IQ4_XS];
    let add = |w: &mut GgufWriter<'static>, name: String, f: Format, rows: u64, k: u64| {
        let blocks = (rows * 256 / f.block_elems() as u64) as usize;
        w.tensor(name, vec![256, rows], f, random_blocks(f, blocks, seed + k));
    };
    add(&mut w, "token_embd.weight".into(), Format::Q8_0, 6, 0);
    for b in 0..4u64 {
        let f = formats[b as usize % formats.len()];
        add(&mut w, format!("blk.{b}.attn_q.weight"), f, 3, 10 + 2 * b);
        add(
            &mut w,
            format!("blk.{b}.ffn_down.weight"),
            Format::Q4_0,
            2,
            11 + 2 * b,
        );
    }
    add(&mut w, "output.weight".into(), Format::Q6_K, 5, 99);
    w
}
