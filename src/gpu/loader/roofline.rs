//! Rooflines of a load, measured in the same run as the load itself: how fast the model's files
//! read sequentially (from the page cache, and from the disk where the cache can be dropped), and
//! how fast this adapter takes bytes from host memory through the loader's own staging ring. A
//! load cannot beat the smaller of the two; [`LoadRooflines::fraction`] says how close it came.

use std::fmt;
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use super::plan::{self, Path};
use super::{stream, LoadOptions, LoadReport, Source, WeightLoader};
use crate::gguf::TensorInfo;
use crate::{Error, Format, GgufFile, Result};

/// The range dropped from the page cache is rounded up to this (past the largest page-cache
/// folio that Linux makes on x86-64 and arm64, 2 MiB).
const DROP_GRAIN: u64 = 8 << 20;

/// Bytes of one `read` call of the read rooflines.
const READ_CALL: usize = 8 << 20;

/// Largest host source of the host-to-device roofline (cycled through for more bytes); large
/// enough not to sit in a CPU cache.
const H2D_SOURCE: u64 = 64 << 20;

/// A measured speed: bytes moved in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Throughput {
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds it took.
    pub seconds: f64,
}

impl Throughput {
    /// In GB/s (10⁹ bytes).
    pub fn gb_per_s(&self) -> f64 {
        super::gb_per_s(self.bytes, self.seconds)
    }
}

/// Why a roofline was not measured (a one-line reason).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotMeasured(pub String);

impl fmt::Display for NotMeasured {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// How much [`WeightLoader::measure_rooflines`] measures.
#[derive(Clone, Debug)]
pub struct RooflineOptions {
    /// Bytes of the files read for each read roofline: the first ones, shard by shard (default
    /// 1 GiB, so that a large model does not take minutes).
    pub read_bytes: u64,
    /// Bytes sent for the host-to-device roofline (default 256 MiB; less for a smaller
    /// model, whose size it then is).
    pub h2d_bytes: u64,
    /// Also read from the disk: drop the sample's pages from the page cache first (default
    /// `true`). The sample is back in the cache afterwards; the rest of the file is untouched.
    pub cold: bool,
}

impl Default for RooflineOptions {
    fn default() -> Self {
        RooflineOptions {
            read_bytes: 1 << 30,
            h2d_bytes: 256 << 20,
            cold: true,
        }
    }
}

/// The rooflines of loading one file on one adapter.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadRooflines {
    /// Sequential `read` of the files from the page cache (read once first if needed).
    pub read_warm: Throughput,
    /// The same from the disk, after dropping the sample from the page cache; why not, where
    /// the cache could not be dropped (not Linux, dirty pages, pages another process maps).
    pub read_cold: std::result::Result<Throughput, NotMeasured>,
    /// Host memory into new device buffers through the loader's staging ring (written into the
    /// mapped slots, `copy_buffer_to_buffer`, slots in flight, mapped again), with the
    /// loader's staging options: what a load does after reading (the faster of two tries).
    pub h2d: Throughput,
    /// The same again into the same buffers: the path without the first touch of fresh device
    /// memory (which costs more than the copy on a CPU adapter, whose device memory is host
    /// memory that the kernel zeroes and maps on first use). Not a bound: a load always writes
    /// new buffers.
    pub h2d_reused: Throughput,
}

impl LoadRooflines {
    /// The speed a load cannot beat, in GB/s: the smaller of the read speed of that cache
    /// state (`cold`: from the disk) and the host-to-device speed; `None` for a cold load
    /// without a cold read figure.
    pub fn bound_gb_per_s(&self, cold: bool) -> Option<f64> {
        let read = if cold {
            self.read_cold.as_ref().ok()?
        } else {
            &self.read_warm
        };
        Some(read.gb_per_s().min(self.h2d.gb_per_s()))
    }

    /// The load's transfer speed ([`LoadReport::transfer_gb_per_s`]) as a fraction of
    /// [`LoadRooflines::bound_gb_per_s`]; `cold`: the load read from the disk (the page cache
    /// dropped first). A [`Source::Direct`] load always reads from the disk.
    pub fn fraction(&self, report: &LoadReport, cold: bool) -> Option<f64> {
        let bound = self.bound_gb_per_s(cold || report.source == Source::Direct)?;
        (bound > 0.0).then(|| report.transfer_gb_per_s() / bound)
    }
}

/// The first `bytes` of the set, shard by shard: `(shard, length from its start)`.
fn sample(file: &GgufFile, bytes: u64) -> Vec<(usize, u64)> {
    let mut left = bytes;
    let mut out = Vec::new();
    for (i, s) in file.shards().iter().enumerate() {
        if left == 0 {
            break;
        }
        let n = s.len().min(left);
        out.push((i, n));
        left -= n;
    }
    out
}

/// Drops the first `bytes` of the set (all of it for `u64::MAX`) from the page cache, and
/// checks that they went (`mincore`); why not where they did not.
fn drop_sample(file: &GgufFile, bytes: u64) -> std::result::Result<(), NotMeasured> {
    for (i, len) in sample(file, bytes) {
        let shard = &file.shards()[i];
        // The page cache may hold a file in folios of several pages, and the kernel drops only
        // folios wholly inside the range: drop a little past the sample.
        shard
            .drop_cache(0, len.next_multiple_of(DROP_GRAIN))
            .map_err(|e| NotMeasured(format!("dropping the page cache failed: {e}")))?;
        match shard.cached_pages(0, len) {
            // A few pages may come straight back (the header, read by someone meanwhile).
            Some((cached, pages)) if cached * 100 > pages => {
                return Err(NotMeasured(format!(
                    "{} kept {cached} of {pages} pages in the page cache (dirty, or mapped by \
                     another process)",
                    shard.path().display()
                )))
            }
            Some(_) => {}
            None => {
                return Err(NotMeasured(
                    "this system cannot tell which pages are cached".into(),
                ))
            }
        }
    }
    Ok(())
}

/// Drops every shard of `file` from the OS page cache so that the next load reads from the
/// disk (a cold load); why not where the cache kept the pages or the system cannot do it.
pub fn drop_page_cache(file: &GgufFile) -> std::result::Result<(), NotMeasured> {
    drop_sample(file, u64::MAX)
}

/// Reads the sample with large `read` calls into one reused buffer; its time.
fn read_sample(file: &GgufFile, parts: &[(usize, u64)], buf: &mut [u8]) -> Result<Throughput> {
    let start = Instant::now();
    let mut bytes = 0;
    for &(i, len) in parts {
        let path = file.shards()[i].path();
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::File::open(path).map_err(io)?;
        let mut left = len;
        while left > 0 {
            let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let n = match f.read(&mut buf[..want]) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io(e)),
            };
            left -= n as u64;
            bytes += n as u64;
        }
    }
    Ok(Throughput {
        bytes,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn buffer(len: usize, what: &str) -> Result<Vec<u8>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        bytes: len,
        what: what.to_string(),
    })?;
    Ok(v)
}

impl WeightLoader {
    /// Measures the rooflines of loading `file` with this loader's options (see
    /// [`LoadRooflines`]): a few seconds at most with the default [`RooflineOptions`]. Run it
    /// right after the load it is meant for (the machine's speed of the moment is what the load
    /// is compared with), once the model is dropped: the host-to-device figure needs room for
    /// its buffers, and memory freed by the model only makes the roofline faster, where
    /// measuring first would leave freed memory that makes the load faster (on a CPU adapter,
    /// fresh device memory costs page faults). Nothing stays allocated afterwards.
    pub fn measure_rooflines(
        &self,
        file: &GgufFile,
        options: &RooflineOptions,
    ) -> Result<LoadRooflines> {
        let parts = sample(file, options.read_bytes);
        let sample_bytes: u64 = parts.iter().map(|p| p.1).sum();
        let mut buf = buffer(READ_CALL, "the read roofline's buffer")?;
        buf.resize(READ_CALL, 0);
        let read_cold = if options.cold {
            match drop_sample(file, sample_bytes) {
                Ok(()) => Ok(read_sample(file, &parts, &mut buf)?),
                Err(why) => Err(why),
            }
        } else {
            Err(NotMeasured("not asked for".into()))
        };
        let all_cached = parts.iter().all(|&(i, len)| {
            file.shards()[i]
                .cached_pages(0, len)
                .is_some_and(|(c, n)| c == n)
        });
        if !all_cached {
            read_sample(file, &parts, &mut buf)?;
        }
        let read_warm = read_sample(file, &parts, &mut buf)?;
        drop(buf);
        let (h2d, h2d_reused) = self.measure_h2d(options.h2d_bytes.min(file.total_len().max(4)))?;
        Ok(LoadRooflines {
            read_warm,
            read_cold,
            h2d,
            h2d_reused,
        })
    }

    /// Sends `bytes` (rounded down to 4) from host memory into new device buffers through the
    /// staging ring of this loader's options: the faster of two sets of new buffers, and the
    /// first set again; the time of each transfer alone.
    fn measure_h2d(&self, bytes: u64) -> Result<(Throughput, Throughput)> {
        let bytes = (bytes & !3).max(4);
        let host_len = bytes.min(H2D_SOURCE);
        let mut host = buffer(host_len as usize, "the host-to-device roofline's source")?;
        // Not zeros: untouched zeroed memory could all be one shared page.
        host.extend((0..host_len).map(|i| (i as u8).wrapping_mul(31) ^ 0x5a));
        let elems = Format::F32.block_bytes() as u64;
        let infos: Vec<TensorInfo> = (0..bytes.div_ceil(host_len))
            .map(|i| {
                let n_bytes = (bytes - i * host_len).min(host_len);
                TensorInfo {
                    name: "host-to-device roofline".into(),
                    dims: vec![n_bytes / elems],
                    format: Format::F32,
                    offset: 0,
                    n_elements: n_bytes / elems,
                    n_bytes,
                    shard: 0,
                }
            })
            .collect();
        let selected: Vec<_> = infos.iter().enumerate().collect();
        let options = LoadOptions {
            progress: None,
            ..self.options.clone()
        };
        let plan = plan::plan(
            &selected,
            &[0],
            &vec![Path::Raw; infos.len()],
            &self.limits(&options),
            options.staging_bytes,
            options.slots,
        )?;
        let ring = self.allocate_ring(&plan, &options)?;
        let pass = |buffers: &[Vec<Arc<wgpu::Buffer>>]| -> Result<Throughput> {
            let start = Instant::now();
            self.stream(
                stream::Input::Memory(&host),
                &plan,
                buffers,
                &ring,
                &options,
            )?;
            Ok(Throughput {
                bytes,
                seconds: start.elapsed().as_secs_f64(),
            })
        };
        // New buffers twice, the faster counting (a roofline is a best case; this machine's
        // noise only ever slows a pass down), and the first set a second time: new device memory
        // is what a load writes (on a CPU adapter the driver's first touch of it, page faults,
        // costs more than the copy); the same memory again shows the path without that.
        let new_buffers = || self.allocate_resident(&plan, |i| infos[i].name.as_str(), &options);
        let (buffers, allocation) = new_buffers()?;
        let mut fresh = pass(&buffers)?;
        let reused = pass(&buffers)?;
        drop((buffers, allocation));
        let (buffers, allocation) = new_buffers()?;
        let again = pass(&buffers)?;
        if again.seconds < fresh.seconds {
            fresh = again;
        }
        drop((buffers, allocation, ring));
        Ok((fresh, reused))
    }
}
