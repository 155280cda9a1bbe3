//! The integer matvec path (`EngineOptions::matvec_integer_dot`) on every adapter: every format
//! that has one, within the bound of `ops::mul_mat_int_dot` (random x), and within the f32
//! rounding term alone where x's codes are exact (integers with ±127 in every block: any wrong
//! code or scale would be far outside it); matvec of 1, 2 and 8 columns, matmul on CPU adapters
//! (its 16-column matvecs), one invocation per row, 64, and the adapter's smallest subgroup (the
//! shuffle reduction where it has subgroups); NaN in a column;
//! the formats and shapes without the path keep the f32 contract; two calls in one pass share the
//! recorder's scratch buffer, and warm steps create nothing.

use gguf_dequant::gpu::kernels::{Job, MulMatJob, Operand, INT_DOT_FORMATS};
use gguf_dequant::gpu::loader::ResidentTensor;
use gguf_dequant::gpu::{buffers, EngineOptions, GpuEngine};
use gguf_dequant::{ops, Format};

use crate::gpu_test;
use crate::kernels::{inputs, weights, within};
use crate::support::gpu::{label, read_buffer};

/// x of `batch × k` values that the quantiser keeps exactly: integers in -127..=127, each block
/// of 32 holding ±127 (so its scale is 1).
fn exact_inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut v: Vec<f32> = inputs(n, seed)
        .iter()
        .map(|x| (x * 127.0).round())
        .collect();
    for (i, b) in v.chunks_mut(32).enumerate() {
        b[i % 32] = if i % 2 == 0 { 127.0 } else { -127.0 };
    }
    v
}

fn integer_path(engine: &GpuEngine) {
    let backend = label(engine);
    assert!(engine.matvec_integer_dot());
    let t = engine.matvec_threads();
    let mut report = Vec::new();
    for (fi, &(f, _)) in INT_DOT_FORMATS.iter().enumerate() {
        let b = f.block_elems();
        let mut worst = 0f64;
        for (si, (k, n)) in [(b, 37), (3 * b, 70), (2 * b.max(128), 5)]
            .into_iter()
            .enumerate()
        {
            let seed = (fi * 10 + si) as u64;
            let raw = weights(f, k * n, seed);
            let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
            for batch in [1, 2, 8, 17] {
                let what = format!("{backend} T={t} {f} K={k} N={n} batch {batch}");
                let x = inputs(batch * k, seed + 7);
                let want = ops::mul_mat_int_dot(f, &raw, k, &x, batch).unwrap();
                let got = if batch <= 8 {
                    engine.matvec(&w, &x, batch).unwrap()
                } else {
                    engine.matmul(&w, &x, batch).unwrap()
                };
                worst = worst.max(within(&what, &want, &got));
                // Exact codes: only the rounding of the sums remains.
                let x = exact_inputs(batch * k, seed + 8);
                let mut want = ops::mul_mat_int_dot(f, &raw, k, &x, batch).unwrap();
                want.slack.clear();
                let got = if batch <= 8 {
                    engine.matvec(&w, &x, batch).unwrap()
                } else {
                    engine.matmul(&w, &x, batch).unwrap()
                };
                within(&format!("{what}, exact codes"), &want, &got);
            }
        }
        report.push(format!("{f} {worst:.2e}"));
    }
    // A NaN in one column: that column's sums are NaN, the other's are not.
    let f = Format::Q4_K;
    let (k, n) = (256, 9);
    let raw = weights(f, k * n, 3);
    let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
    let mut x = inputs(2 * k, 4);
    x[k + 100] = f32::NAN;
    let got = engine.matvec(&w, &x, 2).unwrap();
    assert!(got[..n].iter().all(|v| v.is_finite()), "{backend}: {got:?}");
    assert!(got[n..].iter().all(|v| v.is_nan()), "{backend}: {got:?}");
    // Formats and shapes without the path: the f32 contract.
    for (f, k) in [
        (Format::IQ2_XXS, 256),
        (Format::F16, 40),
        (Format::Q8_0, 32),
    ] {
        let raw = weights(f, k * 11, 5);
        let w = ResidentTensor::upload(engine, "w", f, &[k as u64, 11], &raw).unwrap();
        let x = inputs(3 * k, 6);
        let want = ops::mul_mat(f, &raw, k, &x, 3).unwrap();
        let got = engine.matvec(&w, &x, 3).unwrap();
        if f == Format::Q8_0 {
            // Q8_0 has the path: its bound, not the f32 one.
            within(
                &format!("{backend} {f}"),
                &ops::mul_mat_int_dot(f, &raw, k, &x, 3).unwrap(),
                &got,
            );
        } else {
            within(&format!("{backend} {f} (f32 path)"), &want, &got);
        }
    }
    eprintln!(
        "[int_dot] {backend} (T = {t}): largest fraction of the bound: {}",
        report.join(", ")
    );
}
gpu_test!(
    kernels_integer_dot,
    integer_path,
    options = EngineOptions {
        matvec_integer_dot: true,
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_integer_dot_64_threads,
    integer_path,
    options = EngineOptions {
        matvec_integer_dot: true,
        matvec_threads_per_row: Some(64),
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_integer_dot_subgroup_reduction,
    integer_path,
    options_for = |adapter: &wgpu::Adapter| EngineOptions {
        matvec_integer_dot: true,
        matvec_threads_per_row: Some(adapter.get_info().subgroup_min_size.clamp(2, 64)),
        ..EngineOptions::default()
    }
);

/// Two matvecs of different widths in one pass share the recorder's scratch buffer (the second
/// quantiser waits for the first matvec); a warm step creates no wgpu object.
fn shared_scratch(engine: &GpuEngine) {
    let backend = label(engine);
    let (k, n) = (512usize, 48usize);
    let a_raw = weights(Format::Q4_K, k * n, 21);
    let b_raw = weights(Format::Q8_0, k * n, 22);
    let up =
        |f, raw: &[u8]| ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], raw).unwrap();
    let (wa, wb) = (up(Format::Q4_K, &a_raw), up(Format::Q8_0, &b_raw));
    let xa_host = inputs(3 * k, 23);
    let xb_host = inputs(k, 24);
    let dev = engine.device();
    let xa = buffers::upload(dev, "xa", bytemuck::cast_slice(&xa_host)).unwrap();
    let xb = buffers::upload(dev, "xb", bytemuck::cast_slice(&xb_host)).unwrap();
    let out = |cols: usize| {
        dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("y"),
            size: (cols * n * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    };
    let (ya, yb) = (out(3), out(1));
    let jobs = [
        Job::MatVec(MulMatJob {
            weight: &wa,
            x: Operand::whole(&xa),
            y: Operand::whole(&ya),
            batch: 3,
        }),
        Job::MatVec(MulMatJob {
            weight: &wb,
            x: Operand::whole(&xb),
            y: Operand::whole(&yb),
            batch: 1,
        }),
    ];
    let mut recorder = engine.recorder();
    for step in 0..3 {
        let before = recorder.stats();
        let mut encoder = dev.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            for job in &jobs {
                recorder.job(&mut pass, job).unwrap();
            }
        }
        recorder.finish();
        engine.queue().submit([encoder.finish()]);
        let made = recorder.stats().since(&before);
        // Each matvec is a quantiser and a product.
        assert_eq!(made.dispatches, 4, "{backend}: {made:?}");
        if step > 0 {
            assert_eq!(made.objects_created(), 0, "{backend} step {step}: {made:?}");
        }
        let read = |y: &wgpu::Buffer, cols: usize| -> Vec<f32> {
            bytemuck::pod_collect_to_vec(&read_buffer(
                dev,
                engine.queue(),
                y,
                (cols * n * 4) as u64,
            ))
        };
        let want = ops::mul_mat_int_dot(Format::Q4_K, &a_raw, k, &xa_host, 3).unwrap();
        within(&format!("{backend} Q4_K step {step}"), &want, &read(&ya, 3));
        let want = ops::mul_mat_int_dot(Format::Q8_0, &b_raw, k, &xb_host, 1).unwrap();
        within(&format!("{backend} Q8_0 step {step}"), &want, &read(&yb, 1));
    }
}
gpu_test!(
    kernels_integer_dot_shared_scratch,
    shared_scratch,
    options = EngineOptions {
        matvec_integer_dot: true,
        ..EngineOptions::default()
    }
);
