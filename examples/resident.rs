//! Loads a GGUF model onto the GPU with the weight-loading service and uses a resident tensor in
//! a compute pass of its own: a tiny WGSL kernel sums one row of a dequantised f32 tensor, and the
//! sum is compared with the same sum over the CPU codec's values.
//!
//! ```text
//! cargo run --release --example resident -- [MODEL.gguf] [--dtype f32|f16|bf16|raw]
//!     [--source mmap|read] [--staging-mib N] [--tensor NAME] [--glob PATTERN]
//! ```
//!
//! MODEL defaults to `~/.cache/gguf-dequant/models/SmolLM2-135M-Instruct.Q4_1.gguf`. Prints the
//! load figures as one JSON line (the fields of the CLI's `load` command), then the check.

use std::path::PathBuf;

use gguf_dequant::gpu::loader::{LoadOptions, Residency, Source, WeightLoader};
use gguf_dequant::sys::peak_rss_bytes;
use gguf_dequant::{cpu, Backend, DType, GgufFile, Selection};

const ROW_SUM: &str = "
@group(0) @binding(0) var<storage, read> weights: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
struct Row { start: u32, len: u32 }
@group(0) @binding(2) var<uniform> row: Row;

// One invocation, in element order: the same sequence of f32 additions as the CPU loop below.
@compute @workgroup_size(1)
fn main() {
    var s = 0.0;
    for (var i = 0u; i < row.len; i++) {
        s += weights[row.start + i];
    }
    out[0] = s;
}
";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mut model = None;
    let mut residency = Residency::Dequantised(DType::F32);
    let mut opts = LoadOptions::default();
    let mut tensor = None;
    let mut selection = Selection::All;
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--dtype" => {
                let v = value()?;
                residency = match v.as_str() {
                    "raw" => Residency::Raw,
                    d => Residency::Dequantised(d.parse()?),
                };
            }
            "--source" => opts.source = value()?.parse::<Source>()?,
            "--staging-mib" => opts.staging_bytes = value()?.parse::<u64>()? << 20,
            "--tensor" => tensor = Some(value()?),
            "--glob" => selection = Selection::glob([value()?]),
            _ => model = Some(PathBuf::from(a)),
        }
    }
    let model = model.unwrap_or_else(|| {
        let home = std::env::var_os("HOME").unwrap_or_default();
        PathBuf::from(home).join(".cache/gguf-dequant/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    });

    let loader = WeightLoader::new(Backend::Auto)?;
    let file = GgufFile::open(&model)?;
    let resident = match loader.load_with(&file, &selection, residency, &opts) {
        Ok(m) => m,
        Err(e) => {
            if let Some(h) = e.hint() {
                eprintln!("hint: {h}");
            }
            return Err(e.into());
        }
    };
    let r = resident.report();
    let info = loader.adapter_info();
    println!(
        "{}",
        serde_json::json!({
            "file": model.display().to_string(),
            "backend": format!("{:?}", info.backend).to_lowercase(),
            "adapter": info.name,
            "dtype": residency.dtype().map_or("raw", |d| d.name()),
            "source": r.source.name(),
            "tensors": r.tensors,
            "bytes_read": r.bytes_read,
            "bytes_resident": r.bytes_resident,
            "staging_bytes": r.staging_bytes,
            "chunks": r.chunks,
            "seconds": r.seconds,
            "gb_per_s": r.gb_per_s(),
            "peak_rss_bytes": peak_rss_bytes(),
        })
    );

    // Our own compute pass over a resident tensor: the sum of one row.
    if residency != Residency::Dequantised(DType::F32) {
        return Ok(());
    }
    let t = match &tensor {
        Some(name) => resident
            .get(name)
            .ok_or(format!("no resident tensor {name}"))?,
        None => resident
            .tensors()
            .iter()
            .find(|t| t.dims.len() == 2 && t.format.has_shader())
            .ok_or("no 2-D tensor")?,
    };
    let row_len = t.dims[0];
    let row_index = t.n_elements / row_len / 2; // a row from the middle
                                                // Bind just the row (a whole tensor may exceed the storage-binding limit, or be split over
                                                // several buffers): the loader says which part holds it, from which aligned offset, and at
                                                // which value of the binding the row starts.
    let row = row_index * row_len..(row_index + 1) * row_len;
    let binding = t.bind_elements(row, loader.engine().offset_alignment())?;
    let start = binding.skip_elements.ok_or("a dequantised tensor")? as u32;

    let device = loader.device();
    let queue = loader.queue();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("row sum"),
        source: wgpu::ShaderSource::Wgsl(ROW_SUM.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("row sum"),
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let out = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("row sum out"),
        size: 16,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let readback = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("row sum readback"),
        size: 16,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let uniform = wgpu::util::DeviceExt::create_buffer_init(
        device,
        &wgpu::util::BufferInitDescriptor {
            label: Some("row"),
            contents: bytemuck::cast_slice(&[start, row_len as u32, 0, 0]),
            usage: wgpu::BufferUsages::UNIFORM,
        },
    );
    let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: binding.resource(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: out.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: uniform.as_entire_binding(),
            },
        ],
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    encoder.copy_buffer_to_buffer(&out, 0, &readback, 0, 16);
    let index = queue.submit([encoder.finish()]);
    readback.map_async(wgpu::MapMode::Read, .., |_| {});
    device.poll(wgpu::PollType::Wait {
        submission_index: Some(index),
        timeout: None,
    })?;
    let gpu = f32::from_le_bytes(readback.get_mapped_range(..)?[..4].try_into()?);

    // The CPU codec's values of the same row (just that row's blocks), summed in the same order.
    let info = file.tensor(&t.name).ok_or("tensor vanished")?;
    let row_bytes = row_len as usize / t.format.block_elems() * t.format.block_bytes();
    let raw = &file.tensor_data(info)[row_index as usize * row_bytes..][..row_bytes];
    let values = cpu::dequant_f32(t.format, raw)?;
    let cpu_sum = values.iter().fold(0.0f32, |s, v| s + v);
    println!(
        "row {row_index} of {} ({}, {} values): GPU sum {gpu} (bits {:#010x}), CPU sum {cpu_sum} (bits {:#010x}): {}",
        t.name,
        t.format,
        row_len,
        gpu.to_bits(),
        cpu_sum.to_bits(),
        if gpu.to_bits() == cpu_sum.to_bits() { "equal" } else { "DIFFERENT" }
    );
    if gpu.to_bits() != cpu_sum.to_bits() {
        return Err("GPU and CPU row sums differ".into());
    }
    Ok(())
}
