//! Reading results back: a mapped staging buffer, `map_async`, and a bounded `PollType::Wait`.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::GpuError;

/// How long to wait for a map callback between polls.
const TICK: Duration = Duration::from_millis(2);

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
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(timeout),
        })
        .map_err(|e| match e {
            wgpu::PollError::Timeout => GpuError::Timeout(timeout),
            other => GpuError::Map(other.to_string()),
        })?;
    // The submission is done, but with other threads polling the same device the map callback
    // may be run by one of them, just after our poll returned: wait for it (polling again, in
    // case nobody else does) rather than calling it a timeout.
    loop {
        match rx.recv_timeout(TICK) {
            Ok(Ok(())) => break,
            Ok(Err(e)) => return Err(GpuError::Map(e.to_string())),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(GpuError::Map("the map callback was dropped".into()))
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
