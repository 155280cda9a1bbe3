//! Whole-file dequantisation to safetensors, `.npy` or `.bin` (the `dequant` command).

use std::path::Path;

use crate::gguf::{GgufFile, TensorInfo};
use crate::output::{self, OutputFormat, OutputTensor};
use crate::{cpu, DType, Error, Result};

/// What [`dequant_file`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DequantSummary {
    /// Tensors written.
    pub tensors: usize,
    /// Values written, over all tensors.
    pub values: u64,
    /// Quantised bytes read from the file.
    pub bytes_read: u64,
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

/// Dequantises the tensors of `file` named in `names` (all when empty) to `out` as `dtype`, with the
/// CPU codecs on all cores; the format follows `out`'s extension. `progress` is called with the
/// quantised bytes of each tensor once it is decoded. Nothing is left at `out` on failure.
pub fn dequant_file(
    file: &GgufFile,
    names: &[String],
    out: &Path,
    dtype: DType,
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
    let decode = |i: usize| -> Result<Vec<u8>> {
        let info = selected[i];
        let src = file.tensor_data(info);
        let len = tensors[i].n_values() * dtype.size();
        let mut dst = Vec::new();
        dst.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
            bytes: len,
            what: info.name.clone(),
        })?;
        dst.resize(len, 0);
        cpu::dequant_to_bytes(info.format, src, dtype, &mut dst)?;
        progress(info.n_bytes);
        Ok(dst)
    };
    output::write(out, format, dtype, &tensors, None, &decode)?;
    Ok(DequantSummary {
        tensors: selected.len(),
        values: selected.iter().map(|t| t.n_elements).sum(),
        bytes_read: selected.iter().map(|t| t.n_bytes).sum(),
    })
}
