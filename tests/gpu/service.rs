//! The GPU-resident weight loading service (`gguf_dequant::gpu::loader`): raw and dequantised
//! residency against the CPU codecs (a writer-built file and the real SmolLM2 model), the
//! record-into-encoder API and `wgsl_decode_source` on a test-owned device, 8 threads through one
//! loader, small staging / binding / buffer limits, and failed loads that leave nothing behind.
//!
//! Adapters: lavapipe Vulkan and llvmpipe GL (whatever the machine has, `gpu_test!`); no silent
//! skips under `CI=true`.

use std::sync::Arc;

use gguf_dequant::gguf::GgufWriter;
use gguf_dequant::gpu::loader::{
    drop_page_cache, LoadOptions, RecordJob, Residency, RooflineOptions, ServiceStats, Source,
    WeightLoader,
};
use gguf_dequant::gpu::shaders::wgsl_decode_source;
use gguf_dequant::gpu::{EngineOptions, GpuEngine, GpuError};
use gguf_dequant::Selection;
use gguf_dequant::{DType, Error, Format, GgufFile};

use crate::gpu_test;
use crate::support;
use crate::support::codec::{compare, cpu};
use crate::support::gguf::{random_tensors, temp_file};
use crate::support::gpu::{caller_pipeline, label, read_buffer, Adapter};

/// A small file with the model's formats (and one without a shader), about 2.3 MB, as
/// `small.gguf` in a temporary directory.
fn small_file() -> (tempfile::TempDir, GgufFile) {
    let tensors = [
        ("tok_embd.weight", Format::Q8_0, 45_000),
        ("blk.0.attn_q.weight", Format::Q4_1, 30_000),
        ("blk.0.attn_norm.weight", Format::F32, 576),
        ("blk.0.ffn_up.weight", Format::Q4_0, 3_001),
        ("blk.1.attn_q.weight", Format::F16, 20_002),
        ("blk.1.ffn_down.weight", Format::Q4_K, 33),
        ("output_norm.weight", Format::F32, 7),
        ("token_types", Format::I32, 101),
    ];
    let mut w = GgufWriter::new();
    w.metadata("general.name", "service-test");
    random_tensors(&mut w, &tensors, 0);
    temp_file(&w, "small.gguf")
}

fn loader(engine: GpuEngine, load: LoadOptions) -> WeightLoader {
    WeightLoader::with_engine(Arc::new(engine), load)
}

/// Every resident tensor equals the file (raw) or the CPU codecs (dequantised).
fn check_model(
    loader: &WeightLoader,
    file: &GgufFile,
    model: &gguf_dequant::gpu::loader::ResidentModel,
) {
    for t in model.tensors() {
        let info = file.tensor(&t.name).unwrap();
        let got = loader.read_back(t).unwrap();
        let src = file.tensor_data(info);
        match t.dtype {
            None => assert!(got == src, "{}: raw bytes differ", t.name),
            Some(d) => {
                if let Err(e) = compare(t.format, d, &got, &cpu(t.format, src, d)) {
                    panic!("{}: {e}", t.name);
                }
            }
        }
        assert_eq!(t.dims, info.dims);
        assert_eq!(t.n_elements, info.n_elements);
    }
}

fn residencies() -> [Residency; 4] {
    [
        Residency::Raw,
        Residency::Dequantised(DType::F32),
        Residency::Dequantised(DType::F16),
        Residency::Dequantised(DType::BF16),
    ]
}

fn small_file_all_residencies(engine: GpuEngine) {
    let backend = label(&engine);
    let loader = loader(engine, LoadOptions::default());
    let (_dir, file) = small_file();
    for residency in residencies() {
        for source in [Source::Mmap, Source::DirectRead] {
            let opts = LoadOptions {
                source,
                ..LoadOptions::default()
            };
            let model = loader
                .load_with(&file, &Selection::All, residency, &opts)
                .unwrap();
            assert_eq!(model.tensors().len(), file.tensors().len());
            check_model(&loader, &file, &model);
            let r = model.report();
            assert_eq!(
                r.bytes_read,
                file.tensors().iter().map(|t| t.n_bytes).sum::<u64>()
            );
            eprintln!("{backend} {residency:?} {source}: {r:?}");
        }
    }
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(small_file_all_residencies, small_file_all_residencies);

/// A 1 MiB staging budget for a 2.3 MB file, a 16 KiB binding limit and a 64 KiB buffer limit:
/// more chunks, windows and parts, the same bits.
fn small_limits_same_result(engine: GpuEngine) {
    let small = loader(engine, LoadOptions::default());
    let (_dir, file) = small_file();
    let total: u64 = file.tensors().iter().map(|t| t.n_bytes).sum();
    assert!(total > 2 << 20);
    for residency in residencies() {
        for source in [Source::Mmap, Source::DirectRead] {
            let opts = LoadOptions {
                staging_bytes: 1 << 20,
                slots: 3,
                source,
                max_buffer_bytes: Some(64 << 10),
                ..LoadOptions::default()
            };
            let model = small
                .load_with(&file, &Selection::All, residency, &opts)
                .unwrap();
            let r = model.report();
            assert!(r.staging_bytes <= 1 << 20, "{r:?}");
            assert!(r.chunks > 2, "{r:?}");
            let big = model.get("tok_embd.weight").unwrap();
            assert!(big.is_split(), "{residency:?}: {} parts", big.parts.len());
            for p in &big.parts {
                assert!(p.buffer.size() <= 64 << 10);
            }
            check_model(&small, &file, &model);
        }
    }
}
gpu_test!(
    small_limits_same_result,
    small_limits_same_result,
    options = EngineOptions {
        max_binding_size: Some(16 << 10),
        max_workgroups_per_dim: Some(7),
        ..EngineOptions::default()
    }
);

fn selections(engine: GpuEngine) {
    let loader = loader(engine, LoadOptions::default());
    let (_dir, file) = small_file();
    let raw = Residency::Raw;
    let m = loader
        .load(
            &file,
            &Selection::glob(["blk.*.attn_q.weight", "output_*"]),
            raw,
        )
        .unwrap();
    let names: Vec<&str> = m.tensors().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "blk.0.attn_q.weight",
            "blk.1.attn_q.weight",
            "output_norm.weight"
        ]
    );
    drop(m);
    let m = loader
        .load(
            &file,
            &Selection::names([
                "output_norm.weight",
                "tok_embd.weight",
                "output_norm.weight",
            ]),
            Residency::Dequantised(DType::F16),
        )
        .unwrap();
    assert_eq!(m.tensors().len(), 2);
    check_model(&loader, &file, &m);
    drop(m);
    let e = loader
        .load(&file, &Selection::names(["nope"]), raw)
        .unwrap_err();
    assert!(matches!(e, Error::NoSuchTensor { .. }), "{e}");
    let e = loader
        .load(&file, &Selection::glob(["blk.*", "zzz*"]), raw)
        .unwrap_err();
    assert!(
        matches!(e, Error::Selection { .. }) && e.to_string().contains("zzz*"),
        "{e}"
    );
    let e = loader
        .load(&file, &Selection::glob(["blk.[0"]), raw)
        .unwrap_err();
    assert!(matches!(e, Error::Selection { .. }), "{e}");
    assert!(e.hint().is_some());
    // No CPU fallback: the I32 tensor (no shader) is a typed error, and nothing stays.
    let opts = LoadOptions {
        cpu_fallback: false,
        ..LoadOptions::default()
    };
    let e = loader
        .load_with(
            &file,
            &Selection::All,
            Residency::Dequantised(DType::F32),
            &opts,
        )
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Gpu(GpuError::Unsupported {
                format: Format::I32,
                ..
            })
        ),
        "{e}"
    );
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(selections, selections);

/// 8 threads load and read back through one loader: the same bytes as one thread.
fn eight_threads(engine: GpuEngine) {
    let loader = loader(engine, LoadOptions::default());
    let (_dir, file) = small_file();
    let run = |i: usize| -> Vec<Vec<u8>> {
        let residency = residencies()[i % 4];
        let opts = LoadOptions {
            staging_bytes: 1 << 20,
            source: if i.is_multiple_of(2) {
                Source::Mmap
            } else {
                Source::DirectRead
            },
            ..LoadOptions::default()
        };
        let model = loader
            .load_with(&file, &Selection::All, residency, &opts)
            .unwrap();
        let mut out: Vec<Vec<u8>> = model
            .tensors()
            .iter()
            .map(|t| loader.read_back(t).unwrap())
            .collect();
        // And a record-into-encoder decode of a raw load, on the shared device.
        let raw = loader
            .load(
                &file,
                &Selection::names(["blk.0.attn_q.weight"]),
                Residency::Raw,
            )
            .unwrap();
        let t = &raw.tensors()[0];
        let dst = loader.device().create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: t.dequantised_size(DType::F16),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut enc = loader.device().create_command_encoder(&Default::default());
        loader
            .record_tensor(&mut enc, t, DType::F16, &dst, 0)
            .unwrap();
        loader.queue().submit([enc.finish()]);
        out.push(read_buffer(
            loader.device(),
            loader.queue(),
            &dst,
            t.n_elements * 2,
        ));
        out
    };
    let single: Vec<Vec<Vec<u8>>> = (0..4).map(run).collect();
    let threaded: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8).map(|i| s.spawn(move || run(i))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, got) in threaded.iter().enumerate() {
        assert!(
            *got == single[i % 4],
            "thread {i} differs from the single-thread run"
        );
    }
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(eight_threads, eight_threads);

/// A device the test creates itself on `adapter`.
fn own_device(adapter: &Adapter) -> (wgpu::Device, wgpu::Queue) {
    let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("test-owned"),
        required_limits: adapter.limits(),
        ..Default::default()
    }))
    .unwrap();
    (device, queue)
}

/// The caller's device: raw residency, `record` and `record_tensor` into the caller's encoder,
/// and a caller shader composed from `wgsl_decode_source` reading a raw resident buffer.
fn record_into_callers_encoder(adapter: &Adapter) {
    let (device, queue) = own_device(adapter);
    let loader = WeightLoader::from_device(device.clone(), queue.clone()).unwrap();
    let (_dir, file) = small_file();
    let model = loader.load(&file, &Selection::All, Residency::Raw).unwrap();
    for t in model.tensors() {
        let src = file.tensor_data(file.tensor(&t.name).unwrap());
        assert!(loader.read_back(t).unwrap() == src, "{}", t.name);
        if !t.format.has_shader() {
            continue;
        }
        for dtype in DType::ALL {
            // record_tensor into a buffer of ours, at an offset.
            let off = 256;
            let dst = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("ours"),
                size: off + t.dequantised_size(dtype),
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            let mut enc = device.create_command_encoder(&Default::default());
            loader.record_tensor(&mut enc, t, dtype, &dst, off).unwrap();
            queue.submit([enc.finish()]);
            let got = read_buffer(
                &device,
                &queue,
                &dst,
                off + t.n_elements * dtype.size() as u64,
            );
            compare(
                t.format,
                dtype,
                &got[off as usize..],
                &cpu(t.format, src, dtype),
            )
            .unwrap_or_else(|e| panic!("{}: {e}", t.name));
            // record with plain buffers and an element count.
            let mut enc = device.create_command_encoder(&Default::default());
            loader
                .record(
                    &mut enc,
                    &RecordJob {
                        format: t.format,
                        dtype,
                        src: &t.parts[0].buffer,
                        src_offset: 0,
                        dst: &dst,
                        dst_offset: 0,
                        n_elements: t.n_elements,
                    },
                )
                .unwrap();
            queue.submit([enc.finish()]);
            let got = read_buffer(&device, &queue, &dst, t.n_elements * dtype.size() as u64);
            compare(t.format, dtype, &got, &cpu(t.format, src, dtype))
                .unwrap_or_else(|e| panic!("{}: {e}", t.name));
        }
        decode_in_own_shader(&device, &queue, t, src);
    }
    let bad = RecordJob {
        format: Format::Q4_0,
        dtype: DType::F32,
        src: &model.tensors()[0].parts[0].buffer,
        src_offset: 0,
        dst: &model.tensors()[0].parts[0].buffer,
        dst_offset: 0,
        n_elements: 33,
    };
    let mut enc = device.create_command_encoder(&Default::default());
    assert!(matches!(
        loader.record(&mut enc, &bad),
        Err(Error::Gpu(GpuError::InvalidJob(_)))
    ));
}
gpu_test!(record_into_callers_encoder, record_into_callers_encoder);

/// Our own kernel: `dequant8` from `wgsl_decode_source`, reading the raw resident buffer as `tile`.
fn decode_in_own_shader(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    t: &gguf_dequant::gpu::loader::ResidentTensor,
    src: &[u8],
) {
    let decode = wgsl_decode_source(t.format).unwrap();
    let shader = format!(
        "@group(0) @binding(0) var<storage, read> tile: array<u32>;
         @group(0) @binding(1) var<storage, read_write> out: array<u32>;
         {decode}
         @compute @workgroup_size(64)
         fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {{
             let i = id.y * n.x * 64u + id.x;          // one group of 8 values
             let first = i * 8u;
             if (first >= arrayLength(&out)) {{ return; }}
             let block = first / BLOCK_ELEMS;
             let part = (first % BLOCK_ELEMS) / 8u;
             let v = dequant8(block * BLOCK_BYTES, part);
             for (var k = 0u; k < 8u; k++) {{
                 if (first + k < arrayLength(&out)) {{ out[first + k] = v[k / 4u][k % 4u]; }}
             }}
         }}"
    );
    let pipeline = caller_pipeline(device, "caller decode", &shader);
    let n = t.n_elements;
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: n * 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let part = &t.parts[0];
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: part.buffer.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: out.as_entire_binding(),
            },
        ],
    });
    let groups = n.div_ceil(8 * 64);
    let (x, y) = if groups <= 65_535 {
        (groups, 1)
    } else {
        (65_535, groups.div_ceil(65_535))
    };
    let mut enc = device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(x as u32, y as u32, 1);
    }
    queue.submit([enc.finish()]);
    let got = read_buffer(device, queue, &out, n * 4);
    compare(t.format, DType::F32, &got, &cpu(t.format, src, DType::F32))
        .unwrap_or_else(|e| panic!("own shader, {}: {e}", t.name));
}

/// A budget that the load passes half-way: a typed out-of-memory error, and every buffer the load
/// created is released (stats back to what they were, a model loaded before is untouched).
fn failed_load_releases_everything(engine: GpuEngine) {
    let loader = loader(engine, LoadOptions::default());
    let (_dir, file) = small_file();
    let kept = loader
        .load(
            &file,
            &Selection::names(["output_norm.weight"]),
            Residency::Raw,
        )
        .unwrap();
    let before = loader.stats();
    assert_eq!(before.models, 1);
    let opts = LoadOptions {
        gpu_budget_bytes: Some(before.allocated_bytes + (1 << 20)),
        ..LoadOptions::default()
    };
    let e = loader
        .load_with(
            &file,
            &Selection::All,
            Residency::Dequantised(DType::F32),
            &opts,
        )
        .unwrap_err();
    assert!(matches!(e, Error::Gpu(GpuError::OutOfMemory { .. })), "{e}");
    assert!(e.hint().unwrap().contains("fewer tensors"));
    assert_eq!(loader.stats(), before);
    check_model(&loader, &file, &kept);
    drop(kept);
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(
    failed_load_releases_everything,
    failed_load_releases_everything
);

/// A destroyed device: a typed error, never a panic, nothing registered. On a caller's device the
/// loader leaves the caller's device-lost callback in place (it is the one that runs), unless
/// asked to install its own, which then reports the loss as `DeviceLost`.
fn destroyed_device_is_a_typed_error(adapter: &Adapter) {
    const TEST: &str = "destroyed_device_is_a_typed_error";
    let (_dir, file) = small_file();
    for install_handlers in [false, true] {
        let (device, queue) = own_device(adapter);
        let callers = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = callers.clone();
        device.set_device_lost_callback(move |_, _| {
            seen.store(true, std::sync::atomic::Ordering::SeqCst)
        });
        let loader = if install_handlers {
            let options = EngineOptions {
                install_handlers,
                ..EngineOptions::default()
            };
            let engine = GpuEngine::from_device(device.clone(), queue, options).unwrap();
            WeightLoader::with_engine(Arc::new(engine), LoadOptions::default())
        } else {
            WeightLoader::from_device(device.clone(), queue).unwrap()
        };
        device.destroy();
        let e = loader
            .load(&file, &Selection::All, Residency::Dequantised(DType::F16))
            .unwrap_err();
        eprintln!(
            "[{TEST}] install_handlers {install_handlers}: {e} (hint: {:?})",
            e.hint()
        );
        let callers_ran = callers.load(std::sync::atomic::Ordering::SeqCst);
        if install_handlers {
            assert!(matches!(e, Error::Gpu(GpuError::DeviceLost(_))), "{e:?}");
            assert!(e.hint().is_some());
            assert!(!callers_ran, "the loader's callback replaced the caller's");
        } else {
            assert!(matches!(e, Error::Gpu(_)), "{e:?}");
            assert!(
                callers_ran,
                "the caller's device-lost callback was left in place"
            );
        }
        assert_eq!(loader.stats(), ServiceStats::default());
    }
}
gpu_test!(
    destroyed_device_is_a_typed_error,
    destroyed_device_is_a_typed_error
);

/// A file that grows or is rewritten after it was mapped: `Error::FileChanged`, with a hint.
fn changed_file_is_a_typed_error(engine: GpuEngine) {
    let loader = loader(engine, LoadOptions::default());
    let (dir, file) = small_file();
    let path = dir.path().join("small.gguf");
    let direct = LoadOptions {
        source: Source::DirectRead,
        ..LoadOptions::default()
    };
    let mapped = LoadOptions {
        source: Source::Mmap,
        ..LoadOptions::default()
    };
    // Rewritten in place with another header (same length): the map shows the new bytes, and
    // both sources notice that they are not what was parsed.
    let mut bytes = std::fs::read(&path).unwrap();
    let pos = bytes
        .windows(12)
        .position(|w| w == b"service-test")
        .unwrap();
    bytes[pos] = b'S';
    std::fs::write(&path, &bytes).unwrap();
    for opts in [mapped.clone(), direct.clone()] {
        let e = loader
            .load_with(&file, &Selection::All, Residency::Raw, &opts)
            .unwrap_err();
        assert!(matches!(e, Error::FileChanged { .. }), "{e}");
    }
    bytes[pos] = b's';
    std::fs::write(&path, &bytes).unwrap();
    loader
        .load_with(&file, &Selection::All, Residency::Raw, &direct)
        .unwrap();
    // Grown: both sources notice.
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&[0; 64])
        .unwrap();
    for opts in [mapped, direct] {
        let e = loader
            .load_with(&file, &Selection::All, Residency::Raw, &opts)
            .unwrap_err();
        assert!(matches!(e, Error::FileChanged { .. }), "{e}");
        assert!(e.hint().is_some());
    }
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(changed_file_is_a_typed_error, changed_file_is_a_typed_error);

/// The real SmolLM2 model (Q8_0, Q4_1, F32): raw residency equals `file.tensor_data`, dequantised
/// residency equals the CPU codecs for every tensor, on every adapter.
fn real_model_resident_equals_cpu(engine: GpuEngine) {
    const TEST: &str = "real_model_resident_equals_cpu";
    let Some(path) = support::model_file(TEST, support::MODEL_FILES[0]) else {
        return;
    };
    let file = GgufFile::open(&path).unwrap();
    let backend = label(&engine);
    let loader = loader(engine, LoadOptions::default());
    for (residency, source) in [
        (Residency::Raw, Source::DirectRead),
        (Residency::Dequantised(DType::F32), Source::Mmap),
    ] {
        let opts = LoadOptions {
            source,
            ..LoadOptions::default()
        };
        let model = loader
            .load_with(&file, &Selection::All, residency, &opts)
            .unwrap();
        assert_eq!(model.tensors().len(), file.tensors().len());
        let r = model.report();
        eprintln!(
            "[{TEST}] {backend} {residency:?} {source}: {} tensors, {} B read, {} B resident, {:.2} s, {:.3} GB/s",
            r.tensors, r.bytes_read, r.bytes_resident, r.seconds, r.gb_per_s()
        );
        check_model(&loader, &file, &model);
    }
}
gpu_test!(
    real_model_resident_equals_cpu,
    real_model_resident_equals_cpu
);

fn progress_adds_up_to_bytes_read(engine: GpuEngine) {
    let (_dir, file) = small_file();
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let calls = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (s, c) = (seen.clone(), calls.clone());
    let options = LoadOptions {
        staging_bytes: 1 << 20,
        progress: Some(gguf_dequant::gpu::loader::Progress::new(move |n| {
            s.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            c.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        })),
        ..LoadOptions::default()
    };
    let loader = loader(engine, options);
    let model = loader
        .load(&file, &Selection::All, Residency::Dequantised(DType::F16))
        .unwrap();
    assert_eq!(
        seen.load(std::sync::atomic::Ordering::Relaxed),
        model.report().bytes_read
    );
    assert!(
        calls.load(std::sync::atomic::Ordering::Relaxed) >= 2,
        "one call per chunk"
    );
}
gpu_test!(
    progress_adds_up_to_bytes_read,
    progress_adds_up_to_bytes_read
);

/// The rooflines of a load, measured in the same run: the read sample is the first `read_bytes`
/// of the file, the host-to-device one the file's size (below `h2d_bytes`), every figure a
/// positive speed; the cold read is measured where the cache could be dropped (the file is
/// synced first, so its pages are clean) and otherwise says why. Nothing stays allocated, and
/// a load's phases add up to its time.
fn rooflines_measured_in_the_same_run(engine: GpuEngine) {
    let backend = label(&engine);
    let (dir, file) = small_file();
    std::fs::File::open(dir.path().join("small.gguf"))
        .unwrap()
        .sync_all()
        .unwrap();
    let loader = loader(
        engine,
        LoadOptions {
            staging_bytes: 1 << 20,
            slots: 3,
            readers: 2,
            ..LoadOptions::default()
        },
    );
    let model = loader.load(&file, &Selection::All, Residency::Raw).unwrap();
    let r = model.report().clone();
    assert_eq!(r.readers, 2);
    assert!(r.setup_seconds > 0.0 && r.transfer_seconds > 0.0);
    assert!(
        r.setup_seconds + r.transfer_seconds <= r.seconds + 1e-6,
        "{r:?}"
    );
    assert!(r.transfer_gb_per_s() >= r.gb_per_s());
    let before = loader.stats();
    let len = file.total_len();
    let opts = RooflineOptions {
        read_bytes: len / 2,
        h2d_bytes: 64 << 20,
        cold: true,
    };
    let f = loader.measure_rooflines(&file, &opts).unwrap();
    eprintln!("{backend}: {f:?}");
    assert_eq!(f.read_warm.bytes, len / 2);
    assert_eq!(f.h2d.bytes, len & !3);
    assert_eq!(f.h2d_reused.bytes, len & !3);
    for t in [f.read_warm, f.h2d, f.h2d_reused] {
        assert!(t.seconds > 0.0 && t.gb_per_s() > 0.0, "{t:?}");
    }
    match &f.read_cold {
        Ok(t) => assert_eq!(t.bytes, len / 2),
        Err(why) => assert!(why.0.contains("page") || why.0.contains("Linux"), "{why}"),
    }
    let bound = f.bound_gb_per_s(false).unwrap();
    assert_eq!(bound, f.read_warm.gb_per_s().min(f.h2d.gb_per_s()));
    assert_eq!(f.fraction(&r, false), Some(r.transfer_gb_per_s() / bound));
    assert_eq!(f.bound_gb_per_s(true).is_some(), f.read_cold.is_ok());
    assert_eq!(loader.stats(), before);
    // Dropping the whole file works where the cold read did, and the file loads the same after.
    if f.read_cold.is_ok() {
        drop_page_cache(&file).unwrap();
        let (cached, pages) = file.shards()[0].cached_pages(0, len).unwrap();
        assert!(cached * 100 <= pages, "{cached} of {pages} pages cached");
    }
    check_model(&loader, &file, &model);
    drop(model);
    assert_eq!(loader.stats(), ServiceStats::default());
}
gpu_test!(
    rooflines_measured_in_the_same_run,
    rooflines_measured_in_the_same_run
);
