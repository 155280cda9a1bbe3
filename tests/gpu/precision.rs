//! The precision modes (`EngineOptions::precision`) on every adapter, for every format with
//! parts d·q + m: `int8` (the integer path) and `factored` (scales out of the sums) within the
//! bounds of `ops::mul_mat_int_dot` and `ops::mul_mat_factored` (random x; int8 also within the
//! f32 rounding term alone where x's codes are exact: integers with ±127 in every block, so any
//! wrong code or scale would be far outside it); matvec of 1, 2 and 8 columns (1 and 3 on
//! factored's second and third shapes), matmul on CPU adapters (its 16-column matvecs), one invocation per row, 64, the adapter's smallest subgroup
//! (the shuffle reduction where it has subgroups), and both modes on the rows mapping with slots
//! of several chunks (`MatVec::slot`: factored 2 rows of 2-chunk slots, int8 one row of 4-chunk
//! slots and one row of 2-chunk slots unrolled); NaN in a
//! column; adversarial blocks (offsets that cancel the scaled values to 1/2048 of them, scales at
//! f16's edges); the formats without a kernel of the mode fall back to `exact` and hold its
//! bound; two integer-path calls in one pass share the recorder's scratch buffer, products that
//! read one x (`Recorder::matvecs`) share its codes with the results of separate calls, and warm steps
//! create nothing.

use gguf_dequant::gpu::kernels::{
    Job, Mapping, MatVecOptions, MulMatJob, Op, Operand, Precision, RowsShape, INT_DOT_FORMATS,
};
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

/// `engine`'s product of `batch` columns (matmul past 8) and the reference of the mode it ran.
fn product(
    engine: &GpuEngine,
    w: &ResidentTensor,
    raw: &[u8],
    x: &[f32],
    batch: usize,
) -> (ops::Sums, Vec<f32>) {
    let (f, k) = (w.format, w.dims[0]);
    let (op, got) = if batch <= 8 {
        (Op::MatVec, engine.matvec(w, x, batch).unwrap())
    } else {
        (Op::MatMul, engine.matmul(w, x, batch).unwrap())
    };
    let p = engine.precision_for(op, f, k);
    (
        ops::mul_mat_in(p, f, raw, k as usize, x, batch).unwrap(),
        got,
    )
}

fn modes(engine: &GpuEngine) {
    check_modes(engine, &[1, 2, 8, 17]);
}

/// [`modes`] at fewer widths, for the second and third shapes of a mode (each width is a kernel
/// to compile, and compiling is most of these tests' time on CPU implementations).
fn modes_narrow(engine: &GpuEngine) {
    check_modes(engine, &[1, 3]);
}

/// The grid i-quants checked at every width, one per helper of `shaders/lib/iquant.wgsl` that
/// makes their parts on both paths (`GridPart`, `DeltaPart`); the others with grids at the first
/// width only (each width is a kernel to compile, most of these tests' time).
const GRIDS_EVERY_WIDTH: [Format; 2] = [Format::IQ2_XXS, Format::IQ1_M];

fn check_modes(engine: &GpuEngine, batches: &[usize]) {
    let backend = label(engine);
    let precision = engine.precision();
    let t = engine.matvec_policy().threads;
    let mut report = Vec::new();
    for (fi, &(f, _)) in INT_DOT_FORMATS.iter().enumerate() {
        let b = f.block_elems();
        let batches = if f.binds_grids() && !GRIDS_EVERY_WIDTH.contains(&f) {
            &batches[..1]
        } else {
            batches
        };
        let mut worst = 0f64;
        for (si, (k, n)) in [(b, 37), (3 * b, 70), (2 * b.max(128), 5)]
            .into_iter()
            .enumerate()
        {
            let seed = (fi * 10 + si) as u64;
            let raw = weights(f, k * n, seed);
            let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
            for &batch in batches {
                let what = format!("{backend} {precision} T={t} {f} K={k} N={n} batch {batch}");
                let x = inputs(batch * k, seed + 7);
                let (want, got) = product(engine, &w, &raw, &x, batch);
                worst = worst.max(within(&what, &want, &got));
                if precision == Precision::Int8 {
                    // Exact codes: only the rounding of the sums remains.
                    let x = exact_inputs(batch * k, seed + 8);
                    let (mut want, got) = product(engine, &w, &raw, &x, batch);
                    want.slack.clear();
                    within(&format!("{what}, exact codes"), &want, &got);
                }
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
    // Formats without a kernel of the mode: the exact contract.
    for (f, k) in [(Format::MXFP4, 256), (Format::F16, 40)] {
        let raw = weights(f, k * 11, 5);
        let w = ResidentTensor::upload(engine, "w", f, &[k as u64, 11], &raw).unwrap();
        let x = inputs(3 * k, 6);
        assert_eq!(
            engine.precision_for(Op::MatVec, f, k as u64),
            Precision::Exact
        );
        let want = ops::mul_mat(f, &raw, k, &x, 3).unwrap();
        let got = engine.matvec(&w, &x, 3).unwrap();
        within(&format!("{backend} {f} (exact)"), &want, &got);
    }
    let adversarial = adversarial(engine, &batches[..2]);
    eprintln!(
        "[precision] {backend} {precision} (T = {t}, {}): largest fraction of the bound: {}; adversarial blocks: {adversarial}",
        engine.matvec_policy().mapping,
        report.join(", ")
    );
}

/// Blocks where the offsets cancel the scaled values (all codes q, offsets within an f16 step of
/// d·q: each value 1/2048 of its parts or less) and blocks with scales at f16's edges (largest
/// finite, smallest subnormal, smallest normal), for the formats whose layout is named here:
/// (format, byte of d, byte of the offset's scale (dmin, m) or none, bytes of codes and
/// sub-scales to fill, their value, the offset's scale that cancels with d = 1).
const ADVERSARIAL: &[Adversarial] = &[
    // d·q + m: q = 8 (nibbles 0x88), m = -(8 - 2^-8).
    (Format::Q4_1, 0, Some(2), 4..20, 0x88, -7.996_093_8),
    // q = 16 (high bits set, nibbles 0), m = -(16 - 2^-7).
    (Format::Q5_1, 0, Some(2), 4..24, 0x00, -15.992_188),
    // scales and mins all 8 or 40 (bytes 0x88), q = 8, dmin = 8 - 2^-8.
    (Format::Q4_K, 0, Some(2), 4..144, 0x88, 7.996_093_8),
    // scales and mins 8 or 40, q = 16 (qh all set, nibbles 0), dmin = 16 - 2^-7.
    (Format::Q5_K, 0, Some(2), 4..176, 0x88, 15.992_188),
    // scales and mins 5 (0x55), q = 2 (0xAA), dmin = 2 - 2^-10.
    (Format::Q2_K, 80, Some(82), 0..80, 0x55, 1.999_023_4),
    (Format::Q4_0, 0, None, 2..18, 0x9F, 0.0),
    (Format::Q8_0, 0, None, 2..34, 0x7F, 0.0),
    (Format::Q6_K, 208, None, 0..208, 0x5A, 0.0),
];

type Adversarial = (
    Format,
    usize,
    Option<usize>,
    std::ops::Range<usize>,
    u8,
    f32,
);

/// [`ADVERSARIAL`]'s blocks through `engine` at K = 2 blocks of 256 values, `batches` columns,
/// against the mode's bound; returns the largest fraction of it per format.
fn adversarial(engine: &GpuEngine, batches: &[usize]) -> String {
    let backend = label(engine);
    let mut out = Vec::new();
    for &(f, d_at, m_at, ref fill, byte, m) in ADVERSARIAL {
        let (bb, be) = (f.block_bytes(), f.block_elems());
        let k = 512usize.div_ceil(be) * be;
        let n = 6;
        let mut raw = weights(f, k * n, 40 + f as u64);
        let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
        for (b, block) in raw.chunks_exact_mut(bb).enumerate() {
            let row = b * be / k;
            // Rows 0-2: cancelling offsets; 3-5: random codes with d at an f16 edge.
            let (d, dm) = match row {
                0..=2 => {
                    block[fill.clone()].fill(byte);
                    if f == Format::Q5_1 {
                        block[4..8].fill(0xFF);
                    }
                    if f == Format::Q5_K {
                        block[16..48].fill(0xFF);
                        block[48..176].fill(0x00);
                    }
                    if f == Format::Q2_K {
                        block[16..80].fill(0xAA);
                    }
                    (f16(1.0), f16(m))
                }
                3 => (f16(65504.0), f16(-65504.0)),
                4 => (0x0001u16.to_le_bytes(), 0x8001u16.to_le_bytes()),
                _ => (f16(6.103_515_6e-5), f16(0.0)),
            };
            block[d_at..d_at + 2].copy_from_slice(&d);
            if let Some(at) = m_at {
                block[at..at + 2].copy_from_slice(&dm);
            }
        }
        let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
        let mut worst = 0f64;
        let cols = batches.iter().max().copied().unwrap_or(1);
        for (xi, x) in [
            // Positive x: the largest sums to cancel; and random signs.
            inputs(cols * k, 41)
                .iter()
                .map(|v| 1.25 + 0.25 * v)
                .collect::<Vec<_>>(),
            inputs(cols * k, 42),
        ]
        .into_iter()
        .enumerate()
        {
            for &batch in batches {
                let x = &x[..batch * k];
                let (want, got) = product(engine, &w, &raw, x, batch);
                let what = format!(
                    "{backend} {} {f} adversarial x{xi} batch {batch}",
                    engine.precision()
                );
                worst = worst.max(within(&what, &want, &got));
            }
        }
        out.push(format!("{f} {worst:.2e}"));
    }
    out.join(", ")
}
gpu_test!(
    kernels_precision_int8,
    modes,
    options = EngineOptions {
        precision: Precision::Int8,
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_precision_int8_64_threads,
    modes,
    options = EngineOptions {
        precision: Precision::Int8,
        matvec: MatVecOptions {
            threads: Some(64),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
// At fewer widths, as the factored sums': the same kernel file as 64 threads per row, with the
// subgroup reduction.
gpu_test!(
    kernels_precision_int8_subgroup_reduction,
    modes_narrow,
    options_for = |adapter: &wgpu::Adapter| EngineOptions {
        precision: Precision::Int8,
        matvec: MatVecOptions {
            threads: Some(adapter.get_info().subgroup_min_size.clamp(2, 64)),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_precision_factored,
    modes,
    options = EngineOptions {
        precision: Precision::Factored,
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_precision_factored_subgroup_reduction,
    modes_narrow,
    options_for = |adapter: &wgpu::Adapter| EngineOptions {
        precision: Precision::Factored,
        matvec: MatVecOptions {
            threads: Some(adapter.get_info().subgroup_min_size.clamp(2, 64)),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_precision_factored_rows_mapping,
    modes_narrow,
    options = EngineOptions {
        precision: Precision::Factored,
        matvec: MatVecOptions {
            mapping: Mapping::Rows(RowsShape::new(64, 2).unwrap().with_slot(2).unwrap()),
            unroll: false,
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_precision_int8_rows_mapping,
    modes_narrow,
    options = EngineOptions {
        precision: Precision::Int8,
        matvec: MatVecOptions {
            mapping: Mapping::Rows(RowsShape::new(64, 1).unwrap().with_slot(4).unwrap()),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
// Slots of 2 chunks, two per unrolled step: int8's slot_dot over 16 values (one half of the
// quantiser's Σq) and the rows kernel's unrolled loop.
gpu_test!(
    kernels_precision_int8_rows_slot2,
    modes_narrow,
    options = EngineOptions {
        precision: Precision::Int8,
        matvec: MatVecOptions {
            mapping: Mapping::Rows(RowsShape::new(64, 1).unwrap().with_slot(2).unwrap()),
            unroll: true,
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
gpu_test!(kernels_precision_exact_adversarial, exact_adversarial,);

/// The exact mode on [`ADVERSARIAL`]'s blocks (its own, tighter bound).
fn exact_adversarial(engine: &GpuEngine) {
    assert_eq!(engine.precision(), Precision::Exact);
    eprintln!(
        "[precision] {} exact: adversarial blocks: {}",
        label(engine),
        adversarial(engine, &[1, 2])
    );
}

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
    kernels_precision_int8_shared_scratch,
    shared_scratch,
    options = EngineOptions {
        precision: Precision::Int8,
        ..EngineOptions::default()
    }
);

/// `Recorder::matvecs` on products that share x: under `int8` x is quantised once for the
/// products that read it alike (a format without the integer path in between, exact, keeps the
/// scratch; a product of another K quantises again, and the one after it too), with the results
/// of separate calls bit for bit, each within its mode's bound; jobs naming another x, or
/// writing y over x, are refused before anything is recorded.
fn shared_x(engine: &GpuEngine) {
    let backend = label(engine);
    let batch = 3usize;
    // (format, K, rows): Q4_K and Q8_0 on the integer path, MXFP4 exact.
    let cases = [
        (Format::Q4_K, 512usize, 48usize),
        (Format::MXFP4, 512, 40),
        (Format::Q8_0, 512, 36),
        (Format::Q4_K, 256, 20),
        (Format::Q8_0, 512, 24),
    ];
    let dev = engine.device();
    let raws: Vec<Vec<u8>> = cases
        .iter()
        .enumerate()
        .map(|(i, &(f, k, n))| weights(f, k * n, 40 + i as u64))
        .collect();
    let ws: Vec<ResidentTensor> = cases
        .iter()
        .zip(&raws)
        .map(|(&(f, k, n), raw)| {
            ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], raw).unwrap()
        })
        .collect();
    let x_host = inputs(batch * 512, 45);
    let x = buffers::upload(dev, "x", bytemuck::cast_slice(&x_host)).unwrap();
    let out = |n: usize| {
        dev.create_buffer(&wgpu::BufferDescriptor {
            label: Some("y"),
            size: (batch * n * 4) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    };
    let ys: [Vec<wgpu::Buffer>; 2] =
        [0, 1].map(|_| cases.iter().map(|&(_, _, n)| out(n)).collect());
    let mut recorder = engine.recorder();
    let mut dispatches = [0u64; 2];
    for (shared, ys) in ys.iter().enumerate() {
        let before = recorder.stats();
        let mut encoder = dev.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            let jobs = shared_jobs(&ws, &x, ys, batch as u32);
            if shared == 1 {
                recorder.matvecs(&mut pass, &jobs).unwrap();
            } else {
                for job in &jobs {
                    recorder.matvec(&mut pass, job).unwrap();
                }
            }
        }
        recorder.finish();
        engine.queue().submit([encoder.finish()]);
        dispatches[shared] = recorder.stats().since(&before).dispatches;
    }
    // Separate: a quantiser before each integer-path product. Shared: before the first, the one
    // of K 256 and the one after it.
    assert_eq!(dispatches, [9, 8], "{backend}");
    for (i, &(f, k, n)) in cases.iter().enumerate() {
        let read = |y: &wgpu::Buffer| -> Vec<f32> {
            bytemuck::pod_collect_to_vec(&read_buffer(
                dev,
                engine.queue(),
                y,
                (batch * n * 4) as u64,
            ))
        };
        let (alone, shared) = (read(&ys[0][i]), read(&ys[1][i]));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&alone), bits(&shared), "{backend} {f:?} K {k}");
        let p = engine.precision_for(Op::MatVec, f, k as u64);
        let want = ops::mul_mat_in(p, f, &raws[i], k, &x_host[..batch * k], batch).unwrap();
        within(&format!("{backend} {f:?} K {k} shared x"), &want, &shared);
    }
    // Refused: another x; y over the x the jobs read.
    let before = recorder.stats();
    let other = buffers::upload(dev, "x2", bytemuck::cast_slice(&x_host)).unwrap();
    let mut encoder = dev.create_command_encoder(&Default::default());
    let mut pass = encoder.begin_compute_pass(&Default::default());
    let mut bad = shared_jobs(&ws, &x, &ys[0], batch as u32);
    bad[1].x = Operand::whole(&other);
    let e = recorder.matvecs(&mut pass, &bad).unwrap_err().to_string();
    assert!(e.contains("job 1 reads another x"), "{e}");
    let writable = dev.create_buffer(&wgpu::BufferDescriptor {
        label: Some("xy"),
        size: (batch * 512 * 4) as u64,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let mut bad = shared_jobs(&ws, &x, &ys[0], batch as u32);
    for job in &mut bad {
        job.x = Operand::whole(&writable);
    }
    bad[2].y = Operand {
        buffer: &writable,
        offset: 1024,
    };
    let e = recorder.matvecs(&mut pass, &bad).unwrap_err().to_string();
    assert!(e.contains("job 2 writes y"), "{e}");
    assert_eq!(recorder.stats().since(&before).dispatches, 0, "{backend}");
}
/// [`shared_x`]'s jobs: `ws[i]` from `x` into `ys[i]`.
fn shared_jobs<'a>(
    ws: &'a [ResidentTensor],
    x: &'a wgpu::Buffer,
    ys: &'a [wgpu::Buffer],
    batch: u32,
) -> Vec<MulMatJob<'a>> {
    ws.iter()
        .zip(ys)
        .map(|(w, y)| MulMatJob {
            weight: w,
            x: Operand::whole(x),
            y: Operand::whole(y),
            batch,
        })
        .collect()
}
gpu_test!(
    kernels_precision_int8_shared_x,
    shared_x,
    options = EngineOptions {
        precision: Precision::Int8,
        ..EngineOptions::default()
    }
);
