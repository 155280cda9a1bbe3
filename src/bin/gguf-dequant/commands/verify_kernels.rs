//! `verify --op`: the inference kernels (`gpu::kernels`, any of the registry's) on every matrix
//! of a file, with seeded random inputs of the kind each takes, against the CPU f64 reference
//! (`ops::reference`), within the f32 accuracy contract `|y − y_ref| ≤ K·2⁻²³·Σ|w·x|` (get_rows:
//! bit for bit).
//!
//! A tensor of 2 or more dims is N rows of K = dims[0] values (more dims folded into rows;
//! matvec_id reads them as experts, a matrix as one). One with more than `--max-rows` rows is
//! checked on a contiguous run of that many rows at a seeded position, uploaded as a tensor of
//! its own (`[K, rows]`); the report names the run.

use std::io::Write;
use std::ops::Range;

use anyhow::{bail, Result};
use gguf_dequant::formats::sample::Rng;
use gguf_dequant::gguf::TensorInfo;
use gguf_dequant::gpu::kernels::{Input, Inputs, KernelKey, Op, Precision};
use gguf_dequant::gpu::loader::ResidentTensor;
use gguf_dequant::gpu::{GpuEngine, GpuError};
use gguf_dequant::{ops, Error, GgufFile};
use serde_json::{json, Value as Json};

use crate::args::{KernelChoice, VerifyArgs};
use crate::backend::{self, GPU};
use crate::progress::Progress;
use crate::render::{self, describe, printable};

/// Columns of X in the matvec checks (one dispatch of 1 column, one of 3).
const MATVEC_BATCHES: &[usize] = &[1, 3];
/// Columns of X in the matmul check (more than one 32-wide tile in neither direction, ragged).
const MATMUL_BATCHES: &[usize] = &[17];
/// Random ids gathered besides 0 and N − 1.
const RANDOM_IDS: usize = 6;
/// Tokens and slots of the matvec_id checks (each token's x broadcast to its slots, then one x
/// per slot).
const ID_TOKENS: usize = 3;
const ID_SLOTS: usize = 2;

/// One kernel on one tensor.
struct Check {
    op: Op,
    /// Batch sizes run (get_rows: the number of ids).
    batches: Vec<usize>,
    /// Output values compared.
    values: u64,
    /// The largest fraction of the bound (0 or ∞ for get_rows); ∞ when a value can never pass.
    max_fraction: f64,
    /// Values beyond the bound (get_rows: values whose bits differ).
    failures: u64,
    /// Compared bit for bit (the reference is exact) rather than within the bound.
    exact: bool,
    /// The kernel refused the tensor (a shape or a size it cannot take).
    error: Option<String>,
    /// The kernel variants the calls ran (`GpuEngine::kernels_for`), each once.
    variants: Vec<KernelKey>,
}

impl Check {
    fn new(op: Op) -> Check {
        Check {
            op,
            batches: Vec::new(),
            values: 0,
            max_fraction: 0.0,
            failures: 0,
            exact: false,
            error: None,
            variants: Vec::new(),
        }
    }

    fn add(&mut self, fraction: f64) {
        self.values += 1;
        // NaN counts as beyond the bound.
        if fraction.is_nan() || fraction > 1.0 {
            self.failures += 1;
        }
        self.max_fraction = self.max_fraction.max(fraction);
        if fraction.is_nan() {
            self.max_fraction = f64::INFINITY;
        }
    }

    fn ok(&self) -> bool {
        self.error.is_none() && self.failures == 0
    }
}

/// One tensor: skipped with a reason, or checked on `sample` rows.
struct TensorReport<'f> {
    info: &'f TensorInfo,
    k: u64,
    rows: u64,
    sample: Range<u64>,
    skipped: Option<String>,
    checks: Vec<Check>,
}

impl TensorReport<'_> {
    fn subsampled(&self) -> bool {
        self.skipped.is_none() && self.sample.end - self.sample.start < self.rows
    }
}

/// Runs the kernels of `op` on every matrix of `args.file`; an error when any check fails.
pub fn run(args: &VerifyArgs, op: &KernelChoice) -> Result<()> {
    let backend = backend::choose(args.backend, GPU)?;
    let file = GgufFile::open(&args.file)?;
    let engine = GpuEngine::with_options(
        backend,
        super::variant_options(args.variant, args.precision),
    )?;
    let ops = &op.ops[..];
    let bar = Progress::steps(args.report.quiet, args.report.json);
    let n = file.tensors().len() as u64;
    let mut reports = Vec::with_capacity(file.tensors().len());
    for (i, t) in file.tensors().iter().enumerate() {
        bar.step(i as u64, n, &printable(&t.name));
        reports.push(check_tensor(&engine, &file, i, t, ops, args)?);
    }
    bar.finish();
    let checks = reports.iter().flat_map(|r| &r.checks).count();
    let bad = reports
        .iter()
        .flat_map(|r| &r.checks)
        .filter(|c| !c.ok())
        .count();
    if args.report.json {
        let (backend, adapter) = render::backend_json(Some(&engine));
        let entries: Vec<Json> = reports.iter().flat_map(|r| report_json(r, ops)).collect();
        render::print_json(&json!({
            "file": render::path_json(&args.file), "backend": backend, "adapter": adapter,
            "op": op.name, "seed": args.seed, "max_rows": args.max_rows, "ok": bad == 0,
            "matvec_variant": super::variant_name(&engine),
            "precision": engine.precision().name(),
            "checks": entries,
        }))?;
    } else {
        write_table(&reports, ops, args, &engine, bad)?;
    }
    if bad > 0 {
        bail!(
            "{bad} of {checks} kernel checks failed on {}: beyond the bound of precision {} \
             (exact: K·2⁻²³·Σ|w·x|), get_rows not bit-exact, or refused by the kernel",
            describe(&engine),
            engine.precision()
        );
    }
    Ok(())
}

/// A generator for tensor `index`'s stream `stream` (0: the row run, 1 + op: an op's inputs), so
/// that each input depends only on the seed, the tensor and the op.
fn rng(seed: u64, index: usize, stream: u64) -> Rng {
    let mut r = Rng::new(seed);
    let mix = r.next_u64() ^ ((index as u64) << 8 | stream).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    Rng::new(mix)
}

/// Uniform in [-1, 1): 24 random bits, exact in f32.
fn uniform(rng: &mut Rng) -> f32 {
    (rng.next_u64() >> 40) as f32 * (1.0 / (1u32 << 23) as f32) - 1.0
}

fn check_tensor<'f>(
    engine: &GpuEngine,
    file: &GgufFile,
    index: usize,
    t: &'f TensorInfo,
    ops: &[Op],
    args: &VerifyArgs,
) -> Result<TensorReport<'f>> {
    let k = t.dims[0];
    let rows = t.n_elements / k;
    let mut report = TensorReport {
        info: t,
        k,
        rows,
        sample: 0..0,
        skipped: None,
        checks: Vec::new(),
    };
    if t.dims.len() < 2 {
        report.skipped = Some("1-D: not a matrix".into());
        return Ok(report);
    }
    if !t.format.has_shader() {
        report.skipped = Some(format!("{}: no GPU shader (CPU only)", t.format));
        return Ok(report);
    }
    let m = rows.min(args.max_rows);
    let start = if rows > m {
        rng(args.seed, index, 0).next_u64() % (rows - m + 1)
    } else {
        0
    };
    report.sample = start..start + m;
    let row_bytes = k / t.format.block_elems() as u64 * t.format.block_bytes() as u64;
    let (from, len) = (start * row_bytes, m * row_bytes);
    let sub = &file.tensor_data(t)[from as usize..(from + len) as usize];
    let dims = if m == rows {
        t.dims.clone()
    } else {
        vec![k, m]
    };
    let weight = match ResidentTensor::upload(engine, &t.name, t.format, &dims, sub) {
        Ok(w) => Some(w),
        Err(e) if refused(&e) => {
            for &op in ops {
                let mut c = Check::new(op);
                c.error = Some(e.to_string());
                report.checks.push(c);
            }
            None
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(w) = weight {
        for &op in ops {
            let mut r = rng(args.seed, index, 1 + op as u64);
            report.checks.push(check_op(engine, &w, sub, op, &mut r)?);
        }
    }
    file.release_tensor(t, from, len);
    Ok(report)
}

/// A kernel's refusal of a tensor it cannot take (a shape, a size): a failed check, not the end of
/// the run.
fn refused(e: &Error) -> bool {
    matches!(
        e,
        Error::Gpu(GpuError::InvalidJob(_) | GpuError::TooLarge { .. }) | Error::InvalidShape(_)
    )
}

/// One call's inputs, owned.
enum Owned {
    X(Vec<f32>, usize),
    Ids(Vec<u32>),
    XIds(Vec<f32>, Vec<u32>, bool),
}

impl Owned {
    fn input(&self) -> Input<'_> {
        match self {
            Owned::X(x, batch) => Input::X { x, batch: *batch },
            Owned::Ids(ids) => Input::Ids(ids),
            Owned::XIds(x, ids, x_per_slot) => Input::XIds {
                x,
                ids,
                slots: ID_SLOTS,
                x_per_slot: *x_per_slot,
            },
        }
    }

    /// The batch the report names: columns, ids, or tokens × slots.
    fn batch(&self) -> usize {
        match self {
            Owned::X(_, batch) => *batch,
            Owned::Ids(ids) => ids.len(),
            Owned::XIds(_, ids, _) => ids.len(),
        }
    }
}

/// The seeded inputs `op` is checked with on `w`: X of a few column counts; ids 0, N − 1 and
/// random ones; expert ids over the tensor's experts (dims past the second; a matrix is one)
/// with x per token and then per slot.
fn inputs(op: Op, w: &ResidentTensor, rng: &mut Rng) -> Vec<Owned> {
    let k = w.dims[0] as usize;
    let rows = w.n_elements / w.dims[0];
    let x = |n: usize, rng: &mut Rng| (0..n * k).map(|_| uniform(rng)).collect::<Vec<f32>>();
    match op.inputs() {
        Inputs::X => {
            let batches = if op == Op::MatMul {
                MATMUL_BATCHES
            } else {
                MATVEC_BATCHES
            };
            batches.iter().map(|&b| Owned::X(x(b, rng), b)).collect()
        }
        Inputs::Ids => {
            let mut ids = vec![0, (rows - 1) as u32];
            ids.extend((0..RANDOM_IDS).map(|_| (rng.next_u64() % rows) as u32));
            vec![Owned::Ids(ids)]
        }
        Inputs::XIds => {
            let experts = rows / w.dims.get(1).copied().unwrap_or(1).max(1);
            let pairs = ID_TOKENS * ID_SLOTS;
            let mut ids = vec![0, (experts - 1) as u32];
            ids.extend((2..pairs).map(|_| (rng.next_u64() % experts) as u32));
            [false, true]
                .into_iter()
                .map(|per_slot| {
                    let n = if per_slot { pairs } else { ID_TOKENS };
                    Owned::XIds(x(n, rng), ids.clone(), per_slot)
                })
                .collect()
        }
    }
}

/// `op` on `w` with its seeded inputs, against `ops::reference_in` on the same blocks in the
/// precision the call ran in.
fn check_op(
    engine: &GpuEngine,
    w: &ResidentTensor,
    blocks: &[u8],
    op: Op,
    rng: &mut Rng,
) -> Result<Check> {
    let mut c = Check::new(op);
    for owned in inputs(op, w, rng) {
        let input = owned.input();
        c.batches.push(owned.batch());
        let got = match engine.run(op, w, &input) {
            Ok(g) => g,
            Err(e) if refused(&e) => {
                c.error = Some(e.to_string());
                return Ok(c);
            }
            Err(e) => return Err(e.into()),
        };
        let tokens = match &owned {
            Owned::XIds(_, ids, _) => ids.len() / ID_SLOTS,
            other => other.batch(),
        };
        for key in engine.kernels_for(op, w, tokens as u64)? {
            if !c.variants.contains(&key) {
                c.variants.push(key);
            }
        }
        let k = w.dims.first().copied().unwrap_or(1);
        let precision = engine.precision_for(op, w.format, k);
        let want = ops::reference_in(precision, op, w.format, blocks, &w.dims, &input)?;
        c.exact = matches!(want, ops::Reference::Exact(_));
        if got.len() != want.len() {
            bail!(
                "{}: {op} returned {} values, not {}",
                w.name,
                got.len(),
                want.len()
            );
        }
        for (i, &g) in got.iter().enumerate() {
            c.add(want.fraction(i, g));
        }
    }
    Ok(c)
}

/// The JSON entries of one tensor: one per op (see the README for the fields).
fn report_json(r: &TensorReport<'_>, ops: &[Op]) -> Vec<Json> {
    let base = |op: Op| {
        json!({
            "name": r.info.name, "type": r.info.format.name(), "dims": r.info.dims,
            "op": op.name(), "k": r.k, "rows": r.rows,
        })
    };
    let mut out = Vec::new();
    if let Some(reason) = &r.skipped {
        for &op in ops {
            let mut j = base(op);
            extend(
                &mut j,
                json!({
                    "status": "skipped", "reason": reason, "row_start": Json::Null,
                    "rows_checked": 0, "batches": [], "values": 0, "max_fraction": Json::Null,
                    "failures": 0, "variant": Json::Null,
                }),
            );
            out.push(j);
        }
        return out;
    }
    for c in &r.checks {
        let mut j = base(c.op);
        let fraction = if c.max_fraction.is_finite() && c.error.is_none() {
            json!(c.max_fraction)
        } else {
            Json::Null
        };
        extend(
            &mut j,
            json!({
                "status": if c.ok() { "pass" } else { "fail" }, "reason": c.error,
                "row_start": r.sample.start, "rows_checked": r.sample.end - r.sample.start,
                "batches": c.batches, "values": c.values, "max_fraction": fraction,
                "failures": c.failures, "variant": KernelKey::names(&c.variants),
            }),
        );
        out.push(j);
    }
    out
}

fn extend(j: &mut Json, more: Json) {
    if let (Json::Object(a), Json::Object(b)) = (j, more) {
        a.extend(b);
    }
}

/// A check's cell: the largest fraction, `exact` for a bit-exact kernel, or FAIL.
fn cell(c: &Check) -> String {
    if c.error.is_some() {
        return "FAIL refused".into();
    }
    let value = match (c.exact, c.max_fraction) {
        (true, _) if c.failures == 0 => "exact".to_string(),
        (true, _) => format!("{} differ", c.failures),
        (false, f) if f.is_infinite() => "inf".to_string(),
        (false, f) => format!("{f:.4}"),
    };
    if c.ok() {
        value
    } else {
        format!("FAIL {value}")
    }
}

fn write_table(
    reports: &[TensorReport<'_>],
    ops: &[Op],
    args: &VerifyArgs,
    engine: &GpuEngine,
    bad: usize,
) -> Result<()> {
    let mut out = render::stdout();
    let names: Vec<String> = reports
        .iter()
        .map(|r| printable(&r.info.name).into_owned())
        .collect();
    let dims: Vec<String> = reports
        .iter()
        .map(|r| format!("{:?}", r.info.dims))
        .collect();
    let rows: Vec<String> = reports
        .iter()
        .map(|r| match (&r.skipped, r.subsampled()) {
            (Some(_), _) => "-".into(),
            (None, true) => format!("{}..{} of {}", r.sample.start, r.sample.end, r.rows),
            (None, false) => format!("all {}", r.rows),
        })
        .collect();
    let width = |v: &[String], min: usize| {
        v.iter()
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(0)
            .max(min)
    };
    let (nw, dw, rw) = (width(&names, 4), width(&dims, 4), width(&rows, 4));
    write!(
        out,
        "{:<nw$}  {:<7} {:<dw$}  {:<rw$}",
        "name", "type", "dims", "rows"
    )?;
    for op in ops {
        write!(out, "  {:>12}", op.name())?;
    }
    writeln!(out)?;
    for (i, r) in reports.iter().enumerate() {
        write!(
            out,
            "{:<nw$}  {:<7} {:<dw$}  {:<rw$}",
            names[i],
            r.info.format.name(),
            dims[i],
            rows[i]
        )?;
        match &r.skipped {
            Some(reason) => write!(out, "  skipped: {reason}")?,
            None => {
                for c in &r.checks {
                    write!(out, "  {:>12}", cell(c))?;
                }
            }
        }
        writeln!(out)?;
    }
    for r in reports {
        for c in r.checks.iter().filter(|c| c.error.is_some()) {
            writeln!(
                out,
                "{} {}: refused: {}",
                printable(&r.info.name),
                c.op.name(),
                c.error.as_deref().unwrap_or("")
            )?;
        }
    }
    if bad == 0 {
        let checked: Vec<&TensorReport<'_>> =
            reports.iter().filter(|r| r.skipped.is_none()).collect();
        let n_checks: usize = checked.iter().map(|r| r.checks.len()).sum();
        let worst = checked
            .iter()
            .flat_map(|r| &r.checks)
            .filter(|c| !c.exact)
            .map(|c| c.max_fraction)
            .fold(0.0, f64::max);
        let exact: Vec<&str> = ops
            .iter()
            .filter(|&&o| {
                checked
                    .iter()
                    .flat_map(|r| &r.checks)
                    .any(|c| c.op == o && c.exact)
            })
            .map(|o| o.name())
            .collect();
        let skipped = reports.len() - checked.len();
        let sub = checked.iter().filter(|r| r.subsampled()).count();
        let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
        write!(
            out,
            "verify passed: {n_checks} kernel checks ({}) of {} matrices on {} against the CPU \
             reference: within {}",
            names.join(", "),
            checked.len(),
            describe(engine),
            match engine.precision() {
                Precision::Exact | Precision::Mixed16 => "K·2⁻²³·Σ|w·x| + K·2⁻¹²⁵".to_string(),
                p => format!("the bound of precision {p} where a kernel has it, else exact"),
            }
        )?;
        if exact.len() < ops.len() {
            write!(out, " (largest fraction {worst:.4})")?;
        }
        if !exact.is_empty() {
            write!(out, ", {} bit-exact", exact.join(", "))?;
        }
        write!(out, "; {skipped} tensors skipped")?;
        if ops.contains(&Op::MatVec) {
            write!(out, "; matvec variant {}", super::variant_name(engine))?;
        }
        let mut variants: Vec<String> = Vec::new();
        for key in checked
            .iter()
            .flat_map(|r| &r.checks)
            .flat_map(|c| &c.variants)
        {
            let name = key.to_string();
            if !variants.contains(&name) {
                variants.push(name);
            }
        }
        match variants.len() {
            0 => {}
            1..=3 => write!(out, "; kernels run: {}", variants.join(", "))?,
            n => write!(out, "; {n} kernel variants run (--json names each check's)")?,
        }
        if sub > 0 {
            write!(
                out,
                "; {sub} checked on a run of {} rows (seed {})",
                args.max_rows, args.seed
            )?;
        }
        writeln!(out)?;
    }
    out.flush()?;
    Ok(())
}
