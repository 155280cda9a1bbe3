//! Lookup-table placement for the i-quant grids, timed (never asserted): the engine's choice, a
//! read-only storage buffer read at each lookup (`storage`), against the same grid copied into
//! workgroup memory by every workgroup (`workgroup`) and a module-scope `const` array indexed at
//! run time (`const`, which naga copies into per-invocation memory).
//!
//! `cargo bench --bench gpu_tables` (`GGUF_DEQUANT_BACKEND=vulkan|gl` to pick one backend; both by
//! default). The timed work is the driver's, so `cargo test --bench gpu_tables` (dev profile, no
//! release build of the dependencies) gives the same figures. Each variant is the production
//! shader with only the table section (and, for `workgroup`, the fill before the entry point's
//! barrier) replaced, so the decode is identical; every variant's output is checked against the
//! `storage` one before it is timed.
//!
//! Figures (lavapipe and llvmpipe GL, Mesa 22.3.6, LLVM 15, 2 cores shared with other builds;
//! medians of 15, ms per 2^20 f32 values; IQ3_XXS / IQ2_XS / IQ2_S / IQ1_S, grids of 256 / 1024 /
//! 2048 / 4096 words):
//!
//! ```text
//!   Vulkan storage   2.98 / 3.40 / 2.67 / 2.29
//!   Vulkan workgroup 3.54 / 6.36 / 9.35 / 16.13  (every 512-value workgroup copies the grid)
//!   Vulkan const     41.2 / 146.8 / skipped / skipped (~90 s to compile at 1024 words)
//!   GL storage       6.06 / 7.56 / 5.08 / 3.86
//!   GL workgroup     56.8 / 113.8 / skipped / skipped (137 s and 422 s to compile)
//!   GL const         5.31 / 4.53 / skipped / skipped
//! ```
//!
//! The storage buffer is the fastest on Vulkan, within 1.1-1.7x of the best on GL (where GLSL
//! const arrays are cheap), and never pathological; one shader serves every backend.

use std::time::{Duration, Instant};

use gguf_dequant::gpu::{shaders, tables, Backend, GpuEngine};
use gguf_dequant::{DType, Format};
use wgpu::util::DeviceExt;

use gguf_dequant::formats::sample::normal_blocks;

/// Values decoded per dispatch (4 MiB of f32 output).
const N_VALUES: usize = 1 << 20;
const REPS: usize = 15;
/// Variants whose pipeline compiles for minutes on llvmpipe are run only with `GPU_TABLES_ALL=1`:
/// `const` above this many words (lavapipe: ~4 s for 256 words, ~90 s for 1024, a timeout past
/// 120 s for 2048), and on GL `workgroup` above it (llvmpipe GL: 20 s for 1024 words, 137 s for
/// 2048, 422 s for 4096).
const SLOW_WORDS: u32 = 1024;

#[derive(Clone, Copy, PartialEq, Debug)]
enum Placement {
    Storage,
    Workgroup,
    Const,
}

/// The grid (its offset constant) each benchmarked format reads.
const CASES: &[(Format, &str)] = &[
    (Format::IQ3_XXS, "IQ3XXS_GRID_AT"),
    (Format::IQ2_XS, "IQ2XS_GRID_AT"),
    (Format::IQ2_S, "IQ2S_GRID_AT"),
    (Format::IQ1_S, "IQ1S_GRID_AT"),
];

const TABLE_HEADER: &str = "// ---- shaders/tables/iq_grids.wgsl ----\n";
const BINDING: &str = "@group(0) @binding(3) var<storage, read> grids: array<u32>;";

/// The production shader with the table placement replaced.
fn variant(format: Format, grid: &str, p: Placement) -> String {
    let src = shaders::source(format, DType::F32).expect("has a shader");
    if p == Placement::Storage {
        return src.to_string();
    }
    let slot = tables::LAYOUT
        .iter()
        .find(|s| s.wgsl_name == grid)
        .expect("grid");
    let start = src.find(TABLE_HEADER).expect("table section") + TABLE_HEADER.len();
    let end = start + src[start..].find("// ---- ").expect("next section");
    // Every offset constant becomes 0: the variant's array holds this grid only.
    let section: String = src[start..end]
        .lines()
        .map(|l| match l.strip_prefix("const ") {
            Some(rest) if rest.contains("_GRID_AT: u32") => {
                format!("const {}: u32 = 0u;", rest.split(':').next().unwrap())
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let n = slot.words;
    let decl = match p {
        Placement::Workgroup => format!(
            "@group(0) @binding(3) var<storage, read> grids_src: array<u32>;\n\
             var<workgroup> grids: array<u32, {n}>;"
        ),
        Placement::Const => {
            let words = tables::words();
            let data = words[slot.word as usize..(slot.word + n) as usize]
                .iter()
                .map(|w| format!("{w:#x}u"))
                .collect::<Vec<_>>()
                .join(", ");
            format!("const grids = array<u32, {n}>({data});")
        }
        Placement::Storage => unreachable!(),
    };
    let section = section.replace(BINDING, &decl);
    let mut out = format!("{}{}\n{}", &src[..start], section, &src[end..]);
    if p == Placement::Workgroup {
        let fill = format!(
            "for (var t = lid; t < {n}u; t += WG_SIZE) {{ grids[t] = grids_src[{}u + t]; }}\n    workgroupBarrier();",
            slot.word
        );
        out = out.replacen("workgroupBarrier();", &fill, 1);
    }
    out
}

struct Setup {
    pipeline: wgpu::ComputePipeline,
    bind: wgpu::BindGroup,
    dst: wgpu::Buffer,
    groups: u32,
}

fn setup(
    engine: &GpuEngine,
    src_buf: &wgpu::Buffer,
    table_buf: &wgpu::Buffer,
    format: Format,
    wgsl: &str,
    p: Placement,
) -> Setup {
    let device = engine.device();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("gpu_tables variant"),
        source: wgpu::ShaderSource::Wgsl(wgsl.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("gpu_tables variant"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let n_out = (N_VALUES / format.block_elems() * format.block_elems()) as u32;
    let groups = n_out.div_ceil(shaders::VALS_PER_WORKGROUP as u32);
    let params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: None,
        contents: bytemuck::cast_slice(&[n_out, groups, 0, 0]),
        usage: wgpu::BufferUsages::UNIFORM,
    });
    let dst = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: n_out as u64 * 4,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let mut entries = vec![
        wgpu::BindGroupEntry {
            binding: 0,
            resource: src_buf.as_entire_binding(),
        },
        wgpu::BindGroupEntry {
            binding: 1,
            resource: dst.as_entire_binding(),
        },
        wgpu::BindGroupEntry {
            binding: 2,
            resource: params.as_entire_binding(),
        },
    ];
    if p != Placement::Const {
        entries.push(wgpu::BindGroupEntry {
            binding: 3,
            resource: table_buf.as_entire_binding(),
        });
    }
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    Setup {
        pipeline,
        bind,
        dst,
        groups,
    }
}

fn run(engine: &GpuEngine, s: &Setup) -> Duration {
    let mut encoder = engine.device().create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&s.pipeline);
        pass.set_bind_group(0, &s.bind, &[]);
        pass.dispatch_workgroups(s.groups, 1, 1);
    }
    let t = Instant::now();
    let index = engine.queue().submit([encoder.finish()]);
    engine
        .device()
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(Duration::from_secs(900)),
        })
        .expect("dispatch finishes");
    t.elapsed()
}

fn read(engine: &GpuEngine, buf: &wgpu::Buffer) -> Vec<u8> {
    let device = engine.device();
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: buf.size(),
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(buf, 0, &staging, 0, buf.size());
    let index = engine.queue().submit([encoder.finish()]);
    staging.map_async(wgpu::MapMode::Read, .., |r| r.unwrap());
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(Duration::from_secs(900)),
        })
        .unwrap();
    let v = staging.get_mapped_range(..).unwrap().to_vec();
    staging.unmap();
    v
}

fn bench_backend(backend: Backend) {
    let engine = match GpuEngine::new(backend) {
        Ok(e) => e,
        Err(e) => {
            println!("{backend}: SKIPPED (no adapter: {e})");
            return;
        }
    };
    let device = engine.device();
    let all = std::env::var("GPU_TABLES_ALL").is_ok_and(|v| v == "1");
    let wg_limit = engine.limits().max_compute_workgroup_storage_size;
    println!(
        "{backend}: `{}`; workgroup storage limit {wg_limit} B; {N_VALUES} f32 values per dispatch, median of {REPS}",
        engine.adapter_info().name
    );
    let table_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some("tables"),
        contents: bytemuck::cast_slice(&tables::words()),
        usage: wgpu::BufferUsages::STORAGE,
    });
    for &(format, grid) in CASES {
        let n_blocks = N_VALUES / format.block_elems();
        let mut raw = normal_blocks(format, n_blocks, 7 + format.id() as u64);
        raw.resize(raw.len().div_ceil(4) * 4, 0);
        let src_buf = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("src"),
            contents: &raw,
            usage: wgpu::BufferUsages::STORAGE,
        });
        let words = tables::LAYOUT
            .iter()
            .find(|s| s.wgsl_name == grid)
            .unwrap()
            .words;
        let mut reference: Option<Vec<u8>> = None;
        for p in [Placement::Storage, Placement::Workgroup, Placement::Const] {
            let label = format!("{:<8} {grid:<15} {:<9}", format.name(), format!("{p:?}"));
            let slow =
                p == Placement::Const || (p == Placement::Workgroup && backend == Backend::Gl);
            if slow && words > SLOW_WORDS && !all {
                println!("  {label} skipped: {words} words compile for minutes (GPU_TABLES_ALL=1 runs it)");
                continue;
            }
            if p == Placement::Workgroup && words * 4 + 1024 > wg_limit {
                println!(
                    "  {label} n/a: {} B grid over the workgroup limit",
                    words * 4
                );
                continue;
            }
            let wgsl = variant(format, grid, p);
            let t = Instant::now();
            let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
            let s = setup(&engine, &src_buf, &table_buf, format, &wgsl, p);
            if let Some(e) = pollster::block_on(scope.pop()) {
                println!("  {label} failed: {e}");
                continue;
            }
            run(&engine, &s); // warm-up (and the driver's own compile)
            let compile = t.elapsed();
            run(&engine, &s);
            let out = read(&engine, &s.dst);
            match &reference {
                None => reference = Some(out),
                Some(r) => assert!(*r == out, "{label}: output differs from storage"),
            }
            let mut times: Vec<Duration> = (0..REPS).map(|_| run(&engine, &s)).collect();
            times.sort();
            let med = times[REPS / 2];
            let gbs = (N_VALUES * 4) as f64 / med.as_secs_f64() / 1e9;
            println!(
                "  {label} {:>8.2} ms  {gbs:>6.3} GB/s f32  (min {:.2} ms; pipeline + first run {:.0} ms)",
                med.as_secs_f64() * 1e3,
                times[0].as_secs_f64() * 1e3,
                compile.as_secs_f64() * 1e3
            );
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing we need either.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let backends = match std::env::var("GGUF_DEQUANT_BACKEND").map(|s| s.parse::<Backend>()) {
        Ok(Ok(b)) => vec![b],
        _ => vec![Backend::Vulkan, Backend::Gl],
    };
    for b in backends {
        bench_backend(b);
    }
}
