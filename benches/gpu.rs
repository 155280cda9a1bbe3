//! GPU benchmarks (criterion), on the best adapter (`GGUF_DEQUANT_BACKEND=vulkan|gl|…` picks one):
//!
//! * `gpu_dequant_f16/<TYPE>`: one GPU-resident dequantisation of 1 Mi values (2 MiB of f16) per
//!   format with a shader, timed by GPU timestamp queries where the adapter has them
//!   (`iter_custom`), else by the wall clock around submit-and-wait. Throughput counts quantised
//!   bytes read + f16 bytes written, as `gguf-dequant bench` does.
//! * `gpu_copy/<bytes>`: `copy_buffer_to_buffer` of the Q4_0 case's traffic, the roofline.
//! * `load_f16/<model>/{mmap,read}`: a whole model loaded to GPU-resident f16: every tensor's
//!   raw blocks uploaded and dequantised on the GPU (formats without a shader decoded by the CPU
//!   codecs and uploaded as f16), from the memory map or from plain `read` calls. Throughput
//!   counts the file's tensor bytes. Models come from `$GGUF_DEQUANT_MODELS` or
//!   `~/.cache/gguf-dequant/models` (what `scripts/test.sh` downloads); missing ones are skipped
//!   with a note.
//!
//! `cargo bench --bench gpu [FILTER]`; a few minutes on lavapipe.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gguf_dequant::bench::{self, BenchAdapter, CopyCase, GpuCase};
use gguf_dequant::gpu::{upload, Backend, DequantJob, GpuEngine};
use gguf_dequant::{cpu, DType, Format, GgufFile};

/// Values per kernel case: 1 Mi (2 MiB of f16).
const N_VALUES: usize = 1 << 20;

fn adapter() -> Option<BenchAdapter> {
    match BenchAdapter::open(Backend::Auto, false, false) {
        Ok(mut a) => a.pop(),
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
    for format in bench::gpu_formats() {
        let src = bench::random_blocks(format, N_VALUES / format.block_elems(), 1);
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

/// Where the raw blocks of a load come from.
#[derive(Clone, Copy, Debug)]
enum Source {
    /// Slices of the file's memory map.
    Mmap,
    /// `read` calls into a reused heap buffer.
    Read,
}

/// Loads every tensor of `file` to GPU-resident f16 buffers and waits for the GPU; returns them.
fn load_f16(engine: &GpuEngine, file: &GgufFile, source: Source) -> Vec<wgpu::Buffer> {
    let device = engine.device();
    let queue = engine.queue();
    let mut reader = std::fs::File::open(file.path()).expect("open");
    let mut heap = Vec::new();
    let mut half = Vec::new();
    let mut out = Vec::with_capacity(file.tensors().len());
    let mut encoder = device.create_command_encoder(&Default::default());
    let mut pending = 0u64;
    for t in file.tensors() {
        let raw: &[u8] = match source {
            Source::Mmap => file.tensor_data(t),
            Source::Read => {
                heap.resize(t.n_bytes as usize, 0);
                reader
                    .seek(SeekFrom::Start(file.data_offset() + t.offset))
                    .expect("seek");
                reader.read_exact(&mut heap).expect("read");
                &heap
            }
        };
        let n_values = t.n_elements;
        if GpuEngine::supports(t.format) {
            let n_blocks = n_values / t.format.block_elems() as u64;
            let (src_len, dst_len) = upload::padded(t.format, n_blocks, 2);
            let src = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("raw"),
                size: src_len.max(4),
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: true,
            });
            {
                let mut view = src.get_mapped_range_mut(..).expect("map");
                view.slice(..raw.len()).copy_from_slice(raw);
                view.slice(raw.len()..).fill(0);
            }
            src.unmap();
            let dst = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("f16"),
                size: dst_len.max(16),
                usage: wgpu::BufferUsages::STORAGE,
                mapped_at_creation: false,
            });
            engine
                .record(
                    &mut encoder,
                    &DequantJob {
                        format: t.format,
                        dtype: DType::F16,
                        src: &src,
                        src_offset: 0,
                        n_blocks,
                        dst: &dst,
                        dst_offset: 0,
                    },
                )
                .expect("record");
            out.push(dst);
            pending += t.n_bytes;
        } else {
            half.resize(n_values as usize * 2, 0);
            cpu::dequant_to_bytes(t.format, raw, DType::F16, &mut half).expect("CPU decode");
            let size = (half.len() as u64).div_ceil(4).max(1) * 4;
            half.resize(size as usize, 0);
            let dst = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("f16 (CPU)"),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            queue.write_buffer(&dst, 0, &half);
            out.push(dst);
        }
        // Submit in batches of ~64 MiB of raw blocks so GPU work overlaps the next reads.
        if pending >= 64 << 20 {
            let full = std::mem::replace(
                &mut encoder,
                device.create_command_encoder(&Default::default()),
            );
            queue.submit([full.finish()]);
            pending = 0;
        }
    }
    let index = queue.submit([encoder.finish()]);
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(Duration::from_secs(600)),
        })
        .expect("GPU finished");
    out
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
    let Some(adapter) = adapter() else { return };
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
        for source in [Source::Mmap, Source::Read] {
            let id = BenchmarkId::new(model, format!("{source:?}").to_lowercase());
            g.bench_function(id, |b| b.iter(|| load_f16(&adapter.engine, &file, source)));
        }
    }
    g.finish();
}

criterion_group!(benches, kernels, loads);
criterion_main!(benches);
