//! Whole-file dequantisation to safetensors, `.npy` or `.bin` (the `dequant` command).

use std::path::Path;

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use crate::formats::Format;
use crate::gguf::{GgufFile, TensorInfo};
use crate::gpu::GpuEngine;
use crate::output::{self, OutputFormat, OutputTensor};
use crate::{cpu, DType, Error, Result};

/// Where tensors are decoded.
#[derive(Clone, Copy)]
pub enum Decoder<'a> {
    /// The CPU reference codecs, on all cores.
    Cpu,
    /// WGSL shaders on a GPU; formats without a shader fall back to the CPU codecs.
    Gpu(&'a GpuEngine),
}

impl Decoder<'_> {
    /// Decodes `src` (whole blocks of `format`) to little-endian `dtype` bytes. Returns whether the
    /// CPU codecs did it (always for [`Decoder::Cpu`], for formats without a shader on the GPU).
    pub fn decode(&self, format: Format, src: &[u8], dtype: DType) -> Result<(Vec<u8>, bool)> {
        match self {
            Decoder::Gpu(engine) if format.has_shader() => {
                Ok((engine.dequant(format, src, dtype)?, false))
            }
            _ => {
                let len = cpu::n_values(format, src.len())? * dtype.size();
                let mut dst = Vec::new();
                dst.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
                    bytes: len,
                    what: format!("{format} output"),
                })?;
                dst.resize(len, 0);
                cpu::dequant_to_bytes(format, src, dtype, &mut dst)?;
                Ok((dst, true))
            }
        }
    }
}

/// What [`dequant_file`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DequantSummary {
    /// Tensors written.
    pub tensors: usize,
    /// Values written, over all tensors.
    pub values: u64,
    /// Quantised bytes read from the file.
    pub bytes_read: u64,
    /// Formats that the GPU has no shader for and the CPU codecs decoded instead (empty for
    /// [`Decoder::Cpu`]).
    pub cpu_fallback: Vec<Format>,
}

/// The tensors of `file` named in `names`, in the order given, or every tensor in file order when
/// `names` is empty.
pub fn select<'f>(file: &'f GgufFile, names: &[String]) -> Result<Vec<&'f TensorInfo>> {
    if names.is_empty() {
        return Ok(file.tensors().iter().collect());
    }
    names
        .iter()
        .map(|name| {
            file.tensor(name).ok_or_else(|| Error::NoSuchTensor {
                path: file.path().to_path_buf(),
                name: name.clone(),
            })
        })
        .collect()
}

/// Dequantises the tensors of `file` named in `names` (all when empty) to `out` as `dtype` with
/// `decoder`; the format follows `out`'s extension, and `metadata` goes into a safetensors header's
/// `__metadata__`. `progress` is called with the quantised bytes of each tensor once it is decoded.
/// Nothing is left at `out` on failure.
pub fn dequant_file(
    file: &GgufFile,
    names: &[String],
    out: &Path,
    dtype: DType,
    decoder: Decoder<'_>,
    metadata: Option<HashMap<String, String>>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DequantSummary> {
    let selected = select(file, names)?;
    let format = OutputFormat::from_path(out)?;
    format.check(out, selected.len(), dtype)?;
    let tensors: Vec<OutputTensor> = selected
        .iter()
        .map(|t| OutputTensor {
            name: t.name.clone(),
            shape: t.dims.iter().rev().map(|&d| d as usize).collect(),
        })
        .collect();
    let fallback = Mutex::new(BTreeSet::new());
    let decode = |i: usize| -> Result<Vec<u8>> {
        let info = selected[i];
        let (bytes, on_cpu) = decoder.decode(info.format, file.tensor_data(info), dtype)?;
        file.release(file.data_offset() + info.offset, info.n_bytes);
        if on_cpu && matches!(decoder, Decoder::Gpu(_)) {
            fallback
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(info.format);
        }
        progress(info.n_bytes);
        Ok(bytes)
    };
    output::write(out, format, dtype, &tensors, metadata, &decode)?;
    Ok(DequantSummary {
        tensors: selected.len(),
        values: selected.iter().map(|t| t.n_elements).sum(),
        bytes_read: selected.iter().map(|t| t.n_bytes).sum(),
        cpu_fallback: fallback
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .collect(),
    })
}
