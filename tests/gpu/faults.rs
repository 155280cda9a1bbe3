//! Faults: the window planner on impossible limits (and the fuzz target's regressions), requests
//! larger than the device or the loader's budget (typed errors before anything is allocated or
//! sent), a lost device (typed `DeviceLost`, then recovery on a fresh device), faults in the
//! middle of a multi-chunk load with several reader threads (the device lost, a shard truncated
//! or replaced: typed errors, nothing left registered, no reader thread left running), and a
//! missing adapter in the CLI (one `error:` line with the install hint).
//!
//! GPU tests run on every adapter (`gpu_test!`); no silent skips under `CI=true`.

use std::sync::Arc;

use gguf_dequant::gguf::{GgufWriter, SplitLimit};
use gguf_dequant::gpu::loader::{
    LoadOptions, Progress, Residency, ServiceStats, Source, WeightLoader, READER_THREAD,
};
use gguf_dequant::gpu::{plan_windows, windows, DequantJob, EngineOptions, GpuEngine, GpuError};
use gguf_dequant::Selection;
use gguf_dequant::{DType, Error, Format, GgufFile};

use crate::gpu_test;
use crate::support::codec::{compare, cpu};
use crate::support::gguf::{random_tensors, save};
use crate::support::gpu::Adapter;
use crate::support::rng::random_blocks;

// ---- The window planner ----------------------------------------------------------------------

/// Checks every window of a plan the way the fuzz target does.
fn check_plan(format: Format, dtype: DType, limit: u64, align: u64, n_blocks: u64) {
    let plan = plan_windows(format, dtype, limit, align).unwrap();
    let (bytes, out) = (
        format.block_bytes() as u64,
        (format.block_elems() * dtype.size()) as u64,
    );
    let mut next = 0;
    for (first, count) in plan.windows(n_blocks) {
        assert_eq!(first, next);
        assert_eq!((first * bytes) % align, 0, "{format} align {align}");
        assert_eq!((first * out) % align, 0, "{format} align {align}");
        assert_eq!((first * out) % 16, 0);
        let (s, d) = windows::padded(format, count, dtype.size() as u64);
        assert!(s <= limit && d <= limit, "{format}: {s}/{d} > {limit}");
        next = first + count;
    }
    assert_eq!(next, n_blocks);
    assert_eq!(plan.count(n_blocks), plan.windows(n_blocks).count() as u64);
}

#[test]
fn planner_takes_any_alignment() {
    for &f in Format::ALL {
        for dtype in DType::ALL {
            for align in [1u64, 3, 4, 7, 12, 48, 100, 256, 1000] {
                check_plan(f, dtype, 1 << 20, align, 1001);
            }
        }
    }
}

#[test]
fn planner_rejects_impossible_limits_with_typed_errors() {
    // Alignment 0 used to divide by zero.
    assert!(matches!(
        plan_windows(Format::Q4_0, DType::F32, 1 << 20, 0),
        Err(GpuError::InvalidLimits(_))
    ));
    // An odd alignment near 2^64: the step of blocks overflows (used to overflow in lcm).
    for align in [u64::MAX, u64::MAX - 2, (1 << 63) + 1] {
        assert!(
            matches!(
                plan_windows(Format::Q8_0, DType::F16, u64::MAX, align),
                Err(GpuError::InvalidLimits(_))
            ),
            "{align}"
        );
    }
    // A limit below one step.
    assert!(matches!(
        plan_windows(Format::Q4_K, DType::F32, 1023, 4),
        Err(GpuError::LimitTooSmall {
            limit: 1023,
            step_blocks: 1,
            ..
        })
    ));
}

/// Fuzz crash `crash-be1f69fe…` (`fuzz/fuzz_targets/plan.rs`): a limit past 4 GiB with a 2^39
/// alignment. `LimitTooSmall` must name the limit it was given, not the 4 GiB window cap.
#[test]
fn fuzz_regression_limit_too_small_names_the_given_limit() {
    let format = Format::ALL[0x2a % Format::ALL.len()];
    let limit = 0x0500_0000_0000_0000u64;
    match plan_windows(format, DType::BF16, limit, 1 << 39) {
        Err(GpuError::LimitTooSmall { limit: l, .. }) => assert_eq!(l, limit),
        other => panic!("{other:?}"),
    }
}

/// Windows never pass 4 GiB (the shaders index with u32), whatever the device allows.
#[test]
fn windows_are_capped_at_4_gib() {
    let p = plan_windows(Format::F32, DType::F32, u64::MAX, 256).unwrap();
    let (s, d) = windows::padded(Format::F32, p.max_blocks, 4);
    assert!(s <= windows::MAX_WINDOW_BYTES && d <= windows::MAX_WINDOW_BYTES);
    // The last window of a huge count, without walking the others.
    let n = u64::MAX / 8;
    let (first, count) = p.windows(n).next_back().unwrap();
    assert_eq!(first + count, n);
    assert_eq!(p.count(n), n.div_ceil(p.max_blocks));
}

// ---- Requests larger than the device or the budget --------------------------------------------

fn write_file(dir: &tempfile::TempDir) -> GgufFile {
    let mut w = GgufWriter::new();
    w.metadata("general.name", "faults-test");
    let tensors = [
        ("a.q8", Format::Q8_0, 300),
        // 40 blocks: more than one raw part even at SwiftShader's 256-byte offset alignment
        // (a raw Q4_K part is a multiple of 16 blocks there, of 2 at lavapipe's 32).
        ("b.q4k", Format::Q4_K, 40),
        ("c.f16", Format::F16, 1000),
    ];
    random_tensors(&mut w, &tensors, 77);
    save(&w, &dir.path().join("faults.gguf"))
}

/// Every tensor of `model` equals the file (raw) or the CPU codecs.
fn check_model(
    loader: &WeightLoader,
    file: &GgufFile,
    model: &gguf_dequant::gpu::loader::ResidentModel,
) {
    for t in model.tensors() {
        let src = file.tensor_data(file.tensor(&t.name).unwrap());
        let got = loader.read_back(t).unwrap();
        match t.dtype {
            None => assert!(got == src, "{}", t.name),
            Some(d) => compare(t.format, d, &got, &cpu(t.format, src, d)).unwrap(),
        }
    }
}

fn loader_budget_fails_before_allocating(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir);
    let loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    // The first tensor's f32 buffer (a.q8: 300 blocks of 32 values, 16 bytes of padding) fits
    // the last budget, the second one's does not: the load fails half-way through allocating.
    let first = 300 * 32 * 4 + 16;
    for budget in [0u64, 1000, 20_000, first + 1000] {
        let opts = LoadOptions {
            gpu_budget_bytes: Some(budget),
            readers: 3,
            ..LoadOptions::default()
        };
        let err = loader
            .load_with(
                &file,
                &Selection::All,
                Residency::Dequantised(DType::F32),
                &opts,
            )
            .unwrap_err();
        assert!(
            matches!(err, Error::Gpu(GpuError::OutOfMemory { .. })),
            "{budget}: {err}"
        );
        assert!(err.hint().is_some());
        assert_eq!(loader.stats(), ServiceStats::default(), "{budget}");
    }
    // The loader is unharmed: a budget that holds everything loads.
    let opts = LoadOptions {
        gpu_budget_bytes: Some(1 << 20),
        ..LoadOptions::default()
    };
    let model = loader
        .load_with(
            &file,
            &Selection::All,
            Residency::Dequantised(DType::F32),
            &opts,
        )
        .unwrap();
    check_model(&loader, &file, &model);
    assert!(loader.stats().allocated_bytes > first);
    drop(model);
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(
    loader_budget_fails_before_allocating,
    loader_budget_fails_before_allocating
);

/// A tensor whose smallest aligned part is bigger than the largest buffer: splitting cannot help,
/// so the load fails with `TooLarge` before any buffer exists (it used to create a buffer past
/// the limit). The largest buffer is 512 bytes, or one raw aligned part where that is more
/// (SwiftShader: 16 Q4_K blocks, 2304 bytes, at its 256-byte offset alignment).
fn unsplittable_tensor_is_too_large_before_allocating(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir);
    // A part's offsets serve every output dtype: the step of a 2-byte output.
    let raw_step = plan_windows(
        Format::Q4_K,
        DType::F16,
        u64::MAX >> 8,
        e.offset_alignment(),
    )
    .unwrap()
    .step_blocks;
    let max_buffer = (raw_step * Format::Q4_K.block_bytes() as u64).max(512);
    if e.offset_alignment() <= 32 {
        assert_eq!(max_buffer, 512);
    }
    let loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    let opts = LoadOptions {
        max_buffer_bytes: Some(max_buffer),
        ..LoadOptions::default()
    };
    let q4k = Selection::names(["b.q4k"]);
    let err = loader
        .load_with(&file, &q4k, Residency::Dequantised(DType::F32), &opts)
        .unwrap_err();
    match &err {
        Error::Gpu(GpuError::TooLarge { bytes, limit, .. }) => {
            assert_eq!(*limit, max_buffer);
            assert!(*bytes > max_buffer);
        }
        other => panic!("{other}"),
    }
    assert_eq!(loader.stats(), ServiceStats::default());
    // Raw, the same tensor splits into parts of at most `max_buffer` bytes and loads.
    let model = loader
        .load_with(&file, &q4k, Residency::Raw, &opts)
        .unwrap();
    assert!(model.tensors()[0].parts.len() > 1);
    check_model(&loader, &file, &model);
}
gpu_test!(
    unsplittable_tensor_is_too_large_before_allocating,
    unsplittable_tensor_is_too_large_before_allocating
);

/// `GpuEngine::dequant` with a binding limit (1000 bytes) below one Q4_K block's f32 output: `LimitTooSmall` before any
/// buffer is created; the engine keeps working (no uncaptured error left behind).
fn engine_request_past_the_binding_limit_is_refused_up_front(e: &GpuEngine) {
    let src = random_blocks(Format::Q4_K, 4, 1);
    let err = e.dequant(Format::Q4_K, &src, DType::F32).unwrap_err();
    assert!(
        matches!(err, Error::Gpu(GpuError::LimitTooSmall { limit: 1000, .. })),
        "{err}"
    );
    e.check_device().unwrap();
    // A format whose aligned step fits 1000 bytes still works on the same engine, in windows.
    let src = random_blocks(Format::F16, 5000, 2);
    let got = e.dequant(Format::F16, &src, DType::F32).unwrap();
    compare(
        Format::F16,
        DType::F32,
        &got,
        &cpu(Format::F16, &src, DType::F32),
    )
    .unwrap();
}
gpu_test!(
    engine_request_past_the_binding_limit_is_refused_up_front,
    engine_request_past_the_binding_limit_is_refused_up_front,
    options = EngineOptions {
        max_binding_size: Some(1000),
        ..EngineOptions::default()
    }
);

/// A device with a small `max_buffer_size` (`required_limits`): below the lookup tables' size,
/// `from_device` is a typed error (it used to panic inside `create_buffer_init`); just above it,
/// an output several times the largest buffer is cut into buffer-sized chunks and decodes
/// exactly.
fn small_device_buffers_are_errors_or_chunks_never_panics(adapter: &Adapter) {
    const TEST: &str = "small_device_buffers_are_errors_or_chunks_never_panics";
    let tables = gguf_dequant::gpu::tables::words().len() as u64 * 4;
    let device_with = |max_buffer_size: u64| {
        let mut limits = adapter.limits();
        limits.max_buffer_size = max_buffer_size;
        pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some(TEST),
            required_limits: limits,
            ..Default::default()
        }))
        .unwrap()
    };

    let (device, queue) = device_with(768);
    let err = GpuEngine::from_device(device, queue, EngineOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Gpu(GpuError::Validation { .. } | GpuError::Map(_))
        ),
        "{err}"
    );

    let max = tables.next_multiple_of(256);
    let (device, queue) = device_with(max);
    let e = GpuEngine::from_device(device, queue, EngineOptions::default()).unwrap();
    let n_blocks = (4 * max / 1024) as usize + 3;
    let src = random_blocks(Format::Q4_K, n_blocks, 3);
    let got = e.dequant(Format::Q4_K, &src, DType::F32).unwrap();
    assert!(got.len() as u64 > 4 * max);
    compare(
        Format::Q4_K,
        DType::F32,
        &got,
        &cpu(Format::Q4_K, &src, DType::F32),
    )
    .unwrap();
    e.check_device().unwrap();
}
gpu_test!(
    small_device_buffers_are_errors_or_chunks_never_panics,
    small_device_buffers_are_errors_or_chunks_never_panics
);

/// A caller's job whose block count overflows a 64-bit size is `InvalidJob`, not an arithmetic
/// overflow (it used to panic in debug builds and wrap in release ones).
fn record_with_an_overflowing_block_count_is_invalid(e: &GpuEngine) {
    let buf = |usage| {
        e.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 1024,
            usage,
            mapped_at_creation: false,
        })
    };
    let src = buf(wgpu::BufferUsages::STORAGE);
    let dst = buf(wgpu::BufferUsages::STORAGE);
    let mut encoder = e.device().create_command_encoder(&Default::default());
    for n_blocks in [u64::MAX, u64::MAX / 18 + 1, 1 << 60] {
        let err = e
            .record(
                &mut encoder,
                &DequantJob {
                    format: Format::Q4_0,
                    dtype: DType::F32,
                    src: &src,
                    src_offset: 0,
                    n_blocks,
                    dst: &dst,
                    dst_offset: 0,
                },
            )
            .unwrap_err();
        assert!(
            matches!(err, Error::Gpu(GpuError::InvalidJob(_))),
            "{n_blocks}: {err}"
        );
    }
    e.check_device().unwrap();
}
gpu_test!(
    record_with_an_overflowing_block_count_is_invalid,
    record_with_an_overflowing_block_count_is_invalid
);

// ---- Device lost -----------------------------------------------------------------------------

fn engine_device_lost_then_recreated(e: &GpuEngine) {
    let src = random_blocks(Format::Q4_K, 20, 5);
    let want = cpu(Format::Q4_K, &src, DType::F16);
    compare(
        Format::Q4_K,
        DType::F16,
        &e.dequant(Format::Q4_K, &src, DType::F16).unwrap(),
        &want,
    )
    .unwrap();
    assert!(!e.is_lost());

    e.device().destroy();
    assert!(e.is_lost());
    for _ in 0..2 {
        let err = e.dequant(Format::Q4_K, &src, DType::F16).unwrap_err();
        assert!(matches!(err, Error::Gpu(GpuError::DeviceLost(_))), "{err}");
        assert!(err.hint().unwrap().contains("new device"));
    }
    assert!(matches!(
        e.check_device(),
        Err(Error::Gpu(GpuError::DeviceLost(_)))
    ));
    // Recording into a caller's encoder on the lost device: an error, not a panic.
    let buf = |usage| {
        e.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: 1 << 16,
            usage,
            mapped_at_creation: false,
        })
    };
    let (s, d) = (
        buf(wgpu::BufferUsages::STORAGE),
        buf(wgpu::BufferUsages::STORAGE),
    );
    let mut encoder = e.device().create_command_encoder(&Default::default());
    let err = e
        .record(
            &mut encoder,
            &DequantJob {
                format: Format::Q4_K,
                dtype: DType::F16,
                src: &s,
                src_offset: 0,
                n_blocks: 20,
                dst: &d,
                dst_offset: 0,
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::Gpu(GpuError::DeviceLost(_))), "{err}");

    let fresh = e.recreate().unwrap();
    assert!(!fresh.is_lost());
    let got = fresh.dequant(Format::Q4_K, &src, DType::F16).unwrap();
    compare(Format::Q4_K, DType::F16, &got, &want).unwrap();
}
gpu_test!(
    engine_device_lost_then_recreated,
    engine_device_lost_then_recreated
);

fn engine_on_a_callers_device_cannot_recreate_it(e: &GpuEngine) {
    let caller = GpuEngine::from_device(
        e.device().clone(),
        e.queue().clone(),
        EngineOptions::default(),
    )
    .unwrap();
    assert!(matches!(
        caller.recreate(),
        Err(Error::Gpu(GpuError::DeviceLost(_)))
    ));
}
gpu_test!(
    engine_on_a_callers_device_cannot_recreate_it,
    engine_on_a_callers_device_cannot_recreate_it
);

fn loader_device_lost_then_recovered(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir);
    let loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    let model = loader
        .load(&file, &Selection::All, Residency::Dequantised(DType::BF16))
        .unwrap();
    check_model(&loader, &file, &model);
    let before = loader.stats();

    loader.device().destroy();
    assert!(loader.is_lost());
    for residency in [Residency::Raw, Residency::Dequantised(DType::F32)] {
        let err = loader.load(&file, &Selection::All, residency).unwrap_err();
        assert!(matches!(err, Error::Gpu(GpuError::DeviceLost(_))), "{err}");
    }
    // Nothing more registered by the failed loads.
    assert_eq!(loader.stats(), before);
    let err = loader.read_back(&model.tensors()[0]).unwrap_err();
    assert!(matches!(err, Error::Gpu(GpuError::DeviceLost(_))), "{err}");
    drop(model);
    assert_eq!(loader.stats(), ServiceStats::default());

    let fresh = loader.recover().unwrap();
    assert!(!fresh.is_lost());
    for residency in [Residency::Raw, Residency::Dequantised(DType::F32)] {
        let model = fresh.load(&file, &Selection::All, residency).unwrap();
        check_model(&fresh, &file, &model);
    }
    assert_eq!(fresh.stats(), ServiceStats::default());
}
gpu_test!(
    loader_device_lost_then_recovered,
    loader_device_lost_then_recovered
);

// ---- Faults in the middle of a load ------------------------------------------------------------

/// No reader thread left once a load has returned. A joined thread can stay listed in
/// `/proc/self/task` for a moment while the kernel finishes its exit: wait for that (never
/// more than 10 s; a thread still running would stay).
fn assert_no_reader_threads() {
    for _ in 0..1000 {
        if reader_threads() == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(reader_threads(), 0, "reader threads still running");
}

/// The loader's reader threads alive in this process (Linux; 0 elsewhere). The tests below are
/// `exclusive`, so no other GPU test's load runs meanwhile.
fn reader_threads() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == READER_THREAD)
        .count()
}

/// Options for a load of many small chunks through three reader threads, calling `f` with the
/// number of the chunk just submitted (1, 2, ...) and the reader threads alive then.
fn chunked(source: Source, f: impl Fn(u64, usize) + Send + Sync + 'static) -> LoadOptions {
    let calls = std::sync::atomic::AtomicU64::new(0);
    LoadOptions {
        staging_bytes: 3 * 4096,
        slots: 3,
        readers: 3,
        source,
        progress: Some(Progress::new(move |_| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            f(n, reader_threads())
        })),
        ..LoadOptions::default()
    }
}

/// The device destroyed from the progress callback after the first chunk of a multi-chunk load:
/// `DeviceLost`, nothing registered, no reader left; the recovered loader loads the file.
fn device_lost_mid_load(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir);
    let mut loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    for (source, residency) in [
        (Source::Mmap, Residency::Raw),
        (Source::DirectRead, Residency::Dequantised(DType::F16)),
    ] {
        let device = loader.device().clone();
        let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen_by = seen.clone();
        let opts = chunked(source, move |n, readers| {
            if n == 1 {
                seen_by.store(readers, std::sync::atomic::Ordering::SeqCst);
                device.destroy();
            }
        });
        let err = loader
            .load_with(&file, &Selection::All, residency, &opts)
            .unwrap_err();
        assert!(
            matches!(err, Error::Gpu(GpuError::DeviceLost(_))),
            "{source} {residency:?}: {err}"
        );
        if cfg!(target_os = "linux") {
            assert!(seen.load(std::sync::atomic::Ordering::SeqCst) >= 1);
        }
        assert_no_reader_threads();
        assert_eq!(loader.stats(), ServiceStats::default());
        loader = loader.recover().unwrap();
        let model = loader
            .load_with(
                &file,
                &Selection::All,
                residency,
                &chunked(source, |_, _| {}),
            )
            .unwrap();
        assert!(model.report().chunks > 3, "{:?}", model.report());
        check_model(&loader, &file, &model);
        drop(model);
        assert_eq!(loader.stats(), ServiceStats::default());
    }
}
gpu_test!(device_lost_mid_load, device_lost_mid_load, exclusive = true);

/// The faults test file as a split set of three shards (one tensor each): the paths.
fn write_split_set(dir: &tempfile::TempDir) -> Vec<std::path::PathBuf> {
    let mut w = GgufWriter::new();
    w.metadata("general.name", "faults-split");
    random_tensors(
        &mut w,
        &[
            ("a.q8", Format::Q8_0, 300),
            ("b.q4k", Format::Q4_K, 40),
            ("c.f16", Format::F16, 1000),
        ],
        78,
    );
    let paths = w
        .write_split(&dir.path().join("set.gguf"), SplitLimit::Tensors(1))
        .unwrap();
    assert_eq!(paths.len(), 3);
    paths
}

/// `FileChanged` naming `path`, with `reason` in its message.
fn assert_changed(err: &Error, path: &std::path::Path, reason: &str) {
    match err {
        Error::FileChanged { path: p, reason: r } => {
            assert_eq!(p, path, "{err}");
            assert!(r.contains(reason), "{err}");
        }
        other => panic!("expected FileChanged on {}: {other}", path.display()),
    }
}

/// Shard 2 of a split set truncated from the progress callback after the first chunk (plain
/// reads: truncating under a memory map is SIGBUS by contract): `FileChanged` naming shard 2,
/// nothing registered, no reader left; restored and reopened, the set loads.
fn shard_truncated_mid_load(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_split_set(&dir);
    let file = GgufFile::open(&paths[0]).unwrap();
    assert_eq!(file.shards().len(), 3);
    // Shard 1's tensor takes several chunks, so shard 2 is read only after the callback ran.
    let a = file.tensor("a.q8").unwrap().n_bytes;
    assert!(a > 2 * 4096);
    let original = std::fs::read(&paths[1]).unwrap();
    let loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    let shard2 = paths[1].clone();
    let cut = (original.len() - 1000) as u64;
    let opts = chunked(Source::DirectRead, move |n, _| {
        if n == 1 {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&shard2)
                .unwrap();
            f.set_len(cut).unwrap();
        }
    });
    let err = loader
        .load_with(&file, &Selection::All, Residency::Raw, &opts)
        .unwrap_err();
    assert_changed(&err, &paths[1], "ends before byte");
    assert!(err.hint().is_some());
    assert_no_reader_threads();
    assert_eq!(loader.stats(), ServiceStats::default());
    drop(file);

    std::fs::write(&paths[1], &original).unwrap();
    let file = GgufFile::open(&paths[0]).unwrap();
    let opts = chunked(Source::DirectRead, |_, _| {});
    let model = loader
        .load_with(&file, &Selection::All, Residency::Raw, &opts)
        .unwrap();
    check_model(&loader, &file, &model);
    drop(model);
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(
    shard_truncated_mid_load,
    shard_truncated_mid_load,
    exclusive = true
);

/// Shard 2 replaced (a copy renamed over it) from the progress callback after the first chunk,
/// with both sources: `FileChanged` naming shard 2 as replaced (its inode changed), nothing
/// registered, no reader left; reopened, the set loads.
fn shard_replaced_mid_load(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_split_set(&dir);
    let loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    for source in [Source::Mmap, Source::DirectRead] {
        let file = GgufFile::open(&paths[0]).unwrap();
        let (shard2, copy) = (paths[1].clone(), dir.path().join("replacement.gguf"));
        let opts = chunked(source, move |n, _| {
            if n == 1 {
                std::fs::copy(&shard2, &copy).unwrap();
                std::fs::rename(&copy, &shard2).unwrap();
            }
        });
        let err = loader
            .load_with(&file, &Selection::All, Residency::Raw, &opts)
            .unwrap_err();
        assert_changed(&err, &paths[1], "replaced");
        assert_no_reader_threads();
        assert_eq!(loader.stats(), ServiceStats::default(), "{source}");
        drop(file);
        let file = GgufFile::open(&paths[0]).unwrap();
        let model = loader
            .load_with(
                &file,
                &Selection::All,
                Residency::Raw,
                &chunked(source, |_, _| {}),
            )
            .unwrap();
        check_model(&loader, &file, &model);
    }
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(
    shard_replaced_mid_load,
    shard_replaced_mid_load,
    exclusive = true
);

/// `Source::Direct` (`O_DIRECT`): the file loads exactly, or, where the file system refuses
/// `O_DIRECT` (tmpfs, some overlays; every system but Linux), one typed `Io` error saying so.
fn o_direct_loads_or_says_why(e: GpuEngine) {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir);
    let loader = WeightLoader::with_engine(Arc::new(e), LoadOptions::default());
    for residency in [Residency::Raw, Residency::Dequantised(DType::BF16)] {
        match loader.load_with(
            &file,
            &Selection::All,
            residency,
            &chunked(Source::Direct, |_, _| {}),
        ) {
            Ok(model) => {
                assert_eq!(model.report().source, Source::Direct);
                check_model(&loader, &file, &model);
            }
            Err(err @ Error::Io { .. }) => {
                assert!(err.to_string().contains("O_DIRECT"), "{err}");
                eprintln!("O_DIRECT refused here: {err}");
            }
            Err(other) => panic!("{other}"),
        }
        assert_no_reader_threads();
    }
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(
    o_direct_loads_or_says_why,
    o_direct_loads_or_says_why,
    exclusive = true
);

// ---- A missing adapter in the CLI ----------------------------------------------------------------

#[cfg(feature = "cli")]
fn cli(args: &[&str]) -> std::process::Output {
    crate::support::cli::bin()
        .args(args)
        .env_remove("GGUF_DEQUANT_BACKEND")
        .output()
        .unwrap()
}

/// `--backend metal` on Linux: `selftest` passes on the CPU with the hint; `verify` and `load`
/// fail with exit 1 and exactly one `error:` line that carries the same hint.
#[cfg(all(target_os = "linux", feature = "cli"))]
#[test]
fn missing_adapter_gives_the_selftest_hint_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_file(&dir);
    let path = file.path().to_str().unwrap().to_string();

    let o = cli(&["selftest", "--backend", "metal"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(err.contains("mesa-vulkan-drivers"), "{err}");

    for args in [
        vec!["verify", path.as_str(), "--backend", "metal"],
        vec!["load", path.as_str(), "--backend", "metal"],
        vec![
            "load",
            path.as_str(),
            "--backend",
            "metal",
            "--dtype",
            "raw",
        ],
    ] {
        let o = cli(&args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains("mesa-vulkan-drivers"), "{args:?}: {err}");
        assert!(err.to_lowercase().contains("metal"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}
