//! CPU reference of the inference kernels that read GGUF weights: `get_rows`, `mul_mat` and
//! `mul_mat_id`, as ggml defines them.
//!
//! A weight with GGUF dims `[K, N]` (K fastest) is N rows of K values, stored as raw blocks of any
//! [`Format`] and decoded with the CPU codecs ([`crate::cpu`]). `y = W x` means
//! `y[n] = Σ_k W[n,k]·x[k]`. Activations are row-major `[batch, K]` f32 (`x[b*K + k]`), outputs
//! `[batch, N]` (`y[b*N + n]`). Every product is `f64::from(w) * f64::from(x)`, summed in f64 in
//! the natural k order, so results are deterministic whatever the thread count; [`Sums`] keeps
//! `Σ|w·x|` beside each result for the accuracy contract of f32 kernels (`|got - y| ≤
//! K·2⁻²³·Σ|w·x| + K·2⁻¹²⁵`, see [`Sums::bound`] and [`Sums::fraction`]).
//!
//! Every shape is validated first: errors are [`Error::InvalidShape`] (or
//! [`Error::PartialBlock`] for bytes that are not whole blocks); nothing panics, and every size is
//! computed with checked arithmetic before anything is allocated.

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::formats::Format;
use crate::gpu::kernels::{Input, Op, Precision};

/// 2^-23: the unit roundoff of f32 summation used by the accuracy contract.
pub const F32_EPS: f64 = 1.0 / (1u64 << 23) as f64;

/// 2^-126: the smallest normal f32. WGSL lets an implementation flush subnormal results to zero
/// (SwiftShader does), which loses less than this per product and per addition.
pub const F32_MIN_NORMAL: f64 = f32::MIN_POSITIVE as f64;

/// Per output element: the f64 result and `Σ_k |W[n,k]·x[k]|`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sums {
    /// The results, in the output's layout.
    pub y: Vec<f64>,
    /// `Σ_k |W[n,k]·x[k]|` of each result, in the same layout.
    pub abs: Vec<f64>,
    /// The length K of each sum.
    pub k: usize,
    /// Per element, what a path adds to the f32 bound beyond the rounding of its sums (the
    /// integer path's quantisation of x: [`mul_mat_int_dot`]); empty: nothing.
    pub slack: Vec<f64>,
}

impl Sums {
    /// The bound of element i: K·2⁻²³·Σ|w·x| (the worst case of f32 summation in any order)
    /// plus K·2⁻¹²⁵ (2K operations that may each flush a subnormal result to zero), plus the
    /// element's [`Sums::slack`]. Panics, as indexing does, if `i` is out of range.
    pub fn bound(&self, i: usize) -> f64 {
        let slack = self.slack.get(i).copied().unwrap_or(0.0);
        self.k as f64 * (F32_EPS * self.abs[i] + 2.0 * F32_MIN_NORMAL) + slack
    }

    /// y rounded to f32 (what `--backend cpu` prints).
    pub fn to_f32(&self) -> Vec<f32> {
        self.y.iter().map(|&v| v as f32).collect()
    }

    /// How far `got` is from element i, as a fraction of [`Sums::bound`]: 0.0 when equal to y or
    /// to y rounded to f32 (including both NaN, or both the same infinity); f64::INFINITY when it
    /// can never pass (NaN vs number, wrong infinity, or a nonzero difference with a zero bound).
    /// Result ≤ 1.0 means within the contract. Panics, as indexing does, if `i` is out of range.
    pub fn fraction(&self, i: usize, got: f32) -> f64 {
        let y = self.y[i];
        let g = f64::from(got);
        if y.is_nan() || got.is_nan() {
            return if y.is_nan() && got.is_nan() {
                0.0
            } else {
                f64::INFINITY
            };
        }
        // The f32 nearest to y (an infinity when y is beyond f32's range) is never faulted.
        if g == y || got == y as f32 {
            return 0.0;
        }
        if y.is_infinite() || got.is_infinite() {
            return f64::INFINITY;
        }
        let bound = self.bound(i);
        if bound == 0.0 {
            return f64::INFINITY;
        }
        (g - y).abs() / bound
    }

    /// The largest [`Sums::fraction`] over all elements (0.0 when there are none); errors if
    /// `got.len() != y.len()`.
    pub fn max_fraction(&self, got: &[f32]) -> Result<f64> {
        if got.len() != self.y.len() {
            return Err(shape(format!(
                "{} values to compare with {} results",
                got.len(),
                self.y.len()
            )));
        }
        Ok(got
            .iter()
            .enumerate()
            .map(|(i, &g)| self.fraction(i, g))
            .fold(0.0, f64::max))
    }
}

/// The reference result of one kernel call: f64 sums with their bounds (the products), or the
/// exact values every implementation must give (the gather).
#[derive(Clone, Debug, PartialEq)]
pub enum Reference {
    /// Products: compare within [`Sums::bound`].
    Sums(Sums),
    /// Gathered rows: compare bit for bit (any NaN equals any NaN).
    Exact(Vec<f32>),
}

impl Reference {
    /// Values in the result.
    pub fn len(&self) -> usize {
        match self {
            Reference::Sums(s) => s.y.len(),
            Reference::Exact(v) => v.len(),
        }
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The result as f32: the sums rounded, or the exact values.
    pub fn to_f32(&self) -> Vec<f32> {
        match self {
            Reference::Sums(s) => s.to_f32(),
            Reference::Exact(v) => v.clone(),
        }
    }

    /// How far `got` is from element i as a fraction of its bound ([`Sums::fraction`]); for
    /// exact values 0.0 when the bits are equal (or both NaN), else infinity.
    pub fn fraction(&self, i: usize, got: f32) -> f64 {
        match self {
            Reference::Sums(s) => s.fraction(i, got),
            Reference::Exact(v) => {
                let want = v[i];
                if want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()) {
                    0.0
                } else {
                    f64::INFINITY
                }
            }
        }
    }
}

/// The CPU reference of `op` on a weight of `format` blocks with GGUF `dims` (`[K, N, ...]`)
/// for `input`: [`get_rows`], [`mul_mat`] (matvec and matmul) or [`mul_mat_id`] (N = `dims[1]`).
/// Errors: an input of another kind than the op takes, and every error of those functions.
pub fn reference(
    op: Op,
    format: Format,
    blocks: &[u8],
    dims: &[u64],
    input: &Input<'_>,
) -> Result<Reference> {
    let dim = |i: usize| {
        let d = dims.get(i).copied().unwrap_or(1);
        usize::try_from(d).map_err(|_| shape(format!("dim {i} = {d} does not fit usize")))
    };
    let k = dim(0)?;
    Ok(match (op, *input) {
        (Op::GetRows, Input::Ids(ids)) => Reference::Exact(get_rows(format, blocks, k, ids)?),
        (Op::MatVec | Op::MatMul, Input::X { x, batch }) => {
            Reference::Sums(mul_mat(format, blocks, k, x, batch)?)
        }
        (
            Op::MatVecId,
            Input::XIds {
                x,
                ids,
                slots,
                x_per_slot,
            },
        ) => Reference::Sums(mul_mat_id(
            format,
            blocks,
            k,
            dim(1)?,
            x,
            x_per_slot,
            ids,
            slots,
        )?),
        (op, input) => {
            return Err(shape(format!(
                "{op} takes {:?} inputs, not {:?}",
                op.inputs(),
                input.kind()
            )))
        }
    })
}

/// Rows `ids` of the [K, N] weight, decoded exactly as the CPU codec does: [ids.len(), K] f32.
///
/// N is the number of values in `blocks` over K; only the rows asked for are decoded. Errors if K
/// is not a positive multiple of the block size, `blocks` is not a whole number of rows (or holds
/// none), or an id is ≥ N.
pub fn get_rows(format: Format, blocks: &[u8], k: usize, ids: &[u32]) -> Result<Vec<f32>> {
    let row_bytes = row_bytes(format, k)?;
    let n = count(format, blocks, row_bytes, k, "rows")?;
    check_ids(ids, n, "N", None)?;
    let len = mul(ids.len(), k, "ids.len() × K")?;
    let mut out = alloc::<f32>(len, "get_rows output")?;
    out.resize(len, 0.0);
    for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(k)) {
        let r = id as usize;
        crate::cpu::dequant_into(format, &blocks[r * row_bytes..(r + 1) * row_bytes], dst)?;
    }
    Ok(out)
}

/// Y = W X for a [K, N] weight and `batch` columns of X ([batch, K]); any batch ≥ 1 (this one
/// function is the reference of both matvec and matmul).
///
/// N is the number of values in `blocks` over K. The result is [batch, N]: `y[b*N + n]`. Errors
/// if K is not a positive multiple of the block size, `blocks` is not a whole number of rows (or
/// holds none), batch is 0 or `x.len() != batch*K`.
pub fn mul_mat(format: Format, blocks: &[u8], k: usize, x: &[f32], batch: usize) -> Result<Sums> {
    let row_bytes = row_bytes(format, k)?;
    let n = count(format, blocks, row_bytes, k, "rows")?;
    if batch == 0 {
        return Err(shape(
            "batch = 0: there must be at least one column of X".into(),
        ));
    }
    check_x(x, batch, k, "batch")?;
    let jobs: Vec<Job> = (0..batch)
        .map(|b| Job {
            row0: 0,
            out: b,
            x: b,
        })
        .collect();
    run(format, blocks, row_bytes, k, n, x, &jobs)
}

/// Y = W X in f64 throughout: X is `batch` columns of f64 values ([batch, K]), each weight row
/// decoded with the CPU codec (exactly as every other function here) and multiplied in f64: the
/// reference of a whole forward pass, whose activations are never rounded to f32. Returns
/// [batch, N]. Errors as [`mul_mat`].
pub fn mul_mat_f64(
    format: Format,
    blocks: &[u8],
    k: usize,
    x: &[f64],
    batch: usize,
) -> Result<Vec<f64>> {
    let row_bytes = row_bytes(format, k)?;
    let n = count(format, blocks, row_bytes, k, "rows")?;
    if batch == 0 {
        return Err(shape(
            "batch = 0: there must be at least one column of X".into(),
        ));
    }
    match batch.checked_mul(k) {
        Some(want) if want == x.len() => {}
        _ => {
            return Err(shape(format!(
                "x holds {} values, batch × K = {batch} × {k} were expected",
                x.len()
            )))
        }
    }
    let len = mul(batch, n, "the output size")?;
    // [N, batch] while computing (each task owns one weight row), then transposed.
    let mut t = alloc::<f64>(len, "mul_mat_f64 output")?;
    t.resize(len, 0.0);
    t.par_chunks_mut(batch).enumerate().try_for_each_init(
        || vec![0.0f32; k],
        |w, (r, out)| -> Result<()> {
            crate::cpu::dequant_into(format, &blocks[r * row_bytes..(r + 1) * row_bytes], w)?;
            for (b, o) in out.iter_mut().enumerate() {
                *o = w
                    .iter()
                    .zip(&x[b * k..(b + 1) * k])
                    .map(|(&w, &x)| f64::from(w) * x)
                    .sum();
            }
            Ok(())
        },
    )?;
    let mut y = alloc::<f64>(len, "mul_mat_f64 output")?;
    for b in 0..batch {
        y.extend((0..n).map(|r| t[r * batch + b]));
    }
    Ok(y)
}

/// The reference of a product in `precision`, the mode its kernel ran
/// ([`crate::gpu::kernels::Precision::honoured`]; `GpuEngine::precision_for`): [`mul_mat`] for
/// `exact` (and `mixed16`, which no kernel honours yet), [`mul_mat_factored`], or
/// [`mul_mat_int_dot`]. Errors as those functions.
pub fn mul_mat_in(
    precision: Precision,
    format: Format,
    blocks: &[u8],
    k: usize,
    x: &[f32],
    batch: usize,
) -> Result<Sums> {
    match precision {
        Precision::Exact | Precision::Mixed16 => mul_mat(format, blocks, k, x, batch),
        Precision::Factored => mul_mat_factored(format, blocks, k, x, batch),
        Precision::Int8 => mul_mat_int_dot(format, blocks, k, x, batch),
    }
}

/// [`reference()`] of a kernel that ran in `precision` ([`mul_mat_in`] for matvec and matmul;
/// the other ops sum exactly or not at all).
pub fn reference_in(
    precision: Precision,
    op: Op,
    format: Format,
    blocks: &[u8],
    dims: &[u64],
    input: &Input<'_>,
) -> Result<Reference> {
    match (op, *input, precision) {
        (_, _, Precision::Exact | Precision::Mixed16) => reference(op, format, blocks, dims, input),
        (Op::MatVec | Op::MatMul, Input::X { x, batch }, _) => {
            let k = usize::try_from(dims.first().copied().unwrap_or(1))
                .map_err(|_| shape("dim 0 does not fit usize".into()))?;
            Ok(Reference::Sums(mul_mat_in(
                precision, format, blocks, k, x, batch,
            )?))
        }
        (op, _, precision) => Err(shape(format!("{op} has no {precision} kernel"))),
    }
}

/// The reference of precision `factored` (matvec sums with the scales taken out:
/// [`crate::gpu::kernels::Precision::Factored`]) and its accuracy contract: Y = W X as
/// [`mul_mat`], with the bound
///
/// `|got − y| ≤ K·2⁻²³·Σ_k (|w_k| + 2·M_k)·|x_k| + K·2⁻¹²⁵ + 2⁻¹²¹·Σ_k (|w_k| + 2·M_k)`
///
/// where M_k bounds the offset m of the weight part holding k (values d·q + m; as in
/// [`mul_mat_int_dot`]). A kernel computes `d·Σq·x + m·Σx` per 8-value part: its roundings are
/// relative to `|d·q|·|x|` and `|m|·|x|`, not to `|w·x|`, which the offset can cancel
/// (`|d·q| ≤ |w| + |m|`); the first term covers them and the codec's own rounding of d·q + m,
/// the last what flushing subnormal partial sums of a part to zero loses once multiplied by d or
/// m. Errors as [`mul_mat`], and for a format without parts d·q + m
/// ([`crate::gpu::kernels::INT_DOT_FORMATS`]).
pub fn mul_mat_factored(
    format: Format,
    blocks: &[u8],
    k: usize,
    x: &[f32],
    batch: usize,
) -> Result<Sums> {
    mul_mat_parts(format, blocks, k, x, batch, false)
}

/// The reference of the integer matvec path ([`crate::gpu::kernels::Precision::Int8`]) and its
/// accuracy contract: Y = W X as [`mul_mat`] (y against the f32 x), with the bound
///
/// `|got − y| ≤ K·2⁻²³·Σ_k (|w_k| + 2·M_k)(|x_k| + δ_k) + K·2⁻¹²⁵ + Σ_k |w_k|·δ_k`
///
/// where δ_k = amax/254·(1 + 2⁻¹²) + 2⁻¹¹⁹ is what quantising x costs a value (amax: the
/// largest |x| of the 32 values of its block; the codes are round(x·127/amax)) and M_k bounds
/// the offset m of the weight part holding k (values d·q + m; 0 for formats without
/// `QPART8_MIN`): |m| of Q4_1 and Q5_1, 63·|dmin| of Q4_K and Q5_K, 15·|dmin| of Q2_K. The
/// first term covers the f32 operations on d·q, m and x's codes (4 per part, then any order of
/// summation), the last one x's quantisation; the integer dots are exact. A column of x with a
/// NaN or infinity gives NaN. Errors as [`mul_mat`], and for a format without an integer path
/// ([`crate::gpu::kernels::INT_DOT_FORMATS`]) or K not a multiple of 32.
pub fn mul_mat_int_dot(
    format: Format,
    blocks: &[u8],
    k: usize,
    x: &[f32],
    batch: usize,
) -> Result<Sums> {
    mul_mat_parts(format, blocks, k, x, batch, true)
}

/// The bounds of the part paths: [`mul_mat_int_dot`] where `quantised` (x's codes), else
/// [`mul_mat_factored`] (f32 x: δ = 0, and the flush term of the factored sums).
fn mul_mat_parts(
    format: Format,
    blocks: &[u8],
    k: usize,
    x: &[f32],
    batch: usize,
    quantised: bool,
) -> Result<Sums> {
    let path = if quantised {
        "integer matvec path"
    } else {
        "factored matvec sums"
    };
    let Some(has_min) = crate::gpu::kernels::int_dot_min(format) else {
        return Err(shape(format!("{format} has no {path}")));
    };
    if quantised && !k.is_multiple_of(32) {
        return Err(shape(format!(
            "K = {k}: the integer path quantises x in blocks of 32"
        )));
    }
    let base = mul_mat(format, blocks, k, x, batch)?;
    let n = base.y.len() / batch;
    let row_bytes = row_bytes(format, k)?;
    let block_bytes = format.block_bytes();
    let per_block = format.block_elems();
    // δ per value of x, NaN for a column with a NaN or infinity.
    let delta: Vec<f64> = if quantised {
        x.chunks(32)
            .flat_map(|b| {
                let amax = b.iter().fold(0f64, |a, &v| a.max(f64::from(v).abs()));
                let d = if b.iter().all(|v| v.is_finite()) {
                    amax / 254.0 * (1.0 + 2f64.powi(-12)) + 2f64.powi(-119)
                } else {
                    f64::NAN
                };
                [d; 32]
            })
            .collect()
    } else {
        vec![0.0; x.len()]
    };
    // The factored sums' flush term per unit of |w| + 2M.
    let flush = 2f64.powi(-121);
    let len = mul(batch, n, "the output size")?;
    let mut abs = alloc::<f64>(len, "mul_mat_int_dot bounds")?;
    let mut slack = alloc::<f64>(len, "mul_mat_int_dot bounds")?;
    abs.resize(len, 0.0);
    slack.resize(len, 0.0);
    // [N, batch] while computing, as mul_mat_f64.
    let mut t = alloc::<(f64, f64)>(len, "mul_mat_int_dot bounds")?;
    t.resize(len, (0.0, 0.0));
    t.par_chunks_mut(batch).enumerate().try_for_each_init(
        || vec![0.0f32; k],
        |w, (r, out)| -> Result<()> {
            let row = &blocks[r * row_bytes..(r + 1) * row_bytes];
            crate::cpu::dequant_into(format, row, w)?;
            for (b, o) in out.iter_mut().enumerate() {
                let (xs, ds) = (&x[b * k..(b + 1) * k], &delta[b * k..(b + 1) * k]);
                let (mut a, mut q) = (0f64, 0f64);
                for (i, ((&w, &x), &d)) in w.iter().zip(xs).zip(ds).enumerate() {
                    let m = if has_min {
                        min_bound(format, &row[(i / per_block) * block_bytes..])
                    } else {
                        0.0
                    };
                    let w = f64::from(w).abs();
                    a += (w + 2.0 * m) * (f64::from(x).abs() + d);
                    q += if quantised {
                        w * d
                    } else {
                        (w + 2.0 * m) * flush
                    };
                }
                *o = (a, q);
            }
            Ok(())
        },
    )?;
    for b in 0..batch {
        for r in 0..n {
            let (a, q) = t[r * batch + b];
            abs[b * n + r] = a;
            slack[b * n + r] = q;
        }
    }
    let mut y = base.y;
    for (y, q) in y.iter_mut().zip(&slack) {
        if q.is_nan() {
            *y = f64::NAN;
        }
    }
    Ok(Sums { y, abs, k, slack })
}

/// A bound of |m| for the parts of the block at the start of `block`, for a format with
/// `QPART8_MIN` (0 for any other).
fn min_bound(format: Format, block: &[u8]) -> f64 {
    let f16_at =
        |at: usize| f64::from(half::f16::from_le_bytes([block[at], block[at + 1]]).to_f32()).abs();
    match format {
        Format::Q4_1 | Format::Q5_1 => f16_at(2),
        Format::Q4_K | Format::Q5_K => 63.0 * f16_at(2),
        Format::Q2_K => 15.0 * f16_at(82),
        _ => 0.0,
    }
}

/// ggml's MUL_MAT_ID for a [K, N, E] weight (E experts of N rows each): for token t and slot s,
/// `y[(t*slots + s)*N + n] = Σ_k W[ids[t*slots+s], n, k] · x[row]`, where `row = t*slots + s` when
/// `x_per_slot`, else t (one input row per token broadcast to its slots). ids: [tokens, slots].
///
/// E is the number of values in `blocks` over K·N; each expert row is decoded once per call.
/// Errors if K is not a positive multiple of the block size, N or slots is 0, `blocks` is not a
/// whole number of experts (or holds none), `ids` is empty or not a whole number of tokens, an id
/// is ≥ E, or `x.len()` is not (tokens·slots or tokens)·K.
#[allow(clippy::too_many_arguments)]
pub fn mul_mat_id(
    format: Format,
    blocks: &[u8],
    k: usize,
    n: usize,
    x: &[f32],
    x_per_slot: bool,
    ids: &[u32],
    slots: usize,
) -> Result<Sums> {
    let row_bytes = row_bytes(format, k)?;
    if n == 0 {
        return Err(shape("N = 0: an expert must have at least one row".into()));
    }
    let expert_bytes = mul(row_bytes, n, "the bytes of one expert")?;
    let experts = count(format, blocks, expert_bytes, k, "experts")?;
    if slots == 0 {
        return Err(shape(
            "slots = 0: each token needs at least one slot".into(),
        ));
    }
    if ids.is_empty() || !ids.len().is_multiple_of(slots) {
        return Err(shape(format!(
            "ids holds {} values: not a positive whole number of tokens of {slots} slots",
            ids.len()
        )));
    }
    check_ids(ids, experts, "E", Some(slots))?;
    let tokens = ids.len() / slots;
    let (rows, what) = if x_per_slot {
        (ids.len(), "tokens × slots")
    } else {
        (tokens, "tokens")
    };
    check_x(x, rows, k, what)?;
    let mut jobs: Vec<Job> = ids
        .iter()
        .enumerate()
        .map(|(p, &e)| Job {
            row0: e as usize * n,
            out: p,
            x: if x_per_slot { p } else { p / slots },
        })
        .collect();
    // Grouped by expert, so that each expert row is decoded once; `out` keeps its place.
    jobs.sort_by_key(|j| (j.row0, j.out));
    run(format, blocks, row_bytes, k, n, x, &jobs)
}

/// One output row of N values: weight rows `row0 .. row0 + N` against row `x` of X, into output
/// row `out`.
#[derive(Clone, Copy)]
struct Job {
    row0: usize,
    out: usize,
    x: usize,
}

/// Runs `jobs` (sorted by `row0`, each `out` in `0..jobs.len()` once) over N weight rows each, in
/// parallel over the N rows; returns [jobs.len(), N] sums.
fn run(
    format: Format,
    blocks: &[u8],
    row_bytes: usize,
    k: usize,
    n: usize,
    x: &[f32],
    jobs: &[Job],
) -> Result<Sums> {
    let p = jobs.len();
    let len = mul(p, n, "the output size")?;
    // [N, P] while computing (each task owns one weight row index), then transposed to [P, N].
    let mut ty = alloc::<f64>(len, "mul_mat sums")?;
    let mut ta = alloc::<f64>(len, "mul_mat sums")?;
    ty.resize(len, 0.0);
    ta.resize(len, 0.0);
    ty.par_chunks_mut(p)
        .zip(ta.par_chunks_mut(p))
        .enumerate()
        .try_for_each_init(
            || vec![0.0f32; k],
            |w, (r, (ty, ta))| -> Result<()> {
                for group in jobs.chunk_by(|a, b| a.row0 == b.row0) {
                    let row = group[0].row0 + r;
                    let src = &blocks[row * row_bytes..(row + 1) * row_bytes];
                    crate::cpu::dequant_into(format, src, w)?;
                    for j in group {
                        (ty[j.out], ta[j.out]) = dot(w, &x[j.x * k..(j.x + 1) * k]);
                    }
                }
                Ok(())
            },
        )?;
    let mut y = alloc::<f64>(len, "mul_mat output")?;
    let mut abs = alloc::<f64>(len, "mul_mat output")?;
    for out in 0..p {
        y.extend((0..n).map(|r| ty[r * p + out]));
        abs.extend((0..n).map(|r| ta[r * p + out]));
    }
    Ok(Sums {
        y,
        abs,
        k,
        slack: Vec::new(),
    })
}

/// Σ w·x and Σ |w·x| in f64, in order.
fn dot(w: &[f32], x: &[f32]) -> (f64, f64) {
    let (mut s, mut a) = (0.0f64, 0.0f64);
    for (&w, &x) in w.iter().zip(x) {
        let p = f64::from(w) * f64::from(x);
        s += p;
        a += p.abs();
    }
    (s, a)
}

fn shape(msg: String) -> Error {
    Error::InvalidShape(msg)
}

fn mul(a: usize, b: usize, what: &str) -> Result<usize> {
    a.checked_mul(b)
        .ok_or_else(|| shape(format!("{what} ({a} × {b}) overflows usize")))
}

/// An empty vector with room for `len` values, or [`Error::OutOfMemory`].
fn alloc<T>(len: usize, what: &str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        bytes: len.saturating_mul(std::mem::size_of::<T>()),
        what: what.into(),
    })?;
    Ok(v)
}

/// Bytes of one row of K values, checking K.
fn row_bytes(format: Format, k: usize) -> Result<usize> {
    let elems = format.block_elems();
    if k == 0 || !k.is_multiple_of(elems) {
        return Err(shape(format!(
            "K = {k} is not a positive multiple of {format}'s block of {elems} values"
        )));
    }
    mul(k / elems, format.block_bytes(), "the bytes of one row")
}

/// How many `unit`s of `unit_bytes` bytes `blocks` holds (at least one).
fn count(format: Format, blocks: &[u8], unit_bytes: usize, k: usize, unit: &str) -> Result<usize> {
    let len = blocks.len();
    if !len.is_multiple_of(format.block_bytes()) {
        return Err(Error::partial_block(format, len));
    }
    if len == 0 || !len.is_multiple_of(unit_bytes) {
        return Err(shape(format!(
            "{len} bytes of {format} is not a positive whole number of {unit} \
             ({unit_bytes} bytes each at K = {k})"
        )));
    }
    Ok(len / unit_bytes)
}

/// Every id below `limit` (the dimension named `dim`); with `slots`, the error also names the
/// token and slot of the bad id.
fn check_ids(ids: &[u32], limit: usize, dim: &str, slots: Option<usize>) -> Result<()> {
    let Some(pos) = ids.iter().position(|&id| id as usize >= limit) else {
        return Ok(());
    };
    let at = match slots {
        Some(s) => format!(" (token {}, slot {})", pos / s, pos % s),
        None => String::new(),
    };
    Err(shape(format!(
        "ids[{pos}]{at} = {} is not below {dim} = {limit}",
        ids[pos]
    )))
}

/// `x.len() == rows * k`.
fn check_x(x: &[f32], rows: usize, k: usize, what: &str) -> Result<()> {
    match rows.checked_mul(k) {
        Some(want) if want == x.len() => Ok(()),
        want => Err(shape(format!(
            "x holds {} values, {what} × K = {rows} × {k} = {} were expected",
            x.len(),
            want.map_or("more than usize::MAX".into(), |w| w.to_string())
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(y: f64, abs: f64, k: usize) -> Sums {
        Sums {
            y: vec![y],
            abs: vec![abs],
            k,
            slack: Vec::new(),
        }
    }

    #[test]
    fn f64_product_keeps_f64_inputs() {
        // One F32 row [1, 2] times columns [1e-10 + 1, 3] and [0.5, 0.25].
        let w: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let x = [1.0 + 1e-10, 3.0, 0.5, 0.25];
        let y = mul_mat_f64(Format::F32, &w, 2, &x, 2).unwrap();
        assert_eq!(y, vec![1.0 + 1e-10 + 6.0, 1.0]);
        assert!(mul_mat_f64(Format::F32, &w, 2, &x[..3], 2).is_err());
        assert!(mul_mat_f64(Format::F32, &w, 2, &[], 0).is_err());
    }

    #[test]
    fn eps_is_f32_unit_roundoff() {
        assert_eq!(F32_EPS, f64::from(f32::EPSILON));
        assert_eq!(F32_EPS, 2f64.powi(-23));
    }

    #[test]
    fn bound_is_k_eps_abs() {
        let s = one(3.0, 8.0, 1 << 20);
        assert_eq!(s.bound(0), 1.0);
        assert_eq!(
            one(0.0, 5.0, 3).bound(0),
            3.0 * (5.0 * F32_EPS + 2.0 * F32_MIN_NORMAL)
        );
        assert_eq!(one(1.0, 0.0, 7).bound(0), 7.0 * 2.0 * F32_MIN_NORMAL);
    }

    #[test]
    fn fraction_scales_with_the_bound() {
        let s = one(3.0, 8.0, 1 << 20); // bound 1.0
        assert_eq!(s.fraction(0, 3.0), 0.0);
        assert_eq!(s.fraction(0, 3.5), 0.5);
        assert_eq!(s.fraction(0, 2.5), 0.5);
        assert_eq!(s.fraction(0, 4.0), 1.0);
        assert_eq!(s.fraction(0, 5.0), 2.0);
    }

    #[test]
    fn fraction_special_cases() {
        let inf = f64::INFINITY;
        // NaN: both NaN pass, NaN against a number never does.
        assert_eq!(one(f64::NAN, f64::NAN, 4).fraction(0, f32::NAN), 0.0);
        assert_eq!(one(f64::NAN, f64::NAN, 4).fraction(0, 1.0), inf);
        assert_eq!(one(1.0, 1.0, 4).fraction(0, f32::NAN), inf);
        assert_eq!(one(f64::NAN, inf, 4).fraction(0, f32::INFINITY), inf);
        // Infinities: the same passes, the other one or a number never does.
        assert_eq!(one(inf, inf, 4).fraction(0, f32::INFINITY), 0.0);
        assert_eq!(one(-inf, inf, 4).fraction(0, f32::NEG_INFINITY), 0.0);
        assert_eq!(one(inf, inf, 4).fraction(0, f32::NEG_INFINITY), inf);
        assert_eq!(one(inf, inf, 4).fraction(0, f32::MAX), inf);
        assert_eq!(one(1.0, 1e30, 4).fraction(0, f32::INFINITY), inf);
        // A finite y beyond f32's range rounds to the infinity that --backend cpu prints.
        let big = 1e39;
        assert_eq!(one(big, big, 4).fraction(0, f32::INFINITY), 0.0);
        assert_eq!(one(big, big, 4).fraction(0, f32::NEG_INFINITY), inf);
        // Σ|w·x| = 0: only the flush-to-zero allowance K·2⁻¹²⁵ remains.
        assert_eq!(one(0.0, 0.0, 4).fraction(0, 0.0), 0.0);
        assert_eq!(one(0.0, 0.0, 4).fraction(0, -0.0), 0.0);
        assert!(one(0.0, 0.0, 4).fraction(0, 1e-30) > 1e6);
        assert!(one(0.0, 0.0, 4).fraction(0, 1e-38) <= 1.0);
        // y not representable in f32: its f32 rounding passes whatever the bound.
        let y = 1.0 + 2f64.powi(-40);
        assert_eq!(one(y, 0.0, 1).fraction(0, 1.0), 0.0);
        assert!(one(y, 0.5, 1).fraction(0, 1.0 + f32::EPSILON) > 1.0);
    }

    #[test]
    fn own_f32_rounding_is_within_contract() {
        let s = Sums {
            y: vec![1.0 / 3.0, -2e-40, 1e39, f64::NAN, f64::NEG_INFINITY, 0.0],
            abs: vec![1.0, 2e-40, 1e39, f64::NAN, f64::INFINITY, 0.0],
            k: 1,
            slack: Vec::new(),
        };
        assert_eq!(s.max_fraction(&s.to_f32()).unwrap(), 0.0);
    }

    #[test]
    fn max_fraction_takes_the_worst_and_checks_length() {
        let s = Sums {
            y: vec![3.0, 3.0],
            abs: vec![8.0, 16.0],
            k: 1 << 20,
            slack: Vec::new(),
        };
        assert_eq!(s.max_fraction(&[3.5, 4.0]).unwrap(), 0.5);
        assert_eq!(s.max_fraction(&[4.0, 3.0]).unwrap(), 1.0);
        let e = s.max_fraction(&[3.0]).unwrap_err();
        assert!(matches!(e, Error::InvalidShape(_)), "{e}");
        assert!(e.to_string().contains("1 values to compare with 2"), "{e}");
        let empty = Sums {
            y: vec![],
            abs: vec![],
            k: 1,
            slack: Vec::new(),
        };
        assert_eq!(empty.max_fraction(&[]).unwrap(), 0.0);
    }
}
