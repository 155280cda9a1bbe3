//! The 256-value super-block formats on the GPU, beyond the random blocks of `gpu_vs_cpu.rs`
//! (which covers them through `formats::WITH_SHADER`): Q8_K's **f32** scale at the edges, where
//! `d * int8(q)` rounds, is an f32 subnormal, or overflows, and code combinations that random
//! bytes rarely hit in Q3_K / Q6_K / Q2_K / TQ1_0 / TQ2_0. Bit for bit against the CPU codecs, in
//! f32, f16 and bf16, on lavapipe Vulkan and llvmpipe GL.

use gguf_dequant::gpu::GpuEngine;
use gguf_dequant::{DType, Format};

use crate::gpu_test;
use crate::support::codec::{compare, cpu};
use crate::support::gpu::label;
use crate::support::rng::{random_blocks, Rng};

fn check(engine: &GpuEngine, format: Format, src: &[u8]) -> Vec<String> {
    let mut failures = Vec::new();
    for dtype in DType::ALL {
        match engine.dequant(format, src, dtype) {
            Ok(gpu) => {
                if let Err(e) = compare(format, dtype, &gpu, &cpu(format, src, dtype)) {
                    failures.push(e);
                }
            }
            Err(e) => failures.push(format!("{format} to {dtype}: {e}")),
        }
    }
    failures
}

/// One Q8_K block per scale, each holding all 256 int8 codes (in a scrambled order): zeros,
/// subnormals (the subnormal path must round them exactly whether or not the adapter flushes),
/// the smallest normals, scales whose products round at ties, the largest finite scales (products
/// overflow to Inf), and Inf / NaN.
fn q8_k_scales(engine: &GpuEngine) {
    let backend = label(engine);
    let mut scales: Vec<u32> = vec![
        0x0000_0000,
        0x0000_0001,
        0x0000_0003,
        0x0000_0155,
        0x0040_0000,
        0x0055_5555,
        0x007F_FFFF,
        0x0080_0000,
        0x0080_0001,
        0x00FF_FFFF,
        0x3F80_0000,
        0x3F80_0001,
        0x3FFF_FFFF,
        0x3EAA_AAAB,
        0x7E80_0000,
        0x7EFF_FFFF,
        0x7F00_0001,
        0x7F7F_FFFF,
        0x7F80_0000,
        0x7FC0_0000,
    ];
    let mut rng = Rng::new(0x08C0);
    for _ in 0..40 {
        // random subnormals and random normals
        scales.push(rng.next_u64() as u32 & 0x007F_FFFF);
        scales.push(rng.next_u64() as u32 & 0x7F7F_FFFF);
    }
    let negated: Vec<u32> = scales.iter().map(|s| s | 0x8000_0000).collect();
    scales.extend(negated);
    let mut src = Vec::new();
    for (i, &d) in scales.iter().enumerate() {
        let start = src.len();
        src.extend(d.to_le_bytes());
        src.extend((0..=255u8).map(|q| q.wrapping_mul(167).wrapping_add(i as u8)));
        src.extend((0..32).map(|_| rng.next_u64() as u8));
        assert_eq!(src.len() - start, Format::Q8_K.block_bytes());
    }
    let failures = check(engine, Format::Q8_K, &src);
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
gpu_test!(q8_k_f32_scale_edges, q8_k_scales);

/// Constant-byte blocks (0x00, 0x55, 0xAA, 0xFF, ...) with random f16 scale fields: every code
/// extreme of every sub-block at once (Q3_K with all high bits clear, Q6_K's -32 and 31, scale
/// bytes 0 and 255, the unpacking of both halves of Q4_K's / Q5_K's 6-bit scales).
fn constant_blocks(engine: &GpuEngine) {
    let backend = label(engine);
    let mut failures = Vec::new();
    for format in gguf_dequant::formats::WITH_SHADER
        .iter()
        .copied()
        .filter(|f| f.block_elems() == 256)
    {
        let spec = format.spec();
        let fills = [0x00u8, 0x01, 0x55, 0x80, 0xAA, 0xC3, 0xFE, 0xFF];
        let mut src = random_blocks(format, fills.len() * 3, 0xC0DE);
        for (i, block) in src.chunks_exact_mut(spec.bytes).enumerate() {
            let scales: Vec<(usize, Vec<u8>)> = spec
                .fields
                .iter()
                .filter(|f| f.kind != gguf_dequant::formats::field::FieldKind::Bytes)
                .map(|f| (f.offset, block[f.offset..f.offset + f.len].to_vec()))
                .collect();
            block.fill(fills[i % fills.len()]);
            // The last third keeps the constant in its scale fields too (0x0101: an f16
            // subnormal, 0xFFFF: NaN, ...); the others get their random finite scales back.
            if i / fills.len() != 2 {
                for (off, v) in scales {
                    block[off..off + v.len()].copy_from_slice(&v);
                }
            }
        }
        failures.extend(check(engine, format, &src));
    }
    assert!(failures.is_empty(), "{backend}:\n{}", failures.join("\n"));
}
gpu_test!(super_blocks_constant_bytes, constant_blocks);
