//! Proof that the validation stage's checks are live: run only by `scripts/test.sh`'s
//! "validation (lavapipe)" stage (`cargo test --test gpu -- --ignored validation::`), with the
//! Khronos validation layer installed, `VK_ICD_FILENAMES` naming lavapipe alone and
//! `WGPU_VALIDATION=1`; ignored elsewhere, where no layer need be present.
//!
//! * the loader reports `VK_LAYER_KHRONOS_validation` as active on wgpu's instance, and the
//!   layer's start-up status message lists synchronisation validation among its enables;
//! * a deliberately invalid Vulkan call through wgpu's hal access (a buffer of size 0) reaches
//!   wgpu-hal's `VALIDATION_CANARY` and the logger, and the layer refuses the call;
//! * a deliberately unsynchronised write-after-write (two `vkCmdFillBuffer`s on one buffer, no
//!   barrier) is reported by synchronisation validation, and the same pair with a barrier is not.
//!
//! Each holds the GPU tests' exclusive lock, so that no other test's report lands in it, and
//! drains what it provoked (`validation::expecting`).

use ash::vk;
use gguf_dequant::Backend;
use wgpu_hal::api::Vulkan;

use crate::support::gpu::validation::{capture_debug, expecting};
use crate::support::gpu::{exclusive, Adapter, GpuEngine, GpuTest};

const LAYER: &str = "VK_LAYER_KHRONOS_validation";

/// Runs `body` on every Vulkan adapter, exclusively.
fn on_vulkan<M>(test: &'static str, body: impl crate::support::gpu::Body<M>) {
    GpuTest::new(Backend::Vulkan, test)
        .exclusive(true)
        .run(body);
}

/// The loader's list of the layers active on the adapter's instance
/// (`vkEnumerateDeviceLayerProperties` reports the instance's enabled layers).
fn active_layers(adapter: &Adapter) -> Vec<String> {
    // SAFETY: the hal adapter is only read; the raw handles outlive the calls.
    let hal = unsafe { adapter.as_hal::<Vulkan>() }.expect("a Vulkan adapter");
    let instance = hal.shared_instance().raw_instance();
    unsafe { instance.enumerate_device_layer_properties(hal.raw_physical_device()) }
        .unwrap()
        .iter()
        .map(|l| {
            l.layer_name_as_c_str()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect()
}

fn layer_is_active(adapter: &Adapter) {
    let layers = active_layers(adapter);
    assert!(
        layers.iter().any(|l| l == LAYER),
        "active layers: {layers:?}"
    );
}

#[test]
#[ignore = "validation stage only (scripts/test.sh): needs the Khronos validation layer"]
fn loader_reports_the_layer_active_on_the_instance() {
    on_vulkan(
        "validation::loader_reports_the_layer_active_on_the_instance",
        layer_is_active,
    );
}

/// The layer's Info message at `vkCreateInstance` ("Khronos Validation Layer Active: … Current
/// Enables: …"), heard by wgpu-hal's instance-creation messenger.
#[test]
#[ignore = "validation stage only (scripts/test.sh): needs the Khronos validation layer"]
fn layer_status_lists_synchronization_validation() {
    let (adapters, heard) = exclusive(|| {
        capture_debug(|| gguf_dequant::gpu::compute_adapters(Backend::Vulkan).unwrap())
    });
    assert!(!adapters.is_empty());
    let status = heard
        .iter()
        .find(|m| m.contains("Khronos Validation Layer Active"))
        .unwrap_or_else(|| panic!("no status message from the layer; heard: {heard:#?}"));
    eprintln!("{status}");
    let enables = status
        .split("Current Enables:")
        .nth(1)
        .unwrap_or_else(|| panic!("{status}"));
    let enables = enables.split("Current Disables").next().unwrap();
    assert!(
        enables.contains("VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION"),
        "synchronisation validation is not enabled: {status}"
    );
}

fn zero_sized_buffer(engine: &GpuEngine) {
    // SAFETY: a raw call on wgpu's device that creates (and, if the driver made one, destroys)
    // a buffer of its own; nothing of wgpu's is touched.
    let hal = unsafe { engine.device().as_hal::<Vulkan>() }.expect("a Vulkan device");
    let device = hal.raw_device();
    let info = vk::BufferCreateInfo::default()
        .size(0)
        .usage(vk::BufferUsageFlags::STORAGE_BUFFER);
    let (result, errors) = expecting(|| unsafe { device.create_buffer(&info, None) });
    if let Ok(buffer) = result {
        unsafe { device.destroy_buffer(buffer, None) };
    }
    eprintln!("vkCreateBuffer(size 0): {result:?}; reported: {errors:#?}");
    let vuid = "VUID-VkBufferCreateInfo-size-00912";
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("canary: ") && e.contains(vuid)),
        "not in the canary: {errors:#?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("log ") && e.contains(vuid)),
        "not logged: {errors:#?}"
    );
    // One canary entry per message (the log has the message and its object list).
    assert!(
        errors
            .iter()
            .filter(|e| e.starts_with("canary: "))
            .all(|e| e.contains(vuid)),
        "other reports: {errors:#?}"
    );
}

#[test]
#[ignore = "validation stage only (scripts/test.sh): needs the Khronos validation layer"]
fn invalid_vulkan_call_reaches_the_canary_and_the_log() {
    on_vulkan(
        "validation::invalid_vulkan_call_reaches_the_canary_and_the_log",
        zero_sized_buffer,
    );
}

/// Records two fills of one buffer, with or without a transfer-write barrier between them, into
/// a command buffer of its own (never submitted), and returns what validation reported.
fn two_fills(engine: &GpuEngine, barrier: bool) -> Vec<String> {
    // SAFETY: raw objects of our own on wgpu's device, destroyed before returning; wgpu's
    // queue and objects are not touched.
    let hal = unsafe { engine.device().as_hal::<Vulkan>() }.expect("a Vulkan device");
    let device = hal.raw_device();
    let instance = hal.shared_instance().raw_instance();
    unsafe {
        let buffer = device
            .create_buffer(
                &vk::BufferCreateInfo::default()
                    .size(256)
                    .usage(vk::BufferUsageFlags::TRANSFER_DST),
                None,
            )
            .unwrap();
        let req = device.get_buffer_memory_requirements(buffer);
        let props = instance.get_physical_device_memory_properties(hal.raw_physical_device());
        let type_index = (0..props.memory_type_count)
            .find(|&i| req.memory_type_bits & (1 << i) != 0)
            .unwrap();
        let memory = device
            .allocate_memory(
                &vk::MemoryAllocateInfo::default()
                    .allocation_size(req.size)
                    .memory_type_index(type_index),
                None,
            )
            .unwrap();
        device.bind_buffer_memory(buffer, memory, 0).unwrap();
        let pool = device
            .create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(hal.queue_family_index()),
                None,
            )
            .unwrap();
        let cmd = device
            .allocate_command_buffers(
                &vk::CommandBufferAllocateInfo::default()
                    .command_pool(pool)
                    .level(vk::CommandBufferLevel::PRIMARY)
                    .command_buffer_count(1),
            )
            .unwrap()[0];
        device
            .begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())
            .unwrap();
        let ((), errors) = expecting(|| {
            device.cmd_fill_buffer(cmd, buffer, 0, 256, 1);
            if barrier {
                let b = vk::BufferMemoryBarrier::default()
                    .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                    .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                    .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
                    .buffer(buffer)
                    .offset(0)
                    .size(vk::WHOLE_SIZE);
                device.cmd_pipeline_barrier(
                    cmd,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::DependencyFlags::empty(),
                    &[],
                    &[b],
                    &[],
                );
            }
            device.cmd_fill_buffer(cmd, buffer, 0, 256, 2);
        });
        device.end_command_buffer(cmd).unwrap();
        device.free_command_buffers(pool, &[cmd]);
        device.destroy_command_pool(pool, None);
        device.destroy_buffer(buffer, None);
        device.free_memory(memory, None);
        errors
    }
}

fn write_after_write(engine: &GpuEngine) {
    let with_barrier = two_fills(engine, true);
    assert!(with_barrier.is_empty(), "with a barrier: {with_barrier:#?}");
    let without = two_fills(engine, false);
    eprintln!("without a barrier: {without:#?}");
    let id = "SYNC-HAZARD-WRITE-AFTER-WRITE";
    assert!(
        without
            .iter()
            .any(|e| e.starts_with("canary: ") && e.contains("WRITE_AFTER_WRITE")),
        "not in the canary: {without:#?}"
    );
    assert!(
        without
            .iter()
            .any(|e| e.starts_with("log ") && e.contains(id)),
        "not logged: {without:#?}"
    );
}

#[test]
#[ignore = "validation stage only (scripts/test.sh): needs the Khronos validation layer"]
fn synchronization_validation_reports_a_write_after_write() {
    on_vulkan(
        "validation::synchronization_validation_reports_a_write_after_write",
        write_after_write,
    );
}
