//! GPU timing for benchmarks: every compute adapter of a backend, a device that asks for timestamp
//! queries when the adapter has them, and a [`GpuTimer`] that measures recorded work by GPU
//! timestamps (or, on adapters without them, by the wall clock around submit-and-wait).
//!
//! ```no_run
//! use gguf_dequant::gpu::timing::{self, GpuTimer};
//! use gguf_dequant::gpu::{Backend, EngineOptions};
//! # fn main() -> gguf_dequant::Result<()> {
//! for adapter in timing::compute_adapters(Backend::Vulkan, false)? {
//!     let engine = timing::engine_with_timestamps(&adapter, EngineOptions::default())?;
//!     let timer = GpuTimer::new(&engine)?;
//!     let (seconds, how) = timer.time(&engine, |encoder| {
//!         // engine.record(encoder, &job)?;
//!         let _ = encoder;
//!         Ok(())
//!     })?;
//!     println!("{seconds} s ({how})");
//! }
//! # Ok(()) }
//! ```

use std::fmt;
use std::sync::mpsc;
use std::time::Instant;

use super::{adapters, describe, scoped, Backend, EngineOptions, GpuEngine, GpuError};
use crate::Result;

/// How a duration was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timing {
    /// GPU timestamp queries written before and after the work, inside one command buffer.
    Timestamp,
    /// The wall clock around submit-and-wait (the adapter has no timestamp queries); includes
    /// submission and synchronisation overhead.
    Wall,
}

impl Timing {
    /// `timestamp` or `wall`.
    pub const fn name(self) -> &'static str {
        match self {
            Timing::Timestamp => "timestamp",
            Timing::Wall => "wall",
        }
    }
}

impl fmt::Display for Timing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The adapters of `backend` that run compute shaders, best first. With `all == false` only the
/// best one (what [`GpuEngine::new`]
/// picks). No adapter is [`GpuError::NoAdapter`].
pub fn compute_adapters(backend: Backend, all: bool) -> Result<Vec<wgpu::Adapter>> {
    let (mut usable, seen) = adapters(backend.wgpu_backends());
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
    if !all {
        usable.truncate(1);
    }
    Ok(usable)
}

/// The timestamp features this adapter offers, of those a [`GpuTimer`] uses.
fn timestamp_features(adapter: &wgpu::Adapter) -> wgpu::Features {
    adapter.features()
        & (wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS)
}

/// An engine on a new device of `adapter` with the adapter's own limits and, when the adapter has
/// them, `TIMESTAMP_QUERY` (+ `TIMESTAMP_QUERY_INSIDE_ENCODERS`).
pub fn engine_with_timestamps(
    adapter: &wgpu::Adapter,
    options: EngineOptions,
) -> Result<GpuEngine> {
    let info = adapter.get_info();
    let desc = wgpu::DeviceDescriptor {
        label: Some("gguf-dequant bench"),
        required_features: timestamp_features(adapter),
        required_limits: adapter.limits(),
        ..Default::default()
    };
    let (device, queue) =
        pollster::block_on(adapter.request_device(&desc)).map_err(|e| GpuError::RequestDevice {
            adapter: describe(&info),
            reason: e.to_string(),
        })?;
    GpuEngine::from_device(device, queue, options)
}

/// Times work recorded into a command encoder. One timer per engine; not for concurrent use.
pub struct GpuTimer {
    queries: Option<Queries>,
    period_ns: f64,
}

struct Queries {
    set: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    /// `TIMESTAMP_QUERY_INSIDE_ENCODERS`: `write_timestamp` on the encoder; otherwise the
    /// timestamps are the begin and end writes of two empty compute passes around the work.
    inside_encoders: bool,
}

impl fmt::Debug for GpuTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuTimer")
            .field("timing", &self.timing())
            .field("period_ns", &self.period_ns)
            .finish()
    }
}

impl GpuTimer {
    /// A timer on `engine`'s device: timestamps when the device was created with
    /// `TIMESTAMP_QUERY` (see [`engine_with_timestamps`]), else the wall clock.
    pub fn new(engine: &GpuEngine) -> Result<GpuTimer> {
        let device = engine.device();
        let features = device.features();
        let period_ns = f64::from(engine.queue().get_timestamp_period());
        if !features.contains(wgpu::Features::TIMESTAMP_QUERY) || period_ns <= 0.0 {
            return Ok(GpuTimer {
                queries: None,
                period_ns,
            });
        }
        let queries = scoped(device, "creating timestamp queries", || Queries {
            set: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("gguf-dequant bench"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            }),
            resolve: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gguf-dequant timestamps"),
                size: 16,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            }),
            read: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("gguf-dequant timestamps readback"),
                size: 16,
                usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            inside_encoders: features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
        })?;
        Ok(GpuTimer {
            queries: Some(queries),
            period_ns,
        })
    }

    /// A timer that always uses the wall clock around submit-and-wait (to cross-check timestamps,
    /// or on drivers whose timestamps are not to be trusted).
    pub fn wall() -> GpuTimer {
        GpuTimer {
            queries: None,
            period_ns: 0.0,
        }
    }

    /// How [`GpuTimer::time`] measures.
    pub fn timing(&self) -> Timing {
        if self.queries.is_some() {
            Timing::Timestamp
        } else {
            Timing::Wall
        }
    }

    /// Records `work` into a fresh encoder (between two timestamps), submits it and waits for it.
    /// Returns the seconds the GPU spent (timestamps), or the wall-clock seconds of submit and
    /// wait (recording is never timed), with how they were measured.
    pub fn time(
        &self,
        engine: &GpuEngine,
        work: impl FnOnce(&mut wgpu::CommandEncoder) -> Result<()>,
    ) -> Result<(f64, Timing)> {
        let device = engine.device();
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("gguf-dequant bench"),
        });
        let Some(q) = &self.queries else {
            work(&mut encoder)?;
            let start = Instant::now();
            let index = engine.queue().submit([encoder.finish()]);
            wait(engine, index)?;
            return Ok((start.elapsed().as_secs_f64(), Timing::Wall));
        };
        let stamp = |encoder: &mut wgpu::CommandEncoder, i: u32| {
            if q.inside_encoders {
                encoder.write_timestamp(&q.set, i);
            } else {
                let writes = wgpu::ComputePassTimestampWrites {
                    query_set: &q.set,
                    beginning_of_pass_write_index: (i == 0).then_some(0),
                    end_of_pass_write_index: (i == 1).then_some(1),
                };
                drop(encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some("gguf-dequant timestamp"),
                    timestamp_writes: Some(writes),
                }));
            }
        };
        stamp(&mut encoder, 0);
        work(&mut encoder)?;
        stamp(&mut encoder, 1);
        encoder.resolve_query_set(&q.set, 0..2, &q.resolve, 0);
        encoder.copy_buffer_to_buffer(&q.resolve, 0, &q.read, 0, 16);
        let index = scoped(device, "submitting timed work", || {
            engine.queue().submit([encoder.finish()])
        })?;
        let (tx, rx) = mpsc::channel();
        q.read.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        wait(engine, index)?;
        match rx.try_recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(GpuError::Map(e.to_string()).into()),
            Err(_) => {
                return Err(GpuError::Map("timestamp readback did not complete".into()).into())
            }
        }
        let ticks = {
            let view = q
                .read
                .get_mapped_range(..)
                .map_err(|e| GpuError::Map(e.to_string()))?;
            let stamp = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&view[8 * i..8 * i + 8]);
                u64::from_ne_bytes(b)
            };
            stamp(1).wrapping_sub(stamp(0))
        };
        q.read.unmap();
        Ok((ticks as f64 * self.period_ns * 1e-9, Timing::Timestamp))
    }
}

fn wait(engine: &GpuEngine, index: wgpu::SubmissionIndex) -> Result<(), GpuError> {
    let timeout = engine.options.timeout;
    engine
        .device()
        .poll(wgpu::PollType::Wait {
            submission_index: Some(index),
            timeout: Some(timeout),
        })
        .map_err(|e| match e {
            wgpu::PollError::Timeout => GpuError::Timeout(timeout),
            other => GpuError::Map(other.to_string()),
        })?;
    engine.check()
}
