//! Writers for decoded tensors: safetensors, NumPy `.npy` and raw little-endian `.bin`.
//!
//! Every writer writes to a temporary file beside the destination and renames it over the
//! destination only when everything was written: a failure, or an interrupted process, never leaves a
//! partial file at the destination path. [`refuse_input`] keeps a writer off the file it decodes.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use npyz::WriterBuilder;
use safetensors::tensor::{Dtype, View};
use tempfile::NamedTempFile;

use crate::{DType, Error, Result};

/// The file format of an output, chosen by the destination's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// `.safetensors`: any number of tensors.
    Safetensors,
    /// `.npy`: exactly one tensor, f32 (`<f4`) or f16 (`<f2`).
    Npy,
    /// `.bin`: exactly one tensor, raw little-endian values.
    Bin,
}

impl OutputFormat {
    /// The format named by `path`'s extension.
    pub fn from_path(path: &Path) -> Result<OutputFormat> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext.to_ascii_lowercase().as_str() {
            "safetensors" => Ok(OutputFormat::Safetensors),
            "npy" => Ok(OutputFormat::Npy),
            "bin" => Ok(OutputFormat::Bin),
            _ => Err(output_error(
                path,
                "unknown output extension (expected .safetensors, .npy or .bin)",
            )),
        }
    }

    /// Checks that this format can hold `n_tensors` tensors of `dtype`.
    pub fn check(self, path: &Path, n_tensors: usize, dtype: DType) -> Result<()> {
        match self {
            OutputFormat::Safetensors => Ok(()),
            OutputFormat::Npy | OutputFormat::Bin if n_tensors != 1 => Err(output_error(
                path,
                &format!(
                    "a {} file holds exactly one tensor, {n_tensors} were selected \
                     (select one tensor, or write .safetensors)",
                    self.extension()
                ),
            )),
            OutputFormat::Npy if dtype == DType::BF16 => Err(output_error(
                path,
                "NumPy has no bfloat16 dtype: decode to f32 or f16, or write .safetensors",
            )),
            OutputFormat::Npy | OutputFormat::Bin => Ok(()),
        }
    }

    fn extension(self) -> &'static str {
        match self {
            OutputFormat::Safetensors => ".safetensors",
            OutputFormat::Npy => ".npy",
            OutputFormat::Bin => ".bin",
        }
    }
}

/// One tensor to write: its name and row-major shape (GGUF dims reversed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputTensor {
    /// The tensor's name, as in the GGUF file.
    pub name: String,
    /// Row-major shape: the GGUF (ggml-order) dims reversed.
    pub shape: Vec<usize>,
}

impl OutputTensor {
    /// Number of values.
    pub fn n_values(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Decodes tensor `i` of the list given to [`write()`] into little-endian bytes of the output dtype.
pub type DecodeFn<'a> = dyn Fn(usize) -> Result<Vec<u8>> + Sync + 'a;

/// Writes `tensors` to `path` in `format`, asking `decode` for each tensor's bytes one at a time (so
/// at most one decoded tensor is held in memory). `metadata` goes into the safetensors header.
pub fn write(
    path: &Path,
    format: OutputFormat,
    dtype: DType,
    tensors: &[OutputTensor],
    metadata: Option<HashMap<String, String>>,
    decode: &DecodeFn<'_>,
) -> Result<()> {
    format.check(path, tensors.len(), dtype)?;
    if format == OutputFormat::Safetensors {
        if let Some(t) = tensors.iter().find(|t| t.name == "__metadata__") {
            return Err(output_error(
                path,
                &format!(
                    "a tensor named {:?} cannot be stored in safetensors (the name is reserved)",
                    t.name
                ),
            ));
        }
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".gguf-dequant-").suffix(".partial");
    // A normal new file's mode (0666 less the umask), not tempfile's private 0600.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let tmp = builder.tempfile_in(dir).map_err(|e| io_error(dir, e))?;
    match format {
        OutputFormat::Safetensors => {
            write_safetensors(path, &tmp, dtype, tensors, metadata, decode)?
        }
        OutputFormat::Npy => write_single(&tmp, dtype, true, &tensors[0], decode)?,
        OutputFormat::Bin => write_single(&tmp, dtype, false, &tensors[0], decode)?,
    }
    tmp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(())
}

/// Refuses (with [`Error::Output`]) a destination `out` that is the file `input`: the same path, a
/// different spelling of it (`./x`, an absolute path), a symbolic link to it or another hard link
/// of it. It compares the canonical paths and the files themselves (device and inode on Unix, the
/// volume and file index on Windows). A destination that does not exist yet is never the input.
pub fn refuse_input(out: &Path, input: &Path) -> Result<()> {
    let same_path = match (std::fs::canonicalize(out), std::fs::canonicalize(input)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if same_path || same_file::is_same_file(out, input).unwrap_or(false) {
        return Err(output_error(
            out,
            &format!(
                "this is the input file {}; refusing to overwrite it (write somewhere else)",
                input.display()
            ),
        ));
    }
    Ok(())
}

fn write_single(
    tmp: &NamedTempFile,
    dtype: DType,
    npy: bool,
    tensor: &OutputTensor,
    decode: &DecodeFn<'_>,
) -> Result<()> {
    let path = tmp.path();
    let mut w = BufWriter::new(tmp.as_file());
    if npy {
        let descr = match dtype {
            DType::F16 => "<f2",
            _ => "<f4",
        };
        let descr: npyz::TypeStr = descr
            .parse()
            .map_err(|e| output_error(path, &format!("{e}")))?;
        let shape: Vec<u64> = tensor.shape.iter().map(|&d| d as u64).collect();
        npyz::WriteOptions::new_header_only()
            .dtype(npyz::DType::Plain(descr))
            .shape(&shape)
            .writer(&mut w)
            .write_header_only()
            .map_err(|e| io_error(path, e))?;
    }
    let bytes = decode(0)?;
    let expected = tensor.n_values() * dtype.size();
    if bytes.len() != expected {
        return Err(Error::DecodedSize {
            expected,
            got: bytes.len(),
        });
    }
    w.write_all(&bytes).map_err(|e| io_error(path, e))?;
    w.flush().map_err(|e| io_error(path, e))?;
    Ok(())
}

/// A tensor whose bytes are decoded only when the safetensors serialiser asks for them.
struct LazyTensor<'a> {
    index: usize,
    dtype: Dtype,
    shape: &'a [usize],
    len: usize,
    decode: &'a DecodeFn<'a>,
    failure: &'a Mutex<Option<Error>>,
}

impl View for LazyTensor<'_> {
    fn dtype(&self) -> Dtype {
        self.dtype
    }

    fn shape(&self) -> &[usize] {
        self.shape
    }

    fn data(&self) -> Cow<'_, [u8]> {
        match (self.decode)(self.index) {
            Ok(bytes) if bytes.len() == self.len => Cow::Owned(bytes),
            other => {
                // `View::data` cannot fail: record the first failure, write placeholder bytes of the
                // right size, and discard the whole temporary file afterwards.
                let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
                if failure.is_none() {
                    *failure = Some(match other {
                        Err(e) => e,
                        Ok(bytes) => Error::DecodedSize {
                            expected: self.len,
                            got: bytes.len(),
                        },
                    });
                }
                Cow::Owned(vec![0; self.len])
            }
        }
    }

    fn data_len(&self) -> usize {
        self.len
    }
}

fn write_safetensors(
    dest: &Path,
    tmp: &NamedTempFile,
    dtype: DType,
    tensors: &[OutputTensor],
    metadata: Option<HashMap<String, String>>,
    decode: &DecodeFn<'_>,
) -> Result<()> {
    let st_dtype = match dtype {
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
    };
    let failure = Mutex::new(None);
    let views = tensors.iter().enumerate().map(|(index, t)| {
        let view = LazyTensor {
            index,
            dtype: st_dtype,
            shape: &t.shape,
            len: t.n_values() * dtype.size(),
            decode,
            failure: &failure,
        };
        (t.name.as_str(), view)
    });
    // serialize_to_file replaces our temporary file with its own private (0600) one: keep our mode.
    let mode = tmp
        .as_file()
        .metadata()
        .map_err(|e| io_error(dest, e))?
        .permissions();
    let result = safetensors::serialize_to_file(views, metadata, tmp.path())
        .map_err(|e| output_error(dest, &format!("safetensors: {e}")))
        .and_then(|()| std::fs::set_permissions(tmp.path(), mode).map_err(|e| io_error(dest, e)));
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    result
}

fn output_error(path: &Path, reason: &str) -> Error {
    Error::Output {
        path: PathBuf::from(path),
        reason: reason.to_string(),
    }
}

fn io_error(path: &Path, source: std::io::Error) -> Error {
    Error::Io {
        path: PathBuf::from(path),
        source,
    }
}
