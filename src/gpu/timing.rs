//! GPU timing for benchmarks: a [`GpuTimer`] that measures recorded work by GPU timestamps on
//! engines whose device has them ([`GpuEngine::from_adapter`] asks for them), or by the wall clock
//! around submit-and-wait.
//!
//! ```no_run
//! use gguf_dequant::gpu::timing::GpuTimer;
//! use gguf_dequant::gpu::{compute_adapters, EngineOptions, GpuEngine};
//! use gguf_dequant::Backend;
//! # fn main() -> gguf_dequant::Result<()> {
//! for adapter in compute_adapters(Backend::All)? {
//!     let engine = GpuEngine::from_adapter(&adapter, EngineOptions::default())?;
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
use std::time::Instant;

use super::{buffers, GpuEngine};
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
    /// `TIMESTAMP_QUERY` (as [`GpuEngine::from_adapter`] does where the adapter has it), else the
    /// wall clock.
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
        let set = super::scoped(device, "creating timestamp queries", || {
            device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("gguf-dequant bench"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            })
        })?;
        let queries = Queries {
            set,
            resolve: buffers::create(
                device,
                "gguf-dequant timestamps",
                16,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                false,
            )?,
            read: buffers::create(
                device,
                "gguf-dequant timestamps readback",
                16,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
                false,
            )?,
            inside_encoders: features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS),
        };
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
            let index = engine.submit("submitting timed work", encoder)?;
            engine.wait(index)?;
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
        let index = engine.submit("submitting timed work", encoder)?;
        let mut bytes = [0u8; 16];
        engine.read_into(&q.read, index, &mut bytes)?;
        let stamp = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[8 * i..8 * i + 8]);
            u64::from_ne_bytes(b)
        };
        let ticks = stamp(1).wrapping_sub(stamp(0));
        Ok((ticks as f64 * self.period_ns * 1e-9, Timing::Timestamp))
    }
}
