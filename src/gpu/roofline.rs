//! The two rooflines `gguf-dequant bench` measures a dequantisation against, on the same adapter:
//!
//! * **Buffer copy** ([`record_copy`]): `copy_buffer_to_buffer`. On a discrete GPU it runs at
//!   memory bandwidth; on a software adapter it is a `memcpy`, far faster than any shader there.
//! * **Shader copy** ([`ShaderCopy`]): a WGSL streaming kernel (`shaders/lib/stream.wgsl`) with the
//!   traffic shape of the dequantisation it is compared with. It reads the quantised bytes and
//!   writes the output bytes, both as `vec4<u32>`, with the dequantisers' 64-invocation
//!   workgroups, one workgroup per 512 output values, the same 2-D folding of large grids and
//!   the engine's windows ([`crate::gpu::windows::plan_windows`], with the limit rounded down to
//!   and the alignment raised to 16 bytes for the `vec4` bindings). What it writes is given by
//!   [`expected`]: an exact copy where input and output are the same size.
//!
//! On a discrete GPU both rooflines should agree; where they do not, the shader copy is the
//! bound a shader can reach.

use super::pipelines::{params, storage};
use super::windows::{self, grid, round_up, MAX_WINDOW_BYTES};
use super::{binding, buffers, scoped, GpuEngine, GpuError};
use crate::formats::sample::Rng;
use crate::{DType, Format, Result};

/// The streaming kernel's WGSL.
pub const SOURCE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/shaders/lib/stream.wgsl"
));

/// Bytes of one word of the kernel's bindings (`vec4<u32>`).
pub const WORD: u64 = 16;

/// Output words per workgroup for `dtype`: the dequantisers' 512 values per workgroup (128 words of
/// f32, 64 of f16 or bf16).
pub const fn out_span(dtype: DType) -> u64 {
    super::shaders::VALS_PER_WORKGROUP * dtype.size() as u64 / WORD
}

/// One dispatch of the kernel: a window of the source and output buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamWindow {
    /// Byte offset of the source binding.
    pub src_offset: u64,
    /// Source words bound (the window's quantised bytes rounded up to 16).
    pub src_words: u64,
    /// Byte offset of the output binding.
    pub dst_offset: u64,
    /// Output words bound (the window's output bytes rounded up to 16).
    pub dst_words: u64,
    /// Workgroups that carry words: one per [`out_span`] output words.
    pub groups: u64,
    /// Source words per workgroup.
    pub in_span: u64,
    /// Output words per workgroup.
    pub out_span: u64,
}

impl StreamWindow {
    /// Bytes this window reads plus bytes it writes.
    pub fn traffic(&self) -> u64 {
        WORD * (self.src_words + self.dst_words)
    }
}

/// The windows of a shader copy with the traffic of `n_blocks` blocks of `format` decoded to
/// `dtype`, under a storage-binding limit of `limit` bytes and an offset alignment of `align`: the
/// engine's window plan with the limit rounded down to 16 bytes and the alignment raised to 16,
/// so that every binding is whole `vec4` words at a 16-byte offset within the limit.
pub fn stream_windows(
    format: Format,
    dtype: DType,
    n_blocks: u64,
    limit: u64,
    align: u64,
) -> Result<Vec<StreamWindow>, GpuError> {
    let limit = limit.min(MAX_WINDOW_BYTES) & !(WORD - 1);
    let plan = windows::plan_windows(format, dtype, limit, align.max(WORD))?;
    let (bytes, out_block) = (
        format.block_bytes() as u64,
        (format.block_elems() * dtype.size()) as u64,
    );
    let span = out_span(dtype);
    Ok(plan
        .windows(n_blocks)
        .map(|(first, count)| {
            let src_words = (count * bytes).div_ceil(WORD);
            let dst_words = (count * out_block).div_ceil(WORD);
            let groups = dst_words.div_ceil(span);
            StreamWindow {
                src_offset: first * bytes,
                src_words,
                dst_offset: first * out_block,
                dst_words,
                groups,
                in_span: src_words.div_ceil(groups),
                out_span: span,
            }
        })
        .collect())
}

/// `(source bytes, output bytes)` the buffers of a shader copy of `n_blocks` blocks of `format`
/// to `dtype` need: the data rounded up to 16 bytes (also enough for [`GpuEngine::record`]).
pub fn buffer_sizes(format: Format, dtype: DType, n_blocks: u64) -> (u64, u64) {
    let (src, dst) = windows::padded(format, n_blocks, dtype.size() as u64);
    (round_up(src, WORD), round_up(dst, WORD))
}

/// What the kernel writes into one window: output word `m` of workgroup `g` is the XOR of the
/// group's source words `k < in_span` with `k ≡ m (mod out_span)`, zero when there is none (the
/// source words past `src.len()` count as absent). With `in_span == out_span` it is a copy.
pub fn expected(src: &[[u32; 4]], dst_words: u64, in_span: u64, out_span: u64) -> Vec<[u32; 4]> {
    (0..dst_words)
        .map(|o| {
            let (g, m) = (o / out_span, o % out_span);
            let mut v = [0u32; 4];
            for k in (m..in_span).step_by(out_span as usize) {
                if let Some(w) = src.get((g * in_span + k) as usize) {
                    for (a, b) in v.iter_mut().zip(w) {
                        *a ^= b;
                    }
                }
            }
            v
        })
        .collect()
}

/// Records a `copy_buffer_to_buffer` of the first `bytes` bytes of `src` into `dst`: the buffer
/// copy roofline. `bytes` is a multiple of 4 within both buffers (usages `COPY_SRC`, `COPY_DST`).
pub fn record_copy(
    encoder: &mut wgpu::CommandEncoder,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    bytes: u64,
) {
    encoder.copy_buffer_to_buffer(src, 0, dst, 0, bytes);
}

/// One shader copy for [`ShaderCopy::record`]: the traffic of `n_blocks` blocks of `format`
/// decoded to `dtype`, from `src` into `dst` (usage `STORAGE`, at least [`buffer_sizes`] bytes).
#[derive(Clone, Copy, Debug)]
pub struct StreamJob<'a> {
    /// The format whose bytes are read.
    pub format: Format,
    /// The output dtype whose bytes are written.
    pub dtype: DType,
    /// Blocks.
    pub n_blocks: u64,
    /// Source buffer.
    pub src: &'a wgpu::Buffer,
    /// Output buffer.
    pub dst: &'a wgpu::Buffer,
}

/// The streaming kernel compiled on one engine's device.
#[derive(Debug)]
pub struct ShaderCopy {
    layout: wgpu::BindGroupLayout,
    pipeline: wgpu::ComputePipeline,
}

impl ShaderCopy {
    /// Compiles the kernel on `engine`'s device (inside error scopes).
    pub fn new(engine: &GpuEngine) -> Result<ShaderCopy> {
        let device = engine.device();
        let copy = scoped(device, "compiling the shader-copy roofline", || {
            let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("gguf-dequant shader copy"),
                entries: &[
                    storage(binding::SRC, true, WORD),
                    storage(binding::DST, false, WORD),
                    params(),
                ],
            });
            let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("gguf-dequant shader copy"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
            let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("gguf-dequant shader copy"),
                source: wgpu::ShaderSource::Wgsl(SOURCE.into()),
            });
            let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("gguf-dequant shader copy"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: Default::default(),
                cache: None,
            });
            ShaderCopy { layout, pipeline }
        })?;
        engine.check_device()?;
        Ok(copy)
    }

    /// Records `job` into `encoder` in the engine's windows; returns the bytes it moves (read
    /// plus written). Nothing is submitted.
    pub fn record(
        &self,
        engine: &GpuEngine,
        encoder: &mut wgpu::CommandEncoder,
        job: &StreamJob<'_>,
    ) -> Result<u64> {
        let windows = stream_windows(
            job.format,
            job.dtype,
            job.n_blocks,
            engine.max_binding_size(),
            engine.offset_alignment(),
        )?;
        self.record_windows(engine, encoder, job, &windows)
    }

    fn record_windows(
        &self,
        engine: &GpuEngine,
        encoder: &mut wgpu::CommandEncoder,
        job: &StreamJob<'_>,
        windows: &[StreamWindow],
    ) -> Result<u64> {
        let (src_len, dst_len) = buffer_sizes(job.format, job.dtype, job.n_blocks);
        if job.src.size() < src_len || job.dst.size() < dst_len {
            return Err(GpuError::InvalidJob(format!(
                "a shader copy of {} blocks of {} to {} needs buffers of {src_len} and {dst_len} bytes",
                job.n_blocks, job.format, job.dtype
            ))
            .into());
        }
        let device = engine.device();
        let device_dim = engine.limits().max_compute_workgroups_per_dimension;
        let max_dim = engine
            .options
            .max_workgroups_per_dim
            .map_or(device_dim, |m| m.clamp(1, device_dim)) as u64;
        scoped(device, "recording the shader-copy roofline", || {
            for w in windows {
                let params = [w.groups as u32, w.in_span as u32, w.out_span as u32, 0];
                let uniform = buffers::upload_as(
                    device,
                    "gguf-dequant shader copy params",
                    bytemuck::cast_slice(&params),
                    wgpu::BufferUsages::UNIFORM,
                )?;
                let bind = |buffer, offset, words: u64| {
                    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset,
                        size: wgpu::BufferSize::new(words * WORD),
                    })
                };
                let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("gguf-dequant shader copy window"),
                    layout: &self.layout,
                    entries: &[
                        wgpu::BindGroupEntry {
                            binding: binding::SRC,
                            resource: bind(job.src, w.src_offset, w.src_words),
                        },
                        wgpu::BindGroupEntry {
                            binding: binding::DST,
                            resource: bind(job.dst, w.dst_offset, w.dst_words),
                        },
                        wgpu::BindGroupEntry {
                            binding: binding::PARAMS,
                            resource: uniform.as_entire_binding(),
                        },
                    ],
                });
                let (x, y) = grid(w.groups, max_dim);
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("gguf-dequant shader copy"),
                    timestamp_writes: None,
                });
                pass.set_pipeline(&self.pipeline);
                pass.set_bind_group(0, &group, &[]);
                pass.dispatch_workgroups(x, y, 1);
            }
            Ok::<_, GpuError>(())
        })??;
        engine.check_device()?;
        Ok(windows.iter().map(StreamWindow::traffic).sum())
    }

    /// Runs the kernel on `engine` for three traffic shapes (F32 to f32: a plain copy; Q4_0 to
    /// f32: less read than written; F32 to f16: more read than written), each cut into several
    /// windows by a binding limit of at most 64 KiB, reads the output back and compares it word
    /// for word with [`expected`]. A difference is [`GpuError::Internal`].
    pub fn check(&self, engine: &GpuEngine) -> Result<()> {
        const LIMIT: u64 = 64 << 10;
        let shapes = [
            (Format::F32, DType::F32, 40_000),
            (Format::Q4_0, DType::F32, 3_000),
            (Format::F32, DType::F16, 70_000),
        ];
        let mut rng = Rng::new(0x5EED_C0B1);
        for (format, dtype, n_blocks) in shapes {
            let limit = engine.max_binding_size().min(LIMIT);
            let windows =
                stream_windows(format, dtype, n_blocks, limit, engine.offset_alignment())?;
            let (src_len, dst_len) = buffer_sizes(format, dtype, n_blocks);
            let mut bytes = vec![0u8; src_len as usize];
            rng.fill(&mut bytes[..(n_blocks * format.block_bytes() as u64) as usize]);
            let device = engine.device();
            let src = buffers::upload_as(
                device,
                "shader copy check source",
                &bytes,
                wgpu::BufferUsages::STORAGE,
            )?;
            let (dst, staging) =
                buffers::output_and_readback(device, "shader copy check", dst_len)?;
            let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("gguf-dequant shader copy check"),
            });
            let job = StreamJob {
                format,
                dtype,
                n_blocks,
                src: &src,
                dst: &dst,
            };
            self.record_windows(engine, &mut encoder, &job, &windows)?;
            encoder.copy_buffer_to_buffer(&dst, 0, &staging, 0, dst_len);
            let index = engine.submit("submitting the shader-copy check", encoder)?;
            let mut out = vec![0u8; dst_len as usize];
            engine.read_into(&staging, index, &mut out)?;
            let words = |b: &[u8]| -> Vec<[u32; 4]> {
                bytemuck::pod_collect_to_vec::<u8, u32>(b)
                    .chunks_exact(4)
                    .map(|c| [c[0], c[1], c[2], c[3]])
                    .collect()
            };
            let (src_words, out_words) = (words(&bytes), words(&out));
            for w in &windows {
                let s = (w.src_offset / WORD) as usize;
                let d = (w.dst_offset / WORD) as usize;
                let want = expected(
                    &src_words[s..s + w.src_words as usize],
                    w.dst_words,
                    w.in_span,
                    w.out_span,
                );
                if let Some(i) = (0..want.len()).find(|&i| out_words[d + i] != want[i]) {
                    return Err(GpuError::Internal {
                        what: format!("checking the shader-copy roofline ({format} to {dtype})"),
                        message: format!(
                            "output word {} is {:08x?}, expected {:08x?}",
                            d + i,
                            out_words[d + i],
                            want[i]
                        ),
                    }
                    .into());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_validates_without_capabilities_and_translates() {
        let module = naga::front::wgsl::parse_str(SOURCE).expect("parses");
        let info = naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::empty(),
        )
        .validate(&module)
        .expect("validates under Capabilities::empty()");
        naga::back::spv::write_vec(&module, &info, &Default::default(), None).expect("SPIR-V");
        let mut glsl = String::new();
        let options = naga::back::glsl::Options {
            version: naga::back::glsl::Version::Embedded {
                version: 310,
                is_webgl: false,
            },
            ..Default::default()
        };
        let pipeline = naga::back::glsl::PipelineOptions {
            shader_stage: naga::ShaderStage::Compute,
            entry_point: "main".into(),
            multiview: None,
        };
        naga::back::glsl::Writer::new(
            &mut glsl,
            &module,
            &info,
            &options,
            &pipeline,
            naga::proc::BoundsCheckPolicies::default(),
        )
        .and_then(|mut w| w.write())
        .expect("GLSL ES 3.1");
        // The bindings are the engine's numbers.
        for (name, b) in [
            ("src", binding::SRC),
            ("dst", binding::DST),
            ("params", binding::PARAMS),
        ] {
            let var = module
                .global_variables
                .iter()
                .find(|(_, v)| v.name.as_deref() == Some(name))
                .map(|(_, v)| v)
                .unwrap_or_else(|| panic!("{name}"));
            assert_eq!(
                var.binding.as_ref().map(|r| (r.group, r.binding)),
                Some((0, b))
            );
        }
    }

    /// The kernel writes what [`expected`] says on every adapter of lavapipe Vulkan and llvmpipe
    /// GL, in several windows; a missing backend is a note, or a failure with `CI=true`.
    #[test]
    fn kernel_copies_correctly_on_the_software_adapters() {
        for backend in [crate::Backend::Vulkan, crate::Backend::Gl] {
            let adapters = match super::super::compute_adapters(backend) {
                Ok(a) => a,
                Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
                    panic!("{backend}: {e} (CI=true: a missing adapter is an error)")
                }
                Err(e) => {
                    eprintln!("*** SKIPPED the shader copy on {backend}: {e} ***");
                    continue;
                }
            };
            for adapter in &adapters {
                let engine =
                    GpuEngine::from_adapter(adapter, super::super::EngineOptions::default())
                        .unwrap();
                let copy = ShaderCopy::new(&engine).unwrap();
                copy.check(&engine)
                    .unwrap_or_else(|e| panic!("{}: {e}", engine.adapter_info().name));
            }
        }
    }

    #[test]
    fn equal_spans_copy_and_every_word_is_read_once() {
        let src: Vec<[u32; 4]> = (0..300u32).map(|i| [i, i + 1, i * 7, !i]).collect();
        assert_eq!(expected(&src, 300, 128, 128)[..300], src[..]);
        // More read than written: the XOR of each word's residues, every source word once.
        let out = expected(&src, 128, 150, 64);
        let x = out.iter().fold([0u32; 4], |a, w| {
            [a[0] ^ w[0], a[1] ^ w[1], a[2] ^ w[2], a[3] ^ w[3]]
        });
        let y = src.iter().fold([0u32; 4], |a, w| {
            [a[0] ^ w[0], a[1] ^ w[1], a[2] ^ w[2], a[3] ^ w[3]]
        });
        assert_eq!(x, y);
        // Less read than written: the group's words, then zeros.
        let out = expected(&src[..36], 256, 18, 128);
        assert_eq!(out[..18], src[..18]);
        assert!(out[18..128].iter().all(|w| *w == [0; 4]));
        assert_eq!(out[128..146], src[18..36]);
    }

    #[test]
    fn windows_cover_the_traffic_within_the_limit() {
        for &format in crate::formats::WITH_SHADER {
            for dtype in DType::ALL {
                for (limit, align) in [(1 << 20, 4), (1 << 20, 256), (1 << 30, 32)] {
                    let n_blocks = 100_003 / format.block_elems() as u64 + 1;
                    let w = stream_windows(format, dtype, n_blocks, limit, align).unwrap();
                    let (src_len, dst_len) = buffer_sizes(format, dtype, n_blocks);
                    let mut src_end = 0;
                    let mut dst_end = 0;
                    for w in &w {
                        assert_eq!(w.src_offset % 16, 0, "{format} {dtype}");
                        assert_eq!(w.dst_offset % align.max(16), 0, "{format} {dtype}");
                        assert!(w.src_words * 16 <= limit && w.dst_words * 16 <= limit);
                        assert!(w.src_offset == src_end && w.dst_offset == dst_end);
                        src_end = w.src_offset + w.src_words * 16;
                        dst_end += w.dst_words * 16;
                        assert!(w.groups * w.out_span >= w.dst_words);
                        assert!(w.groups * w.in_span >= w.src_words);
                        assert_eq!(w.out_span % 64, 0);
                    }
                    assert!(src_end <= src_len && dst_end <= dst_len, "{format} {dtype}");
                    assert_eq!(dst_end, dst_len, "{format} {dtype}");
                    let bytes = n_blocks * format.block_bytes() as u64;
                    let traffic: u64 = w.iter().map(StreamWindow::traffic).sum();
                    let exact = bytes + n_blocks * (format.block_elems() * dtype.size()) as u64;
                    assert!(traffic >= exact && traffic < exact + 32 * w.len() as u64);
                }
            }
        }
    }
}
