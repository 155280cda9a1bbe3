//! Instances, adapters and devices: the one place that creates them, ranks adapters and installs
//! the handlers that record device loss and uncaught errors.

use std::sync::{Arc, Mutex};

use super::GpuError;
use crate::{Backend, Result};

impl Backend {
    /// The wgpu backends this selects; empty for [`Backend::Cpu`].
    pub fn wgpu_backends(self) -> wgpu::Backends {
        match self {
            Backend::Auto | Backend::All => {
                wgpu::Backends::VULKAN
                    | wgpu::Backends::METAL
                    | wgpu::Backends::DX12
                    | wgpu::Backends::GL
            }
            Backend::Vulkan => wgpu::Backends::VULKAN,
            Backend::Gl => wgpu::Backends::GL,
            Backend::Metal => wgpu::Backends::METAL,
            Backend::Dx12 => wgpu::Backends::DX12,
            Backend::Cpu => wgpu::Backends::empty(),
        }
    }
}

fn instance(backends: wgpu::Backends) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backends;
    desc.flags = wgpu::InstanceFlags::from_build_config().with_env();
    desc.backend_options = wgpu::BackendOptions::from_env_or_default();
    wgpu::Instance::new(desc)
}

fn runs_compute(adapter: &wgpu::Adapter) -> bool {
    adapter
        .get_downlevel_capabilities()
        .flags
        .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
}

/// `name (backend, device type)`, as errors and reports name an adapter.
pub(crate) fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

/// The adapters of `backend` that run compute shaders, best first: discrete > integrated >
/// virtual > CPU, and Vulkan, Metal and DX12 before GL. None is [`GpuError::NoAdapter`] (also
/// for [`Backend::Cpu`], which names no GPU).
pub fn compute_adapters(backend: Backend) -> Result<Vec<wgpu::Adapter>> {
    let backends = backend.wgpu_backends();
    let all = pollster::block_on(instance(backends).enumerate_adapters(backends));
    let seen: Vec<String> = all.iter().map(|a| describe(&a.get_info())).collect();
    let mut usable: Vec<wgpu::Adapter> = all.into_iter().filter(runs_compute).collect();
    if usable.is_empty() {
        let seen = if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        };
        return Err(GpuError::NoAdapter {
            backend: backend.to_string(),
            seen,
        }
        .into());
    }
    rank(&mut usable);
    Ok(usable)
}

/// Sorts compute adapters best first (stable: ties keep wgpu's enumeration order).
fn rank(adapters: &mut [wgpu::Adapter]) {
    adapters.sort_by_key(|a| {
        let info = a.get_info();
        let kind = match info.device_type {
            wgpu::DeviceType::DiscreteGpu => 0,
            wgpu::DeviceType::IntegratedGpu => 1,
            wgpu::DeviceType::VirtualGpu => 2,
            wgpu::DeviceType::Cpu => 3,
            wgpu::DeviceType::Other => 4,
        };
        (kind, info.backend == wgpu::Backend::Gl)
    });
}

/// An adapter as wgpu reports it, with the limits that matter for dequantisation.
#[derive(Clone, Debug)]
pub struct AdapterDetails {
    /// Name, vendor, backend, device type, driver.
    pub info: wgpu::AdapterInfo,
    /// The adapter's own limits (what a device created by [`super::GpuEngine::new`] gets).
    pub limits: wgpu::Limits,
    /// Whether it runs compute shaders (GL adapters below GLES 3.1 do not).
    pub compute: bool,
    /// What it offers kernels beyond WebGPU's core: subgroups and their sizes, `shader-f16`,
    /// 16-bit integers, cooperative-matrix shapes.
    pub capabilities: Capabilities,
    /// Its position in [`compute_adapters`]`(Backend::All)` (the adapter numbers of the command
    /// line's `adapters` and `load --devices`); `None` when it does not run compute shaders.
    pub index: Option<usize>,
}

/// Every adapter wgpu sees on any backend, usable for compute or not: the compute adapters first,
/// in the order of [`compute_adapters`]`(Backend::All)`, then the others.
pub fn list_adapters() -> Vec<AdapterDetails> {
    let backends = Backend::All.wgpu_backends();
    let (mut compute, other): (Vec<_>, Vec<_>) =
        pollster::block_on(instance(backends).enumerate_adapters(backends))
            .into_iter()
            .partition(runs_compute);
    rank(&mut compute);
    let details = |a: &wgpu::Adapter, index: Option<usize>| AdapterDetails {
        info: a.get_info(),
        limits: a.limits(),
        compute: index.is_some(),
        capabilities: Capabilities::of(a),
        index,
    };
    compute
        .iter()
        .enumerate()
        .map(|(i, a)| details(a, Some(i)))
        .chain(other.iter().map(|a| details(a, None)))
        .collect()
}

/// What an adapter offers GPU-shaped kernels beyond WebGPU's core, as wgpu reports it: the
/// capability set a kernel variant may require. Integer dot products (`dot4I8Packed`) are core
/// WGSL, available everywhere; whether the hardware runs them as one instruction wgpu does not
/// report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// The smallest and largest subgroup size where the adapter offers wgpu's `SUBGROUP`
    /// feature (a kernel cannot require one size: any in the range may run it), else `None`.
    pub subgroups: Option<(u32, u32)>,
    /// `SHADER_F16` (WGSL `enable f16;`).
    pub shader_f16: bool,
    /// `SHADER_I16` (WGSL `enable wgpu_int16;`: `i16`/`u16` values and loads).
    pub shader_i16: bool,
    /// The cooperative-matrix shapes the adapter lists where it offers
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` (wgpu does not check a shader's shape against them: a
    /// kernel may use only a listed one), else empty.
    pub cooperative_matrices: Vec<wgpu::CooperativeMatrixProperties>,
    /// Bytes of workgroup memory one workgroup may use (NVIDIA's Vulkan driver: 48 KiB).
    pub workgroup_storage: u32,
    /// Invocations one workgroup may have.
    pub workgroup_invocations: u32,
}

impl Capabilities {
    /// `adapter`'s capabilities (what a device of it may enable).
    pub fn of(adapter: &wgpu::Adapter) -> Capabilities {
        let coop = adapter
            .features()
            .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);
        Capabilities::from_parts(
            adapter.features(),
            &adapter.get_info(),
            &adapter.limits(),
            if coop {
                adapter.cooperative_matrix_properties()
            } else {
                Vec::new()
            },
        )
    }

    /// `device`'s capabilities (the features it was created with; a device does not list
    /// cooperative-matrix shapes, so none).
    pub fn of_device(device: &wgpu::Device) -> Capabilities {
        Capabilities::from_parts(
            device.features(),
            &device.adapter_info(),
            &device.limits(),
            Vec::new(),
        )
    }

    fn from_parts(
        features: wgpu::Features,
        info: &wgpu::AdapterInfo,
        limits: &wgpu::Limits,
        cooperative_matrices: Vec<wgpu::CooperativeMatrixProperties>,
    ) -> Capabilities {
        Capabilities {
            subgroups: features
                .contains(wgpu::Features::SUBGROUP)
                .then_some((info.subgroup_min_size, info.subgroup_max_size)),
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            shader_i16: features.contains(wgpu::Features::SHADER_I16),
            cooperative_matrices,
            workgroup_storage: limits.max_compute_workgroup_storage_size,
            workgroup_invocations: limits.max_compute_invocations_per_workgroup,
        }
    }

    /// The cooperative-matrix shapes as `MxNxK ab->cr` (e.g. `16x16x16 f16->f32`), in the
    /// adapter's order.
    pub fn cooperative_matrix_names(&self) -> Vec<String> {
        let ty = |t: wgpu::CooperativeScalarType| format!("{t:?}").to_lowercase();
        self.cooperative_matrices
            .iter()
            .map(|p| {
                format!(
                    "{}x{}x{} {}->{}{}",
                    p.m_size,
                    p.n_size,
                    p.k_size,
                    ty(p.ab_type),
                    ty(p.cr_type),
                    if p.saturating_accumulation {
                        " saturating"
                    } else {
                        ""
                    }
                )
            })
            .collect()
    }
}

/// A device of `adapter` with the adapter's own limits and, when it has them, the timestamp
/// features: `TIMESTAMP_QUERY` and `TIMESTAMP_QUERY_INSIDE_ENCODERS` (what
/// [`super::timing::GpuTimer`] uses), and `TIMESTAMP_QUERY_INSIDE_PASSES` (for a caller that
/// times the dispatches of one pass, as examples/generate's `--profile` does); and `SUBGROUP`
/// (the matvec kernels' subgroup reduction).
pub(crate) fn request_device(adapter: &wgpu::Adapter) -> Result<(wgpu::Device, wgpu::Queue)> {
    let info = adapter.get_info();
    let desc = wgpu::DeviceDescriptor {
        label: Some("gguf-dequant"),
        required_features: adapter.features()
            & (wgpu::Features::TIMESTAMP_QUERY
                | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS
                | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
                | wgpu::Features::SUBGROUP),
        required_limits: adapter.limits(),
        ..Default::default()
    };
    pollster::block_on(adapter.request_device(&desc)).map_err(|e| {
        GpuError::RequestDevice {
            adapter: describe(&info),
            reason: e.to_string(),
        }
        .into()
    })
}

/// The probe of [`exact_f16`]: each invocation converts two codes with `unpack2x16float` and with
/// the decoders' integer conversion (`shaders/lib/half.wgsl`, bit-exact with the CPU on every
/// adapter the tests run) and counts the codes where they differ (NaN against NaN is no
/// difference), so the probe needs 4 bytes of memory whatever the device's limits.
const F16_PROBE: &str = concat!(
    "@group(0) @binding(0) var<storage, read_write> mismatches: atomic<u32>;\n",
    "const EXP_MASK_F32: u32 = 0x7F800000u;\n",
    "const MANT_MASK_F32: u32 = 0x007FFFFFu;\n",
    include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/shaders/lib/half.wgsl"
    )),
    "
fn is_nan(b: u32) -> bool {
    return (b & EXP_MASK_F32) == EXP_MASK_F32 && (b & MANT_MASK_F32) != 0u;
}

fn differs(got: u32, want: u32) -> bool {
    return got != want && !(is_nan(got) && is_nan(want));
}

@compute @workgroup_size(64)
fn probe(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i < 32768u) {
        let w = (2u * i) | ((2u * i + 1u) << 16u);
        let got = bitcast<vec2<u32>>(unpack2x16float(w));
        let want = f16x2_bits(w);
        let n = u32(differs(got.x, want.x)) + u32(differs(got.y, want.y));
        if (n > 0u) {
            atomicAdd(&mismatches, n);
        }
    }
}
"
);

/// Whether `device`'s own binary16 conversion (WGSL `unpack2x16float`) gives every f16 but NaN
/// the f32 the integer conversion gives (subnormals included, where a device may flush them)
/// and NaN for NaN: the condition of the matvec kernels' `hw_f16` variant. All 65536 codes are
/// converted on the device both ways ([`F16_PROBE`]). `Ok(false)` where the device cannot
/// compile it (no `unpack2x16float`: wgpu's downlevel flag `SHADER_F16_IN_F32`); errors: the
/// device failing to run it (lost, out of memory).
pub(crate) fn exact_f16(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    timeout: std::time::Duration,
) -> Result<bool> {
    use super::{buffers, error::scoped};
    let compiled = scoped(device, "the f16 conversion probe", || {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("gguf-dequant f16 probe"),
            source: wgpu::ShaderSource::Wgsl(F16_PROBE.into()),
        });
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("gguf-dequant f16 probe"),
            layout: None,
            module: &module,
            entry_point: Some("probe"),
            compilation_options: Default::default(),
            cache: None,
        })
    });
    let Ok(pipeline) = compiled else {
        return Ok(false);
    };
    let (output, readback) = buffers::output_and_readback(device, "f16 probe", 4)?;
    let bind = scoped(device, "the f16 probe's bindings", || {
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("gguf-dequant f16 probe"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: output.as_entire_binding(),
            }],
        })
    })?;
    let mut encoder = device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(32768 / 64, 1, 1);
    }
    encoder.copy_buffer_to_buffer(&output, 0, &readback, 0, 4);
    let index = buffers::submit(device, queue, "the f16 conversion probe", encoder)?;
    let mut count = [0u8; 4];
    buffers::read_into(device, &readback, index, timeout, &mut count)?;
    Ok(u32::from_le_bytes(count) == 0)
}

/// What the device callbacks recorded, checked after every engine call.
#[derive(Default)]
pub(crate) struct DeviceState {
    lost: Mutex<Option<String>>,
    uncaptured: Mutex<Option<String>>,
}

impl DeviceState {
    /// Installs an uncaptured-error handler and a device-lost callback on `device` that record
    /// into the returned state (replacing the device's own).
    pub(crate) fn install(device: &wgpu::Device) -> Arc<DeviceState> {
        let state = Arc::new(DeviceState::default());
        let s = state.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            let mut slot = s.uncaptured.lock().unwrap_or_else(|p| p.into_inner());
            slot.get_or_insert_with(|| e.to_string());
        }));
        let s = state.clone();
        device.set_device_lost_callback(move |reason, message| {
            let mut slot = s.lost.lock().unwrap_or_else(|p| p.into_inner());
            *slot = Some(format!("{reason:?}: {message}"));
        });
        state
    }

    /// Whether the device-lost callback has run.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// [`GpuError::DeviceLost`] once the device is lost, else [`GpuError::Uncaptured`] for an
    /// error no scope caught (clearing it), else `Ok`.
    pub(crate) fn check(&self) -> Result<(), GpuError> {
        if let Some(m) = self.lost.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Err(GpuError::DeviceLost(m));
        }
        if let Some(m) = self
            .uncaptured
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            return Err(GpuError::Uncaptured(m));
        }
        Ok(())
    }
}
