//! Tensors of a GGUF file decoded into safetensors, `.npy` or `.bin` (what the `dequant` and
//! `convert` commands run), on the CPU codecs or, with the `gpu` feature, a GPU.

use std::collections::{BTreeSet, HashMap};
#[cfg(not(feature = "gpu"))]
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Number, Value as Json};

use crate::formats::Format;
use crate::gguf::{GgufFile, TensorInfo, Value};
#[cfg(feature = "gpu")]
use crate::gpu::GpuEngine;
use crate::output::{self, OutputFormat, OutputTensor};
use crate::{cpu, DType, Error, Result};

/// Where tensors are decoded.
#[derive(Clone, Copy)]
pub enum Decoder<'a> {
    /// The CPU reference codecs, on all cores.
    Cpu,
    /// WGSL shaders on a GPU; formats without a shader fall back to the CPU codecs.
    #[cfg(feature = "gpu")]
    Gpu(&'a GpuEngine),
    /// Without the `gpu` feature there is no GPU to borrow; this decodes like [`Decoder::Cpu`].
    #[cfg(not(feature = "gpu"))]
    #[doc(hidden)]
    NoGpu(PhantomData<&'a ()>),
}

impl Decoder<'_> {
    /// Decodes `src` (whole blocks of `format`) to little-endian `dtype` bytes. Returns whether the
    /// CPU codecs did it (always for [`Decoder::Cpu`], for formats without a shader on the GPU).
    pub fn decode(&self, format: Format, src: &[u8], dtype: DType) -> Result<(Vec<u8>, bool)> {
        #[cfg(feature = "gpu")]
        if let Decoder::Gpu(engine) = self {
            if format.has_shader() {
                return Ok((engine.dequant(format, src, dtype)?, false));
            }
        }
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

    /// Whether this decodes on a GPU (so that a CPU decode is a fallback worth reporting).
    fn is_gpu(&self) -> bool {
        #[cfg(feature = "gpu")]
        {
            matches!(self, Decoder::Gpu(_))
        }
        #[cfg(not(feature = "gpu"))]
        {
            false
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

/// Checks, before anything is decoded or written, that `out` may receive `n_tensors` tensors of
/// `file` as `dtype`: it is not `file` itself ([`output::refuse_input`]), its extension names an
/// [`OutputFormat`], and that format holds that many tensors of that dtype. Returns the format.
pub fn check(file: &GgufFile, n_tensors: usize, out: &Path, dtype: DType) -> Result<OutputFormat> {
    for input in file.paths() {
        output::refuse_input(out, input)?;
    }
    let format = OutputFormat::from_path(out)?;
    format.check(out, n_tensors, dtype)?;
    Ok(format)
}

/// Dequantises `tensors` (of `file`, e.g. what a `service::Selection` resolves to) to `out` as
/// `dtype` with `decoder`; the format follows `out`'s extension, and `metadata` goes into a
/// safetensors header's `__metadata__` ([`safetensors_metadata`] carries the file's). `progress` is
/// called with the quantised bytes of each tensor once it is decoded. [`check`] runs first, so `out`
/// is never the input file; nothing is left at `out` on failure.
pub fn dequant_file(
    file: &GgufFile,
    tensors: &[&TensorInfo],
    out: &Path,
    dtype: DType,
    decoder: Decoder<'_>,
    metadata: Option<HashMap<String, String>>,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<DequantSummary> {
    let format = check(file, tensors.len(), out, dtype)?;
    let outputs: Vec<OutputTensor> = tensors
        .iter()
        .map(|t| OutputTensor {
            name: t.name.clone(),
            shape: t.dims.iter().rev().map(|&d| d as usize).collect(),
        })
        .collect();
    let fallback = Mutex::new(BTreeSet::new());
    let decode = |i: usize| -> Result<Vec<u8>> {
        let info = tensors[i];
        let (bytes, on_cpu) = decoder.decode(info.format, file.tensor_data(info), dtype)?;
        file.release_tensor(info, 0, info.n_bytes);
        if on_cpu && decoder.is_gpu() {
            fallback
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(info.format);
        }
        progress(info.n_bytes);
        Ok(bytes)
    };
    output::write(out, format, dtype, &outputs, metadata, &decode)?;
    Ok(DequantSummary {
        tensors: tensors.len(),
        values: tensors.iter().map(|t| t.n_elements).sum(),
        bytes_read: tensors.iter().map(|t| t.n_bytes).sum(),
        cpu_fallback: fallback
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .collect(),
    })
}

/// The file's metadata as strings, for a safetensors `__metadata__` header: string values as they
/// are (lossily), everything else as its [`metadata_json`] text (`30`, `true`, `["a","b"]`); and
/// `"format": "pt"`, what Hugging Face tools look for, unless the file has a key of that name.
pub fn safetensors_metadata(file: &GgufFile) -> HashMap<String, String> {
    let mut m: HashMap<String, String> = file
        .metadata()
        .iter()
        .map(|(k, v)| {
            let s = match v {
                Value::String(s) => s.to_string_lossy().into_owned(),
                v => metadata_json(v).to_string(),
            };
            (k.clone(), s)
        })
        .collect();
    m.entry("format".to_string())
        .or_insert_with(|| "pt".to_string());
    m
}

/// A metadata value as JSON, arrays in full: integers (u64 and i64 too) as JSON integers, floats
/// as JSON numbers (an f32 as its shortest decimal) except non-finite ones, which JSON cannot
/// hold and become the strings `"NaN"`, `"inf"` and `"-inf"`; strings decoded lossily (invalid
/// UTF-8 becomes U+FFFD).
pub fn metadata_json(v: &Value) -> Json {
    match v {
        Value::U8(x) => json!(x),
        Value::I8(x) => json!(x),
        Value::U16(x) => json!(x),
        Value::I16(x) => json!(x),
        Value::U32(x) => json!(x),
        Value::I32(x) => json!(x),
        Value::U64(x) => json!(x),
        Value::I64(x) => json!(x),
        // Through the shortest decimal that round-trips the f32, so 0.1f32 is 0.1, not
        // 0.10000000149011612.
        Value::F32(x) => float_json(x.to_string().parse::<f64>().unwrap_or(f64::NAN)),
        Value::F64(x) => float_json(*x),
        Value::Bool(b) => json!(b),
        Value::String(s) => Json::from(s.to_string_lossy().into_owned()),
        Value::Array(a) => Json::Array(a.iter().map(|v| metadata_json(&v)).collect()),
    }
}

fn float_json(x: f64) -> Json {
    match Number::from_f64(x) {
        Some(n) => Json::Number(n),
        None if x.is_nan() => Json::from("NaN"),
        None if x > 0.0 => Json::from("inf"),
        None => Json::from("-inf"),
    }
}
