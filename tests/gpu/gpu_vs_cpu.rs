//! GPU output against the CPU codecs, bit for bit, on each backend (lavapipe Vulkan and llvmpipe
//! GL on a machine without a GPU): every format with a shader, f32, f16 and bf16 output, ragged
//! shapes, a NaN sentinel, forced windowing and 2-D dispatch, and MXFP4's subnormal scales.
//!
//! A missing adapter prints a loud SKIPPED line, or fails the test when `CI=true`.

use gguf_dequant::gpu::{DequantJob, EngineOptions, GpuEngine};
use gguf_dequant::{DType, Format};

use crate::gpu_test;
use crate::support::codec::{compare, cpu, value};
use crate::support::gpu::label;
use crate::support::rng::{random_blocks, Rng};

/// Shapes as (rows, blocks per row): one block, odd counts, several rows, more than one workgroup.
const SHAPES: &[(usize, usize)] = &[(1, 1), (1, 3), (3, 7), (5, 33), (2, 517)];

fn matches_cpu(engine: &GpuEngine) {
    let backend = label(engine);
    let mut failures = Vec::new();
    for &format in gguf_dequant::formats::WITH_SHADER {
        for (s, &(rows, per_row)) in SHAPES.iter().enumerate() {
            // One-value formats get ragged element counts too (rows * per_row is often odd).
            let n_blocks = rows * per_row;
            let src = random_blocks(format, n_blocks, 0x5EED + s as u64);
            for dtype in DType::ALL {
                match engine.dequant(format, &src, dtype) {
                    Ok(gpu) => {
                        if let Err(e) = compare(format, dtype, &gpu, &cpu(format, &src, dtype)) {
                            failures.push(format!("{rows}x{per_row} blocks: {e}"));
                        }
                    }
                    Err(e) => failures.push(format!("{format} to {dtype}: {e}")),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
gpu_test!(gpu_matches_cpu_bit_for_bit, matches_cpu);

/// Caller-owned buffers through `record`: the output sits at a nonzero aligned offset in a buffer
/// pre-filled with a NaN sentinel; every value must be overwritten, and the bytes before the
/// offset and past the end (the 16-byte padding and beyond) must keep the sentinel.
fn sentinel(engine: &GpuEngine) {
    let backend = label(engine);
    const SENTINEL: u8 = 0xFF; // 0xFFFF_FFFF / 0xFFFF: a NaN in f32, f16 and bf16
    let device = engine.device();
    let align = engine.offset_alignment().max(16);
    let mut failures = Vec::new();
    for &format in gguf_dequant::formats::WITH_SHADER {
        for dtype in DType::ALL {
            let n_blocks: u64 = if format.block_elems() == 1 { 1031 } else { 37 };
            let src = random_blocks(format, n_blocks as usize, 7);
            let want = cpu(format, &src, dtype);
            let (src_len, dst_len) =
                gguf_dequant::gpu::windows::padded(format, n_blocks, dtype.size() as u64);
            let src_offset = align;
            let mut src_bytes = vec![0xA5u8; (src_offset + src_len) as usize];
            src_bytes[src_offset as usize..src_offset as usize + src.len()].copy_from_slice(&src);
            let src_buf = wgpu::util::DeviceExt::create_buffer_init(
                device,
                &wgpu::util::BufferInitDescriptor {
                    label: Some("sentinel src"),
                    contents: &src_bytes,
                    usage: wgpu::BufferUsages::STORAGE,
                },
            );
            let total = align + dst_len + 64;
            let dst_buf = wgpu::util::DeviceExt::create_buffer_init(
                device,
                &wgpu::util::BufferInitDescriptor {
                    label: Some("sentinel dst"),
                    contents: &vec![SENTINEL; total as usize],
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                },
            );
            let staging = device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("sentinel staging"),
                size: total,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            });
            let mut encoder = device.create_command_encoder(&Default::default());
            let job = DequantJob {
                format,
                dtype,
                src: &src_buf,
                src_offset,
                n_blocks,
                dst: &dst_buf,
                dst_offset: align,
            };
            if let Err(e) = engine.record(&mut encoder, &job) {
                failures.push(format!("{format} to {dtype}: record: {e}"));
                continue;
            }
            encoder.copy_buffer_to_buffer(&dst_buf, 0, &staging, 0, total);
            let index = engine.queue().submit([encoder.finish()]);
            staging.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(index),
                    timeout: Some(std::time::Duration::from_secs(60)),
                })
                .unwrap();
            let got = staging.get_mapped_range(..).unwrap().to_vec();
            staging.unmap();
            let (head, rest) = got.split_at(align as usize);
            let (values, tail) = rest.split_at(want.len());
            if head.iter().chain(tail).any(|&b| b != SENTINEL) {
                failures.push(format!(
                    "{format} to {dtype}: bytes outside the output were touched"
                ));
            }
            // The sentinel NaN would compare equal to a NaN result, so check it was overwritten:
            // a value still equal to the sentinel bits where the CPU has other bits is unwritten.
            if let Err(e) = compare(format, dtype, values, &want) {
                failures.push(e);
            }
            let n = want.len() / dtype.size();
            let sentinel_bits = if dtype == DType::F32 {
                u32::MAX
            } else {
                0xFFFF
            };
            if let Some(i) = (0..n).find(|&i| {
                value(dtype, values, i) == sentinel_bits && value(dtype, &want, i) != sentinel_bits
            }) {
                failures.push(format!("{format} to {dtype}: value {i} never written"));
            }
        }
    }
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
gpu_test!(sentinel_every_value_written_nothing_past_the_end, sentinel);

/// A small forced binding limit: one tensor spans several windows, and window boundaries fall
/// inside runs of 17-, 18-, 22- and 34-byte blocks and of 50- to 292-byte super-blocks (e.g. the
/// i-quants' 50, 56, 66, 74, 82, 98 and 136, Q3_K's 110 and Q6_K's 210); tiny chunks and a tiny 2-D
/// fold too. The limit is 64 KiB where the adapter's offset alignment lets one step of windows of
/// every format fit it (32 bytes: lavapipe, llvmpipe GL), else the least power of two that does
/// (256 bytes, SwiftShader: 128 KiB, for Q3_K's and the i-quants' 128-block steps); each tensor
/// is four limits of output.
fn windowing(engine: &GpuEngine) {
    let backend = label(engine);
    let limit = engine.max_binding_size();
    assert_eq!(
        limit,
        windowing_limit(engine.offset_alignment()),
        "{backend}"
    );
    let mut failures = Vec::new();
    for &format in gguf_dequant::formats::WITH_SHADER {
        for dtype in [DType::F32, DType::F16] {
            let out_block = (format.block_elems() * dtype.size()) as u64;
            let n_blocks = (4 * limit / out_block + 7) as usize;
            let windows = engine.window_count(format, dtype, n_blocks as u64).unwrap();
            assert!(windows >= 3, "{format} to {dtype}: only {windows} windows");
            let src = random_blocks(format, n_blocks, 99);
            match engine.dequant(format, &src, dtype) {
                Ok(gpu) => {
                    if let Err(e) = compare(format, dtype, &gpu, &cpu(format, &src, dtype)) {
                        failures.push(format!("{windows} windows: {e}"));
                    }
                }
                Err(e) => failures.push(format!("{format} to {dtype}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
/// The least power of two from 64 KiB up that holds one step of windows of every shader format
/// and output dtype at offset alignment `align`.
fn windowing_limit(align: u64) -> u64 {
    let fits = |limit: u64| {
        gguf_dequant::formats::WITH_SHADER.iter().all(|&f| {
            DType::ALL
                .iter()
                .all(|&d| gguf_dequant::gpu::plan_windows(f, d, limit, align).is_ok())
        })
    };
    let mut limit = 1u64 << 16;
    while !fits(limit) {
        limit *= 2;
    }
    limit
}
/// 64 KiB at lavapipe's and llvmpipe GL's 32-byte alignment, 128 KiB at SwiftShader's 256.
#[test]
fn windowing_limit_per_alignment() {
    assert_eq!(windowing_limit(32), 1 << 16);
    assert_eq!(windowing_limit(256), 1 << 17);
}
fn windowing_options(adapter: &crate::support::gpu::Adapter) -> EngineOptions {
    let align = adapter.limits().min_storage_buffer_offset_alignment as u64;
    EngineOptions {
        max_binding_size: Some(windowing_limit(align)),
        max_workgroups_per_dim: Some(7),
        max_chunk_bytes: 1 << 19,
        ..EngineOptions::default()
    }
}
gpu_test!(
    windows_chunks_and_2d_dispatch,
    windowing,
    options_for = windowing_options
);

/// Whether the adapter flushes an f32 subnormal in a float multiply (the shaders never depend on
/// it; `tests/gpu/adapters.rs` records which adapters do: SwiftShader).
pub(crate) fn flushes_subnormals(engine: &GpuEngine) -> bool {
    let device = engine.device();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("ftz probe"),
        source: wgpu::ShaderSource::Wgsl(
            "@group(0) @binding(0) var<storage, read_write> b: array<u32>;
             @compute @workgroup_size(1) fn main() {
                 b[2] = bitcast<u32>(bitcast<f32>(b[0]) * bitcast<f32>(b[1]));
             }"
            .into(),
        ),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let init: [u32; 4] = [0x0020_0000, 3.0f32.to_bits(), 0, 0]; // 2^-128 * 3
    let buf = wgpu::util::DeviceExt::create_buffer_init(
        device,
        &wgpu::util::BufferInitDescriptor {
            label: None,
            contents: bytemuck::cast_slice(&init),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        },
    );
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[wgpu::BindGroupEntry {
            binding: 0,
            resource: buf.as_entire_binding(),
        }],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    encoder.copy_buffer_to_buffer(&buf, 0, &staging, 0, 16);
    let index = engine.queue().submit([encoder.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: None,
        })
        .unwrap();
    let got = u32::from_le_bytes(
        staging.get_mapped_range(..).unwrap()[8..12]
            .try_into()
            .unwrap(),
    );
    got != (f32::from_bits(0x0020_0000) * 3.0).to_bits()
}

/// MXFP4 with e = 0 and 1 (scales 2^-128 and 2^-127, f32 subnormals) and e = 254, 255 (overflow
/// to Inf): the shader builds these values as bits, so they must match the CPU exactly on every
/// adapter, whether or not the adapter flushes subnormals in float arithmetic (reported).
fn mxfp4_subnormal_scales(engine: &GpuEngine) {
    let backend = label(engine);
    let ftz = flushes_subnormals(engine);
    eprintln!(
        "{backend}: float multiply {} f32 subnormals; MXFP4 does not depend on it",
        if ftz { "FLUSHES" } else { "preserves" }
    );
    let mut src = Vec::new();
    for e in [0u8, 1, 2, 3, 127, 253, 254, 255] {
        for half in 0..16u8 {
            src.push(e);
            // all 256 code pairs over 16 blocks per exponent
            src.extend((0..16u8).map(|j| half * 16 + j));
        }
    }
    let cpu_f32 = cpu(Format::MXFP4, &src, DType::F32);
    let subnormals = cpu_f32
        .chunks_exact(4)
        .filter(|b| {
            let v = u32::from_le_bytes((*b).try_into().unwrap()) & 0x7FFF_FFFF;
            v != 0 && v < 0x0080_0000
        })
        .count();
    assert!(
        subnormals > 100,
        "the input exercises subnormal results ({subnormals})"
    );
    for dtype in DType::ALL {
        let gpu = engine.dequant(Format::MXFP4, &src, dtype).unwrap();
        compare(Format::MXFP4, dtype, &gpu, &cpu(Format::MXFP4, &src, dtype))
            .unwrap_or_else(|e| panic!("{backend} (float multiply flushes: {ftz}): {e}"));
    }
}
gpu_test!(mxfp4_subnormal_scales_exact, mxfp4_subnormal_scales);

/// Errors, not panics: a partial block, and a caller job with a misaligned offset.
fn typed_errors(engine: &GpuEngine) {
    let err = engine
        .dequant(Format::Q4_0, &[0u8; 19], DType::F32)
        .unwrap_err();
    assert!(
        matches!(err, gguf_dequant::Error::PartialBlock { .. }),
        "{err}"
    );
    let err = engine
        .dequant(Format::F64, &[0u8; 8], DType::F32)
        .unwrap_err();
    assert!(matches!(err, gguf_dequant::Error::Gpu(_)), "{err}");
    assert!(engine
        .dequant(Format::Q8_0, &[], DType::F16)
        .unwrap()
        .is_empty());
    let buf = engine.device().create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 4096,
        usage: wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    let mut encoder = engine.device().create_command_encoder(&Default::default());
    let job = DequantJob {
        format: Format::Q4_0,
        dtype: DType::F32,
        src: &buf,
        src_offset: 2,
        n_blocks: 1,
        dst: &buf,
        dst_offset: 1024,
    };
    let err = engine.record(&mut encoder, &job).unwrap_err();
    assert!(err.to_string().contains("multiples"), "{err}");
}
gpu_test!(errors_are_typed, typed_errors);

/// Exhaustive and edge codes: every f16 and bf16 bit pattern and every F8_E4M3 byte; f32 values
/// at and around every f16 rounding boundary (ties, subnormals, overflow, NaN payloads) for the
/// f16/bf16 output rounding; subnormal, tiny and huge f16 scales in every scaled block format; all
/// 256 NVFP4 scale codes (0x80..0xFF included, where bit 7 is ignored).
fn edge_codes(engine: &GpuEngine) {
    let backend = label(engine);
    let mut cases: Vec<(Format, Vec<u8>)> = Vec::new();
    let all16: Vec<u8> = (0..=u16::MAX).flat_map(|h| h.to_le_bytes()).collect();
    cases.push((Format::F16, all16.clone()));
    cases.push((Format::BF16, all16));
    cases.push((Format::F8_E4M3, (0..=255u8).collect()));
    let mut f32s: Vec<u32> = Vec::new();
    for h in 0..0x7C00u16 {
        let x = half::f16::from_bits(h).to_f32().to_bits();
        let next = half::f16::from_bits(h + 1).to_f32().to_bits();
        let tie = (f32::from_bits(x) / 2.0 + f32::from_bits(next) / 2.0).to_bits();
        for v in [x, x + 1, x.saturating_sub(1), tie, tie + 1, tie - 1] {
            f32s.extend([v, v | 0x8000_0000]);
        }
    }
    f32s.extend([
        1,
        0x0040_0000,
        0x007F_FFFF,
        0x7F80_0000,
        0x7F80_0001,
        0x7FC0_1234,
        0xFFFF_FFFF,
        0x7F7F_FFFF,
        0x3380_0000,
    ]);
    cases.push((
        Format::F32,
        f32s.iter().flat_map(|v| v.to_le_bytes()).collect(),
    ));
    let scales: [u16; 10] = [
        0x0000, 0x0001, 0x0003, 0x03FF, 0x0400, 0x1000, 0x3C00, 0x7BFF, 0x8001, 0xFBFF,
    ];
    let mut rng = Rng::new(42);
    for &format in gguf_dequant::formats::WITH_SHADER {
        let spec = format.spec();
        let f16_fields: Vec<usize> = spec
            .fields
            .iter()
            .filter(|f| f.kind == gguf_dequant::formats::field::FieldKind::F16)
            .map(|f| f.offset)
            .collect();
        if f16_fields.is_empty() {
            continue;
        }
        let mut src = vec![0u8; spec.bytes * scales.len() * scales.len()];
        rng.fill(&mut src);
        for (i, block) in src.chunks_exact_mut(spec.bytes).enumerate() {
            for (k, &off) in f16_fields.iter().enumerate() {
                let s = scales[(i / scales.len().pow(k as u32)) % scales.len()];
                block[off..off + 2].copy_from_slice(&s.to_le_bytes());
            }
        }
        cases.push((format, src));
    }
    let mut nv = vec![0u8; 64 * 36];
    rng.fill(&mut nv);
    for (i, block) in nv.chunks_exact_mut(36).enumerate() {
        block[..4].copy_from_slice(&[
            4 * i as u8,
            4 * i as u8 + 1,
            4 * i as u8 + 2,
            4 * i as u8 + 3,
        ]);
    }
    cases.push((Format::NVFP4, nv));
    let mut failures = Vec::new();
    for (format, src) in &cases {
        for dtype in DType::ALL {
            match engine.dequant(*format, src, dtype) {
                Ok(gpu) => {
                    if let Err(e) = compare(*format, dtype, &gpu, &cpu(*format, src, dtype)) {
                        failures.push(e);
                    }
                }
                Err(e) => failures.push(format!("{format} to {dtype}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
gpu_test!(edge_codes_exhaustive, edge_codes);

/// The i-quant super-block formats at their scale extremes: every f16 super-scale class (zero,
/// subnormal, smallest and largest normal, Inf, NaN, both signs) with all other bytes 0x00, 0xFF
/// (largest sub-block scales, every sign bit set, last grid entries) or random; IQ1_M's f16 scale
/// is spread over the top nibbles of its four scale words. The shaders' products are exact, so
/// every value must match the CPU bit for bit however the driver contracts or reorders them.
fn iquant_extremes(engine: &GpuEngine) {
    use Format::*;
    let backend = label(engine);
    let scales: [u16; 12] = [
        0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00,
        0x7E01,
    ];
    let mut rng = Rng::new(0x1D);
    let mut failures = Vec::new();
    for format in [IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS] {
        let bytes = format.block_bytes();
        let mut src = Vec::new();
        for &d in &scales {
            for fill in 0..4 {
                let mut block = vec![0u8; bytes];
                match fill {
                    0 => {}
                    1 => block.fill(0xFF),
                    _ => rng.fill(&mut block),
                }
                if format == IQ1_M {
                    // dbits = sc[0] >> 12 | ... : nibble k of d in the top nibble of u16 k.
                    for k in 0..4 {
                        let at = 48 + 2 * k + 1;
                        block[at] = (block[at] & 0x0F) | ((((d >> (4 * k)) & 0xF) as u8) << 4);
                    }
                } else {
                    block[..2].copy_from_slice(&d.to_le_bytes());
                }
                src.extend(block);
            }
        }
        for dtype in DType::ALL {
            match engine.dequant(format, &src, dtype) {
                Ok(gpu) => {
                    if let Err(e) = compare(format, dtype, &gpu, &cpu(format, &src, dtype)) {
                        failures.push(e);
                    }
                }
                Err(e) => failures.push(format!("{format} to {dtype}: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
gpu_test!(iquant_scale_extremes, iquant_extremes);
