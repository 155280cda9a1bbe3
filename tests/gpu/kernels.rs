//! The inference kernels (`gguf_dequant::gpu::kernels`) on every adapter, for every format with a
//! shader, against the f64 CPU reference (`gguf_dequant::ops`): every output within
//! `K · 2⁻²³ · Σ|w·x| + K · 2⁻¹²⁵`, the largest observed fraction of that bound printed per format; gathered
//! rows bit-exact with the CPU codec. Ragged shapes, both matvec thread mappings (one invocation
//! per row, as on CPU adapters, and 64, as on GPUs), tensors split over buffers and bindings,
//! NaN and Inf, repeatability, the real models, and the composable decode modules.

use gguf_dequant::formats::sample::{finite_blocks, normal_blocks, Rng};
use gguf_dequant::gpu::decode::{decode_module, DecodeNames};
use gguf_dequant::gpu::kernels::{
    KernelKey, Mapping, MatVecOptions, MulMatJob, Op, Operand, Precision, MATMUL_CPU_COLUMNS,
};
use gguf_dequant::gpu::loader::{ResidentPart, ResidentTensor};
use gguf_dequant::gpu::{buffers, tables, EngineOptions, GpuEngine};
use gguf_dequant::{cpu, formats, ops, DType, Error, Format, GgufFile};
use std::sync::Arc;

use crate::gpu_test;
use crate::support;
use crate::support::gpu::{caller_pipeline, label, read_buffer};

/// Random blocks of `format`: finite scales for block formats, ordinary values for the
/// one-value formats (whose random bit patterns would overflow any f32 sum).
pub fn weights(format: Format, n_values: usize, seed: u64) -> Vec<u8> {
    let blocks = n_values / format.block_elems();
    if format.block_elems() == 1 {
        normal_blocks(format, blocks, seed)
    } else {
        finite_blocks(format, blocks, seed)
    }
}

pub fn inputs(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| (rng.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        .collect()
}

/// Asserts `got` within the bound of `want` and returns the largest fraction. Outputs whose
/// Σ|w·x| passes f32's range are outside the contract (an f32 partial sum may overflow), as with
/// MXFP4 blocks whose random E8M0 scale is near 2^127.
pub fn within(what: &str, want: &ops::Sums, got: &[f32]) -> f64 {
    assert_eq!(got.len(), want.y.len(), "{what}: output length");
    let mut worst = 0f64;
    for (i, &g) in got.iter().enumerate() {
        if want.abs[i] > f32::MAX as f64 {
            continue;
        }
        let f = want.fraction(i, g);
        worst = worst.max(f);
        assert!(
            f <= 1.0,
            "{what}: element {i}: got {g}, reference {} (bound {}, fraction {f})",
            want.y[i],
            want.bound(i)
        );
    }
    worst
}

/// The shapes (K, N) tried for `format`: one block, ragged rows, a few blocks.
fn shapes(format: Format) -> Vec<(usize, usize)> {
    let b = format.block_elems();
    if b == 1 {
        vec![(1, 1), (5, 3), (13, 37), (64, 9), (300, 70)]
    } else {
        vec![(b, 1), (b, 37), (3 * b, 70), (2 * b.max(128), 5)]
    }
}

fn check_every_format(engine: &GpuEngine, batches: &[usize], matmul: bool) {
    let backend = label(engine);
    let mut report = Vec::new();
    for (fi, &f) in formats::WITH_SHADER.iter().enumerate() {
        let mut worst = 0f64;
        for (si, (k, n)) in shapes(f).into_iter().enumerate() {
            let seed = (fi * 100 + si) as u64;
            let raw = weights(f, k * n, seed);
            let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
            for &batch in batches {
                let x = inputs(batch * k, seed + 7);
                let want = ops::mul_mat(f, &raw, k, &x, batch).unwrap();
                let what = format!("{backend} {f} K={k} N={n} batch {batch}");
                let got = engine.matvec(&w, &x, batch).unwrap();
                worst = worst.max(within(&format!("{what} matvec"), &want, &got));
                if matmul {
                    let got = engine.matmul(&w, &x, batch).unwrap();
                    worst = worst.max(within(&format!("{what} matmul"), &want, &got));
                }
            }
            // Row gather: ids at both ends of the table, repeated, bit-exact.
            let ids = [0, n as u32 - 1, (n / 2) as u32, 0];
            let want = ops::get_rows(f, &raw, k, &ids).unwrap();
            let got = engine.get_rows(&w, &ids).unwrap();
            if let Err(e) = support::codec::compare_f32(f, &got, &want) {
                panic!("{backend} {f} K={k} get_rows f32: {e}");
            }
            let f16 = engine.get_rows_as(&w, &ids, DType::F16).unwrap();
            let want16: Vec<u8> = want
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
                .collect();
            if let Err(e) = support::codec::compare(f, DType::F16, &f16, &want16) {
                panic!("{backend} {f} K={k} get_rows f16: {e}");
            }
        }
        report.push(format!("{f} {worst:.2e}"));
    }
    eprintln!(
        "[kernels] {backend} (matvec threads per row {}): largest fraction of the bound: {}",
        engine.matvec_policy().threads,
        report.join(", ")
    );
}

/// Every format, every shape, matvec for 1, 2 and 8 columns (and matmul for the same), rows
/// gathered to f32 and f16, with the adapter's own thread mapping.
fn every_format_matvec_matmul_get_rows(engine: &GpuEngine) {
    check_every_format(engine, &[1, 2, 8], true);
}
gpu_test!(kernels_every_format, every_format_matvec_matmul_get_rows);

/// The other thread mapping than the one CI's CPU adapters pick: 64 invocations per matvec row
/// and the workgroup reduction, and the tiled matmul, as on discrete GPUs.
fn every_format_with_64_threads_per_row(engine: &GpuEngine) {
    assert_eq!(engine.matvec_policy().threads, 64);
    check_every_format(engine, &[1, 3], true);
}
gpu_test!(
    kernels_every_format_64_threads,
    every_format_with_64_threads_per_row,
    options = EngineOptions {
        matvec: MatVecOptions {
            threads: Some(64),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);

/// matmul for 17 and 512 columns and matvec for 17 (in groups of 8), on ragged shapes.
fn wide_batches(engine: &GpuEngine) {
    let backend = label(engine);
    let mut report = Vec::new();
    for (fi, &f) in formats::WITH_SHADER.iter().enumerate() {
        let b = f.block_elems();
        let (k, n) = if b == 1 { (37, 45) } else { (2 * b, 45) };
        let raw = weights(f, k * n, 900 + fi as u64);
        let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
        let mut worst = 0f64;
        for batch in [17, 512] {
            let x = inputs(batch * k, fi as u64);
            let want = ops::mul_mat(f, &raw, k, &x, batch).unwrap();
            let got = engine.matmul(&w, &x, batch).unwrap();
            worst = worst.max(within(
                &format!("{backend} {f} matmul {batch}"),
                &want,
                &got,
            ));
            // The kernels each call ran, as planned: the tiled matmul, or on CPU adapters
            // matvecs of MATMUL_CPU_COLUMNS columns and one of the rest.
            let keys = engine.kernels_for(Op::MatMul, &w, batch as u64).unwrap();
            if engine.matvec_policy().threads == 1 {
                let cols: Vec<u32> = keys
                    .iter()
                    .map(|k| k.matvec_variant().unwrap().columns)
                    .collect();
                let rest = batch as u32 % MATMUL_CPU_COLUMNS;
                let mut want = vec![MATMUL_CPU_COLUMNS];
                want.extend((rest > 0).then_some(rest));
                assert_eq!(cols, want, "{backend} {f} matmul {batch}: {keys:?}");
            } else {
                assert_eq!(keys, [KernelKey::matmul(f)], "{backend} {f}");
            }
            if batch == 17 {
                let got = engine.matvec(&w, &x, batch).unwrap();
                worst = worst.max(within(&format!("{backend} {f} matvec 17"), &want, &got));
                // Three dispatches of 8, 8 and 1 columns: two kernels, named by their variant.
                let keys = engine.kernels_for(Op::MatVec, &w, 17).unwrap();
                let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
                assert_eq!(keys.len(), 2, "{backend} {f}: {names:?}");
                for (key, c) in keys.iter().zip([8, 1]) {
                    let v = key.matvec_variant().unwrap();
                    assert_eq!((key.op(), v.columns), (Op::MatVec, c));
                    assert_eq!(v.precision, Precision::Exact);
                    if v.rows == 0 {
                        assert_eq!(v.threads, engine.matvec_policy().threads);
                    }
                }
                let head = format!("matvec.{}.c8.", f.name());
                assert!(names[0].starts_with(&head), "{names:?}");
            }
        }
        report.push(format!("{f} {worst:.2e}"));
    }
    eprintln!(
        "[kernels] {backend} batches 17 and 512: {}",
        report.join(", ")
    );
}
gpu_test!(kernels_wide_batches, wide_batches);
gpu_test!(
    kernels_wide_batches_tiled,
    wide_batches,
    options = EngineOptions {
        matvec: MatVecOptions {
            threads: Some(64),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);

/// ggml's MUL_MAT_ID on [K, N, E] weights, x per token and per slot, ids at both ends.
fn expert_indexed(engine: &GpuEngine) {
    let backend = label(engine);
    for (fi, &f) in formats::WITH_SHADER.iter().enumerate() {
        let b = f.block_elems();
        let (k, n, e) = if b == 1 { (12, 7, 4) } else { (b, 7, 4) };
        let raw = weights(f, k * n * e, 500 + fi as u64);
        let dims = [k as u64, n as u64, e as u64];
        let w = ResidentTensor::upload(engine, "experts", f, &dims, &raw).unwrap();
        let slots = 2;
        let ids = [0u32, 3, 3, 1, 2, 0];
        for x_per_slot in [false, true] {
            let rows = if x_per_slot {
                ids.len()
            } else {
                ids.len() / slots
            };
            let x = inputs(rows * k, fi as u64);
            let want = ops::mul_mat_id(f, &raw, k, n, &x, x_per_slot, &ids, slots).unwrap();
            let got = engine.matvec_id(&w, &x, &ids, slots, x_per_slot).unwrap();
            within(
                &format!("{backend} {f} matvec_id x_per_slot={x_per_slot}"),
                &want,
                &got,
            );
        }
        let err = engine.matvec_id(&w, &inputs(k, 1), &[4], 1, false);
        assert!(matches!(err, Err(Error::Gpu(_))), "{f}: expert 4 of 4");
    }
}
gpu_test!(kernels_expert_indexed, expert_indexed);

/// `engine`'s matvec (1 and 3 columns) and matvec_id of `f` on a K × N weight: within the bound
/// of the f64 reference and bit-identical to `reference`'s, an engine on the same device with
/// other options. `seeds`: the weights', then x's.
fn same_rows(
    what: &str,
    engine: &GpuEngine,
    reference: &GpuEngine,
    f: Format,
    k: usize,
    n: usize,
    (w_seed, x_seed): (u64, u64),
) {
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    let raw = weights(f, k * n, w_seed);
    // One expert of N rows: matvec and matvec_id read the same tensor.
    let dims = [k as u64, n as u64, 1];
    let w = ResidentTensor::upload(engine, "w", f, &dims, &raw).unwrap();
    let wr = ResidentTensor::upload(reference, "w", f, &dims, &raw).unwrap();
    for batch in [1, 3] {
        let x = inputs(batch * k, x_seed);
        let want = ops::mul_mat(f, &raw, k, &x, batch).unwrap();
        let got = engine.matvec(&w, &x, batch).unwrap();
        within(&format!("{what} matvec {batch}"), &want, &got);
        let same = reference.matvec(&wr, &x, batch).unwrap();
        assert_eq!(bits(got), bits(same), "{what} matvec {batch}");
    }
    let (ids, x) = ([0u32, 0], inputs(k, x_seed));
    let got = engine.matvec_id(&w, &x, &ids, 2, false).unwrap();
    let same = reference.matvec_id(&wr, &x, &ids, 2, false).unwrap();
    assert_eq!(bits(got), bits(same), "{what} matvec_id");
}

/// The matvec kernels' subgroup paths against the same kernels without them, where the device
/// has `SUBGROUP` (CI: lavapipe, 8 lanes, and SwiftShader, 4; llvmpipe GL has none and keeps
/// both fallbacks): with as many invocations per row as the adapter's smallest subgroup, the
/// shuffle reduction; with one, x read once per subgroup lane group and broadcast. Every format,
/// 1 and 3 columns (ragged K for the one-value formats, a last workgroup of dead rows) and
/// matvec_id, within the bound of the f64 reference and bit-identical to the fallback (the
/// workgroup-memory tree, every invocation reading x) on the same device.
fn subgroups_against_fallback(engine: &GpuEngine) {
    let backend = label(engine);
    let policy = engine.matvec_policy();
    let t = policy.threads;
    let has = engine
        .device()
        .features()
        .contains(wgpu::Features::SUBGROUP);
    let lanes = engine.adapter_info().subgroup_min_size.min(8);
    if t == 1 {
        assert!(!policy.classic_subgroups());
        assert_eq!(policy.x_lanes(), if has { lanes } else { 1 }, "{backend}");
    } else {
        assert_eq!(policy.classic_subgroups(), has, "{backend}: T = {t}");
        assert_eq!(policy.x_lanes(), 1, "{backend}: T = {t}");
    }
    if support::is_ci() && engine.adapter_info().backend == wgpu::Backend::Vulkan {
        assert!(has, "{backend}: CI's Vulkan adapters have subgroups");
    }
    let fallback = GpuEngine::from_device(
        engine.device().clone(),
        engine.queue().clone(),
        EngineOptions {
            matvec: MatVecOptions {
                threads: Some(t),
                subgroups: false,
                ..MatVecOptions::default()
            },
            ..EngineOptions::default()
        },
    )
    .unwrap();
    let off = fallback.matvec_policy();
    assert!(!off.classic_subgroups() && off.x_lanes() == 1 && off.subgroups.is_none());
    assert_eq!(off.threads, t);
    for (fi, &f) in formats::WITH_SHADER.iter().enumerate() {
        let b = f.block_elems();
        let k = if b == 1 { 300 } else { 3 * b };
        let what = format!("{backend} {f} T={t}");
        let seeds = (1300 + fi as u64, fi as u64);
        same_rows(&what, engine, &fallback, f, k, 37, seeds);
    }
    eprintln!(
        "[kernels] {backend}: {t} invocations per row, subgroup reduction {}, x shared by {} lanes: bit-identical to the fallback",
        policy.classic_subgroups(),
        policy.x_lanes()
    );
}
gpu_test!(
    kernels_subgroup_reduction,
    subgroups_against_fallback,
    options_for = |adapter: &wgpu::Adapter| EngineOptions {
        matvec: MatVecOptions {
            threads: Some(adapter.get_info().subgroup_min_size.clamp(2, 64)),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);
gpu_test!(
    kernels_subgroup_shared_x,
    subgroups_against_fallback,
    options = EngineOptions {
        matvec: MatVecOptions {
            threads: Some(1),
            ..MatVecOptions::default()
        },
        ..EngineOptions::default()
    }
);

/// Unrolled matvec rows (several invocations per row: 8, and 64 as on GPUs, each decoding
/// `MATVEC_UNROLL` chunks per loop step) against the same rows a chunk per step: every format,
/// rows long enough for whole steps and a ragged rest (a ragged row end for the one-value
/// formats), 1 and 3 columns and matvec_id, within the bound of the f64 reference and
/// bit-identical to the rolled rows on the same device.
fn unrolled_against_rolled(engine: &GpuEngine) {
    let backend = label(engine);
    let open = |threads: u32, unroll: bool| {
        GpuEngine::from_device(
            engine.device().clone(),
            engine.queue().clone(),
            EngineOptions {
                matvec: MatVecOptions {
                    threads: Some(threads),
                    unroll,
                    ..MatVecOptions::default()
                },
                ..EngineOptions::default()
            },
        )
        .unwrap()
    };
    for t in [8, 64] {
        let (unrolled, rolled) = (open(t, true), open(t, false));
        assert!(unrolled.matvec_policy().unrolled() && !rolled.matvec_policy().unrolled());
        for (fi, &f) in formats::WITH_SHADER.iter().enumerate() {
            let b = f.block_elems();
            // 2304 values are 288 chunks: whole steps of 4 chunks of 8 or 64 invocations, then
            // the rest; plus one block, or 13 values (a ragged last chunk).
            let k = if b == 1 { 2304 + 13 } else { 2304 + b };
            let what = format!("{backend} {f} T={t} K={k}");
            let seeds = (1700 + fi as u64, fi as u64);
            same_rows(&what, &unrolled, &rolled, f, k, 5, seeds);
        }
    }
    eprintln!("[kernels] {backend}: unrolled rows bit-identical to rolled ones, 8 and 64 invocations per row");
}
gpu_test!(kernels_unrolled_rows, unrolled_against_rolled);

/// A tensor in two buffers (rows 0..a and a..n) and bindings far smaller than the tensor: every
/// dispatch binds one run of whole rows, and matvec and matmul split their columns.
fn split_tensors(engine: &GpuEngine) {
    let backend = label(engine);
    for f in [
        Format::Q4_0,
        Format::Q4_K,
        Format::IQ2_XXS,
        Format::F16,
        Format::Q8_0,
    ] {
        let k = f.block_elems().max(32) * 2;
        let n = 700;
        let raw = weights(f, k * n, 42);
        let row_bytes = k / f.block_elems() * f.block_bytes();
        let a = 333;
        let part = |rows: std::ops::Range<usize>| {
            let bytes = &raw[rows.start * row_bytes..rows.end * row_bytes];
            ResidentPart {
                buffer: Arc::new(buffers::upload(engine.device(), "part", bytes).unwrap()),
                range: 0..bytes.len() as u64,
                elements: (rows.start * k) as u64..(rows.end * k) as u64,
            }
        };
        let w = ResidentTensor {
            name: "split".into(),
            format: f,
            dims: vec![k as u64, n as u64],
            n_elements: (k * n) as u64,
            dtype: None,
            parts: vec![part(0..a), part(a..n)],
        };
        for batch in [1, 5, 40] {
            let x = inputs(batch * k, batch as u64);
            let want = ops::mul_mat(f, &raw, k, &x, batch).unwrap();
            let what = format!("{backend} {f} split, batch {batch}");
            within(&what, &want, &engine.matvec(&w, &x, batch).unwrap());
            within(&what, &want, &engine.matmul(&w, &x, batch).unwrap());
        }
        let ids: Vec<u32> = vec![0, a as u32 - 1, a as u32, n as u32 - 1, 5, 600];
        let want = ops::get_rows(f, &raw, k, &ids).unwrap();
        assert_eq!(
            engine.get_rows(&w, &ids).unwrap(),
            want,
            "{backend} {f} split get_rows"
        );
        let experts = ResidentTensor {
            dims: vec![k as u64, 70, 10],
            ..w.clone()
        };
        let eids = [0u32, 4, 5, 9];
        let x = inputs(2 * k, 3);
        let want = ops::mul_mat_id(f, &raw, k, 70, &x, false, &eids, 2).unwrap();
        within(
            &format!("{backend} {f} split matvec_id"),
            &want,
            &engine.matvec_id(&experts, &x, &eids, 2, false).unwrap(),
        );
    }
}
/// Bindings of 16 KiB (a few hundred rows, a few columns of y) and at most 7 workgroups per
/// grid dimension.
fn small_bindings(_: &crate::support::gpu::Adapter) -> EngineOptions {
    EngineOptions {
        max_binding_size: Some(16 << 10),
        max_workgroups_per_dim: Some(7),
        ..EngineOptions::default()
    }
}
gpu_test!(
    kernels_split_tensors,
    split_tensors,
    options_for = small_bindings
);

/// F16 and BF16 rows of whole 16-byte chunks from an aligned start are read four words per load
/// (`MatVec::vec_w`); the same weight two bytes past an aligned start is read a word at a
/// time. matvec, matmul and matvec_id give the same bits both ways, within the bound.
fn wide_weight_reads(engine: &GpuEngine) {
    let backend = label(engine);
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    for f in [Format::F16, Format::BF16] {
        let (k, n) = (64usize, 36usize);
        let raw = weights(f, k * n, 11);
        let dims = [k as u64, n as u64];
        let aligned = ResidentTensor::upload(engine, "w", f, &dims, &raw).unwrap();
        let mut padded = vec![0u8; 2];
        padded.extend_from_slice(&raw);
        padded.resize(padded.len().next_multiple_of(4), 0);
        let skewed = ResidentTensor {
            parts: vec![ResidentPart {
                buffer: Arc::new(buffers::upload(engine.device(), "skewed", &padded).unwrap()),
                range: 2..2 + raw.len() as u64,
                elements: 0..(k * n) as u64,
            }],
            ..aligned.clone()
        };
        for batch in [1, 3] {
            let x = inputs(batch * k, 12);
            let want = ops::mul_mat(f, &raw, k, &x, batch).unwrap();
            let what = format!("{backend} {f} batch {batch}");
            let wide = engine.matvec(&aligned, &x, batch).unwrap();
            within(&format!("{what} matvec"), &want, &wide);
            let words = engine.matvec(&skewed, &x, batch).unwrap();
            assert_eq!(bits(wide), bits(words), "{what} matvec");
            let wide = engine.matmul(&aligned, &x, batch).unwrap();
            assert_eq!(
                bits(wide),
                bits(engine.matmul(&skewed, &x, batch).unwrap()),
                "{what} matmul"
            );
        }
        let experts = |t: &ResidentTensor| ResidentTensor {
            dims: vec![k as u64, 9, 4],
            ..t.clone()
        };
        let (ids, x) = ([3u32, 0, 2, 1], inputs(2 * k, 13));
        let want = ops::mul_mat_id(f, &raw, k, 9, &x, false, &ids, 2).unwrap();
        let wide = engine
            .matvec_id(&experts(&aligned), &x, &ids, 2, false)
            .unwrap();
        within(&format!("{backend} {f} matvec_id"), &want, &wide);
        let words = engine
            .matvec_id(&experts(&skewed), &x, &ids, 2, false)
            .unwrap();
        assert_eq!(bits(wide), bits(words), "{backend} {f} matvec_id");
    }
}
gpu_test!(kernels_wide_weight_reads, wide_weight_reads);

/// NaN and infinity in weights and inputs reach exactly the outputs they belong to, and results
/// repeat bit for bit.
fn special_values_and_repeatability(engine: &GpuEngine) {
    let backend = label(engine);
    let (k, n) = (64usize, 40usize);
    let mut vals: Vec<f32> = inputs(k * n, 5);
    vals[3 * k + 10] = f32::NAN;
    vals[7 * k] = f32::INFINITY;
    vals[9 * k + 63] = f32::NEG_INFINITY;
    let raw: Vec<u8> = bytemuck::cast_slice(&vals).to_vec();
    let w = ResidentTensor::upload(engine, "w", Format::F32, &[k as u64, n as u64], &raw).unwrap();
    let mut x = inputs(3 * k, 6);
    x[k + 20] = f32::INFINITY; // column 1: every row with a nonzero weight at k = 20
    x[2 * k + 5] = f32::NAN; // column 2: all NaN
    let want = ops::mul_mat(Format::F32, &raw, k, &x, 3).unwrap();
    for (name, got) in [
        ("matvec", engine.matvec(&w, &x, 3).unwrap()),
        ("matmul", engine.matmul(&w, &x, 3).unwrap()),
    ] {
        within(&format!("{backend} special {name}"), &want, &got);
        assert!(
            got[3].is_nan() && got[7].is_infinite() && got[9].is_infinite(),
            "{name}"
        );
        assert!(got[2 * n..].iter().all(|v| v.is_nan()), "{name}: column 2");
        assert!(
            got[n..2 * n].iter().any(|v| v.is_infinite()),
            "{name}: column 1"
        );
    }
    // Repeatability, on a quantised weight of ordinary size.
    let raw = weights(Format::Q4_K, 1024 * 64, 9);
    let w = ResidentTensor::upload(engine, "w", Format::Q4_K, &[1024, 64], &raw).unwrap();
    let x = inputs(1024 * 8, 10);
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    assert_eq!(
        bits(engine.matvec(&w, &x, 8).unwrap()),
        bits(engine.matvec(&w, &x, 8).unwrap())
    );
    assert_eq!(
        bits(engine.matmul(&w, &x, 8).unwrap()),
        bits(engine.matmul(&w, &x, 8).unwrap())
    );
}
gpu_test!(kernels_special_values, special_values_and_repeatability);

/// Typed errors for bad jobs, never a panic.
fn bad_jobs(engine: &GpuEngine) {
    let raw = weights(Format::Q4_0, 64 * 4, 1);
    let w = ResidentTensor::upload(engine, "w", Format::Q4_0, &[64, 4], &raw).unwrap();
    let gpu_err = |r: gguf_dequant::Result<Vec<f32>>| matches!(r, Err(Error::Gpu(_)));
    assert!(gpu_err(engine.matvec(&w, &inputs(63, 1), 1)));
    assert!(gpu_err(engine.matvec(&w, &[], 0)));
    assert!(gpu_err(engine.get_rows(&w, &[4])));
    let x = buffers::upload(engine.device(), "x", &[0u8; 64 * 4 * 9]).unwrap();
    let y = buffers::upload(engine.device(), "y", &[0u8; 4 * 4 * 9]).unwrap();
    let mut enc = engine
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let job = MulMatJob {
        weight: &w,
        x: Operand::whole(&x),
        y: Operand::whole(&y),
        batch: 9,
    };
    assert!(engine.record_matvec(&mut enc, &job).is_err(), "9 columns");
    let short = MulMatJob {
        batch: 8,
        y: Operand {
            buffer: &y,
            offset: 4 * 4 * 2,
        },
        ..job
    };
    assert!(
        engine.record_matvec(&mut enc, &short).is_err(),
        "y too short"
    );
    assert!(ResidentTensor::upload(engine, "w", Format::Q4_0, &[64, 5], &raw).is_err());
    assert!(
        ResidentTensor::upload(engine, "w", Format::I8, &[4], &[0; 4])
            .and_then(|t| engine.matvec(&t, &inputs(4, 1), 1))
            .is_err()
    );
}
gpu_test!(kernels_bad_jobs, bad_jobs);

/// Real tensors of both real models: a run of rows of every 2-D tensor of a format with a
/// shader (the token embedding gathered, the others multiplied).
fn real_model_tensors(engine: &GpuEngine) {
    const TEST: &str = "kernels_real_models";
    let backend = label(engine);
    for model in support::MODEL_FILES {
        let Some(path) = support::model_file(TEST, model) else {
            return;
        };
        let file = GgufFile::open(&path).unwrap();
        let mut worst: Vec<(Format, f64)> = Vec::new();
        let mut checked = 0;
        for t in file.tensors() {
            if t.dims.len() != 2 || !t.format.has_shader() {
                continue;
            }
            let k = t.dims[0] as usize;
            let rows = (t.dims[1] as usize).min(48);
            let row_bytes = k / t.format.block_elems() * t.format.block_bytes();
            let raw = &file.tensor_data(t)[..rows * row_bytes];
            let dims = [k as u64, rows as u64];
            let w = ResidentTensor::upload(engine, &t.name, t.format, &dims, raw).unwrap();
            if t.name.contains("token_embd") {
                let ids = [0u32, rows as u32 - 1, 7];
                let want = ops::get_rows(t.format, raw, k, &ids).unwrap();
                assert_eq!(engine.get_rows(&w, &ids).unwrap(), want, "{}", t.name);
            }
            let x = inputs(2 * k, checked);
            let want = ops::mul_mat(t.format, raw, k, &x, 2).unwrap();
            let what = format!("{backend} {model} {}", t.name);
            let mut f = within(&what, &want, &engine.matvec(&w, &x, 2).unwrap());
            f = f.max(within(&what, &want, &engine.matmul(&w, &x, 2).unwrap()));
            match worst.iter_mut().find(|(g, _)| *g == t.format) {
                Some(e) => e.1 = e.1.max(f),
                None => worst.push((t.format, f)),
            }
            checked += 1;
        }
        assert!(checked > 0, "{model}: no 2-D tensor with a shader");
        let report: Vec<String> = worst.iter().map(|(f, w)| format!("{f} {w:.2e}")).collect();
        eprintln!(
            "[{TEST}] {backend} {model}: {checked} tensors; {}",
            report.join(", ")
        );
    }
}
gpu_test!(kernels_real_models, real_model_tensors);

/// Two formats' decode modules (Q4_0 and the i-quant IQ2_XXS) in one caller shader, with the
/// caller's own binding names and numbers: valid under `Capabilities::empty()`, and its output
/// is the CPU codec's.
fn two_decode_modules_in_one_shader(engine: &GpuEngine) {
    let names = |prefix, blocks| DecodeNames {
        prefix,
        blocks,
        grids: "my_grids",
    };
    let q4 = decode_module(Format::Q4_0, &names("q4_", "weights_a")).unwrap();
    let iq = decode_module(Format::IQ2_XXS, &names("iq_", "weights_b")).unwrap();
    let src = format!(
        "@group(1) @binding(7) var<storage, read> weights_a: array<u32>;\n\
         @group(1) @binding(2) var<storage, read> weights_b: array<u32>;\n\
         @group(1) @binding(9) var<storage, read> my_grids: array<u32>;\n\
         @group(1) @binding(0) var<storage, read_write> out: array<f32>;\n\
         {q4}\n{iq}\n\
         @compute @workgroup_size(32)\n\
         fn main(@builtin(local_invocation_index) i: u32) {{\n\
             let a = q4_dequant8((i / 4u) * q4_BLOCK_BYTES, i % 4u);\n\
             let b = iq_dequant8(0u, i);\n\
             for (var j = 0u; j < 8u; j++) {{\n\
                 out[8u * i + j] = bitcast<f32>(a[j / 4u][j % 4u]);\n\
                 out[256u + 8u * i + j] = bitcast<f32>(b[j / 4u][j % 4u]);\n\
             }}\n\
         }}"
    );
    let module = naga::front::wgsl::parse_str(&src).unwrap();
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .unwrap();
    let a = finite_blocks(Format::Q4_0, 8, 1);
    let b = finite_blocks(Format::IQ2_XXS, 1, 2);
    let mut want = cpu::dequant_f32(Format::Q4_0, &a).unwrap();
    want.extend(cpu::dequant_f32(Format::IQ2_XXS, &b).unwrap());

    let device = engine.device();
    let buf = |label, bytes: &[u8]| buffers::upload(device, label, bytes).unwrap();
    let (wa, wb) = (buf("a", &a), buf("b", &b));
    let grids = buf("grids", bytemuck::cast_slice(&tables::words()));
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 512 * 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let pipeline = caller_pipeline(device, "two decoders", &src);
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(1),
        entries: &[(7, &wa), (2, &wb), (9, &grids), (0, &out)].map(|(binding, b)| {
            wgpu::BindGroupEntry {
                binding,
                resource: b.as_entire_binding(),
            }
        }),
    });
    let empty = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[],
    });
    let mut enc = device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &empty, &[]);
        pass.set_bind_group(1, &bind, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    engine.queue().submit([enc.finish()]);
    let got: Vec<f32> =
        bytemuck::pod_collect_to_vec(&read_buffer(device, engine.queue(), &out, 512 * 4));
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&want), "{}", label(engine));
}
gpu_test!(decode_modules_compose, two_decode_modules_in_one_shader);

/// The matvec rows mapping for GPUs (all W invocations of a workgroup on R rows, each chunk of x
/// read once for them), within the bound of the f64 reference and bit-identical to one row per
/// workgroup a chunk per step with the same W and reduction (a row's sums depend on neither R
/// nor the unrolling), rows long enough for a whole unrolled step and a ragged rest (a ragged row
/// end for the one-value formats), 5 rows (a last workgroup of dead rows): every format at one
/// column on 64 invocations and 4 rows, with the subgroup reduction where the adapter has one;
/// on one format of each family also 3 columns and matvec_id (which keeps the classic mapping),
/// on 2 rows unrolled (two chunks of each per step: slow to compile on CPU implementations, and
/// the same loop for every decoder), and on 32 invocations through workgroup memory. Then 8
/// columns (rows halved to 2: rows × columns at most 16) on 8 rows.
fn rows_mapping(engine: &GpuEngine) {
    use gguf_dequant::gpu::kernels::RowsShape;
    let backend = label(engine);
    let open_shape = |shape: RowsShape, unroll: bool, subgroups: bool| {
        GpuEngine::from_device(
            engine.device().clone(),
            engine.queue().clone(),
            EngineOptions {
                matvec: MatVecOptions {
                    mapping: Mapping::Rows(shape),
                    unroll,
                    subgroups,
                    ..MatVecOptions::default()
                },
                ..EngineOptions::default()
            },
        )
        .unwrap()
    };
    let open = |w: u32, r: u32, unroll: bool, subgroups: bool| {
        open_shape(RowsShape::new(w, r).unwrap(), unroll, subgroups)
    };
    let sg = engine
        .device()
        .features()
        .contains(wgpu::Features::SUBGROUP);
    let (wide, one) = (open(64, 4, true, true), open(64, 1, false, true));
    let info = engine.adapter_info();
    assert_eq!(
        wide.matvec_policy()
            .rows_subgroups(RowsShape::new(64, 4).unwrap()),
        sg && info.subgroup_min_size >= 4 && info.subgroup_max_size <= 64,
        "{backend}"
    );
    let (tree, tree_one) = (open(32, 2, true, false), open(32, 1, false, false));
    let tree_shape = RowsShape::new(32, 2).unwrap();
    assert!(!tree.matvec_policy().rows_subgroups(tree_shape));
    assert_eq!(tree.matvec_policy().mapping, Mapping::Rows(tree_shape));
    let two = open(64, 2, true, true);
    let few = [
        Format::Q4_0,
        Format::Q4_K,
        Format::Q6_K,
        Format::IQ2_XXS,
        Format::MXFP4,
        Format::F16,
    ];
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    for (fi, &f) in formats::WITH_SHADER.iter().enumerate() {
        let b = f.block_elems();
        // 1024 values are 128 chunks: one whole step of 64 invocations × 2 chunks, then the rest.
        let k = if b == 1 { 1024 + 13 } else { 1024 + b };
        let seeds = (1900 + fi as u64, fi as u64);
        let what = format!("{backend} {f} rows 64x4 K={k}");
        if few.contains(&f) {
            same_rows(&what, &wide, &one, f, k, 5, seeds);
            same_rows(&format!("{what} (2 rows)"), &two, &one, f, k, 5, seeds);
            same_rows(
                &format!("{what} (32x2 tree)"),
                &tree,
                &tree_one,
                f,
                k,
                5,
                seeds,
            );
            continue;
        }
        let raw = weights(f, k * 5, seeds.0);
        let dims = [k as u64, 5];
        let w = ResidentTensor::upload(&wide, "w", f, &dims, &raw).unwrap();
        let x = inputs(k, seeds.1);
        let got = wide.matvec(&w, &x, 1).unwrap();
        within(&what, &ops::mul_mat(f, &raw, k, &x, 1).unwrap(), &got);
        assert_eq!(bits(got), bits(one.matvec(&w, &x, 1).unwrap()), "{what}");
    }
    // Slots of 2 and 4 chunks (`MatVec::slot`): within the bound, and a row's sums independent of
    // R and U for one slot (2 rows unrolled against 1 rolled); F16's ragged K leaves whole chunks
    // and a ragged one past the whole slots.
    for slot in [2, 4] {
        let shape = |r: u32| RowsShape::new(64, r).unwrap().with_slot(slot).unwrap();
        let (slots, slots_one) = (
            open_shape(shape(2), true, true),
            open_shape(shape(1), false, true),
        );
        for (fi, f) in [Format::Q4_K, Format::Q8_0, Format::F16]
            .into_iter()
            .enumerate()
        {
            let k = if f == Format::F16 {
                1024 + 13
            } else {
                1024 + f.block_elems()
            };
            let what = format!("{backend} {f} rows 64x2s{slot} K={k}");
            let seeds = (2000 + fi as u64, fi as u64);
            same_rows(&what, &slots, &slots_one, f, k, 5, seeds);
        }
    }
    let (f, k, n) = (Format::Q4_K, 1024, 19);
    let raw = weights(f, k * n, 7);
    let w = ResidentTensor::upload(engine, "w", f, &[k as u64, n as u64], &raw).unwrap();
    let eight = open(128, 8, true, true);
    let x = inputs(8 * k, 8);
    let want = ops::mul_mat(f, &raw, k, &x, 8).unwrap();
    within(
        &format!("{backend} rows 128x8, 8 columns"),
        &want,
        &eight.matvec(&w, &x, 8).unwrap(),
    );
    eprintln!("[kernels] {backend}: the rows mapping within the bound, its rows' sums independent of R and U");
}
gpu_test!(kernels_rows_mapping, rows_mapping);

/// binary16 converted by the device's `unpack2x16float` (`MatVec::hw_f16`), which the engine
/// uses where its probe found every f16 converted exactly, against the integer conversion on the
/// same device: formats that read binary16 (F16 weights with a quarter of them subnormal, where
/// a device that flushes would differ; the block formats' random f16 scales), the classic
/// mapping and the rows mapping with slots, 1 and 3 columns and matvec_id: within the bound of
/// the f64 reference and bit-identical. CI's three implementations all convert exactly, so
/// every other kernel test runs the device's conversion of F16 weights there.
fn hw_f16_against_integer(engine: &GpuEngine) {
    use gguf_dequant::gpu::kernels::{reads_f16, RowsShape};
    let backend = label(engine);
    let policy = engine.matvec_policy();
    let hw = policy.hw_f16;
    if support::is_ci() {
        assert!(hw, "{backend}: CI's adapters convert binary16 exactly");
    }
    // CPU adapters keep the block formats' scales on the integer conversion by default.
    let cpu = engine.adapter_info().device_type == wgpu::DeviceType::Cpu;
    assert_eq!(policy.hw_f16_scales, hw && !cpu, "{backend}");
    let open = |mapping: Mapping, hw_f16: bool| {
        GpuEngine::from_device(
            engine.device().clone(),
            engine.queue().clone(),
            EngineOptions {
                matvec: MatVecOptions {
                    mapping,
                    hw_f16: Some(hw_f16),
                    ..MatVecOptions::default()
                },
                ..EngineOptions::default()
            },
        )
        .unwrap()
    };
    let rows = Mapping::Rows(RowsShape::new(64, 2).unwrap().with_slot(4).unwrap());
    let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
    // Every decoder composes the same conversion (tests/cpu/kernel_shaders.rs compiles them
    // all): F16, two k-quants, a 32-value format and an i-quant on the classic mapping; F16 and
    // Q4_K on the rows mapping.
    let classic = [
        Format::F16,
        Format::Q4_K,
        Format::Q6_K,
        Format::Q8_0,
        Format::IQ2_XXS,
    ];
    for (mapping, few) in [(Mapping::Classic, &classic[..]), (rows, &classic[..2])] {
        let (on, off) = (open(mapping, true), open(mapping, false));
        let (p, q) = (on.matvec_policy(), off.matvec_policy());
        assert!(p.hw_f16 == hw && p.hw_f16_scales == hw, "{backend}");
        assert!(!q.hw_f16 && !q.hw_f16_scales);
        for (fi, &f) in few.iter().enumerate() {
            assert!(reads_f16(f), "{f}");
            let b = f.block_elems();
            let k = if b == 1 { 1024 + 13 } else { 1024 + b };
            let what = format!("{backend} {f} {mapping} hw_f16");
            let seeds = (2100 + fi as u64, fi as u64);
            if f != Format::F16 {
                same_rows(&what, &on, &off, f, k, 5, seeds);
                continue;
            }
            // F16: ordinary values, and every fourth a subnormal of either sign.
            let n = 5;
            let mut raw = weights(f, k * n, seeds.0);
            let mut rng = Rng::new(seeds.0);
            for v in raw.chunks_exact_mut(8) {
                let code = (rng.next_u64() & 0x83FF) as u16;
                v[..2].copy_from_slice(&code.to_le_bytes());
            }
            let dims = [k as u64, n as u64];
            let w = ResidentTensor::upload(&on, "w", f, &dims, &raw).unwrap();
            for batch in [1, 3] {
                let x = inputs(batch * k, seeds.1);
                let got = on.matvec(&w, &x, batch).unwrap();
                within(&what, &ops::mul_mat(f, &raw, k, &x, batch).unwrap(), &got);
                let same = off.matvec(&w, &x, batch).unwrap();
                assert_eq!(bits(got), bits(same), "{what} {batch}");
            }
        }
    }
    eprintln!("[kernels] {backend}: binary16 by the device's conversion {hw}, bit-identical to the integer one");
}
gpu_test!(kernels_hw_f16, hw_f16_against_integer);
