//! The kernels' `Recorder` on every adapter: a step of every kernel (on a weight split over
//! buffers and bindings) recorded again and again with one recorder creates no wgpu object once
//! warm and gives the reference's results every time; an engine's own weightless kernel
//! (`Program`) goes through the same recorder on the same terms; a recording that outgrows its
//! uniform buffer is correct and the next one fits; unused bind groups are dropped; bad jobs
//! and programs are typed errors.

use gguf_dequant::gpu::kernels::{
    BindingKind, GetRowsJob, Job, MatVecIdJob, MulMatJob, Operand, Recorder, RETAIN_RECORDINGS,
};
use gguf_dequant::gpu::loader::{ResidentPart, ResidentTensor};
use gguf_dequant::gpu::{buffers, EngineOptions, GpuEngine};
use gguf_dequant::{ops, DType, Error, Format};
use std::sync::Arc;

use crate::gpu_test;
use crate::kernels::{inputs, weights, within};
use crate::support::gpu::{label, read_buffer};

fn storage(engine: &GpuEngine, bytes: u64) -> wgpu::Buffer {
    engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: Some("recorder test"),
        size: bytes.next_multiple_of(16),
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

fn f32s(engine: &GpuEngine, buf: &wgpu::Buffer, n: usize) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(&read_buffer(
        engine.device(),
        engine.queue(),
        buf,
        4 * n as u64,
    ))
}

/// Records `jobs` into one pass with `recorder`, finishes, submits and waits.
fn step(engine: &GpuEngine, recorder: &mut Recorder, jobs: &[Job<'_>]) {
    let mut encoder = engine
        .device()
        .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
        for job in jobs {
            recorder.job(&mut pass, job).unwrap();
        }
    }
    recorder.finish();
    engine.queue().submit([encoder.finish()]);
}

/// A weight of `rows` rows split over two buffers at row `a`.
fn split_weight(
    engine: &GpuEngine,
    f: Format,
    k: usize,
    rows: usize,
    a: usize,
    raw: &[u8],
) -> ResidentTensor {
    let row_bytes = k / f.block_elems() * f.block_bytes();
    let part = |r: std::ops::Range<usize>| {
        let bytes = &raw[r.start * row_bytes..r.end * row_bytes];
        ResidentPart {
            buffer: Arc::new(buffers::upload(engine.device(), "part", bytes).unwrap()),
            range: 0..bytes.len() as u64,
            elements: (r.start * k) as u64..(r.end * k) as u64,
        }
    };
    ResidentTensor {
        name: "split".into(),
        format: f,
        dims: vec![k as u64, rows as u64],
        n_elements: (k * rows) as u64,
        dtype: None,
        parts: vec![part(0..a), part(a..rows)],
    }
}

/// A step of all four kernels on a split IQ2_XXS weight (grids bound too), recorded five times
/// with one recorder: the first step creates the objects, the others none (by the recorder's
/// own count and the engine's), and every step's results are the reference's.
fn warm_steps_create_nothing(engine: &GpuEngine) {
    let f = Format::IQ2_XXS;
    let (k, rows, a) = (512usize, 96usize, 40usize);
    let raw = weights(f, k * rows, 11);
    let w = split_weight(engine, f, k, rows, a, &raw);
    let experts = ResidentTensor {
        dims: vec![k as u64, 24, 4],
        ..w.clone()
    };
    let x_host = inputs(20 * k, 12);
    let x = buffers::upload(engine.device(), "x", bytemuck::cast_slice(&x_host)).unwrap();
    let ids_host = [3u32, 0, rows as u32 - 1, 41];
    let ids = buffers::upload(engine.device(), "ids", bytemuck::cast_slice(&ids_host)).unwrap();
    let eids_host = [2u32, 0, 3, 3];
    let eids = buffers::upload(engine.device(), "eids", bytemuck::cast_slice(&eids_host)).unwrap();
    let (y_mv, y_mm, y_id) = (
        storage(engine, 3 * rows as u64 * 4),
        storage(engine, 20 * rows as u64 * 4),
        storage(engine, 4 * 24 * 4),
    );
    let out = storage(engine, 4 * k as u64 * 4);
    let mv = MulMatJob {
        weight: &w,
        x: Operand::whole(&x),
        y: Operand::whole(&y_mv),
        batch: 3,
    };
    let jobs = [
        Job::GetRows(GetRowsJob {
            weight: &w,
            ids: Operand::whole(&ids),
            n_ids: 4,
            out: Operand::whole(&out),
            dtype: DType::F32,
        }),
        Job::MatVec(mv),
        Job::MatMul(MulMatJob {
            y: Operand::whole(&y_mm),
            batch: 20,
            ..mv
        }),
        Job::MatVecId(MatVecIdJob {
            weight: &experts,
            x: Operand::whole(&x),
            ids: Operand::whole(&eids),
            y: Operand::whole(&y_id),
            tokens: 2,
            slots: 2,
            x_per_slot: false,
        }),
    ];
    let mut recorder = engine.recorder();
    let backend = label(engine);
    for i in 0..5 {
        let before = recorder.stats();
        let engine_before = engine.kernel_objects_created();
        step(engine, &mut recorder, &jobs);
        let made = recorder.stats().since(&before);
        let engine_made = engine.kernel_objects_created() - engine_before;
        if i == 0 {
            assert!(
                made.objects_created() > 0 && engine_made > 0,
                "{backend}: {made:?}"
            );
        } else {
            assert_eq!(made.objects_created(), 0, "{backend} step {i}: {made:?}");
            assert_eq!(engine_made, 0, "{backend} step {i}");
            assert_eq!(
                made.bind_groups_reused, made.dispatches,
                "{backend} step {i}"
            );
        }
        assert!(made.dispatches >= 4, "{made:?}");
        let rows_want = ops::get_rows(f, &raw, k, &ids_host).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&f32s(engine, &out, 4 * k)),
            bits(&rows_want),
            "{backend} get_rows"
        );
        let want = ops::mul_mat(f, &raw, k, &x_host[..3 * k], 3).unwrap();
        within(
            &format!("{backend} matvec step {i}"),
            &want,
            &f32s(engine, &y_mv, 3 * rows),
        );
        let want = ops::mul_mat(f, &raw, k, &x_host, 20).unwrap();
        within(
            &format!("{backend} matmul step {i}"),
            &want,
            &f32s(engine, &y_mm, 20 * rows),
        );
        let want = ops::mul_mat_id(f, &raw, k, 24, &x_host[..2 * k], false, &eids_host, 2).unwrap();
        within(
            &format!("{backend} matvec_id step {i}"),
            &want,
            &f32s(engine, &y_id, 4 * 24),
        );
    }
    eprintln!("[recorder] {backend}: {:?}", recorder.stats());
}
/// Bindings of 8 KiB, so the split weight's parts are several runs of rows each.
fn small_bindings(_: &crate::support::gpu::Adapter) -> EngineOptions {
    EngineOptions {
        max_binding_size: Some(8 << 10),
        ..EngineOptions::default()
    }
}
gpu_test!(
    recorder_warm_steps_create_nothing,
    warm_steps_create_nothing,
    options_for = small_bindings
);

/// An engine's own weightless kernel: `y = x * params.scale + params.shift` over `params.n`
/// values, with a dynamic-offset uniform shared with our kernels.
const SCALE: &str = "
struct Params { n: u32, scale: f32, shift: f32, _pad: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(1) @binding(0) var<uniform> params: Params;
@compute @workgroup_size(64)
fn scale(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < params.n) {
        y[id.x] = x[id.x] * params.scale + params.shift;
    }
}";

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ScaleParams {
    n: u32,
    scale: f32,
    shift: f32,
    _pad: u32,
}

/// The program beside a matvec in one pass: two dispatches with different params each step,
/// correct results, no object after the first step.
fn engines_own_kernel(engine: &GpuEngine) {
    let backend = label(engine);
    let program = engine
        .program(
            "scale",
            SCALE,
            "scale",
            &[
                (0, BindingKind::Storage { min_bytes: 4 }),
                (3, BindingKind::StorageReadWrite { min_bytes: 4 }),
            ],
        )
        .unwrap();
    let n = 320usize;
    let x_host = inputs(n, 3);
    let x = buffers::upload(engine.device(), "x", bytemuck::cast_slice(&x_host)).unwrap();
    let (y1, y2) = (storage(engine, 4 * n as u64), storage(engine, 4 * n as u64));
    let raw = weights(Format::Q4_0, 64 * n, 4);
    let w = ResidentTensor::upload(engine, "w", Format::Q4_0, &[n as u64, 64], &raw).unwrap();
    let y_mv = storage(engine, 64 * 4);
    let mut recorder = engine.recorder();
    for i in 0..3 {
        let before = recorder.stats();
        let mut encoder = engine.device().create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            let bind = |b| wgpu::BufferBinding {
                buffer: b,
                offset: 0,
                size: None,
            };
            let p = |scale, shift| ScaleParams {
                n: n as u32,
                scale,
                shift,
                _pad: 0,
            };
            let groups = [(n as u32).div_ceil(64), 1, 1];
            recorder
                .dispatch(
                    &mut pass,
                    &program,
                    &p(2.0, 1.0),
                    &[bind(&x), bind(&y1)],
                    groups,
                )
                .unwrap();
            // The matvec reads the first program's output.
            let job = MulMatJob {
                weight: &w,
                x: Operand::whole(&y1),
                y: Operand::whole(&y_mv),
                batch: 1,
            };
            recorder.matvec(&mut pass, &job).unwrap();
            recorder
                .dispatch(
                    &mut pass,
                    &program,
                    &p(-0.5, 0.25),
                    &[bind(&x), bind(&y2)],
                    groups,
                )
                .unwrap();
        }
        recorder.finish();
        engine.queue().submit([encoder.finish()]);
        let made = recorder.stats().since(&before);
        if i > 0 {
            assert_eq!(made.objects_created(), 0, "{backend} step {i}: {made:?}");
        }
        let y1v = f32s(engine, &y1, n);
        let y2v = f32s(engine, &y2, n);
        for j in 0..n {
            assert_eq!(y1v[j], x_host[j] * 2.0 + 1.0, "{backend} y1[{j}]");
            assert_eq!(y2v[j], x_host[j] * -0.5 + 0.25, "{backend} y2[{j}]");
        }
        let want = ops::mul_mat(Format::Q4_0, &raw, n, &y1v, 1).unwrap();
        within(
            &format!("{backend} matvec after the program"),
            &want,
            &f32s(engine, &y_mv, 64),
        );
    }
    // Bad calls are typed errors.
    let mut encoder = engine.device().create_command_encoder(&Default::default());
    let mut pass = encoder.begin_compute_pass(&Default::default());
    let bind = |b| wgpu::BufferBinding {
        buffer: b,
        offset: 0,
        size: None,
    };
    let p = ScaleParams {
        n: 1,
        scale: 1.0,
        shift: 0.0,
        _pad: 0,
    };
    let r = recorder.dispatch(&mut pass, &program, &p, &[bind(&x)], [1, 1, 1]);
    assert!(
        matches!(r, Err(Error::Gpu(_))),
        "one buffer for two bindings"
    );
    let odd = wgpu::BufferBinding {
        buffer: &x,
        offset: 4,
        size: None,
    };
    let r = recorder.dispatch(&mut pass, &program, &p, &[odd, bind(&y1)], [1, 1, 1]);
    assert!(matches!(r, Err(Error::Gpu(_))), "an unaligned offset");
    let big = [0u32; 65];
    let r = recorder.dispatch(&mut pass, &program, &big, &[bind(&x), bind(&y1)], [1, 1, 1]);
    assert!(matches!(r, Err(Error::Gpu(_))), "params over 256 bytes");
    drop(pass);
    let twice = [
        (0, BindingKind::Storage { min_bytes: 4 }),
        (0, BindingKind::Storage { min_bytes: 4 }),
    ];
    assert!(engine.program("twice", SCALE, "scale", &twice).is_err());
    assert!(engine.program("broken", "fn nope(", "scale", &[]).is_err());
}
gpu_test!(recorder_engines_own_kernel, engines_own_kernel);

/// 300 matvec dispatches in one recording (far past the first uniform buffer): every result
/// right; the next recording fits one buffer and creates nothing. A bind group unused for
/// RETAIN_RECORDINGS recordings is dropped and made again when needed.
fn outgrown_uniforms_and_eviction(engine: &GpuEngine) {
    let backend = label(engine);
    let (k, rows) = (64usize, 8usize);
    let raw = weights(Format::Q8_0, k * rows, 5);
    let w =
        ResidentTensor::upload(engine, "w", Format::Q8_0, &[k as u64, rows as u64], &raw).unwrap();
    let calls = 300usize;
    let x_host = inputs(calls * k, 6);
    let x = buffers::upload(engine.device(), "x", bytemuck::cast_slice(&x_host)).unwrap();
    let y = storage(engine, (calls * rows * 4) as u64);
    let align = engine.offset_alignment();
    // Each call its own column: x and y offsets that keep the storage alignment.
    let stride_x = (k as u64 * 4).next_multiple_of(align);
    let stride_y = (rows as u64 * 4).next_multiple_of(align);
    let xs = buffers::upload_sized(
        engine.device(),
        "xs",
        &[],
        stride_x * calls as u64,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    )
    .unwrap();
    for c in 0..calls {
        engine.queue().write_buffer(
            &xs,
            c as u64 * stride_x,
            bytemuck::cast_slice(&x_host[c * k..(c + 1) * k]),
        );
    }
    drop(x);
    let ys = storage(engine, stride_y * calls as u64);
    drop(y);
    let jobs: Vec<Job<'_>> = (0..calls)
        .map(|c| {
            Job::MatVec(MulMatJob {
                weight: &w,
                x: Operand {
                    buffer: &xs,
                    offset: c as u64 * stride_x,
                },
                y: Operand {
                    buffer: &ys,
                    offset: c as u64 * stride_y,
                },
                batch: 1,
            })
        })
        .collect();
    let mut recorder = engine.recorder();
    for i in 0..3 {
        let before = recorder.stats();
        step(engine, &mut recorder, &jobs);
        let made = recorder.stats().since(&before);
        match i {
            0 => assert!(
                made.buffers_created > 1,
                "{backend}: the first recording outgrows its buffer: {made:?}"
            ),
            1 => assert_eq!(
                made.buffers_created, 1,
                "{backend}: one buffer that holds it all"
            ),
            _ => assert_eq!(made.objects_created(), 0, "{backend}: {made:?}"),
        }
        let got = f32s(engine, &ys, (stride_y / 4) as usize * calls);
        for c in 0..calls {
            let want = ops::mul_mat(Format::Q8_0, &raw, k, &x_host[c * k..(c + 1) * k], 1).unwrap();
            let at = c * (stride_y / 4) as usize;
            within(
                &format!("{backend} recording {i} call {c}"),
                &want,
                &got[at..at + rows],
            );
        }
    }
    // Eviction: the first job's bind group survives RETAIN_RECORDINGS empty recordings, not one
    // more.
    for _ in 0..RETAIN_RECORDINGS {
        recorder.finish();
    }
    let before = recorder.stats();
    step(engine, &mut recorder, &jobs[..1]);
    assert_eq!(
        recorder.stats().since(&before).bind_groups_created,
        0,
        "{backend}: kept"
    );
    for _ in 0..=RETAIN_RECORDINGS {
        recorder.finish();
    }
    let before = recorder.stats();
    step(engine, &mut recorder, &jobs[..1]);
    assert_eq!(
        recorder.stats().since(&before).bind_groups_created,
        1,
        "{backend}: evicted"
    );
}
gpu_test!(
    recorder_outgrown_uniforms_and_eviction,
    outgrown_uniforms_and_eviction
);
