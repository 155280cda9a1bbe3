//! Reading results back: a mapped staging buffer, `map_async`, and a bounded `PollType::Wait`.

use std::sync::mpsc;
use std::time::Duration;

use super::GpuError;

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
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(timeout),
        })
        .map_err(|e| match e {
            wgpu::PollError::Timeout => GpuError::Timeout(timeout),
            other => GpuError::Map(other.to_string()),
        })?;
    match rx.try_recv() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(GpuError::Map(e.to_string())),
        Err(_) => return Err(GpuError::Timeout(timeout)),
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
