//! Command-line arguments.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use gguf_dequant::DType;

/// Inspect, verify and dequantise GGUF model files.
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
    /// Show a GGUF file's header, metadata and tensor table.
    Inspect {
        /// The GGUF file.
        file: PathBuf,
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
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
        /// Where to decode: a GPU backend, or the CPU codecs. `auto` takes the best GPU adapter
        /// (or the one GGUF_DEQUANT_BACKEND names) and falls back to the CPU when there is none.
        #[arg(long, value_enum, default_value_t = Backend::Auto)]
        backend: Backend,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
}

/// Decoding backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The best GPU adapter, else the CPU codecs.
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

impl Backend {
    /// The GPU backend, or `None` for the CPU.
    pub fn gpu(self) -> Option<gguf_dequant::gpu::Backend> {
        use gguf_dequant::gpu::Backend as B;
        match self {
            Backend::Auto => Some(B::Auto),
            Backend::Vulkan => Some(B::Vulkan),
            Backend::Gl => Some(B::Gl),
            Backend::Metal => Some(B::Metal),
            Backend::Dx12 => Some(B::Dx12),
            Backend::Cpu => None,
        }
    }
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    s.parse()
}
