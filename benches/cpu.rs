//! CPU decode throughput per format, in GB/s of f32 output, on one thread and on all threads.
//!
//! `cargo bench --bench cpu [FILTER]`; each format decodes ~16 MiB of f32 from random blocks whose
//! scale fields are finite and normal (`gguf_dequant::formats::sample::normal_blocks`).

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gguf_dequant::{cpu, Format};

use gguf_dequant::formats::sample::normal_blocks;

/// Values decoded per iteration (16 MiB of f32).
const N_VALUES: usize = 4 << 20;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cpu_dequant");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1));
    for &f in Format::ALL {
        let src = normal_blocks(f, N_VALUES / f.block_elems(), 1 + f.id() as u64);
        let mut dst = vec![0.0f32; N_VALUES];
        g.throughput(Throughput::Bytes((N_VALUES * 4) as u64));
        g.bench_function(BenchmarkId::new(f.name(), "1t"), |b| {
            b.iter(|| cpu::dequant_into(f, &src, &mut dst).expect("sizes"))
        });
        g.bench_function(BenchmarkId::new(f.name(), "all"), |b| {
            b.iter(|| cpu::dequant_into_with(f, &src, &mut dst, None).expect("sizes"))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
