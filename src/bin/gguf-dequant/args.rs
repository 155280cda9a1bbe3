//! Command-line arguments.

use std::path::PathBuf;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use gguf_dequant::gpu::kernels::Op;
use gguf_dequant::gpu::loader::{Residency, Source};
use gguf_dequant::Selection;
use gguf_dequant::{Backend, DType};

use crate::backend::{self, ADAPTERS, DECODE, GPU};

/// Inspect, verify, convert and dequantise GGUF model files, on the GPU or the CPU.
#[derive(Debug, Parser)]
#[command(name = "gguf-dequant", version, about, max_term_width = 100)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Decode a built-in sample of every format on the GPU and check it against the CPU codecs.
    Selftest(SelftestArgs),
    /// List every GPU adapter wgpu sees, with the limits that matter here.
    Adapters(AdaptersArgs),
    /// Show a GGUF file's header, metadata and tensor table.
    Inspect(InspectArgs),
    /// Make the whole file (or a selection) GPU-resident, raw or dequantised, and report the speed.
    Load(LoadArgs),
    /// Dequantise every tensor on the GPU and compare it bit-for-bit with the CPU codecs, or with
    /// `--op` run the inference kernels on every matrix against the CPU reference.
    Verify(VerifyArgs),
    /// Dequantise the whole model (or a selection) into a .safetensors file, GGUF metadata in
    /// `__metadata__`.
    Convert(ConvertArgs),
    /// Dequantise tensors to .safetensors (any number), .npy or .bin (one tensor).
    Dequant(DequantArgs),
    /// Run one kernel (get_rows, matvec, matmul, matvec_id) on one tensor with inputs from .npy
    /// files, on the GPU or with the CPU reference, and write the result as .npy.
    Apply(ApplyArgs),
    /// Benchmark GPU dequantisation per adapter, format and dtype against two rooflines of the
    /// same traffic (a buffer copy, a shader copy) and the CPU codecs, and with `--kernels` the
    /// inference kernels on real models' weight shapes; or compare earlier reports.
    Bench(BenchArgs),
    /// Make a model's matrices resident and tune matvec on this GPU: for every (format, K, N,
    /// columns) the model uses, time the kernel mappings and keep the fastest (cached per
    /// device), printing each key's choice, its time, its share of the read roofline and the
    /// runner-up.
    Tune(TuneArgs),
}

/// `tune` options.
#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The GGUF file (the first shard of a split set).
    pub file: PathBuf,
    /// GPU backend [default: the one GGUF_DEQUANT_BACKEND names, else auto].
    #[arg(long, value_parser = backend::parser(GPU))]
    pub backend: Option<Backend>,
    /// `off` (the prior alone), `cache` (cached choices, nothing measured), `on` (measure what
    /// the cache lacks) or `force` (measure everything again) [default: GGUF_DEQUANT_TUNE, else
    /// `on`].
    #[arg(long, value_name = "off|cache|on|force")]
    pub tune: Option<gguf_dequant::gpu::tune::Tuning>,
    /// Columns per matvec call to tune for (1 to 8, comma-separated).
    #[arg(long, default_value = "1", value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=8))]
    pub batch: Vec<u32>,
    /// Milliseconds the whole tuning may take.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub budget_ms: u64,
    /// Milliseconds one key's race may take (pipeline compiles not counted).
    #[arg(long, default_value_t = 150, value_name = "MS")]
    pub key_budget_ms: u64,
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub report: Report,
}

/// `selftest` options.
#[derive(Debug, Args)]
pub struct SelftestArgs {
    /// GPU adapter: the best one, every one (`all`), or the best of one API [default: the one
    /// GGUF_DEQUANT_BACKEND names, else auto].
    #[arg(long, value_parser = backend::parser(ADAPTERS))]
    pub backend: Option<Backend>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `adapters` options.
#[derive(Debug, Args)]
pub struct AdaptersArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `inspect` options.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// The GGUF file.
    pub file: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `load` options.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The GGUF file.
    pub file: PathBuf,
    /// Residency: `raw` quantised blocks, or dequantised to f32, f16 or bf16.
    #[arg(long, default_value = "f16", value_parser = parse_residency)]
    pub dtype: Residency,
    /// GPU backend [default: the one GGUF_DEQUANT_BACKEND names, else auto].
    #[arg(long, value_parser = backend::parser(GPU))]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub select: Select,
    /// Read the file with plain reads straight into the staging buffers (`read`), through its
    /// memory map (`mmap`), or with `O_DIRECT` reads that bypass the page cache (`direct`,
    /// Linux).
    #[arg(long, default_value = "read", value_parser = parse_source)]
    pub source: Source,
    /// Host staging budget in MiB (per device with --devices).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub staging_mib: u64,
    /// Staging slots the budget is split into.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(2..=64))]
    pub slots: u64,
    /// Reader threads filling staging slots at once (at most one per slot).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub readers: u64,
    /// Load from the disk: drop the file from the page cache first (Linux; an error where the
    /// cache keeps it) and compare with the cold read roofline.
    #[arg(long)]
    pub cold: bool,
    /// Skip measuring the rooflines (file read speed, host-to-device speed) before the load.
    #[arg(long)]
    pub no_roofline: bool,
    #[command(flatten)]
    pub devices: DeviceArgs,
    #[command(flatten)]
    pub report: Report,
}

/// `load`'s options for one model over several devices.
#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// Place the model over several GPU devices: `all` compute adapters, or adapter numbers as
    /// `gguf-dequant adapters` prints them, comma-separated (layers go to them in that order).
    #[arg(long, value_name = "all|LIST", value_parser = parse_devices, conflicts_with = "backend")]
    pub devices: Option<Devices>,
    /// With --devices: each device's share of the layers, by layer count (llama.cpp's
    /// --tensor-split), e.g. `3,1,1` [default: equal shares].
    #[arg(long, value_name = "LIST", value_delimiter = ',', requires = "devices")]
    pub tensor_split: Vec<f64>,
    /// With --devices: each device's budget of resident MiB, filled in order, e.g. `100,200,300`.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "devices",
        conflicts_with = "tensor_split"
    )]
    pub budget_mib: Vec<u64>,
    /// With --devices: the adapter of the input tensors (token_embd, ...) [default: the first
    /// of --devices].
    #[arg(long, value_name = "N", requires = "devices")]
    pub input_device: Option<usize>,
    /// With --devices: the adapter of the output tensors (output, output_norm) [default: the
    /// last of --devices].
    #[arg(long, value_name = "N", requires = "devices")]
    pub output_device: Option<usize>,
}

/// `--devices`: every compute adapter, or these adapter numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Devices {
    /// `all`.
    All,
    /// Adapter numbers, in placement order.
    List(Vec<usize>),
}

/// `verify` options.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The GGUF file.
    pub file: PathBuf,
    /// GPU backend [default: the one GGUF_DEQUANT_BACKEND names, else auto].
    #[arg(long, value_parser = backend::parser(GPU))]
    pub backend: Option<Backend>,
    /// Output element type compared (the dequantisation check; not with --op).
    #[arg(long, default_value = "f32", value_parser = parse_dtype, conflicts_with = "op")]
    pub dtype: DType,
    /// Instead of the dequantisation check: run this kernel (or `all` of them) on every matrix
    /// (a tensor of 2 or more dims, folded into rows of dims[0]; matvec_id reads dims past the
    /// second as experts) with seeded random inputs, against the CPU f64 reference, within the
    /// f32 bound K·2⁻²³·Σ|w·x| (get_rows: bit for bit).
    #[arg(long, value_name = "OP", value_parser = kernel_choice_parser())]
    pub op: Option<KernelChoice>,
    /// With --op: check at most this many rows of each tensor (a contiguous run at a seeded
    /// position when the tensor has more).
    #[arg(
        long,
        default_value_t = 256,
        requires = "op",
        value_parser = clap::value_parser!(u64).range(1..=65536)
    )]
    pub max_rows: u64,
    /// With --op: the seed of the random inputs and row runs.
    #[arg(long, default_value_t = 1, requires = "op")]
    pub seed: u64,
    /// With --op: matvec's variant: `classic` (each row its own invocations) or `rows:WxR[sS]`
    /// (the rows mapping for GPUs, e.g. rows:128x2, or rows:64x2s4 with slots of 4 chunks)
    /// [default: the engine's].
    #[arg(long, value_name = "classic|rows:WxR[sS]", requires = "op")]
    pub variant: Option<gguf_dequant::gpu::kernels::Mapping>,
    /// With --op: how matvec and matmul sum: exact, factored, int8 or mixed16 (formats without
    /// a kernel of that mode sum exact); each check holds the bound of the mode it ran in.
    #[arg(long, default_value = "exact", value_name = "MODE", requires = "op")]
    pub precision: gguf_dequant::gpu::kernels::Precision,
    #[command(flatten)]
    pub report: Report,
}

/// `verify --op`: one kernel of the registry, or `all`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelChoice {
    /// As given: a kernel's name or `all`.
    pub name: &'static str,
    /// The kernels it runs, in registry order.
    pub ops: Vec<Op>,
}

/// The registry's kernels as clap's possible values, each with its summary.
fn op_values() -> Vec<PossibleValue> {
    Op::ALL
        .iter()
        .map(|o| PossibleValue::new(o.name()).help(o.summary()))
        .collect()
}

/// `--op` of `apply`: one kernel of the registry by name.
fn op_parser() -> impl TypedValueParser<Value = Op> {
    PossibleValuesParser::new(op_values())
        .try_map(|s| Op::from_name(&s).ok_or_else(|| format!("unknown kernel `{s}`")))
}

/// `--op` of `verify`: a kernel of the registry, or `all`.
fn kernel_choice_parser() -> impl TypedValueParser<Value = KernelChoice> {
    let mut values = op_values();
    values.push(PossibleValue::new("all").help("every kernel"));
    PossibleValuesParser::new(values).try_map(|s| {
        if s == "all" {
            return Ok(KernelChoice {
                name: "all",
                ops: Op::ALL.to_vec(),
            });
        }
        let op = Op::from_name(&s).ok_or_else(|| format!("unknown kernel `{s}`"))?;
        Ok::<_, String>(KernelChoice {
            name: op.name(),
            ops: vec![op],
        })
    })
}

/// `apply` options.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The GGUF file.
    pub file: PathBuf,
    /// The weight: a tensor of 2 or more dims [K, N, ...], taken as N·... rows of K values.
    #[arg(long, value_name = "NAME")]
    pub tensor: String,
    /// The kernel.
    #[arg(long, value_name = "OP", value_parser = op_parser())]
    pub op: Op,
    /// X as .npy: for get_rows the row ids, a 1-D array of any integer dtype; for matvec,
    /// matmul and matvec_id float32 [batch, K] (or [K]: batch 1), C or Fortran order
    /// (matvec_id: one row per token, or one per token and slot).
    #[arg(long, value_name = "X.npy")]
    pub input: PathBuf,
    /// matvec_id's expert ids as .npy: [tokens, slots] (or [tokens]: one slot) of any integer
    /// dtype, each below the tensor's experts (its dims past the second).
    #[arg(long, value_name = "IDS.npy")]
    pub ids: Option<PathBuf>,
    /// Y as .npy (never an input file), float32: [batch, N], or [ids, K] for get_rows. Written
    /// to a temporary name and renamed when complete.
    #[arg(long, short, value_name = "Y.npy")]
    pub out: PathBuf,
    /// Where to run: a GPU adapter's kernels, or `cpu`, the f64 reference rounded to f32
    /// (get_rows: the CPU codec's values), for every format [default: the one
    /// GGUF_DEQUANT_BACKEND names, else auto: the best GPU adapter, or the CPU on a machine
    /// without one].
    #[arg(long, value_parser = backend::parser(DECODE))]
    pub backend: Option<Backend>,
    /// matvec's variant: `classic` (each row its own invocations) or `rows:WxR[sS]` (the rows
    /// mapping for GPUs, e.g. rows:128x2, or rows:64x2s4 with slots of 4 chunks) [default: the
    /// engine's].
    #[arg(long, value_name = "classic|rows:WxR[sS]")]
    pub variant: Option<gguf_dequant::gpu::kernels::Mapping>,
    /// How matvec and matmul sum on the GPU: exact, factored, int8 or mixed16 (formats without
    /// a kernel of that mode sum exact; the summary names the mode that ran).
    #[arg(long, default_value = "exact", value_name = "MODE")]
    pub precision: gguf_dequant::gpu::kernels::Precision,
    /// No summary line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `convert` options.
#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// The GGUF file.
    pub file: PathBuf,
    /// The .safetensors file to write (never the input file).
    pub out: PathBuf,
    /// Output element type.
    #[arg(long, default_value = "f16", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Where to decode [default: the one GGUF_DEQUANT_BACKEND names, else auto: the best GPU
    /// adapter, or the CPU codecs on a machine without one].
    #[arg(long, value_parser = backend::parser(DECODE))]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub select: Select,
    #[command(flatten)]
    pub report: Report,
}

/// `dequant` options.
#[derive(Debug, Args)]
pub struct DequantArgs {
    /// The GGUF file.
    pub file: PathBuf,
    #[command(flatten)]
    pub select: Select,
    /// Output file (never the input file); its extension (.safetensors, .npy, .bin) picks the
    /// format.
    #[arg(long, short, value_name = "PATH")]
    pub out: PathBuf,
    /// Output element type.
    #[arg(long, default_value = "f32", value_parser = parse_dtype)]
    pub dtype: DType,
    /// Where to decode [default: the one GGUF_DEQUANT_BACKEND names, else auto: the best GPU
    /// adapter, or the CPU codecs on a machine without one].
    #[arg(long, value_parser = backend::parser(DECODE))]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub report: Report,
}

/// `bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// A GGUF model (the first shard of a split set): decode its own tensors' blocks instead of
    /// random ones, for the formats it holds (`--types all`: every one of them).
    #[arg(value_name = "MODEL")]
    pub model: Option<PathBuf>,
    /// Merge the JSON reports of earlier runs (several machines, schemas 2 to 5) into one table
    /// (and `--svg` chart) without running anything.
    #[arg(long, value_name = "REPORT.json", num_args = 1.., conflicts_with_all = [
        "model", "types", "dtype", "mib", "backend", "runs", "no_cpu", "wall", "json", "rotate_mib",
        "budget", "kernels", "shapes", "batch", "matmul_batch", "rows", "precision",
        "one_weight", "no_unroll", "no_hw_f16", "variant",
    ])]
    pub compare: Vec<PathBuf>,
    /// Formats (ggml names, comma-separated), or `all` = every format with a GPU shader. A named
    /// format without a shader gets CPU figures only.
    #[arg(long, default_value = "all", value_name = "LIST|all")]
    pub types: String,
    /// Output dtypes of the dequantisation rows: f32, f16, bf16, `both` (f32 and f16), `all`, or
    /// `none` (kernel rows only).
    #[arg(
        long,
        default_value = "both",
        value_name = "f32|f16|bf16|both|all|none"
    )]
    pub dtype: String,
    /// MiB of f32 output per format (fractions allowed, e.g. 0.25): the value count every format
    /// and dtype decodes.
    #[arg(long, default_value_t = 16.0, value_name = "N")]
    pub mib: f64,
    /// MiB of traffic each timed run rotates through (distinct buffer pairs) [default: 1024 on a
    /// discrete GPU, 256 on other adapters].
    #[arg(long, value_name = "N")]
    pub rotate_mib: Option<f64>,
    /// Adapters: the best one, every one wgpu finds (`all`), or the best of one API [default: the
    /// one GGUF_DEQUANT_BACKEND names, else auto].
    #[arg(long, value_parser = backend::parser(ADAPTERS))]
    pub backend: Option<Backend>,
    /// Timed runs per measurement (median reported; at least 5).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(5..))]
    pub runs: u32,
    /// Seconds each GPU measurement may take: past it, one untimed probe (after a first call
    /// thrown away: it compiles) sizes a smaller rotation, then fewer runs (at least 3, or the probe alone where one call takes the whole
    /// budget; each row reports its own count). 0: no budget.
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub budget: f64,
    /// Skip the CPU codecs.
    #[arg(long)]
    pub no_cpu: bool,
    /// Also time the inference kernels (comma-separated names: matvec, matmul, get_rows,
    /// matvec_id; or `all`) on weights of each `--shape`, beside the rooflines and the
    /// dequantiser on the same tensor, with the CPU cost of recording them [default: none].
    #[arg(long, value_name = "LIST|all")]
    pub kernels: Option<String>,
    /// Kernel weight shape KxN: N rows of K values (repeatable, or comma-separated) [default:
    /// 4096x4096, 4096x14336 and 1024x151936].
    #[arg(long = "shape", value_name = "KxN", value_delimiter = ',')]
    pub shapes: Vec<String>,
    /// Columns of the matvec rows, 1 to 8 (comma-separated: one row each).
    #[arg(long, default_value = "1", value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(1..=8))]
    pub batch: Vec<u32>,
    /// Columns of the matmul rows [default: 512; 32 on CPU adapters].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub matmul_batch: Option<u32>,
    /// Rows each get_rows call gathers (random ids).
    #[arg(long, default_value_t = 512, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub rows: u32,
    /// Time with the wall clock around submit-and-wait even where timestamp queries exist.
    #[arg(long)]
    pub wall: bool,
    /// How the matvec rows (and matmul on CPU adapters) sum, for the formats with parts d·q + m:
    /// exact (f32 values), factored (d·Σq·x + m·Σx, as llama.cpp), int8 (x as int8 codes,
    /// `dot4I8Packed`), or mixed16 (reserved: exact); the looser modes hold looser bounds.
    #[arg(
        long,
        default_value = "exact",
        value_name = "exact|factored|int8|mixed16"
    )]
    pub precision: gguf_dequant::gpu::kernels::Precision,
    /// Run the matvec rows of several invocations (GPUs) one chunk per loop step instead of
    /// four with their loads issued together: the same sums, for comparing the two.
    #[arg(long)]
    pub no_unroll: bool,
    /// Convert binary16 (F16 weights, block scales) in the matvec rows with integer operations
    /// even where the engine found the device's own conversion exact (variants without `.hf`):
    /// the same sums, for comparing the two.
    #[arg(long)]
    pub no_hw_f16: bool,
    /// matvec's variant: `classic` (each row its own invocations) or `rows:WxR[sS]` (the rows
    /// mapping for GPUs: W invocations per workgroup, 32 to 256, all working on R rows, 1 to 8,
    /// each chunk of x read once for the R rows, as llama.cpp's mul_mat_vec; each invocation
    /// taking slots of S consecutive 8-value chunks, 1, 2 or 4, R × S at most 8) [default: the
    /// engine's, classic].
    #[arg(long, alias = "matvec-rows", value_name = "classic|rows:WxR[sS]")]
    pub variant: Option<gguf_dequant::gpu::kernels::Mapping>,
    /// Make every call of a kernel row's timed run on one weight copy (as llama.cpp's
    /// test-backend-ops times its cases: the weight then stays in the GPU's caches where it
    /// fits) instead of on distinct copies.
    #[arg(long)]
    pub one_weight: bool,
    /// Write the JSON report to PATH (`-`: stdout, instead of the table; no progress bar).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Draw GB/s per format and adapter, with both rooflines, into an SVG file.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--json` and `--quiet` of the long commands.
#[derive(Debug, Args)]
pub struct Report {
    /// Print one JSON object instead of text (no progress bar).
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `--tensor` and `--glob`: which tensors a command works on.
#[derive(Clone, Debug, Args)]
pub struct Select {
    /// Only this tensor (repeatable); every tensor when neither --tensor nor --glob is given.
    #[arg(long = "tensor", value_name = "NAME")]
    pub tensors: Vec<String>,
    /// Only tensors whose names match these globs (repeatable), e.g. `blk.0.*`.
    #[arg(long = "glob", value_name = "PATTERN", conflicts_with = "tensors")]
    pub globs: Vec<String>,
}

impl Select {
    /// The library's selection: names, globs, or every tensor.
    pub fn selection(self) -> Selection {
        if !self.tensors.is_empty() {
            Selection::Names(self.tensors)
        } else if !self.globs.is_empty() {
            Selection::Glob(self.globs)
        } else {
            Selection::All
        }
    }
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse()
}

fn parse_residency(s: &str) -> Result<Residency, String> {
    if s.eq_ignore_ascii_case("raw") {
        Ok(Residency::Raw)
    } else {
        Ok(Residency::Dequantised(s.parse()?))
    }
}

fn parse_devices(s: &str) -> Result<Devices, String> {
    if s.trim().eq_ignore_ascii_case("all") {
        return Ok(Devices::All);
    }
    s.split(',')
        .map(|d| {
            d.trim()
                .parse()
                .map_err(|_| format!("`{d}` is not an adapter number (expected all or e.g. 0,2)"))
        })
        .collect::<Result<_, _>>()
        .map(Devices::List)
}

fn parse_source(s: &str) -> Result<Source, String> {
    s.parse()
}
