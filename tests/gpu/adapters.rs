//! The adapters CI requires, and what differs between them, by name.
//!
//! `scripts/test.sh` makes three implementations visible in one process (`VK_ICD_FILENAMES`
//! lists Mesa's lavapipe and Chromium's SwiftShader; llvmpipe GL comes through EGL) and names
//! them in `GGUF_DEQUANT_EXPECT_ADAPTERS`; every `gpu_test!` runs on each of them.
//! [`expected_adapters_are_present`] fails when one is missing, so that a CI machine that lost
//! an implementation cannot pass by running the suite on fewer. [`KNOWN`] records per adapter
//! the facts in which they differ (limits, timestamp queries, subnormal flushing), and
//! `adapter_facts_by_name` asserts them on each one found.

use gguf_dequant::gpu::timing::{GpuTimer, Timing};

use crate::gpu_test;
use crate::support::gpu::{all_adapters, GpuEngine};

#[test]
fn expected_adapters_are_present() {
    let Some(expect) = crate::support::expected_adapters("expected_adapters_are_present") else {
        return;
    };
    let seen: Vec<(String, String)> = all_adapters()
        .iter()
        .map(|a| {
            let info = a.get_info();
            (format!("{:?}", info.backend).to_lowercase(), info.name)
        })
        .collect();
    eprintln!("expected: {expect:?}; compute adapters: {seen:?}");
    for (backend, name) in &expect {
        assert!(
            seen.iter()
                .any(|(b, n)| b == backend && n.contains(name.as_str())),
            "no {backend} compute adapter named `*{name}*` (seen: {seen:?})"
        );
    }
}

/// What one implementation is known to do, matched by backend and a substring of its name.
#[derive(Debug, PartialEq)]
struct Facts {
    /// `min_storage_buffer_offset_alignment`: window and part offsets are multiples of it.
    offset_alignment: u64,
    /// `max_storage_buffer_binding_size`: larger tensors are bound in windows.
    max_binding: u64,
    /// `max_buffer_size`: larger tensors are split into parts by the loader.
    max_buffer: u64,
    /// `Features::TIMESTAMP_QUERY` (the benchmark's GPU timing; else the wall clock).
    timestamp_query: bool,
    /// `Features::TIMESTAMP_QUERY_INSIDE_ENCODERS`.
    timestamp_inside_encoders: bool,
    /// Whether an f32 subnormal times 3 in a shader comes out as zero (flush to zero). The
    /// shaders are bit-exact either way: they assemble every possibly subnormal result as bits.
    flushes_subnormals: bool,
}

struct Known {
    backend: wgpu::Backend,
    name: &'static str,
    facts: Facts,
}

/// The implementations CI runs, as measured on Debian 12 (Mesa 22.3.6 with LLVM 15; SwiftShader
/// from Chromium's `chromium-common`).
const KNOWN: &[Known] = &[
    // Mesa lavapipe (Vulkan on llvmpipe).
    Known {
        backend: wgpu::Backend::Vulkan,
        name: "llvmpipe",
        facts: Facts {
            offset_alignment: 32,
            max_binding: 128 << 20,
            max_buffer: (2 << 30) - 1,
            timestamp_query: true,
            timestamp_inside_encoders: true,
            flushes_subnormals: false,
        },
    },
    // Google SwiftShader (Vulkan on its Subzero JIT): 8 times lavapipe's offset alignment (window
    // and part steps of up to 128 blocks, see `windows_chunks_and_2d_dispatch` and
    // `unsplittable_tensor_is_too_large_before_allocating`), a 1 GiB binding and buffer, and f32
    // subnormals flushed to zero in float arithmetic.
    Known {
        backend: wgpu::Backend::Vulkan,
        name: "SwiftShader",
        facts: Facts {
            offset_alignment: 256,
            max_binding: 1 << 30,
            max_buffer: 1 << 30,
            timestamp_query: true,
            timestamp_inside_encoders: true,
            flushes_subnormals: true,
        },
    },
    // Mesa llvmpipe through OpenGL 4.5 Core (EGL).
    Known {
        backend: wgpu::Backend::Gl,
        name: "llvmpipe",
        facts: Facts {
            offset_alignment: 32,
            max_binding: 128 << 20,
            max_buffer: (2 << 30) - 1,
            timestamp_query: true,
            timestamp_inside_encoders: true,
            flushes_subnormals: false,
        },
    },
];

fn facts_of(engine: &GpuEngine) -> Facts {
    let features = engine.device().features();
    Facts {
        offset_alignment: engine.offset_alignment(),
        max_binding: engine.limits().max_storage_buffer_binding_size,
        max_buffer: engine.limits().max_buffer_size,
        timestamp_query: features.contains(wgpu::Features::TIMESTAMP_QUERY),
        timestamp_inside_encoders: features
            .contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
        flushes_subnormals: crate::gpu_vs_cpu::flushes_subnormals(engine),
    }
}

fn adapter_facts(engine: &GpuEngine) {
    let info = engine.adapter_info();
    let got = facts_of(engine);
    eprintln!("{} ({:?}): {got:#?}", info.name, info.backend);
    // The benchmark times with timestamps exactly where the device has the feature.
    let timing = GpuTimer::new(engine).unwrap().timing();
    assert_eq!(
        timing == Timing::Timestamp,
        got.timestamp_query,
        "{timing:?}"
    );
    let known = KNOWN
        .iter()
        .find(|k| k.backend == info.backend && info.name.contains(k.name));
    match known {
        Some(k) => assert_eq!(got, k.facts, "{} ({:?})", info.name, info.backend),
        None if crate::support::is_ci() => panic!(
            "{} ({:?}) is not in KNOWN (tests/gpu/adapters.rs): add its facts, {got:?}",
            info.name, info.backend
        ),
        None => eprintln!(
            "{} ({:?}) is not in KNOWN: facts printed, not checked",
            info.name, info.backend
        ),
    }
}
gpu_test!(adapter_facts_by_name, adapter_facts);
