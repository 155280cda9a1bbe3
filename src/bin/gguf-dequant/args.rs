//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use gguf_dequant::gpu;
use gguf_dequant::gpu::loader::{Residency, Source};
use gguf_dequant::DType;

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
    Selftest {
        /// GPU backend.
        #[arg(long, value_enum, default_value_t = GpuBackend::Auto)]
        backend: GpuBackend,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List every GPU adapter wgpu sees, with the limits that matter here.
    Adapters {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show a GGUF file's header, metadata and tensor table.
    Inspect {
        /// The GGUF file.
        file: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Make the whole file (or a selection) GPU-resident, raw or dequantised, and report the speed.
    Load {
        /// The GGUF file.
        file: PathBuf,
        /// Residency: `raw` quantised blocks, or dequantised to f32, f16 or bf16.
        #[arg(long, default_value = "f16", value_parser = parse_residency)]
        dtype: Residency,
        /// GPU backend.
        #[arg(long, value_enum, default_value_t = GpuBackend::Auto)]
        backend: GpuBackend,
        /// Only these tensors (repeatable).
        #[arg(long = "tensor", value_name = "NAME")]
        tensors: Vec<String>,
        /// Only tensors whose names match these globs (repeatable), e.g. `blk.0.*`.
        #[arg(long = "glob", value_name = "PATTERN", conflicts_with = "tensors")]
        globs: Vec<String>,
        /// Read the file through its memory map (`mmap`) or with plain reads (`read`).
        #[arg(long, default_value = "mmap", value_parser = parse_source)]
        source: Source,
        /// Host staging budget in MiB.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
        staging_mib: u64,
        #[command(flatten)]
        report: Report,
    },
    /// Dequantise every tensor on the GPU and compare it bit-for-bit with the CPU codecs.
    Verify {
        /// The GGUF file.
        file: PathBuf,
        /// GPU backend.
        #[arg(long, value_enum, default_value_t = GpuBackend::Auto)]
        backend: GpuBackend,
        /// Output element type compared.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        #[command(flatten)]
        report: Report,
    },
    /// Dequantise the whole model into a .safetensors file, GGUF metadata in `__metadata__`.
    Convert {
        /// The GGUF file.
        file: PathBuf,
        /// The .safetensors file to write.
        out: PathBuf,
        /// Output element type.
        #[arg(long, default_value = "f16", value_parser = parse_dtype)]
        dtype: DType,
        /// Where to decode.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
        #[command(flatten)]
        report: Report,
    },
    /// Dequantise tensors to .safetensors (any number), .npy or .bin (one tensor).
    Dequant {
        /// The GGUF file.
        file: PathBuf,
        /// A tensor to dequantise (repeatable); every tensor when absent.
        #[arg(long = "tensor", value_name = "NAME")]
        tensors: Vec<String>,
        /// Output file; its extension (.safetensors, .npy, .bin) picks the format.
        #[arg(long, short, value_name = "PATH")]
        out: PathBuf,
        /// Output element type.
        #[arg(long, default_value = "f32", value_parser = parse_dtype)]
        dtype: DType,
        /// Where to decode.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Benchmark GPU dequantisation per adapter, format and dtype against a buffer copy of the
    /// same traffic and the CPU codecs.
    Bench(BenchArgs),
}

/// `bench` options.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Formats (ggml names, comma-separated), or `all` = every format with a GPU shader. A named
    /// format without a shader gets CPU figures only.
    #[arg(long, default_value = "all", value_name = "LIST|all")]
    pub types: String,
    /// Output dtypes: f32, f16, bf16, `both` (f32 and f16) or `all`.
    #[arg(long, default_value = "both", value_name = "f32|f16|bf16|both|all")]
    pub dtype: String,
    /// MiB of f32 output per format (fractions allowed, e.g. 0.25): the value count every format
    /// and dtype decodes.
    #[arg(long, default_value_t = 16.0, value_name = "N")]
    pub mib: f64,
    /// Adapters: the best one (`auto`), every one wgpu finds (`all`), or the best of one backend.
    #[arg(long, value_enum, default_value_t = BenchBackend::Auto)]
    pub backend: BenchBackend,
    /// Timed runs per measurement (median reported; at least 5).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(5..))]
    pub runs: u32,
    /// Skip the CPU codecs.
    #[arg(long)]
    pub no_cpu: bool,
    /// Time with the wall clock around submit-and-wait even where timestamp queries exist.
    #[arg(long)]
    pub wall: bool,
    /// Write the JSON report to PATH (`-`: stdout, instead of the table).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Draw GB/s per format and adapter, with the copy bandwidth, into an SVG file.
    #[arg(long, value_name = "PATH")]
    pub svg: Option<PathBuf>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Adapters `bench` runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BenchBackend {
    /// The best GPU adapter, or the one GGUF_DEQUANT_BACKEND names.
    Auto,
    /// Every compute adapter of every backend.
    All,
    /// Vulkan (lavapipe counts).
    Vulkan,
    /// OpenGL / GLES through EGL (llvmpipe counts).
    Gl,
    /// Metal.
    Metal,
    /// Direct3D 12.
    Dx12,
}

impl BenchBackend {
    /// The library backend, and whether every adapter of it is wanted.
    pub fn gpu(self) -> (gpu::Backend, bool) {
        match self {
            BenchBackend::Auto => (gpu::Backend::Auto, false),
            BenchBackend::All => (gpu::Backend::Auto, true),
            BenchBackend::Vulkan => (gpu::Backend::Vulkan, false),
            BenchBackend::Gl => (gpu::Backend::Gl, false),
            BenchBackend::Metal => (gpu::Backend::Metal, false),
            BenchBackend::Dx12 => (gpu::Backend::Dx12, false),
        }
    }
}

/// `--json` and `--quiet` for long commands.
#[derive(Debug, Args)]
pub struct Report {
    /// Print one JSON object instead of text (no progress bar).
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Decoding backends: a GPU API, or the CPU codecs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The best GPU adapter (or the one GGUF_DEQUANT_BACKEND names), else the CPU codecs.
    Auto,
    /// Vulkan (lavapipe counts).
    Vulkan,
    /// OpenGL / GLES through EGL (llvmpipe counts).
    Gl,
    /// Metal.
    Metal,
    /// Direct3D 12.
    Dx12,
    /// The CPU reference codecs, on all cores.
    Cpu,
}

/// GPU backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum GpuBackend {
    /// The best GPU adapter, or the one GGUF_DEQUANT_BACKEND names.
    Auto,
    /// Vulkan (lavapipe counts).
    Vulkan,
    /// OpenGL / GLES through EGL (llvmpipe counts).
    Gl,
    /// Metal.
    Metal,
    /// Direct3D 12.
    Dx12,
}

impl Backend {
    /// The GPU backend, or `None` for the CPU.
    pub fn gpu(self) -> Option<gpu::Backend> {
        match self {
            Backend::Auto => Some(gpu::Backend::Auto),
            Backend::Vulkan => Some(GpuBackend::Vulkan.gpu()),
            Backend::Gl => Some(GpuBackend::Gl.gpu()),
            Backend::Metal => Some(GpuBackend::Metal.gpu()),
            Backend::Dx12 => Some(GpuBackend::Dx12.gpu()),
            Backend::Cpu => None,
        }
    }
}

impl GpuBackend {
    /// The library's backend.
    pub fn gpu(self) -> gpu::Backend {
        match self {
            GpuBackend::Auto => gpu::Backend::Auto,
            GpuBackend::Vulkan => gpu::Backend::Vulkan,
            GpuBackend::Gl => gpu::Backend::Gl,
            GpuBackend::Metal => gpu::Backend::Metal,
            GpuBackend::Dx12 => gpu::Backend::Dx12,
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

fn parse_source(s: &str) -> Result<Source, String> {
    s.parse()
}
