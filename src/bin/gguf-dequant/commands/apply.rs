//! `apply`: one kernel (`get_rows`, `matvec`, `matmul`) on one tensor of a GGUF file, inputs from
//! a `.npy` file, the result written as a float32 `.npy` file; on a GPU adapter (the library's
//! kernels, `gpu::kernels`) or on the CPU (`ops`, the f64 reference rounded to f32).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use gguf_dequant::gguf::TensorInfo;
use gguf_dequant::gpu::loader::{LoadOptions, Residency, WeightLoader};
use gguf_dequant::gpu::{GpuEngine, GpuError};
use gguf_dequant::output::{self, OutputFormat, OutputTensor};
use gguf_dequant::{ops, Backend, DType, Error, GgufFile, Selection};

use crate::args::{ApplyArgs, Op};
use crate::backend::{self, DECODE};
use crate::npy::Npy;
use crate::render::{describe, printable};

/// What `apply` refuses, naming the file (and tensor) at fault.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The input X does not fit the op or the tensor.
    #[error("{path}: {reason}")]
    Input {
        /// The .npy input.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The tensor cannot be used by the op (here).
    #[error("{path}: tensor {name:?} {reason}")]
    Tensor {
        /// The GGUF file.
        path: PathBuf,
        /// The tensor's name.
        name: String,
        /// Why not.
        reason: String,
    },
}

/// The weight as the kernels see it: N rows of K values.
struct Weight<'f> {
    info: &'f TensorInfo,
    k: u64,
    n: u64,
}

/// X, checked against the weight.
enum Input {
    /// Row ids for get_rows.
    Ids(Vec<u32>),
    /// `batch × K` f32 values.
    X { values: Vec<f32>, batch: usize },
}

/// Runs `args.op` and writes Y.
pub fn run(args: &ApplyArgs) -> Result<()> {
    let backend = backend::choose(args.backend, DECODE)?;
    let file = GgufFile::open(&args.file)?;
    let info = file
        .tensor(&args.tensor)
        .ok_or_else(|| Error::NoSuchTensor {
            path: args.file.clone(),
            name: args.tensor.clone(),
        })?;
    let weight = weight(&args.file, info)?;
    // A named GPU backend needs a shader; `auto` only once it has found an adapter.
    if !matches!(backend, Backend::Cpu | Backend::Auto) {
        check_shader(&args.file, info)?;
    }
    check_out(&args.out, &file, &args.input)?;
    let (input, x_shape) = read_input(&args.input, args.op, &weight)?;
    let engine = engine(backend, args.quiet)?;
    if engine.is_some() {
        check_shader(&args.file, info)?;
    }
    let start = Instant::now();
    let y = match &engine {
        Some(engine) => on_gpu(engine, &file, &weight, args.op, &input)?,
        None => on_cpu(&file, &weight, &input)?,
    };
    let secs = start.elapsed().as_secs_f64();
    let shape = match &input {
        Input::Ids(ids) => vec![ids.len(), weight.k as usize],
        Input::X { batch, .. } => vec![*batch, weight.n as usize],
    };
    let out = OutputTensor {
        name: info.name.clone(),
        shape: shape.clone(),
    };
    output::write(
        &args.out,
        OutputFormat::Npy,
        DType::F32,
        &[out],
        None,
        &|_| Ok(bytemuck::cast_slice::<f32, u8>(&y).to_vec()),
    )?;
    if !args.quiet {
        let place = match (&engine, args.op) {
            (Some(e), _) => describe(e),
            (None, Op::GetRows) => "the CPU (the codec's values)".into(),
            (None, _) => "the CPU (f64 reference rounded to f32)".into(),
        };
        eprintln!(
            "{}: tensor {} ({} {:?}) X {:?} -> Y {shape:?} on {place} in {secs:.3} s; wrote {}",
            args.op.name(),
            printable(&info.name),
            info.format,
            info.dims,
            x_shape,
            args.out.display()
        );
    }
    Ok(())
}

/// The tensor as N rows of K = dims[0] values: 2 dims or more (more are folded into rows).
fn weight<'f>(path: &Path, info: &'f TensorInfo) -> Result<Weight<'f>, ApplyError> {
    let refuse = |reason: String| ApplyError::Tensor {
        path: path.to_path_buf(),
        name: info.name.clone(),
        reason,
    };
    if info.dims.len() < 2 {
        return Err(refuse(format!(
            "has dims {:?}: a vector, not a matrix (apply takes tensors of 2 or more dims)",
            info.dims
        )));
    }
    let k = info.dims[0];
    let elems = info.format.block_elems() as u64;
    if !k.is_multiple_of(elems) {
        return Err(refuse(format!(
            "has rows of {k} values, not whole {}-value {} blocks",
            elems, info.format
        )));
    }
    if usize::try_from(info.n_elements).is_err() {
        return Err(refuse("is too large for this machine".into()));
    }
    Ok(Weight {
        info,
        k,
        n: info.n_elements / k,
    })
}

/// `out` must be a .npy path that is no input (the model's files, or X).
fn check_out(out: &Path, file: &GgufFile, input: &Path) -> Result<()> {
    if OutputFormat::from_path(out).ok() != Some(OutputFormat::Npy) {
        return Err(Error::Output {
            path: out.to_path_buf(),
            reason: "apply writes .npy".into(),
        }
        .into());
    }
    for path in file.paths() {
        output::refuse_input(out, path)?;
    }
    output::refuse_input(out, input)?;
    Ok(())
}

fn check_shader(path: &Path, info: &TensorInfo) -> Result<(), ApplyError> {
    if info.format.has_shader() {
        return Ok(());
    }
    Err(ApplyError::Tensor {
        path: path.to_path_buf(),
        name: info.name.clone(),
        reason: format!(
            "is {}, which has no GPU shader (use --backend cpu: the CPU reference takes every format)",
            info.format
        ),
    })
}

/// Reads X and checks it against the op and the weight; returns it and its shape in the file.
fn read_input(path: &Path, op: Op, w: &Weight<'_>) -> Result<(Input, Vec<u64>)> {
    let refuse = |reason: String| ApplyError::Input {
        path: path.to_path_buf(),
        reason,
    };
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let npy = Npy::parse(&bytes).map_err(refuse)?;
    let descr = &npy.descr;
    let name = format!("{:?}", w.info.name);
    if op == Op::GetRows {
        if !descr.is_integer() {
            return Err(refuse(format!(
                "ids are {} ({}); get_rows takes a 1-D array of an integer dtype",
                descr.numpy_name(),
                descr.text
            ))
            .into());
        }
        if npy.shape.len() != 1 {
            return Err(refuse(format!(
                "ids have shape {:?}; get_rows takes a 1-D array",
                npy.shape
            ))
            .into());
        }
        npy.check_data().map_err(refuse)?;
        let mut ids = Vec::new();
        for (i, id) in npy.int_values().into_iter().enumerate() {
            if id < 0 {
                return Err(refuse(format!("ids[{i}] = {id} is negative")).into());
            }
            if id >= w.n as i128 {
                return Err(refuse(format!(
                    "ids[{i}] = {id} is not below N = {}, the rows of tensor {name}",
                    w.n
                ))
                .into());
            }
            // Below N, which the kernels take as u32 (the GPU refuses larger N itself).
            ids.push(
                u32::try_from(id).map_err(|_| {
                    refuse(format!("ids[{i}] = {id} is larger than the kernels take"))
                })?,
            );
        }
        return Ok((Input::Ids(ids), npy.shape));
    }
    if !descr.is_f32() {
        return Err(refuse(format!(
            "X is {} ({}); {} takes float32 (<f4): convert it with x.astype(numpy.float32)",
            descr.numpy_name(),
            descr.text,
            op.name()
        ))
        .into());
    }
    let batch = match npy.shape[..] {
        [k] if k == w.k => 1,
        [b, k] if k == w.k => b,
        [k] | [_, k] => {
            return Err(refuse(format!(
                "X has rows of {k} values (shape {:?}); tensor {name} has K = {} (dims {:?})",
                npy.shape, w.k, w.info.dims
            ))
            .into())
        }
        _ => {
            return Err(refuse(format!(
                "X has shape {:?}; {} takes [batch, K] or [K] with K = {}",
                npy.shape,
                op.name(),
                w.k
            ))
            .into())
        }
    };
    if batch == 0 {
        return Err(refuse(format!("X has shape {:?}: no rows", npy.shape)).into());
    }
    npy.check_data().map_err(refuse)?;
    let batch = usize::try_from(batch).map_err(|_| refuse("X has too many rows".into()))?;
    let values = npy.f32_values();
    Ok((Input::X { values, batch }, npy.shape))
}

/// The engine for `backend`, or `None` for the CPU. `auto` without any adapter falls back to the
/// CPU with a note; a named backend without an adapter is an error.
fn engine(backend: Backend, quiet: bool) -> Result<Option<Arc<GpuEngine>>> {
    if backend == Backend::Cpu {
        return Ok(None);
    }
    match GpuEngine::new(backend) {
        Ok(engine) => Ok(Some(Arc::new(engine))),
        Err(Error::Gpu(GpuError::NoAdapter { .. })) if backend == Backend::Auto => {
            if !quiet {
                eprintln!("note: no GPU adapter found; running the CPU reference");
            }
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The tensor made resident raw (the loader splits one larger than a buffer on whole rows), then
/// the kernel.
fn on_gpu(
    engine: &Arc<GpuEngine>,
    file: &GgufFile,
    w: &Weight<'_>,
    op: Op,
    input: &Input,
) -> Result<Vec<f32>> {
    let loader = WeightLoader::with_engine(engine.clone(), LoadOptions::default());
    let name = &w.info.name;
    let model = loader.load(file, &Selection::names([name.clone()]), Residency::Raw)?;
    let t = model
        .get(name)
        .ok_or_else(|| anyhow::anyhow!("the loader did not load tensor {name:?}"))?;
    // read_input gives ids exactly for get_rows.
    Ok(match input {
        Input::Ids(ids) => engine.get_rows(t, ids)?,
        Input::X { values, batch } if op == Op::Matmul => engine.matmul(t, values, *batch)?,
        Input::X { values, batch } => engine.matvec(t, values, *batch)?,
    })
}

/// The CPU reference: the codec's rows, or f64 sums rounded to f32.
fn on_cpu(file: &GgufFile, w: &Weight<'_>, input: &Input) -> Result<Vec<f32>> {
    let blocks = file.tensor_data(w.info);
    let k = w.k as usize;
    Ok(match input {
        Input::Ids(ids) => ops::get_rows(w.info.format, blocks, k, ids)?,
        Input::X { values, batch } => {
            ops::mul_mat(w.info.format, blocks, k, values, *batch)?.to_f32()
        }
    })
}
