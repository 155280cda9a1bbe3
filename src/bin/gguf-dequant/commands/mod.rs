//! One module per subcommand: take the parsed arguments, call the library, print through
//! [`crate::render`].

mod adapters;
mod apply;
mod bench;
mod dequant;
mod inspect;
mod load;
mod selftest;
mod tune;
mod verify;
mod verify_kernels;

use anyhow::Result;
use gguf_dequant::gguf::TensorInfo;
use gguf_dequant::gpu::kernels::{Mapping, MatVecOptions, Precision};
use gguf_dequant::gpu::{EngineOptions, GpuEngine};
use gguf_dequant::GgufFile;
use gguf_dequant::Selection;

use crate::args::Command;

/// Runs `command`.
pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Selftest(args) => selftest::run(&args),
        Command::Adapters(args) => adapters::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Load(args) => load::run(args),
        Command::Verify(args) => verify::run(&args),
        Command::Convert(args) => dequant::convert(args),
        Command::Dequant(args) => dequant::dequant(args),
        Command::Apply(args) => apply::run(&args),
        Command::Bench(args) => bench::run(&args),
        Command::Tune(args) => tune::run(&args),
    }
}

/// Engine options with matvec's variant forced to `variant` (`--variant`), else the defaults,
/// summing in `precision` (`--precision`).
fn variant_options(variant: Option<Mapping>, precision: Precision) -> EngineOptions {
    EngineOptions {
        precision,
        matvec: MatVecOptions {
            mapping: variant.unwrap_or(Mapping::Classic),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
}

/// The matvec variant `engine` runs by default, as `--variant` spells it.
fn variant_name(engine: &GpuEngine) -> String {
    engine.matvec_policy().mapping.to_string()
}

/// The tensors of `file` that `selection` picks, in file order: the one place where the command
/// line turns a selection into tensors (`load`, `dequant`, `convert`).
fn selected<'f>(file: &'f GgufFile, selection: &Selection) -> Result<Vec<&'f TensorInfo>> {
    let all = file.tensors();
    Ok(selection
        .resolve(file)?
        .into_iter()
        .map(|i| &all[i])
        .collect())
}
