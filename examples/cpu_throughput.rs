//! CPU decode throughput of one format, for `scripts/bench_vs_ggml.py`.
//!
//! ```text
//! cpu_throughput gen FORMAT N_VALUES SEED FILE   # write random blocks (scales finite)
//! cpu_throughput run FORMAT FILE [OUT]           # time 1 thread and all threads; OUT = f32 LE output
//! ```
//! `run` prints one line: `FORMAT values gbps_1t gbps_all f16_1t bf16_1t f16_all bf16_all`: GB/s
//! of f32 output on one thread and on all threads, then f16 and bf16 output (one thread, all
//! threads) in values per second as a fraction of the f32 figure of the same thread count; each
//! the best of several runs.

use std::time::{Duration, Instant};

use gguf_dequant::{cpu, DType, Format};

/// Best seconds per call of `f`, over at least `MIN_REPS` calls and `MIN_TIME`.
fn best_time(mut f: impl FnMut()) -> f64 {
    const MIN_REPS: usize = 5;
    const MIN_TIME: Duration = Duration::from_millis(500);
    f();
    let start = Instant::now();
    let mut best = f64::INFINITY;
    let mut reps = 0;
    while reps < MIN_REPS || start.elapsed() < MIN_TIME {
        let t = Instant::now();
        f();
        best = best.min(t.elapsed().as_secs_f64());
        reps += 1;
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: cpu_throughput gen FORMAT N_VALUES SEED FILE | run FORMAT FILE [OUT]";
    let format = |s: &String| Format::from_name(s).ok_or(format!("unknown format {s}"));
    match args.first().map(String::as_str) {
        Some("gen") if args.len() == 5 => {
            let f = format(&args[1])?;
            let n: usize = args[2].parse()?;
            let seed: u64 = args[3].parse()?;
            std::fs::write(
                &args[4],
                gguf_dequant::formats::sample::normal_blocks(f, n / f.block_elems(), seed),
            )?;
        }
        Some("run") if args.len() == 3 || args.len() == 4 => {
            let f = format(&args[1])?;
            let src = std::fs::read(&args[2])?;
            let n = f
                .values_for(src.len())
                .ok_or("not a whole number of blocks")?;
            let mut dst = vec![0.0f32; n];
            let gb = (n * 4) as f64 / 1e9;
            let one = best_time(|| cpu::dequant_into(f, &src, &mut dst).expect("sizes"));
            let all = best_time(|| cpu::dequant_into_with(f, &src, &mut dst, None).expect("sizes"));
            let mut half = vec![0u8; n * 2];
            let mut half_time = |dtype: DType, threads: Option<usize>| {
                best_time(|| {
                    cpu::dequant_to_bytes_with(f, &src, dtype, &mut half, threads).expect("sizes")
                })
            };
            let (f16_1, bf16_1) = (
                half_time(DType::F16, Some(1)),
                half_time(DType::BF16, Some(1)),
            );
            let (f16_all, bf16_all) = (half_time(DType::F16, None), half_time(DType::BF16, None));
            if let Some(out) = args.get(3) {
                cpu::dequant_into(f, &src, &mut dst)?;
                let bytes: Vec<u8> = dst.iter().flat_map(|v| v.to_le_bytes()).collect();
                std::fs::write(out, bytes)?;
            }
            println!(
                "{} {} {:.3} {:.3} {:.3} {:.3} {:.3} {:.3}",
                f.name(),
                n,
                gb / one,
                gb / all,
                one / f16_1,
                one / bf16_1,
                all / f16_all,
                all / bf16_all
            );
        }
        _ => return Err(usage.into()),
    }
    Ok(())
}
