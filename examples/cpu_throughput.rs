//! CPU decode throughput of one format, for `scripts/bench_vs_ggml.py`.
//!
//! ```text
//! cpu_throughput gen FORMAT N_VALUES SEED FILE   # write random blocks (scales finite)
//! cpu_throughput run FORMAT FILE [OUT]           # time 1 thread and all threads; OUT = f32 LE output
//! cpu_throughput align FORMAT FILE [DTYPE]       # 1 thread, output at each 16-byte offset
//! ```
//! `run` prints one line: `FORMAT values gbps_1t gbps_all f16_1t bf16_1t f16_all bf16_all`: GB/s
//! of f32 output on one thread and on all threads, then f16 and bf16 output (one thread, all
//! threads) in values per second as a fraction of the f32 figure of the same thread count; each
//! the best of several calls over rounds that time the six variants in turn.
//!
//! `align` prints `FORMAT gbps@0 gbps@16 gbps@32 gbps@48`: one thread's output (DTYPE: f32, the
//! default, f16 or bf16) with the destination that many bytes past a 64-byte boundary (glibc
//! places large buffers at 16), in GB/s of f32 output (values/s × 4, so the dtypes compare),
//! timed in turn the same way, to show what stores that cross cache lines cost on this CPU.

use std::time::{Duration, Instant};

use gguf_dequant::{cpu, DType, Format};

/// Rounds of [`best_times`]: the variants are timed in turn, each round, so that all of them see
/// the same load on a shared machine.
const ROUNDS: usize = 3;

/// Best seconds per call of each of `fs`: in each of [`ROUNDS`] rounds every variant runs for at
/// least `MIN_REPS` calls and `MIN_TIME`, in turn; the best call over all rounds is kept.
fn best_times(fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    const MIN_REPS: usize = 5;
    const MIN_TIME: Duration = Duration::from_millis(200);
    let mut best = vec![f64::INFINITY; fs.len()];
    for _ in 0..ROUNDS {
        for (f, best) in fs.iter_mut().zip(best.iter_mut()) {
            f();
            let start = Instant::now();
            let mut reps = 0;
            while reps < MIN_REPS || start.elapsed() < MIN_TIME {
                let t = Instant::now();
                f();
                *best = best.min(t.elapsed().as_secs_f64());
                reps += 1;
            }
        }
    }
    best
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: cpu_throughput gen FORMAT N_VALUES SEED FILE | run FORMAT FILE [OUT] \
                 | align FORMAT FILE [f32|f16|bf16]";
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
            let gb = (n * 4) as f64 / 1e9;
            // Each variant its own output, so that the closures can be timed in turn.
            let src = &src[..];
            let f32_rows = |threads| {
                let mut dst = vec![0.0f32; n];
                move || cpu::dequant_into_with(f, src, &mut dst, threads).expect("sizes")
            };
            let half_rows = |dtype, threads| {
                let mut half = vec![0u8; n * 2];
                move || {
                    cpu::dequant_to_bytes_with(f, src, dtype, &mut half, threads).expect("sizes")
                }
            };
            let t = best_times(&mut [
                &mut f32_rows(Some(1)),
                &mut f32_rows(None),
                &mut half_rows(DType::F16, Some(1)),
                &mut half_rows(DType::BF16, Some(1)),
                &mut half_rows(DType::F16, None),
                &mut half_rows(DType::BF16, None),
            ]);
            let (one, all, f16_1, bf16_1, f16_all, bf16_all) = (t[0], t[1], t[2], t[3], t[4], t[5]);
            if let Some(out) = args.get(3) {
                let mut dst = vec![0.0f32; n];
                cpu::dequant_into(f, src, &mut dst)?;
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
        Some("align") if args.len() == 3 || args.len() == 4 => {
            let f = format(&args[1])?;
            let src = std::fs::read(&args[2])?;
            let dtype = match args.get(3).map(String::as_str) {
                None | Some("f32") => DType::F32,
                Some("f16") => DType::F16,
                Some("bf16") => DType::BF16,
                Some(d) => return Err(format!("unknown dtype {d}: f32, f16 or bf16").into()),
            };
            let n = f
                .values_for(src.len())
                .ok_or("not a whole number of blocks")?;
            let src = &src[..];
            const LINE: usize = 64;
            let bytes = n * dtype.size();
            let at_offset = |offset: usize| {
                let mut buf = vec![0.0f32; (bytes + LINE) / 4];
                let skip = (0..LINE)
                    .find(|i| (buf.as_ptr() as usize + i) % LINE == offset)
                    .expect("a line holds every offset");
                move || {
                    let out =
                        &mut bytemuck::cast_slice_mut::<f32, u8>(&mut buf)[skip..skip + bytes];
                    cpu::dequant_to_bytes_with(f, src, dtype, out, Some(1)).expect("sizes")
                }
            };
            let t = best_times(&mut [
                &mut at_offset(0),
                &mut at_offset(16),
                &mut at_offset(32),
                &mut at_offset(48),
            ]);
            let gb = (n * 4) as f64 / 1e9;
            let rates: Vec<String> = t.iter().map(|t| format!("{:.3}", gb / t)).collect();
            println!("{} {}", f.name(), rates.join(" "));
        }
        _ => return Err(usage.into()),
    }
    Ok(())
}
