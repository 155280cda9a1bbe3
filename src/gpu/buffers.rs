//! The one path between host memory and GPU buffers: uploads, submission, bounded waits and
//! mapped read-back. Every buffer the engine, the timer and the loader create goes through here.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::error::scoped;
use super::windows::{round_up, SRC_ALIGN};
use super::GpuError;

/// How long to wait for a map callback between polls.
const TICK: Duration = Duration::from_millis(2);

/// Creates a buffer inside error scopes, so that an invalid one (a lost device, a size past the
/// limit, out of memory) is an error naming `label`.
pub(crate) fn create(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    usage: wgpu::BufferUsages,
    mapped_at_creation: bool,
) -> Result<wgpu::Buffer, GpuError> {
    scoped(
        device,
        &format!("allocating {size} bytes for {label}"),
        || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation,
            })
        },
    )
}

/// A storage output buffer of `size` bytes (`STORAGE | COPY_SRC`, labelled `<label> output`) and a
/// staging buffer to read it back through (`MAP_READ | COPY_DST`, `<label> readback`).
pub(crate) fn output_and_readback(
    device: &wgpu::Device,
    label: &str,
    size: u64,
) -> Result<(wgpu::Buffer, wgpu::Buffer), GpuError> {
    let output = create(
        device,
        &format!("{label} output"),
        size,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        false,
    )?;
    let readback = create(
        device,
        &format!("{label} readback"),
        size,
        wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        false,
    )?;
    Ok((output, readback))
}

/// Creates a storage buffer holding `src` exactly as it is (the caller's memory map, not repacked),
/// padded with zeros to a multiple of 4 bytes.
pub fn upload(device: &wgpu::Device, label: &str, src: &[u8]) -> Result<wgpu::Buffer, GpuError> {
    upload_as(
        device,
        label,
        src,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
    )
}

/// [`upload`] with other usages. Unlike `create_buffer_init`, an invalid buffer (lost device,
/// size past the limit) is an error, not a panic.
pub fn upload_as(
    device: &wgpu::Device,
    label: &str,
    src: &[u8],
    usage: wgpu::BufferUsages,
) -> Result<wgpu::Buffer, GpuError> {
    upload_sized(device, label, src, 0, usage)
}

/// [`upload_as`] into a buffer of at least `size` bytes: `src`, then zeros.
pub fn upload_sized(
    device: &wgpu::Device,
    label: &str,
    src: &[u8],
    size: u64,
    usage: wgpu::BufferUsages,
) -> Result<wgpu::Buffer, GpuError> {
    let size = round_up((src.len() as u64).max(size), SRC_ALIGN).max(SRC_ALIGN);
    let buffer = create(device, label, size, usage, true)?;
    {
        let mut view = buffer
            .get_mapped_range_mut(..)
            .map_err(|e| GpuError::Map(format!("{label}: {e}")))?;
        view.slice(..src.len()).copy_from_slice(src);
        view.slice(src.len()..).fill(0);
    }
    buffer.unmap();
    Ok(buffer)
}

/// Finishes `encoder` and submits it inside error scopes.
pub(crate) fn submit(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    what: &str,
    encoder: wgpu::CommandEncoder,
) -> Result<wgpu::SubmissionIndex, GpuError> {
    scoped(device, what, || queue.submit([encoder.finish()]))
}

/// Waits for submission `index`, at most `timeout`.
pub(crate) fn wait(
    device: &wgpu::Device,
    index: wgpu::SubmissionIndex,
    timeout: Duration,
) -> Result<(), GpuError> {
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(timeout),
        })
        .map_err(|e| match e {
            wgpu::PollError::Timeout => GpuError::Timeout(timeout),
            other => GpuError::Map(other.to_string()),
        })?;
    Ok(())
}

/// Maps `staging` for writing again once the GPU is done with it, and calls `done` with the
/// outcome (from inside a later poll of the device, on whichever thread polls).
pub(crate) fn map_for_write(
    staging: &wgpu::Buffer,
    done: impl FnOnce(Result<(), GpuError>) + Send + 'static,
) {
    staging.map_async(wgpu::MapMode::Write, .., move |r| {
        done(r.map_err(|e| GpuError::Map(format!("mapping a staging buffer failed: {e}"))))
    });
}

/// Maps `staging` (after submission `index` copied into it) and copies its first `out.len()`
/// bytes into `out`, waiting at most `timeout`.
pub(crate) fn read_into(
    device: &wgpu::Device,
    staging: &wgpu::Buffer,
    index: wgpu::SubmissionIndex,
    timeout: Duration,
    out: &mut [u8],
) -> Result<(), GpuError> {
    let (tx, rx) = mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    let start = Instant::now();
    wait(device, index, timeout)?;
    // The submission is done, but with other threads polling the same device the map callback
    // may be run by one of them, just after our poll returned: wait for it (polling again, in
    // case nobody else does) rather than calling it a timeout.
    loop {
        match rx.recv_timeout(TICK) {
            Ok(Ok(())) => break,
            Ok(Err(e)) => return Err(GpuError::Map(e.to_string())),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(GpuError::Invariant(
                    "the map callback was dropped unanswered".into(),
                ))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if start.elapsed() > timeout {
                    return Err(GpuError::Timeout(timeout));
                }
                device
                    .poll(wgpu::PollType::Poll)
                    .map_err(|e| GpuError::Map(e.to_string()))?;
            }
        }
    }
    {
        let view = staging
            .get_mapped_range(..)
            .map_err(|e| GpuError::Map(e.to_string()))?;
        out.copy_from_slice(&view[..out.len()]);
    }
    staging.unmap();
    Ok(())
}
