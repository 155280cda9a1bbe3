//! `apply`: one kernel of the registry (`get_rows`, `matvec`, `matmul`, `matvec_id`) on one tensor
//! of a GGUF file, inputs from `.npy` files of the kind the kernel takes, the result written as a
//! float32 `.npy` file; on a GPU adapter (the library's kernels, `gpu::kernels`) or on the CPU
//! (`ops::reference`, the f64 reference rounded to f32).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use gguf_dequant::gguf::TensorInfo;
use gguf_dequant::gpu::kernels::{Input as KernelInput, Inputs, KernelKey, Mapping, Op, Precision};
use gguf_dequant::gpu::loader::{LoadOptions, Residency, WeightLoader};
use gguf_dequant::gpu::{GpuEngine, GpuError};
use gguf_dequant::output::{self, OutputFormat, OutputTensor};
use gguf_dequant::{ops, Backend, DType, Error, GgufFile, Selection};

use crate::args::ApplyArgs;
use crate::backend::{self, DECODE};
use crate::render::{describe, printable};
use gguf_dequant::npy::Npy;

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

/// The weight as the kernels see it: N rows of K values, read by matvec_id as `experts` blocks
/// of `dims[1]` rows.
struct Weight<'f> {
    info: &'f TensorInfo,
    k: u64,
    n: u64,
    experts: u64,
}

/// X, checked against the op and the weight.
enum Input {
    /// Row ids for get_rows.
    Ids(Vec<u32>),
    /// `batch × K` f32 values.
    X { values: Vec<f32>, batch: usize },
    /// matvec_id: `rows × K` f32 values and `tokens × slots` expert ids.
    XIds {
        values: Vec<f32>,
        ids: Vec<u32>,
        slots: usize,
        x_per_slot: bool,
    },
}

impl Input {
    fn kernel_input(&self) -> KernelInput<'_> {
        match self {
            Input::Ids(ids) => KernelInput::Ids(ids),
            Input::X { values, batch } => KernelInput::X {
                x: values,
                batch: *batch,
            },
            Input::XIds {
                values,
                ids,
                slots,
                x_per_slot,
            } => KernelInput::XIds {
                x: values,
                ids,
                slots: *slots,
                x_per_slot: *x_per_slot,
            },
        }
    }
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
    if let Some(ids) = &args.ids {
        output::refuse_input(&args.out, ids)?;
    }
    let (input, x_shape) = read_input(args, &weight)?;
    let engine = engine(backend, args.quiet, args.variant, args.precision)?;
    if engine.is_some() {
        check_shader(&args.file, info)?;
    }
    let start = Instant::now();
    let (y, variant) = match &engine {
        Some(engine) => {
            let (y, variant) = on_gpu(engine, &file, &weight, args.op, &input)?;
            (y, Some(variant))
        }
        None => (on_cpu(&file, &weight, args.op, &input)?, None),
    };
    let secs = start.elapsed().as_secs_f64();
    let shape = match &input {
        Input::Ids(ids) => vec![ids.len(), weight.k as usize],
        Input::X { batch, .. } => vec![*batch, weight.n as usize],
        Input::XIds { ids, slots, .. } => {
            vec![
                ids.len() / slots,
                *slots,
                (weight.n / weight.experts) as usize,
            ]
        }
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
        let place = match (&engine, args.op.inputs()) {
            (Some(e), _) => {
                let kernels = variant.as_deref().unwrap_or_default();
                match e.precision_for(args.op, info.format, weight.k) {
                    Precision::Exact => format!("{} ({kernels})", describe(e)),
                    p => format!("{} in precision {p} ({kernels})", describe(e)),
                }
            }
            (None, Inputs::Ids) => "the CPU (the codec's values)".into(),
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
    let n = info.n_elements / k;
    Ok(Weight {
        info,
        k,
        n,
        experts: n / info.dims[1].max(1),
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

/// Reads and parses the .npy file at `path`.
fn read_npy(path: &Path) -> Result<Vec<u8>> {
    Ok(std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?)
}

/// Integer ids from `npy` (at `path`), each below `limit` (dimension `dim`, the `what` of tensor
/// `name`), as u32.
fn read_ids(
    path: &Path,
    npy: &Npy<'_>,
    (limit, dim, what): (u64, &str, &str),
    name: &str,
) -> Result<Vec<u32>> {
    let refuse = |reason: String| ApplyError::Input {
        path: path.to_path_buf(),
        reason,
    };
    npy.check_data().map_err(refuse)?;
    let mut ids = Vec::new();
    for (i, id) in npy.int_values().into_iter().enumerate() {
        if id < 0 {
            return Err(refuse(format!("ids[{i}] = {id} is negative")).into());
        }
        if id >= limit as i128 {
            return Err(refuse(format!(
                "ids[{i}] = {id} is not below {dim} = {limit}, the {what} of tensor {name}"
            ))
            .into());
        }
        // Below the limit, which the kernels take as u32 (the GPU refuses larger ones itself).
        ids.push(
            u32::try_from(id)
                .map_err(|_| refuse(format!("ids[{i}] = {id} is larger than the kernels take")))?,
        );
    }
    Ok(ids)
}

/// X: float32 rows of K values, `[rows, K]` or `[K]`; returns the values and the rows.
fn read_x(path: &Path, npy: &Npy<'_>, op: Op, w: &Weight<'_>) -> Result<(Vec<f32>, usize)> {
    let refuse = |reason: String| ApplyError::Input {
        path: path.to_path_buf(),
        reason,
    };
    let descr = &npy.descr;
    let name = format!("{:?}", w.info.name);
    if !descr.is_f32() {
        return Err(refuse(format!(
            "X is {} ({}); {} takes float32 (<f4): convert it with x.astype(numpy.float32)",
            descr.numpy_name(),
            printable(&descr.text),
            op.name()
        ))
        .into());
    }
    let rows = match npy.shape[..] {
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
    if rows == 0 {
        return Err(refuse(format!("X has shape {:?}: no rows", npy.shape)).into());
    }
    npy.check_data().map_err(refuse)?;
    let rows = usize::try_from(rows).map_err(|_| refuse("X has too many rows".into()))?;
    Ok((npy.f32_values(), rows))
}

/// Reads the op's inputs (`--input`, and `--ids` for matvec_id) and checks them against the op
/// and the weight; returns them and X's shape in the file.
fn read_input(args: &ApplyArgs, w: &Weight<'_>) -> Result<(Input, Vec<u64>)> {
    let (op, path) = (args.op, args.input.as_path());
    let refuse = |path: &Path, reason: String| ApplyError::Input {
        path: path.to_path_buf(),
        reason,
    };
    if let (Some(ids), false) = (&args.ids, op.inputs() == Inputs::XIds) {
        return Err(refuse(ids, format!("--ids is for matvec_id; {op} takes none")).into());
    }
    let bytes = read_npy(path)?;
    let npy = Npy::parse(&bytes).map_err(|e| refuse(path, e))?;
    let name = format!("{:?}", w.info.name);
    let input = match op.inputs() {
        Inputs::Ids => {
            if !npy.descr.is_integer() {
                return Err(refuse(
                    path,
                    format!(
                        "ids are {} ({}); {op} takes a 1-D array of an integer dtype",
                        npy.descr.numpy_name(),
                        printable(&npy.descr.text)
                    ),
                )
                .into());
            }
            if npy.shape.len() != 1 {
                return Err(refuse(
                    path,
                    format!("ids have shape {:?}; {op} takes a 1-D array", npy.shape),
                )
                .into());
            }
            Input::Ids(read_ids(path, &npy, (w.n, "N", "rows"), &name)?)
        }
        Inputs::X => {
            let (values, batch) = read_x(path, &npy, op, w)?;
            Input::X { values, batch }
        }
        Inputs::XIds => {
            let (values, rows) = read_x(path, &npy, op, w)?;
            let Some(ids_path) = &args.ids else {
                return Err(refuse(path, format!("{op} also needs --ids IDS.npy")).into());
            };
            let ids_bytes = read_npy(ids_path)?;
            let ids_npy = Npy::parse(&ids_bytes).map_err(|e| refuse(ids_path, e))?;
            let slots = match (ids_npy.descr.is_integer(), &ids_npy.shape[..]) {
                (true, [_]) => 1,
                (true, [_, s]) if *s > 0 => *s,
                _ => {
                    return Err(refuse(
                        ids_path,
                        format!(
                            "ids are {} of shape {:?}; {op} takes [tokens, slots] or [tokens] of \
                             an integer dtype",
                            ids_npy.descr.numpy_name(),
                            ids_npy.shape
                        ),
                    )
                    .into())
                }
            };
            let ids = read_ids(ids_path, &ids_npy, (w.experts, "E", "experts"), &name)?;
            let slots =
                usize::try_from(slots).map_err(|_| refuse(ids_path, "too many slots".into()))?;
            let tokens = ids.len() / slots;
            let x_per_slot = match rows {
                r if r == tokens => false,
                r if r == ids.len() => true,
                r => {
                    return Err(refuse(
                        path,
                        format!(
                            "X has {r} rows; with ids of {tokens} tokens × {slots} slots {op} \
                             takes {tokens} (one per token) or {} (one per token and slot)",
                            ids.len()
                        ),
                    )
                    .into())
                }
            };
            Input::XIds {
                values,
                ids,
                slots,
                x_per_slot,
            }
        }
    };
    Ok((input, npy.shape))
}

/// The engine for `backend`, or `None` for the CPU. `auto` without any adapter falls back to the
/// CPU with a note; a named backend without an adapter is an error.
fn engine(
    backend: Backend,
    quiet: bool,
    variant: Option<Mapping>,
    precision: Precision,
) -> Result<Option<Arc<GpuEngine>>> {
    if backend == Backend::Cpu {
        return Ok(None);
    }
    match GpuEngine::with_options(backend, super::variant_options(variant, precision)) {
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
/// the kernel; with the names of the kernel variants it ran ([`KernelKey::names`]).
fn on_gpu(
    engine: &Arc<GpuEngine>,
    file: &GgufFile,
    w: &Weight<'_>,
    op: Op,
    input: &Input,
) -> Result<(Vec<f32>, String)> {
    let loader = WeightLoader::with_engine(engine.clone(), LoadOptions::default());
    let name = &w.info.name;
    let model = loader.load(file, &Selection::names([name.clone()]), Residency::Raw)?;
    let t = model
        .get(name)
        .ok_or_else(|| GpuError::Invariant(format!("the loader did not load tensor {name:?}")))?;
    let y = engine.run(op, t, &input.kernel_input())?;
    let calls = match input {
        Input::Ids(ids) => ids.len(),
        Input::X { batch, .. } => *batch,
        Input::XIds { ids, slots, .. } => ids.len() / slots.max(&1),
    };
    Ok((
        y,
        KernelKey::names(&engine.kernels_for(op, t, calls as u64)?),
    ))
}

/// The CPU reference: the codec's rows, or f64 sums rounded to f32.
fn on_cpu(file: &GgufFile, w: &Weight<'_>, op: Op, input: &Input) -> Result<Vec<f32>> {
    let blocks = file.tensor_data(w.info);
    let r = ops::reference(
        op,
        w.info.format,
        blocks,
        &w.info.dims,
        &input.kernel_input(),
    )?;
    Ok(r.to_f32())
}
