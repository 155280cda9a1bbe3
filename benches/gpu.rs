//! GPU benchmarks (criterion), on the best adapter (`GGUF_DEQUANT_BACKEND=vulkan|gl|…` picks one):
//!
//! * `gpu_dequant_f16/<TYPE>`: one GPU-resident dequantisation of 1 Mi values (2 MiB of f16) per
//!   format with a shader, timed by GPU timestamp queries where the adapter has them
//!   (`iter_custom`), else by the wall clock around submit-and-wait. Throughput counts quantised
//!   bytes read + f16 bytes written, as `gguf-dequant bench` does.
//! * `gpu_copy/<bytes>`: `copy_buffer_to_buffer` of the Q4_0 case's traffic, the roofline.
//! * `load_f16/<model>/{mmap,read}`: a whole model made GPU-resident as f16 by the loading service
//!   (`WeightLoader`), streamed from the memory map or with plain `read` calls. Throughput
//!   counts the file's tensor bytes. Models come from `$GGUF_DEQUANT_MODELS` or
//!   `~/.cache/gguf-dequant/models` (what `scripts/test.sh` downloads); missing ones are skipped
//!   with a note.
//!
//! `cargo bench --bench gpu [FILTER]`; a few minutes on lavapipe.

use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gguf_dequant::bench::{BenchAdapter, CopyCase, GpuCase};
use gguf_dequant::gpu::loader::{LoadOptions, Residency, Source, WeightLoader};
use gguf_dequant::gpu::Backend;
use gguf_dequant::Selection;
use gguf_dequant::{DType, Format, GgufFile};

/// Values per kernel case: 1 Mi (2 MiB of f16).
const N_VALUES: usize = 1 << 20;

fn adapter() -> Option<BenchAdapter> {
    let opened = gguf_dequant::gpu::compute_adapters(Backend::Auto)
        .and_then(|a| BenchAdapter::open(&a[0], false, Default::default()));
    match opened {
        Ok(a) => Some(a),
        Err(e) => {
            eprintln!("benches/gpu: no GPU adapter ({e}); nothing to measure");
            None
        }
    }
}

fn kernels(c: &mut Criterion) {
    let Some(adapter) = adapter() else { return };
    let info = adapter.engine.adapter_info();
    eprintln!(
        "benches/gpu: {} ({:?}), timing: {}",
        info.name,
        info.backend,
        adapter.timer.timing()
    );
    let mut g = c.benchmark_group("gpu_dequant_f16");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    for &format in gguf_dequant::formats::WITH_SHADER {
        let src = gguf_dequant::formats::sample::normal_blocks(
            format,
            N_VALUES / format.block_elems(),
            1,
        );
        let case = GpuCase::new(&adapter, format, DType::F16, &src).expect("upload");
        g.throughput(Throughput::Bytes(case.traffic()));
        g.bench_function(BenchmarkId::from_parameter(format.name()), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| Duration::from_secs_f64(case.run().expect("GPU run").0))
                    .sum()
            })
        });
    }
    g.finish();

    let mut g = c.benchmark_group("gpu_copy");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    let q4 = Format::Q4_0;
    let traffic = (N_VALUES / q4.block_elems() * q4.block_bytes() + N_VALUES * 2) as u64;
    let copy = CopyCase::new(&adapter, traffic.div_ceil(2), &[]).expect("buffers");
    g.throughput(Throughput::Bytes(2 * copy.bytes()));
    g.bench_function(BenchmarkId::from_parameter(copy.bytes()), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| Duration::from_secs_f64(copy.run().expect("GPU copy").0))
                .sum()
        })
    });
    g.finish();
}

fn model_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GGUF_DEQUANT_MODELS") {
        return d.into();
    }
    let cache = std::env::var_os("GGUF_DEQUANT_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/gguf-dequant")))
        .unwrap_or_default();
    cache.join("models")
}

fn loads(c: &mut Criterion) {
    let loader = match WeightLoader::new(Backend::Auto) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("benches/gpu: no adapter for the load benchmark: {e}");
            return;
        }
    };
    let mut g = c.benchmark_group("load_f16");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(10));
    for model in [
        "gemma-3-270m-q4_k_m.gguf",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
    ] {
        let path = model_dir().join(model);
        if !path.is_file() {
            eprintln!(
                "benches/gpu: {} not found (scripts/test.sh downloads it); skipping its load benchmark",
                path.display()
            );
            continue;
        }
        let file = GgufFile::open(&path).expect("valid GGUF");
        let bytes: u64 = file.tensors().iter().map(|t| t.n_bytes).sum();
        g.throughput(Throughput::Bytes(bytes));
        for source in [Source::Mmap, Source::DirectRead] {
            let options = LoadOptions {
                source,
                ..LoadOptions::default()
            };
            let id = BenchmarkId::new(model, source.name());
            g.bench_function(id, |b| {
                b.iter(|| {
                    loader
                        .load_with(
                            &file,
                            &Selection::All,
                            Residency::Dequantised(DType::F16),
                            &options,
                        )
                        .expect("load")
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, kernels, loads);
criterion_main!(benches);
